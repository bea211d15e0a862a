//! Logs an operator can ship: `--log-format json` for the error log and
//! the access log, the access log's app, generation and duration, the
//! line of a streamed answer, SSE stream or WebSocket written at its end
//! with the bytes sent (and those bytes in metrics), SIGUSR1 reopening a
//! rotated access log, `--error-log` (a file every worker process
//! appends to, reopened on SIGUSR1) and journald's priority prefixes,
//! `--pid-file`, and the loop-block warning's remedy.

use crate::client::get;
use crate::common::metrics;
use crate::harness::{wait_until, Server, TempDir, SAMPLE_APPS, WAIT};
use rustix::process::Signal;
use serde_json::Value;
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

matrix!(
    json_error_log_lines_carry_time_level_target_message,
    json_access_lines_carry_app_generation_and_micros,
    sigusr1_reopens_a_moved_access_log,
    streams_and_websockets_are_logged_at_their_end_with_the_bytes_sent,
    pid_file_is_written_and_removed_at_exit,
    live_pid_file_refuses_to_start,
    stale_pid_file_is_replaced,
    loop_block_warning_names_app_blocks,
);

fn parse(line: &str) -> Value {
    serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
}

fn json_error_log_lines_carry_time_level_target_message(poller: &str) {
    let server = Server::start(poller, SAMPLE_APPS, &["--log-format", "json"]);
    assert_eq!(server.get("/hello/").status, 200);
    let log = server.log();
    let lines: Vec<&str> = log.lines().collect();
    assert!(lines.len() > 3, "{log}");
    for line in &lines {
        let v = parse(line);
        let obj = v
            .as_object()
            .unwrap_or_else(|| panic!("not an object: {line}"));
        let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(keys, ["level", "message", "target", "time"], "{line}");
        // RFC 3339 in UTC with milliseconds: 2024-02-29T13:55:36.123Z.
        let time = v["time"].as_str().expect("time is a string");
        assert!(
            time.len() == 24 && time.ends_with('Z') && &time[19..20] == ".",
            "{line}"
        );
        let level = v["level"].as_str().expect("level is a string");
        assert!(
            ["ERROR", "WARN", "INFO", "DEBUG", "TRACE"].contains(&level),
            "{line}"
        );
    }
    let listening = lines
        .iter()
        .map(|l| parse(l))
        .find(|v| {
            v["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("listening on http://"))
        })
        .unwrap_or_else(|| panic!("no listening line: {log}"));
    assert_eq!(listening["level"], "INFO");
    assert!(listening["target"]
        .as_str()
        .is_some_and(|t| t.starts_with("stoa")));
}

fn json_access_lines_carry_app_generation_and_micros(poller: &str) {
    // No app at the root: an unknown path is the host's 404.
    let server = Server::launch(poller)
        .apps(&["article"])
        .args(&["--log-format", "json"])
        .access_log()
        .start();
    let mut c = server.connect();
    c.request(&crate::client::request(
        "GET",
        "/article?q=\"x\"",
        &["User-Agent: e2e \"quoted\"/1.0"],
    ));
    c.request(&get("/no/such/"));
    let lines = server.access_lines(2);
    assert_eq!(lines.len(), 2, "{lines:#?}");
    let app = parse(&lines[0]);
    assert_eq!(app["client"], "127.0.0.1", "{app}");
    assert_eq!(
        (&app["method"], &app["target"], &app["protocol"]),
        (
            &"GET".into(),
            &"/article?q=\"x\"".into(),
            &"HTTP/1.1".into()
        ),
        "{app}"
    );
    assert_eq!(app["status"], 200, "{app}");
    assert!(app["bytes"].as_u64().is_some_and(|n| n > 0), "{app}");
    assert_eq!(app["user_agent"], "e2e \"quoted\"/1.0");
    assert!(app["referer"].is_null(), "{app}");
    assert_eq!((&app["app"], &app["gen"]), (&"article".into(), &1.into()));
    assert!(app["us"].is_u64(), "{app}");
    assert!(app["time"].as_str().is_some_and(|t| t.ends_with('Z')));
    let none = parse(&lines[1]);
    assert_eq!(none["status"], 404, "{none}");
    assert!(none["app"].is_null() && none["gen"].is_null(), "{none}");
    assert!(none["us"].is_u64(), "{none}");
}

/// The sample apps with an access log that has its first line.
pub fn logging_one_request(poller: &str) -> Server {
    let server = Server::launch(poller)
        .apps(SAMPLE_APPS)
        .access_log()
        .start();
    assert_eq!(server.get("/hello/").status, 200);
    assert_eq!(server.access_lines(1).len(), 1);
    server
}

fn sigusr1_reopens_a_moved_access_log(poller: &str) {
    let server = logging_one_request(poller);
    let path = server.access_log_path().to_path_buf();
    let moved = path.with_extension("log.1");
    std::fs::rename(&path, &moved).expect("move the access log");
    // Until the signal, lines still go to the moved file.
    assert_eq!(server.get("/article").status, 200);
    let read = |p: &std::path::Path| std::fs::read_to_string(p).unwrap_or_default();
    assert!(wait_until(WAIT, || read(&moved).lines().count() == 2));
    server.signal(Signal::USR1);
    assert!(
        server.wait_log(&["reopened the access log", &path.display().to_string()]),
        "{}",
        server.log()
    );
    assert!(path.exists(), "no new file at {}", path.display());
    assert_eq!(server.get("/hello/").status, 200);
    let lines = server.access_lines(1);
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert!(
        lines[0].contains("\"GET /hello/ HTTP/1.1\" 200"),
        "{lines:#?}"
    );
    std::thread::sleep(Duration::from_millis(100));
    let old = read(&moved);
    assert_eq!(old.lines().count(), 2, "{old}");
    assert!(old.contains("GET /article"), "{old}");
}

fn pid_file_is_written_and_removed_at_exit(poller: &str) {
    let dir = TempDir::new("pid");
    let pid_file = dir.path().join("stoa.pid");
    let arg = pid_file.display().to_string();
    let mut server = Server::start(poller, SAMPLE_APPS, &["--pid-file", &arg]);
    let text = std::fs::read_to_string(&pid_file).expect("the pid file");
    assert_eq!(text.trim(), server.pid().to_string());
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .expect("read the dir")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name())
        .filter(|n| n != "stoa.pid")
        .collect();
    assert!(leftovers.is_empty(), "temp files left: {leftovers:?}");
    server.signal(Signal::TERM);
    let status = server.wait_exit(Duration::from_secs(10)).expect("exited");
    assert!(status.success(), "{status}: {}", server.log());
    assert!(!pid_file.exists(), "pid file left after a clean exit");
}

fn live_pid_file_refuses_to_start(poller: &str) {
    let dir = TempDir::new("pid-live");
    let pid_file = dir.path().join("stoa.pid");
    // The test process itself: alive, and not the server.
    let live = std::process::id();
    std::fs::write(&pid_file, format!("{live}\n")).expect("write a pid file");
    let arg = pid_file.display().to_string();
    let (_, log) = Server::launch(poller)
        .apps(SAMPLE_APPS)
        .args(&["--pid-file", &arg])
        .refused();
    let expected = format!("another stoa (pid {live}) uses {arg}");
    assert!(log.contains(&expected), "{log}");
    let kept = std::fs::read_to_string(&pid_file).expect("the pid file is kept");
    assert_eq!(kept.trim(), live.to_string());
}

fn stale_pid_file_is_replaced(poller: &str) {
    let dir = TempDir::new("pid-stale");
    let pid_file = dir.path().join("stoa.pid");
    // A process that has exited and been reaped.
    let mut gone = std::process::Command::new("true")
        .spawn()
        .expect("run true");
    let dead = gone.id();
    gone.wait().expect("reap true");
    std::fs::write(&pid_file, format!("{dead}\n")).expect("write a pid file");
    let arg = pid_file.display().to_string();
    let server = Server::start(poller, SAMPLE_APPS, &["--pid-file", &arg]);
    assert!(server.wait_log(&[&format!("replacing the stale pid file {arg} (pid {dead}")]));
    let text = std::fs::read_to_string(&pid_file).expect("the pid file");
    assert_eq!(text.trim(), server.pid().to_string());
}

fn loop_block_warning_names_app_blocks(poller: &str) {
    let server = Server::launch(poller)
        .apps(&["misbehave"])
        .args(&["--loop-block-warn", "1ms"])
        .start();
    // Building a 64 MiB body inline holds the loop for milliseconds.
    let mut c = server.connect();
    c.send(&get("/_test/64m"));
    assert!(
        server.wait_log(&[
            "event loop blocked for",
            "by app misbehave /_test/64m",
            "declare the route blocking with App::blocks so it runs on the pool",
        ]),
        "{}",
        server.log()
    );
}

/// A raw client of a streamed answer: what came after the head.
struct Raw {
    stream: TcpStream,
    got: Vec<u8>,
}

impl Raw {
    fn open(server: &Server, request: &[u8]) -> Raw {
        let mut stream = TcpStream::connect(("127.0.0.1", server.port)).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("a read timeout");
        stream.write_all(request).expect("send the request");
        Raw {
            stream,
            got: Vec::new(),
        }
    }

    /// Reads until `needle` has come (or fails naming it).
    fn read_until(&mut self, needle: &str) {
        let mut chunk = [0u8; 4096];
        while !String::from_utf8_lossy(&self.got).contains(needle) {
            match self.stream.read(&mut chunk) {
                Ok(0) => panic!("closed before {needle:?}: {:?}", self.text()),
                Ok(n) => self.got.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => panic!("no {needle:?} ({e}): {:?}", self.text()),
            }
        }
    }

    /// Reads to the end of stream (a reset ends it too).
    fn read_to_end(&mut self) {
        let mut rest = Vec::new();
        let ended = self.stream.read_to_end(&mut rest);
        self.got.extend_from_slice(&rest);
        assert!(
            ended.is_ok() || ended.is_err_and(|e| e.kind() == ErrorKind::ConnectionReset),
            "{:?}",
            self.text()
        );
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.got).into_owned()
    }

    /// The bytes received after the head.
    fn body_len(&self) -> u64 {
        let text = self.text();
        let head = text.find("\r\n\r\n").expect("a whole head") + 4;
        (self.got.len() - head) as u64
    }
}

/// The JSON access lines (waiting for `n`) whose target is `target`.
fn lines_for(server: &Server, n: usize, target: &str) -> Vec<Value> {
    server
        .access_lines(n)
        .iter()
        .map(|l| parse(l))
        .filter(|v| v["target"] == target)
        .collect()
}

fn streams_and_websockets_are_logged_at_their_end_with_the_bytes_sent(poller: &str) {
    let mut server = Server::launch(poller)
        .apps(&["demo"])
        .args(&["--log-format", "json", "--graceful-timeout", "1"])
        .access_log()
        .start();
    // An SSE stream that ends (two events a second apart), one the client
    // leaves, and a download of a declared length, at once.
    let mut finished = Raw::open(&server, &get("/demo/clock?count=2"));
    let mut left = Raw::open(&server, &get("/demo/clock"));
    let mut download = Raw::open(&server, &get("/demo/bytes?n=100000"));
    left.read_until("id: 1\n");
    // Its head went out a second ago: no line until it ends.
    let early = server.access_lines(0);
    assert!(
        !early.iter().any(|l| l.contains("\"/demo/clock\"")),
        "logged before its end: {early:#?}"
    );
    let received = left.body_len();
    drop(left);
    // The last chunk (the connection stays open for the next request).
    finished.read_until("\r\n0\r\n\r\n");
    download.read_until("\r\n\r\n");
    let mut chunk = vec![0u8; 65536];
    while download.body_len() < 100_000 {
        let n = download.stream.read(&mut chunk).expect("read the download");
        assert!(n > 0, "the download ended at {}", download.body_len());
        download.got.extend_from_slice(&chunk[..n]);
    }
    let whole = lines_for(&server, 3, "/demo/clock?count=2");
    assert_eq!(whole.len(), 1, "{whole:#?}");
    // The bytes on the wire after the head (chunk framing included, as
    // nginx's $body_bytes_sent), and the whole duration: the second event
    // comes a second after the first.
    assert_eq!(
        whole[0]["bytes"].as_u64(),
        Some(finished.body_len()),
        "{whole:#?}"
    );
    assert!(
        whole[0]["us"].as_u64().is_some_and(|us| us >= 1_000_000),
        "{whole:#?}"
    );
    assert_eq!(whole[0]["status"], 200);
    let bytes = lines_for(&server, 3, "/demo/bytes?n=100000");
    assert_eq!(bytes.len(), 1, "{bytes:#?}");
    assert_eq!(bytes[0]["bytes"], 100_000, "{bytes:#?}");
    let cut = lines_for(&server, 3, "/demo/clock");
    assert_eq!(
        cut.len(),
        1,
        "the stream the client left is logged: {cut:#?}"
    );
    let sent = cut[0]["bytes"].as_u64().unwrap_or(0);
    assert!(sent >= received, "{sent} sent, {received} received");
    // A WebSocket: its 101 is logged when the session ends, with the bytes
    // of the frames sent (the echo, then the close's).
    let mut ws = crate::client::Client::connect(server.port);
    let r = ws.request(&crate::client::request(
        "GET",
        "/demo/ws",
        &[
            "Upgrade: websocket",
            "Connection: Upgrade",
            "Sec-WebSocket-Version: 13",
            "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
        ],
    ));
    assert_eq!(r.status, 101, "{r:?}");
    ws.send(&crate::websocket::masked(0x1, b"hello"));
    assert_eq!(ws.read_bytes(7), b"\x81\x05hello");
    ws.send(&crate::websocket::masked(0x8, &[0x03, 0xe8]));
    assert_eq!(ws.read_bytes(4), b"\x88\x02\x03\xe8", "the close echo");
    ws.assert_closed();
    let session = lines_for(&server, 4, "/demo/ws");
    assert_eq!(session.len(), 1, "{session:#?}");
    assert_eq!(
        (&session[0]["status"], &session[0]["bytes"]),
        (&101.into(), &11.into())
    );
    // Metrics count the bytes the lines report.
    let logged: u64 = server
        .access_lines(4)
        .iter()
        .map(|l| parse(l))
        .filter(|v| v["app"] == "demo")
        .filter_map(|v| v["bytes"].as_u64())
        .sum();
    let counted = metrics(&server)["stoa_response_bytes_total{app=\"demo\"}"];
    assert_eq!(counted as u64, logged);
    // A stream the shutdown cuts (past --graceful-timeout) is logged too.
    let mut endless = Raw::open(&server, &get("/demo/clock?shutdown"));
    endless.read_until("id: 0\n");
    server.signal(Signal::TERM);
    endless.read_to_end();
    assert!(
        server.wait_exit(Duration::from_secs(10)).is_some(),
        "{}",
        server.log()
    );
    let cut = lines_for(&server, 6, "/demo/clock?shutdown");
    assert_eq!(
        cut.len(),
        1,
        "the stream a shutdown cut is logged: {cut:#?}"
    );
    assert!(
        cut[0]["bytes"].as_u64() >= Some(endless.body_len()),
        "{cut:#?}"
    );
}

#[test]
fn every_worker_process_appends_to_the_error_log_and_sigusr1_reopens_it() {
    let dir = TempDir::new("error-log");
    let path = dir.path().join("error.log");
    let arg = path.display().to_string();
    let server = Server::launch("epoll")
        .apps(SAMPLE_APPS)
        .args(&[
            "--worker-mode",
            "process",
            "--workers",
            "2",
            "--error-log",
            &arg,
        ])
        .spawned();
    // Standard output still says it (the start of worker processes with
    // the sample apps takes a while on a loaded machine).
    assert!(
        server.stdout.wait(crate::harness::START_TIMEOUT, |t| t
            .contains("listening on")),
        "{}",
        server.log()
    );
    let read = || std::fs::read_to_string(&path).unwrap_or_default();
    let both = ["[worker 0 pid", "[worker 1 pid", "listening on http://"];
    wait_until(WAIT, || both.iter().all(|w| read().contains(w)));
    let text = read();
    for who in ["[worker 0 pid", "[worker 1 pid"] {
        assert!(text.contains(who), "no line of {who}: {text}");
    }
    assert!(text.contains("INFO  stoa::boot: listening on"), "{text}");
    // Standard error keeps nothing of it.
    assert!(!server.log().contains("listening on"), "{}", server.log());
    let moved = path.with_extension("log.1");
    std::fs::rename(&path, &moved).expect("move the error log");
    server.signal(Signal::USR1);
    // The supervisor and each worker open the new file.
    let reopened = |t: &str| {
        t.lines()
            .filter(|l| l.contains("SIGUSR1: reopened the error log"))
            .count()
    };
    let read = || std::fs::read_to_string(&path).unwrap_or_default();
    wait_until(WAIT, || reopened(&read()) == 3);
    let new = read();
    assert_eq!(reopened(&new), 3, "{new}");
    for who in ["[worker 0 pid", "[worker 1 pid"] {
        assert!(
            new.lines()
                .any(|l| l.contains(who) && l.contains("reopened the error log")),
            "{who} did not reopen: {new}"
        );
    }
    // Lines logged before the signal stay in the moved file; each is whole.
    let old = std::fs::read_to_string(&moved).expect("the moved error log");
    assert!(old.contains("listening on http://"), "{old}");
    for line in old.lines().chain(new.lines()) {
        assert!(
            line.starts_with("20") && line.len() > 24,
            "a torn line: {line:?}"
        );
    }
}

#[test]
fn an_error_log_in_a_missing_directory_is_refused_naming_the_flag() {
    let dir = TempDir::new("error-log-missing");
    let path = dir.path().join("missing").join("error.log");
    let arg = path.display().to_string();
    let (_, log) = Server::launch("epoll")
        .apps(SAMPLE_APPS)
        .args(&["--error-log", &arg])
        .refused();
    let missing = dir.path().join("missing");
    let expected = format!(
        "--error-log {arg}: cannot create {arg}: {} is not a directory",
        missing.display()
    );
    assert!(log.contains(&expected), "{log}");
    // `stoa check` says the same of the file's `error_log` key.
    let config = dir.path().join("stoa.toml");
    std::fs::write(&config, format!("error_log = {arg:?}\n")).expect("write the config");
    let apps = dir.path().join("apps");
    std::fs::create_dir(&apps).expect("create the apps dir");
    let out = crate::common::run_to_exit(
        std::process::Command::new(crate::harness::STOA)
            .arg("check")
            .arg("--config")
            .arg(&config)
            .arg("--apps")
            .arg(&apps)
            .args(["--bind", "127.0.0.1:0"]),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains(&format!("problem: {expected}")), "{stdout}");
    assert!(!missing.exists());
}

#[test]
fn on_the_journal_lines_carry_priorities_and_no_time() {
    // What systemd sets for a service whose stderr is the journal: the
    // device and inode of that stream.
    let server = Server::launch("epoll")
        .shell("export JOURNAL_STREAM=$(stat -L -c %d:%i /proc/self/fd/2)")
        .args(&["--log-level", "debug"])
        .access_log()
        .start();
    // An error: a reopen of the access log that finds a directory there.
    let path = server.access_log_path().to_path_buf();
    assert_eq!(server.get("/no/app/").status, 404);
    assert_eq!(server.access_lines(1).len(), 1);
    std::fs::rename(&path, path.with_extension("log.1")).expect("move the access log");
    std::fs::create_dir(&path).expect("a directory at the access log's path");
    server.signal(Signal::USR1);
    assert!(
        server.wait_log(&["<3>ERROR", "cannot reopen the access log"]),
        "no <3> line (JOURNAL_STREAM is set from stat(1)): {}",
        server.log()
    );
    let log = server.log();
    for wanted in [
        "<4>WARN  stoa::boot: no app loaded",
        "<6>INFO  stoa::boot: listening on http://",
        "<7>DEBUG ",
    ] {
        assert!(log.contains(wanted), "no {wanted:?}: {log}");
    }
    for line in log.lines() {
        let priority = line.get(..3).unwrap_or_default();
        assert!(
            ["<3>", "<4>", "<6>", "<7>"].contains(&priority),
            "no priority: {line:?}"
        );
        assert!(
            !line[3..].starts_with("20"),
            "a time on the journal: {line:?}"
        );
    }
}

#[test]
fn worker_processes_log_streams_at_their_end_and_metrics_add_up_their_bytes() {
    let server = Server::launch("epoll")
        .apps(&["demo"])
        .args(&[
            "--worker-mode",
            "process",
            "--workers",
            "2",
            "--log-format",
            "json",
        ])
        .access_log()
        .start();
    // Streams on several connections, so both workers are likely to serve.
    let mut received = 0;
    for n in [100_000, 70_000, 30_000, 5] {
        let r = server.get(&format!("/demo/bytes?n={n}"));
        assert_eq!(r.body.len(), n, "{r:?}");
        received += n as u64;
    }
    let lines: Vec<Value> = server.access_lines(4).iter().map(|l| parse(l)).collect();
    let logged: u64 = lines.iter().filter_map(|v| v["bytes"].as_u64()).sum();
    assert_eq!(logged, received, "{lines:#?}");
    // Each worker publishes its counters a few times a second.
    let counted = || {
        metrics(&server)
            .get("stoa_response_bytes_total{app=\"demo\"}")
            .copied()
            .unwrap_or(0.0) as u64
    };
    // (Whichever worker answers reads the other's counters as last
    // published: wait for one answer that has both; a second read by the
    // other worker may lag by up to a tenth of a second.)
    let mut last = 0;
    assert!(
        wait_until(WAIT, || {
            last = counted();
            last == received
        }),
        "{last} of {received} bytes counted"
    );
}

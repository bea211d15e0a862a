//! Logs an operator can ship: `--log-format json` for the error log and
//! the access log, the access log's app, generation and duration, SIGUSR1
//! reopening a rotated access log, `--pid-file`, and the loop-block
//! warning's remedy.

use crate::client::get;
use crate::harness::{wait_until, Server, TempDir, SAMPLE_APPS, WAIT};
use rustix::process::Signal;
use serde_json::Value;
use std::time::Duration;

matrix!(
    json_error_log_lines_carry_time_level_target_message,
    json_access_lines_carry_app_generation_and_micros,
    sigusr1_reopens_a_moved_access_log,
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

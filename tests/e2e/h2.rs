//! HTTP/2: h2c with prior knowledge on a plain bind and `h2` through ALPN
//! on a TLS bind, on every backend. Our port of h2spec's cases
//! (`h2_frames.py`, Python's `h2` package building raw frames) passes
//! whole; the known attacks (Rapid Reset, MadeYouReset, CONTINUATION
//! floods, an HPACK bomb, SETTINGS/PING/empty-DATA floods, a zero window,
//! stream-id reuse, too many streams) each get their GOAWAY or reset while
//! another connection is served; curl and h2load get whole, streamed and
//! uploaded answers from the sample apps unchanged (a plugin built against
//! app-api 0.2.0 too; the environ app sees `HTTP/2`). And a Unix socket and
//! thread mode speak it too, and the access log says `HTTP/2.0`; a drain,
//! SIGUSR2 and a recycled worker send GOAWAY and finish the stream in
//! flight; `--h2c off` and
//! `--http2 off` speak HTTP/1.1 only, and out-of-range values are refused.

use crate::client::{tls_fixture, Transport};
use crate::h2_client::Steered;
use crate::harness::{Backend, Server, TempDir, WAIT};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

matrix!(
    tls:
    every_conformance_case_passes,
    known_attacks_are_answered_while_another_connection_is_served,
    curl_and_h2load_get_whole_streamed_and_uploaded_answers,
    httpx_sends_many_streams_on_one_connection,
);

const FRAMES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/e2e/h2_frames.py");

/// Runs `h2_frames.py` against `server` with `cases`: its output, after
/// checking it could run (a missing package fails the test, naming it).
pub(crate) fn frames(server: &Server, on: Backend, cases: &[&str]) -> (bool, String) {
    let mut cmd = Command::new("python3");
    cmd.arg(FRAMES);
    if on.transport == Transport::Tls {
        cmd.arg("--tls");
    }
    let out = cmd
        .args(["127.0.0.1", &server.port.to_string(), "/hello/"])
        .args(cases)
        .output()
        .expect("python3 is needed for the HTTP/2 tests (apt-get install -y python3)");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert_ne!(
        out.status.code(),
        Some(3),
        "Python's h2 package is needed for the HTTP/2 tests (python3 -m pip install h2): {text}"
    );
    (out.status.success(), text)
}

fn every_conformance_case_passes(on: Backend) {
    let server = Server::samples(on);
    let (ok, out) = frames(&server, on, &["http2", "hpack", "generic"]);
    assert!(ok, "on {on}:\n{out}\nhost log:\n{}", server.log());
    assert!(out.contains("147 cases, 147 passed, 0 failed"), "{out}");
}

/// `curl` over HTTP/2 to `path`: prior knowledge on a plain bind, ALPN on
/// a TLS one; `extra` flags before the URL. Its output ends with the
/// status and the HTTP version it spoke.
fn curl(server: &Server, on: Backend, path: &str, extra: &[&str]) -> Output {
    let url = match on.transport {
        Transport::Tls => format!("https://localhost:{}{path}", server.port),
        Transport::Plain => format!("http://127.0.0.1:{}{path}", server.port),
    };
    let proto = match on.transport {
        Transport::Tls => "--http2",
        Transport::Plain => "--http2-prior-knowledge",
    };
    Command::new("curl")
        .args([
            "-sS",
            "--max-time",
            "30",
            "--cacert",
            &tls_fixture("ca.pem"),
            proto,
        ])
        .args(["-w", "\n%{http_code} %{http_version}"])
        .args(extra)
        .arg(url)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("curl is needed: apt-get install -y curl ({e})"))
}

fn text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

fn known_attacks_are_answered_while_another_connection_is_served(on: Backend) {
    let server = Server::samples(on);
    let attack = {
        let mut cmd = Command::new("python3");
        cmd.arg(FRAMES);
        if on.transport == Transport::Tls {
            cmd.arg("--tls");
        }
        cmd.args(["127.0.0.1", &server.port.to_string(), "/hello/", "attacks"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("python3 is needed for the HTTP/2 tests")
    };
    // An honest client is served while the attacks run.
    let honest = curl(&server, on, "/article", &[]);
    let attack = attack.wait_with_output().expect("the attacks end");
    let out = text(&attack);
    assert_ne!(
        attack.status.code(),
        Some(3),
        "python3 -m pip install h2: {out}"
    );
    assert!(
        attack.status.success(),
        "on {on}:\n{out}\nhost log:\n{}",
        server.log()
    );
    assert!(out.contains("12 cases, 12 passed"), "{out}");
    let honest = text(&honest);
    assert!(honest.ends_with("\n200 2"), "{honest}");
    // The host is whole after them.
    let after = text(&curl(&server, on, "/article", &[]));
    assert!(
        after.contains("A Royal Baby") && after.ends_with("\n200 2"),
        "{after}"
    );
}

fn curl_and_h2load_get_whole_streamed_and_uploaded_answers(on: Backend) {
    let apps = [
        "hello-project",
        "article",
        "environ",
        "demo",
        "abi-previous",
    ];
    let server = Server::start(on, &apps, &[]);
    // A plugin built against app-api 0.2.0 is served over HTTP/2 unchanged.
    let previous = text(&curl(&server, on, "/previous", &[]));
    assert!(
        previous.starts_with("built against stoa-app-api 0.2.0") && previous.ends_with("\n200 2"),
        "{previous}\n{}",
        server.log()
    );
    let article = text(&curl(&server, on, "/article", &[]));
    assert_eq!(
        article,
        "{\"Name\":\"A Royal Baby\",\"Body\":\"A slow news week\"}\n200 2",
        "{}",
        server.log()
    );
    let head = text(&curl(&server, on, "/article", &["-I"]));
    assert!(head.contains("content-length: 49"), "{head}");
    // A streamed answer larger than every window, through flow control.
    let streamed = curl(
        &server,
        on,
        "/demo/bytes?n=3000000",
        &[
            "-o",
            "/dev/null",
            "-w",
            "\n%{http_code} %{http_version} %{size_download}",
        ],
    );
    let streamed = text(&streamed);
    assert!(
        streamed.ends_with("\n200 2 3000000"),
        "{streamed}\n{}",
        server.log()
    );
    // A buffered body and one streamed to its app's sink on the pool.
    let dir = TempDir::new("h2-upload");
    let file = dir.path().join("body");
    let body: Vec<u8> = (0..2_000_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(&file, &body).expect("write the body");
    let data = format!("@{}", file.display());
    let environ = text(&curl(&server, on, "/_environ/x", &["--data-binary", &data]));
    assert!(
        environ.contains("\"body_length\": 2000000") && environ.contains("\"version\": \"HTTP/2\""),
        "{}",
        &environ[..environ.len().min(600)]
    );
    let hashed = text(&curl(
        &server,
        on,
        "/demo/upload",
        &["--data-binary", &data],
    ));
    assert!(
        hashed.contains("2000000 bytes") && hashed.ends_with("200 2"),
        "{hashed}"
    );
    // Many streams on few connections.
    let scheme = match on.transport {
        Transport::Tls => "https",
        Transport::Plain => "http",
    };
    let url = format!("{scheme}://127.0.0.1:{}/article", server.port);
    let load = Command::new("h2load")
        .args(["-n", "2000", "-c", "10", "-m", "10", &url])
        .output()
        .unwrap_or_else(|e| panic!("h2load is needed: apt-get install -y nghttp2-client ({e})"));
    let load = text(&load);
    assert!(load.contains("2000 succeeded, 0 failed"), "{load}");
    assert!(load.contains("2000 2xx"), "{load}");
}

const HTTPX: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/e2e/h2_httpx.py");

/// Python's httpx (HTTP/2 only) as a browser loads a page: 50 requests at
/// once, then an upload, all on the one connection it opens.
fn httpx_sends_many_streams_on_one_connection(on: Backend) {
    let server = Server::start(on, &["article", "environ"], &[]);
    let base = match on.transport {
        Transport::Tls => format!("https://localhost:{}", server.port),
        Transport::Plain => format!("http://127.0.0.1:{}", server.port),
    };
    let ca = tls_fixture("ca.pem");
    let out = Command::new("python3")
        .args([HTTPX, "--ca", &ca, &base, "50"])
        .output()
        .expect("python3 is needed for the HTTP/2 tests");
    let text = text(&out);
    assert_ne!(
        out.status.code(),
        Some(3),
        "python3 -m pip install 'httpx[http2]': {text}"
    );
    assert!(out.status.success(), "on {on}: {text}\n{}", server.log());
    let want = "versions HTTP/2\nstatuses 200\n\
                article {\"Name\":\"A Royal Baby\",\"Body\":\"A slow news week\"}\n\
                post 200 HTTP/2 100000\n";
    assert_eq!(text, want, "on {on}");
    // One connection carried them all.
    let one = crate::harness::wait_until(WAIT, || {
        crate::common::status(&server)["http2"]["connections"].as_u64() == Some(1)
    });
    assert!(one, "{:#}", crate::common::status(&server)["http2"]);
}

/// h2c over a Unix socket, in thread mode too; the access log names the
/// protocol.
#[test]
fn a_unix_socket_and_thread_mode_speak_it_and_the_access_log_says_http_2() {
    for mode in ["process", "thread"] {
        let dir = TempDir::new("h2-unix");
        let sock = dir.path().join("stoa.sock");
        let bind = format!("unix:{}", sock.display());
        let server = Server::launch("epoll")
            .apps(&["article"])
            .args(&["--bind", &bind, "--worker-mode", mode])
            .access_log()
            .start();
        let line = format!("listening on {bind}\n");
        assert!(
            server.stdout.wait(WAIT, |t| t.contains(&line)),
            "{}",
            server.stdout.text()
        );
        let out = Command::new("curl")
            .args([
                "-sS",
                "--max-time",
                "20",
                "--http2-prior-knowledge",
                "--unix-socket",
            ])
            .arg(&sock)
            .args([
                "-w",
                "\n%{http_code} %{http_version}",
                "http://localhost/article",
            ])
            .output()
            .expect("curl");
        let out = text(&out);
        assert!(
            out.ends_with("A slow news week\"}\n200 2"),
            "{mode}: {out}\n{}",
            server.log()
        );
        let lines = server.access_lines(1);
        assert!(
            lines
                .iter()
                .any(|l| l.contains("\"GET /article HTTP/2.0\" 200 49")),
            "{mode}: {lines:#?}"
        );
    }
}

/// `--h2c off`: the preface on a plain bind is HTTP/1.1's 505, as any
/// `HTTP/2.0` request line; `--http2 off`: a TLS client offering both gets
/// HTTP/1.1.
#[test]
fn h2c_off_and_http2_off_speak_http_1_1_only() {
    let server = Server::launch("epoll")
        .apps(&["article"])
        .args(&["--h2c", "off"])
        .start();
    let mut c = crate::client::Client::connect(server.port);
    c.send(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
    let r = c.read_response();
    assert_eq!(r.status, 505, "{r:?}");
    let on = Backend::tls("epoll");
    let server = Server::start(on, &["article"], &["--http2", "off"]);
    let out = text(&curl(&server, on, "/article", &[]));
    assert!(out.ends_with("\n200 1.1"), "{out}");
}

/// Each `--h2-*` value out of range is refused at start, naming the flag
/// and a valid value.
#[test]
fn out_of_range_h2_values_are_refused_naming_the_flag() {
    let cases: [(&str, &str, &str); 5] = [
        ("--h2-stream-window", "1K", "at least 16K"),
        ("--h2-stream-window", "4G", "at most 2047M"),
        ("--h2-conn-window", "32K", "at least 64K"),
        (
            "--h2-max-concurrent-streams",
            "0",
            "--h2-max-concurrent-streams",
        ),
        ("--h2c", "maybe", "neither on nor off"),
    ];
    for (flag, value, says) in cases {
        let (_, log) = Server::launch("epoll")
            .apps(&["article"])
            .args(&[flag, value])
            .refused();
        assert!(
            log.contains(flag) && log.contains(says),
            "{flag} {value}: {log}"
        );
    }
}

/// SIGTERM with a stream in flight: GOAWAY NO_ERROR naming it, its answer
/// whole, then the connection closes and the host exits 0.
#[test]
fn a_drain_sends_goaway_and_finishes_the_stream_in_flight() {
    let args = ["--graceful-timeout", "10", "--no-watch"];
    let mut stoa = Server::start("epoll", &["demo"], &args);
    let (closed, out) = drained(&stoa, "/demo/sleep-handler/?seconds=1", || {
        stoa.signal(rustix::process::Signal::TERM)
    });
    assert!(closed, "{out}\n{}", stoa.log());
    assert!(FINISHED.iter().all(|l| out.contains(l)), "{out}");
    let exit = stoa
        .wait_exit(Duration::from_secs(10))
        .and_then(|e| e.code());
    assert_eq!(exit, Some(0), "log:\n{}", stoa.log());
}

/// The steered client against `stoa`, its request in flight on `path`:
/// whether the host closed the connection, and what the client printed,
/// after `act` ran once the request was with its app.
fn drained(stoa: &Server, path: &str, act: impl FnOnce()) -> (bool, String) {
    let mut client = Steered::start(stoa, &[]);
    client.say(&format!("get {path}"));
    client.say("ping");
    assert!(client.saw("pong"), "{}\n{}", client.text(), stoa.log());
    act();
    let closed = client.lines.wait(Duration::from_secs(15), |t| {
        t.contains("closed by the host\n")
    });
    (closed, client.text())
}

/// The lines the steered client prints for a GOAWAY NO_ERROR naming
/// stream 1, then the whole answer of `/demo/sleep-handler/` on it.
const FINISHED: [&str; 4] = [
    "goaway 0 1\n",
    "status 1 200\n",
    "body 1 when i sleep 5s\n",
    "end 1\n",
];

/// SIGUSR2 (process mode replaces its workers, keeping its pid) and
/// worker recycling (`--worker-max-requests`) with a stream in flight: the
/// old worker sends GOAWAY NO_ERROR naming it, finishes its answer and
/// closes; the new workers serve on.
#[test]
fn an_upgrade_and_a_recycled_worker_send_goaway_and_finish_the_stream() {
    let args = [
        "--graceful-timeout",
        "10",
        "--workers",
        "1",
        "--worker-mode",
        "process",
    ];
    let stoa = Server::start("epoll", &["demo"], &args);
    let pid = stoa.pid();
    let (closed, out) = drained(&stoa, "/demo/sleep-handler/?seconds=1", || {
        stoa.signal(rustix::process::Signal::USR2)
    });
    assert!(closed, "{out}\n{}", stoa.log());
    assert!(FINISHED.iter().all(|l| out.contains(l)), "SIGUSR2: {out}");
    assert!(
        stoa.wait_log(&["supervisor re-executed in place from"]),
        "{}",
        stoa.log()
    );
    assert_eq!(stoa.get("/demo/justnow/").status, 200);
    assert_eq!(stoa.pid(), pid);
    // A worker replaced after its second request: the stream in flight is
    // that request.
    let args = [
        "--graceful-timeout",
        "10",
        "--workers",
        "1",
        "--worker-max-requests",
        "2",
        "--worker-mode",
        "process",
    ];
    let stoa = Server::start("epoll", &["demo"], &args);
    assert_eq!(stoa.get("/demo/justnow/").status, 200);
    let (closed, out) = drained(&stoa, "/demo/sleep-handler/?seconds=1", || {});
    assert!(closed, "{out}\n{}", stoa.log());
    assert!(
        FINISHED.iter().all(|l| out.contains(l)),
        "recycling: {out}\n{}",
        stoa.log()
    );
    let served = crate::harness::wait_until(WAIT, || stoa.get("/demo/justnow/").status == 200);
    assert!(served, "{}", stoa.log());
}

/// A frame's bytes: its 9-octet header, then `payload`.
fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = (payload.len() as u32).to_be_bytes();
    let mut f = vec![len[1], len[2], len[3], kind, flags];
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// A header block of literal fields, never indexed (RFC 7541 §6.2.3).
fn block(fields: &[(&str, &str)]) -> Vec<u8> {
    let mut b = Vec::new();
    for (name, value) in fields {
        b.push(0x10);
        b.push(name.len() as u8);
        b.extend_from_slice(name.as_bytes());
        b.push(value.len() as u8);
        b.extend_from_slice(value.as_bytes());
    }
    b
}

/// Reads until the host closes the connection (or `limit` passes); true
/// if it closed.
fn closed_within(c: &mut std::net::TcpStream, limit: Duration) -> bool {
    use std::io::Read;
    c.set_read_timeout(Some(limit)).expect("timeout");
    let mut buf = [0u8; 65536];
    loop {
        match c.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
    }
}

/// A client that starts a header block and never ends it, and one that
/// asks for an answer and never opens its window, are closed after
/// `--keep-alive-timeout` and `--send-timeout`: neither holds its connection and the bytes
/// for it for ever, while the host serves on.
#[test]
fn a_stalled_block_and_a_window_never_opened_are_closed_at_the_idle_timeout() {
    use std::io::Write;
    let server = Server::start(
        "epoll",
        &["article", "demo"],
        &["--keep-alive-timeout", "1s", "--send-timeout", "1s"],
    );
    let hello = [
        &b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"[..],
        &frame(0x4, 0, 0, &[0, 4, 0, 0, 0, 0]), // SETTINGS_INITIAL_WINDOW_SIZE 0
    ]
    .concat();
    let get = |path: &str| {
        block(&[
            (":method", "GET"),
            (":scheme", "http"),
            (":path", path),
            (":authority", "localhost"),
        ])
    };
    // HEADERS without END_HEADERS, and no CONTINUATION after it.
    let mut stalled = std::net::TcpStream::connect(("127.0.0.1", server.port)).expect("connect");
    stalled
        .write_all(&[hello.clone(), frame(0x1, 0x1, 1, &get("/article"))].concat())
        .expect("send");
    // A whole request whose answer (100 KB) waits on a window of 0.
    let mut zero = std::net::TcpStream::connect(("127.0.0.1", server.port)).expect("connect");
    zero.write_all(&[hello, frame(0x1, 0x5, 1, &get("/demo/bytes?n=100000"))].concat())
        .expect("send");
    let started = std::time::Instant::now();
    assert!(
        closed_within(&mut stalled, Duration::from_secs(20)),
        "{}",
        server.log()
    );
    assert!(
        closed_within(&mut zero, Duration::from_secs(20)),
        "{}",
        server.log()
    );
    assert!(
        started.elapsed() >= Duration::from_millis(500),
        "closed before its timeout"
    );
    let after = text(&curl(&server, Backend::plain("epoll"), "/article", &[]));
    assert!(after.ends_with("\n200 2"), "{after}");
}

//! Clients past the connection cap (issue 15): with `--overload shed` the
//! one past `--max-connections` is answered 503 with `Retry-After: 1` at
//! once while the others are served; with `--overload queue` it waits in
//! the backlog and is answered once a slot frees; under a low `ulimit -n`
//! the cap follows the descriptor limit and every client gets an answer
//! (200 or 503), none is left waiting. Both are counted in status and
//! metrics and logged with the cap.

use crate::client::{get, Client};
use crate::common::{metrics, status};
use crate::harness::{wait_until, Server, SAMPLE_APPS};
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

matrix!(
    shed_answers_the_client_past_the_cap_at_once,
    queue_answers_the_client_past_the_cap_when_a_slot_frees,
    low_descriptor_limit_answers_instead_of_stalling,
    a_cap_above_the_descriptor_limit_is_refused,
);

/// A generous bound for "at once" (the issue asks for 100 ms; a loaded
/// test machine gets slack).
const PROMPTLY: Duration = Duration::from_secs(3);

/// `n` keep-alive clients, each answered once (so each holds a slot).
fn hold(server: &Server, n: usize) -> Vec<Client> {
    let mut clients: Vec<Client> = (0..n).map(|_| server.connect()).collect();
    for c in clients.iter_mut() {
        c.send(&get("/hello/"));
    }
    for (i, c) in clients.iter_mut().enumerate() {
        let r = c.read_response();
        assert_eq!((r.status, r.text()), (200, "Hello World!"), "client {i}");
    }
    clients
}

/// A host with one worker, `--max-connections 100` and this policy.
fn capped(poller: &str, overload: &str) -> Server {
    let args = ["--max-connections", "100", "--workers", "1", "--overload"];
    Server::launch(poller)
        .apps(SAMPLE_APPS)
        .args(&args)
        .args(&[overload])
        .start()
}

/// Waits until the host has seen released clients go and serves again.
fn wait_for_room(server: &Server) {
    let served = wait_until(PROMPTLY + PROMPTLY, || {
        status_of_one(server.port) == Ok(200)
    });
    assert!(served, "{}", server.log());
}

fn shed_answers_the_client_past_the_cap_at_once(poller: &str) {
    let server = capped(poller, "shed");
    let mut held = hold(&server, 100);
    let started = Instant::now();
    let mut extra = server.connect();
    let r = extra.request(&get("/hello/"));
    let took = started.elapsed();
    assert_eq!(r.status, 503, "{r:?}");
    assert_eq!(r.header("Retry-After"), Some("1"), "{r:?}");
    assert_eq!(r.header("Connection"), Some("close"), "{r:?}");
    assert!(r.text().contains("max_connections"), "{r:?}");
    assert!(took < PROMPTLY, "the 503 took {took:?}");
    extra.assert_closed();
    // The first hundred are still served.
    for (i, c) in held.iter_mut().enumerate() {
        let r = c.request(&get("/hello/"));
        assert_eq!(r.status, 200, "client {i}");
    }
    assert!(
        server.wait_log(&["at the connection cap", "--max-connections 100", "503"]),
        "{}",
        server.log()
    );
    held.truncate(90);
    wait_for_room(&server);
    let m = metrics(&server);
    assert!(
        m["stoa_connections_shed_total{worker=\"0\"}"] >= 1.0,
        "{m:?}"
    );
    assert_eq!(m["stoa_connections_max"], 100.0);
    let doc = status(&server);
    assert!(doc["connections"]["shed"].as_u64() >= Some(1), "{doc:#}");
    assert_eq!(doc["connections"]["overload"], "shed");
}

fn queue_answers_the_client_past_the_cap_when_a_slot_frees(poller: &str) {
    let server = capped(poller, "queue");
    let mut held = hold(&server, 100);
    let mut extra = TcpStream::connect(("127.0.0.1", server.port)).expect("connect");
    extra.write_all(&get("/hello/")).expect("send");
    extra
        .set_read_timeout(Some(Duration::from_millis(300)))
        .expect("timeout");
    let mut buf = [0u8; 512];
    match extra.read(&mut buf) {
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
        other => panic!("answered while the cap was full: {other:?}"),
    }
    held.pop();
    extra
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let n = extra.read(&mut buf).expect("an answer once a slot frees");
    let text = String::from_utf8_lossy(&buf[..n]);
    assert!(text.starts_with("HTTP/1.1 200 "), "{text}");
    assert!(
        server.wait_log(&[
            "at the connection cap",
            "accepts paused",
            "--overload queue"
        ]),
        "{}",
        server.log()
    );
    drop(extra);
    held.truncate(90);
    wait_for_room(&server);
    let m = metrics(&server);
    assert!(
        m["stoa_accept_paused_seconds_total{worker=\"0\"}"] > 0.0,
        "{m:?}"
    );
    assert_eq!(m["stoa_connections_shed_total{worker=\"0\"}"], 0.0);
}

/// One request with `Connection: close`: the status, or why there is none
/// within `PROMPTLY`.
fn status_of_one(port: u16) -> Result<u16, String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| format!("connect: {e}"))?;
    s.set_read_timeout(Some(PROMPTLY + PROMPTLY))
        .map_err(|e| e.to_string())?;
    s.write_all(b"GET /hello/ HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .map_err(|e| format!("send: {e}"))?;
    let mut head = [0u8; 16];
    let n = s.read(&mut head).map_err(|e| format!("read: {e}"))?;
    let text = String::from_utf8_lossy(&head[..n]).into_owned();
    text.split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or(format!("answer {text:?}"))
}

fn low_descriptor_limit_answers_instead_of_stalling(poller: &str) {
    let server = Server::launch(poller)
        .apps(SAMPLE_APPS)
        .args(&["--workers", "1"])
        .shell("ulimit -n 100")
        .start();
    assert!(server.wait_log(&["RLIMIT_NOFILE=100"]), "{}", server.log());
    // Clients that stay connected, more than the limit allows, each asking.
    let mut clients: Vec<TcpStream> = (0..150)
        .map(|_| TcpStream::connect(("127.0.0.1", server.port)).expect("connect"))
        .collect();
    let mut answers = Vec::new();
    for c in clients.iter_mut() {
        c.set_read_timeout(Some(PROMPTLY + PROMPTLY))
            .expect("timeout");
        c.write_all(&get("/hello/")).expect("send");
    }
    for (i, c) in clients.iter_mut().enumerate() {
        let mut head = [0u8; 12];
        let n = c
            .read(&mut head)
            .unwrap_or_else(|e| panic!("client {i}: {e}"));
        answers.push(String::from_utf8_lossy(&head[..n]).into_owned());
    }
    let ok = answers
        .iter()
        .filter(|a| a.starts_with("HTTP/1.1 200"))
        .count();
    let shed = answers
        .iter()
        .filter(|a| a.starts_with("HTTP/1.1 503"))
        .count();
    assert!(ok > 0 && shed > 0 && ok + shed == 150, "{answers:?}");
    drop(clients);
    wait_for_room(&server);
    assert!(
        !server.log_contains("Too many open files"),
        "{}",
        server.log()
    );
}

fn a_cap_above_the_descriptor_limit_is_refused(poller: &str) {
    let (_, log) = Server::launch(poller)
        .apps(SAMPLE_APPS)
        .args(&["--max-connections", "5000"])
        .shell("ulimit -n 1000")
        .refused();
    assert!(
        log.contains("--max-connections 5000")
            && log.contains("RLIMIT_NOFILE 1000")
            && log.contains("use --max-connections"),
        "{log}"
    );
}

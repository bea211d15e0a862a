//! Clients past the connection cap (issue 15): with `--overload shed` the
//! one past `--max-connections` is answered 503 with `Retry-After: 1` at
//! once while the others are served; with `--overload queue` it waits in
//! the backlog and is answered once a slot frees; under a low `ulimit -n`
//! the cap follows the descriptor limit and every client gets an answer
//! (200 or 503), none is left waiting; a limit lowered under a running
//! host (`prlimit`) is met by each worker's spare descriptor, flood after
//! flood. Both are counted in status and metrics and logged with the cap.
//! The cap is the host's, whichever worker a client lands on.

use crate::client::{get, Client};
use crate::common::{metrics, status};
use crate::harness::{wait_until, Server, SAMPLE_APPS};
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

matrix!(
    shed_answers_the_client_past_the_cap_at_once,
    queue_answers_the_client_past_the_cap_when_a_slot_frees,
    low_descriptor_limit_answers_instead_of_stalling,
    a_cap_above_the_descriptor_limit_is_refused,
    every_flood_past_a_lowered_descriptor_limit_is_shed,
    a_worker_out_of_descriptors_serves_again_when_its_clients_leave,
    the_cap_is_the_hosts_over_two_workers,
    the_cap_is_the_hosts_over_two_worker_processes,
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

/// Sets the running server's descriptor limit (soft and hard) with
/// util-linux's `prlimit`, failing the test if it is not installed.
fn lower_nofile(server: &Server, limit: u32) {
    let out = Command::new("prlimit")
        .arg(format!("--pid={}", server.pid()))
        .arg(format!("--nofile={limit}:{limit}"))
        .output();
    let out = out.unwrap_or_else(|e| {
        panic!("prlimit (util-linux) is needed: `apt-get install -y util-linux` ({e})")
    });
    assert!(out.status.success(), "prlimit: {out:?}");
}

/// Each worker's count of clients answered 503, by worker label.
fn sheds(server: &Server) -> Vec<f64> {
    let m = metrics(server);
    (0..2)
        .map(|w| m[&format!("stoa_connections_shed_total{{worker=\"{w}\"}}")])
        .collect()
}

/// `n` clients that connect at once, each sending a keep-alive request
/// and staying: the status each reads within `PROMPTLY` (0 for none).
fn flood(port: u16, n: usize) -> (Vec<TcpStream>, Vec<u16>) {
    let mut clients: Vec<TcpStream> = (0..n)
        .map(|_| TcpStream::connect(("127.0.0.1", port)).expect("connect"))
        .collect();
    for c in clients.iter_mut() {
        c.write_all(&get("/hello/")).expect("send");
    }
    // A client left unanswered would wait until others leave: a long
    // deadline only slows a failing run.
    let deadline = Instant::now() + Duration::from_secs(20);
    let statuses = clients
        .iter_mut()
        .map(|c| {
            let left = deadline.saturating_duration_since(Instant::now());
            c.set_read_timeout(Some(left.max(Duration::from_millis(1))))
                .expect("timeout");
            let mut head = [0u8; 12];
            let n = c.read(&mut head).unwrap_or(0);
            let text = String::from_utf8_lossy(&head[..n]).into_owned();
            text.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0)
        })
        .collect();
    (clients, statuses)
}

/// The limit lowered under a running host below what its connection cap
/// assumed: in each of three floods, every worker answers the clients past
/// the limit 503 and every client gets an answer. Two workers race for the
/// last descriptors: a spare one gives up for an accept may go to the
/// other's accept; the pool is then short, and the other sheds and closes
/// what it accepts until the spare is back, instead of admitting it while
/// the first worker's clients wait in silence until clients leave.
///
/// The kernel hashes each client to one worker's `SO_REUSEPORT` socket, so
/// each gets about half the flood. A flood of 600 over a limit of 200 gives
/// each worker about 300 clients, more than the whole process's descriptors:
/// each must shed some whichever runs first. (With 400, a worker's half
/// could fit what was free, and a worker the machine ran first took every
/// descriptor while the other shed all of its clients.)
fn every_flood_past_a_lowered_descriptor_limit_is_shed(poller: &str) {
    let server = Server::launch(poller)
        .apps(SAMPLE_APPS)
        .args(&["--workers", "2", "--max-connections", "1000"])
        .start();
    // The test process holds the clients: raise its own descriptor limit.
    rlimit::increase_nofile_limit(u64::MAX).expect("raise RLIMIT_NOFILE");
    lower_nofile(&server, 200);
    const CLIENTS: usize = 600;
    for round in 1..=3 {
        let before = sheds(&server);
        let (clients, statuses) = flood(server.port, CLIENTS);
        let count = |s: u16| statuses.iter().filter(|&&x| x == s).count();
        let (ok, shed) = (count(200), count(503));
        drop(clients);
        wait_for_room(&server);
        let after = sheds(&server);
        for w in 0..2 {
            assert!(
                after[w] > before[w],
                "round {round}: worker {w} answered no client 503 ({ok} got 200, {shed} 503, \
                 {} nothing; sheds {before:?} -> {after:?})\n{}",
                CLIENTS - ok - shed,
                server.log()
            );
        }
        assert!(ok > 0 && shed > 0, "round {round}: {statuses:?}");
        assert_eq!(
            ok + shed,
            CLIENTS,
            "round {round}: every client is answered, none left waiting in silence \
             ({ok} got 200, {shed} 503)\n{}",
            server.log()
        );
    }
}

/// One worker out of descriptors that has shed its backlog to the last
/// client: `accept` still fails for want of a descriptor though no client
/// waits, and the loop must stop there (trying on, it would never read
/// that its clients left): once they leave, it serves again.
fn a_worker_out_of_descriptors_serves_again_when_its_clients_leave(poller: &str) {
    let server = Server::launch(poller)
        .apps(SAMPLE_APPS)
        .args(&["--workers", "1", "--max-connections", "1000"])
        .start();
    rlimit::increase_nofile_limit(u64::MAX).expect("raise RLIMIT_NOFILE");
    lower_nofile(&server, 200);
    let (clients, statuses) = flood(server.port, 300);
    let count = |s: u16| statuses.iter().filter(|&&x| x == s).count();
    assert!(count(200) > 0 && count(503) > 0, "{statuses:?}");
    drop(clients);
    wait_for_room(&server);
    assert_eq!(status_of_one(server.port), Ok(200), "{}", server.log());
}

/// `--workers 2 --max-connections 21`: 21 idle keep-alive clients (spread
/// over both workers by the kernel) are all served, and every client past
/// them is shed, whichever worker it lands on. With the cap split per
/// worker (11 each) a worker would shed the 12th of its own, or admit a
/// 22nd client while the host is full.
fn the_cap_is_the_hosts_over_two_workers(poller: &str) {
    cap_over_two_workers(poller, "thread");
}

fn the_cap_is_the_hosts_over_two_worker_processes(poller: &str) {
    cap_over_two_workers(poller, "process");
}

/// `--max-connections 21` over two workers (threads or processes): the
/// host takes 21 clients wherever they land, and sheds the 22nd.
fn cap_over_two_workers(poller: &str, mode: &str) {
    let server = Server::launch(poller)
        .apps(SAMPLE_APPS)
        .args(&[
            "--worker-mode",
            mode,
            "--workers",
            "2",
            "--max-connections",
            "21",
            "--overload",
            "shed",
        ])
        .start();
    let mut held = hold(&server, 21);
    for i in 0..4 {
        let mut extra = server.connect();
        let r = extra.request(&get("/hello/"));
        assert_eq!(r.status, 503, "extra client {i}: {r:?}\n{}", server.log());
        extra.assert_closed();
    }
    for (i, c) in held.iter_mut().enumerate() {
        let r = c.request(&get("/hello/"));
        assert_eq!(r.status, 200, "client {i}");
    }
    assert!(
        server.wait_log(&[
            "at the connection cap",
            "21 open host-wide",
            "--max-connections 21"
        ]),
        "{}",
        server.log()
    );
    drop(held);
    wait_for_room(&server);
    // Worker processes publish their counters a few times a second.
    // (In process mode each series also names the worker's pid.)
    let took = |w: &str| {
        let prefix = format!("stoa_connections_accepted_total{{worker=\"{w}\"");
        metrics(&server)
            .iter()
            .filter(|(k, _)| k.starts_with(&prefix))
            .map(|(_, v)| v)
            .sum::<f64>()
    };
    assert!(
        wait_until(PROMPTLY, || took("0") >= 1.0 && took("1") >= 1.0),
        "a worker took no client: {:?}",
        metrics(&server)
    );
    let m = metrics(&server);
    assert_eq!(m["stoa_connections_max"], 21.0);
    let doc = status(&server);
    assert_eq!(doc["connections"]["max"], 21, "{doc:#}");
    assert!(
        doc["connections"].get("max_per_worker").is_none(),
        "{doc:#}"
    );
}

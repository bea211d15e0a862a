//! Workers and drain: `--workers` spreads connections over its workers,
//! and SIGTERM drains (in-flight requests finish with `Connection: close`,
//! idle keep-alive connections close, new connects are refused, ready turns
//! 503, the status shows `draining`, and the process exits 0). Every load
//! loop is bounded in requests and time; only 127.0.0.1 is used.

use crate::client::{get, request, Client};
use crate::common::{status, STATUS};
use crate::harness::{wait_until, Server};
use rustix::process::Signal;
use serde_json::{json, Value};
use std::io::ErrorKind;
use std::net::TcpStream;
use std::time::{Duration, Instant};

matrix!(two_workers_both_serve, sigterm_drains_in_flight_requests);

fn two_workers_both_serve(poller: &str) {
    let server = Server::start(poller, &["article"], &["--workers", "2"]);
    let port = server.port;
    // 4 threads x 100 connections, one request each.
    let threads: Vec<_> = (0..4)
        .map(|_| {
            std::thread::spawn(move || {
                for _ in 0..100 {
                    let bytes = request("GET", "/article", &["Connection: close"]);
                    assert_eq!(Client::connect(port).request(&bytes).status, 200);
                }
            })
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().expect("load"));
    let s = status(port);
    assert_eq!((&s["workers"], &s["poller"]), (&json!(2), &json!(poller)));
    let per: Vec<u64> = (0..2)
        .map(|w| s["per_worker"][w]["requests"].as_u64().unwrap())
        .collect();
    assert!(
        per.iter().all(|&n| n > 0),
        "a worker served nothing: {per:?}"
    );
    assert_eq!(per.iter().sum::<u64>(), 400, "{s}");
    assert_eq!(s["requests"]["article"]["2xx"], 400);
    assert!(s["connections"]["accepted"].as_u64() >= Some(401), "{s}");
}

fn sigterm_drains_in_flight_requests(poller: &str) {
    let args = ["--workers", "2", "--graceful-timeout", "10", "--no-watch"];
    let mut stoa = Server::start(poller, &["article", "demo"], &args);
    let port = stoa.port;
    let mut sleeper = Client::connect(port);
    sleeper.send(&get("/demo/sleep-handler/?seconds=1"));
    let sent = Instant::now();
    // An idle keep-alive connection (closed at drain start), and two with a
    // request head half sent (busy, so kept): they ask ready and status later.
    let mut idle = Client::connect(port);
    assert_eq!(idle.request(&get("/article")).status, 200);
    let half = |path: &str| {
        let mut c = Client::connect(port);
        c.send(format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n").as_bytes());
        c
    };
    let (mut ready, mut state) = (half("/.well-known/stoa/ready"), half(STATUS));
    // All four accepted (the k-th status poll is the (4+k)-th connection),
    // then time to read what they sent.
    let mut polls = 0;
    let accepted = wait_until(Duration::from_secs(5), || {
        polls += 1;
        status(port)["connections"]["accepted"].as_u64() >= Some(4 + polls)
    });
    assert!(accepted, "stoa did not accept our four connections");
    std::thread::sleep(Duration::from_millis(150));
    stoa.signal(Signal::TERM);

    let refused = wait_until(Duration::from_millis(600), || {
        matches!(TcpStream::connect(("127.0.0.1", port)),
            Err(e) if e.kind() == ErrorKind::ConnectionRefused)
    });
    assert!(refused, "new connects still accepted while draining");
    idle.assert_closed();
    ready.send(b"\r\n");
    let r = ready.read_response();
    assert_eq!((r.status, r.header("Connection")), (503, Some("close")));
    state.send(b"\r\n");
    let s: Value = serde_json::from_slice(&state.read_response().body).expect("JSON");
    assert_eq!(s["draining"], true, "{s}");

    let r = sleeper.read_response();
    assert_eq!((r.status, r.text()), (200, "when i sleep 5s"));
    assert_eq!(r.header("Connection"), Some("close"));
    assert!(sent.elapsed() >= Duration::from_millis(950), "too early");
    sleeper.assert_closed();
    let exit = stoa
        .wait_exit(Duration::from_secs(10))
        .and_then(|e| e.code());
    assert_eq!(exit, Some(0), "log:\n{}", stoa.log());
    assert!(stoa.log().contains("draining"), "{}", stoa.log());
}

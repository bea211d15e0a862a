//! Async and blocking apps (issue 4), through the `demo` sample app at
//! `/demo` and the misbehave plugin's `/_test/timer-panic`: host timers let
//! many sleeps overlap, a handler declared blocking runs on the pool (or on
//! the loop with `--blocking-on-loop`, which then stalls and is reported),
//! a full pool answers 503, a panicking timer callback is a 500, and a
//! client that leaves while its timer is pending leaks nothing.

use crate::client::{get, Client, Response};
use crate::common::{assert_serves, wait_for_open, JUSTNOW_BODY};
use crate::harness::Server;
use std::io::ErrorKind;
use std::time::{Duration, Instant};

matrix!(
    constant_headers_arrive_inline_from_a_timer_and_from_the_pool,
    forty_timer_sleeps_overlap,
    justnow_answers_while_a_blocking_handler_sleeps,
    blocking_on_loop_makes_justnow_wait_and_is_reported,
    full_blocking_pool_answers_503,
    panicking_timer_callback_is_500,
    client_gone_while_its_timer_is_pending,
    bad_seconds_are_400,
);

/// What the demo's sleep handlers answer (the seed's 15 bytes).
pub const SLEEP_BODY: &str = "when i sleep 5s";

/// The demo app and the misbehave plugin, with these flags.
fn start(poller: &str, args: &[&str]) -> Server {
    Server::start(poller, &["demo", "misbehave"], args)
}

/// True if bytes (or the end of stream) are ready on the client's socket.
fn has_arrived(c: &Client) -> bool {
    c.stream().set_nonblocking(true).expect("set non-blocking");
    let peeked = c.stream().peek(&mut [0u8; 1]);
    c.stream().set_nonblocking(false).expect("set blocking");
    match peeked {
        Ok(_) => true,
        Err(e) if e.kind() == ErrorKind::WouldBlock => false,
        Err(e) => panic!("peek failed: {e}"),
    }
}

fn assert_sleep_answer(r: &Response, what: &str) {
    assert_eq!((r.status, r.text()), (200, SLEEP_BODY), "{what}: {r:?}");
}

/// The demo answers with a constant header (`Cache-Control: no-store`,
/// app-api's `StaticHeader`): written as it is for C's answer on the loop,
/// copied by the host for B's (a timer) and A's (a pool thread).
fn constant_headers_arrive_inline_from_a_timer_and_from_the_pool(poller: &str) {
    let server = start(poller, &[]);
    let mut c = server.connect();
    for path in [
        "/demo/justnow/",
        "/demo/sleep-handler/?seconds=0",
        "/demo/syncsleep-handler/?seconds=0",
        "/demo/justnow/",
    ] {
        let r = c.request(&get(path));
        assert_eq!(r.status, 200, "{path}: {r:?}");
        assert_eq!(r.header("Cache-Control"), Some("no-store"), "{path}: {r:?}");
        assert_eq!(r.header_count("cache-control"), 1, "{path}: {r:?}");
    }
}

fn forty_timer_sleeps_overlap(poller: &str) {
    let server = start(poller, &[]);
    let started = Instant::now();
    let mut clients: Vec<Client> = (0..40).map(|_| server.connect()).collect();
    for c in &mut clients {
        c.send(&get("/demo/sleep-handler/"));
    }
    for (i, c) in clients.iter_mut().enumerate() {
        assert_sleep_answer(&c.read_response(), &format!("client {i}"));
    }
    let took = started.elapsed();
    // Forty 1 s timers, overlapped: about 1 s, never 40 s.
    assert!(took >= Duration::from_millis(900), "too fast: {took:?}");
    assert!(took < Duration::from_secs(10), "did not overlap: {took:?}");
    assert_serves(&server);
}

fn justnow_answers_while_a_blocking_handler_sleeps(poller: &str) {
    let server = start(poller, &[]);
    let mut sync = server.connect();
    sync.send(&get("/demo/syncsleep-handler/?seconds=2"));
    std::thread::sleep(Duration::from_millis(200));
    let r = server.get("/demo/justnow/");
    assert_eq!((r.status, r.text()), (200, JUSTNOW_BODY));
    assert!(
        !has_arrived(&sync),
        "the blocking handler answered before justnow"
    );
    assert_sleep_answer(&sync.read_response(), "syncsleep on the pool");
    assert!(
        server.log_lines(&["event loop blocked"]).is_empty(),
        "the pool's sleep was reported as blocking the loop:\n{}",
        server.log()
    );
    assert_serves(&server);
}

/// One worker, so justnow is served by the very loop the handler holds.
fn blocking_on_loop_makes_justnow_wait_and_is_reported(poller: &str) {
    let server = start(poller, &["--blocking-on-loop", "--workers", "1"]);
    let mut sync = server.connect();
    sync.send(&get("/demo/syncsleep-handler/?seconds=2"));
    std::thread::sleep(Duration::from_millis(300));
    let sent = Instant::now();
    let mut now = server.connect();
    let r = now.request(&get("/demo/justnow/"));
    assert_eq!((r.status, r.text()), (200, JUSTNOW_BODY));
    // Loopback delivers in write order: the sync answer is already here.
    assert!(
        has_arrived(&sync),
        "justnow did not wait for the stalled loop"
    );
    assert!(
        sent.elapsed() >= Duration::from_millis(500),
        "justnow answered in {:?} while the loop slept",
        sent.elapsed()
    );
    assert_sleep_answer(&sync.read_response(), "syncsleep on the loop");
    assert!(
        server.wait_log(&[
            "event loop blocked for",
            "by app demo",
            "/demo/syncsleep-handler/"
        ]),
        "no loop-blocked warning naming demo"
    );
    assert_serves(&server);
}

fn full_blocking_pool_answers_503(poller: &str) {
    let server = start(
        poller,
        &["--blocking-threads", "1", "--blocking-queue", "1"],
    );
    let mut clients: Vec<Client> = (0..6).map(|_| server.connect()).collect();
    for c in &mut clients {
        c.send(&get("/demo/syncsleep-handler/?seconds=1"));
    }
    let (mut ok, mut full) = (0, 0);
    for (i, c) in clients.iter_mut().enumerate() {
        let r = c.read_response();
        match r.status {
            200 => {
                assert_sleep_answer(&r, &format!("client {i}"));
                ok += 1;
            }
            503 => {
                assert!(r.header("Retry-After").is_some(), "client {i}: {r:?}");
                assert!(r.text().contains("blocking_queue"), "client {i}: {r:?}");
                full += 1;
            }
            other => panic!("client {i}: unexpected status {other}: {r:?}"),
        }
    }
    assert_eq!(ok + full, 6);
    assert!(ok >= 1 && full >= 1, "{ok} answered, {full} refused");
    assert_serves(&server);
    // The pool is free again once the burst is done.
    let r = server.get("/demo/syncsleep-handler/?seconds=0");
    assert_sleep_answer(&r, "after the burst");
}

fn panicking_timer_callback_is_500(poller: &str) {
    let server = start(poller, &[]);
    let mut c = server.connect();
    let r = c.request(&get("/_test/timer-panic"));
    assert_eq!(
        (r.status, r.reason.as_str()),
        (500, "Internal Server Error"),
        "{r:?}"
    );
    assert!(
        server.wait_log(&["asked to panic in a timer callback"]),
        "the panic was not logged"
    );
    // The same connection and new ones are still served.
    assert_eq!(c.request(&get("/_test/ok")).text(), "ok");
    assert_eq!(server.get("/_test/timer-panic").status, 500);
    assert_serves(&server);
}

fn client_gone_while_its_timer_is_pending(poller: &str) {
    let server = start(poller, &[]);
    assert_eq!(wait_for_open(&server, 0), 0, "connections open at start");
    // Closed politely (FIN) while the 1 s timer is pending.
    let mut gone = server.connect();
    gone.send(&get("/demo/sleep-handler/?seconds=1"));
    assert_eq!(
        wait_for_open(&server, 1),
        1,
        "the pending request's connection"
    );
    drop(gone);
    // Reset (RST, SO_LINGER 0) while its timer is pending.
    let mut reset = server.connect();
    reset.send(&get("/demo/sleep-handler/?seconds=1"));
    assert_eq!(
        wait_for_open(&server, 1),
        1,
        "the pending request's connection"
    );
    socket2::SockRef::from(reset.stream())
        .set_linger(Some(Duration::ZERO))
        .expect("set SO_LINGER 0");
    drop(reset);
    // Both timers fire within about 1 s; nothing may stay open.
    assert_eq!(wait_for_open(&server, 0), 0, "a connection leaked");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(wait_for_open(&server, 0), 0, "a connection leaked");
    assert!(!server.log_contains("panicked"), "{}", server.log());
    assert_serves(&server);
    let r = server.get("/demo/sleep-handler/?seconds=0");
    assert_sleep_answer(&r, "after the clients left");
}

fn bad_seconds_are_400(poller: &str) {
    let server = start(poller, &[]);
    let mut c = server.connect();
    for handler in ["sleep-handler", "syncsleep-handler"] {
        for bad in ["11", "x", "-1", "1.5", ""] {
            let r = c.request(&get(&format!("/demo/{handler}/?seconds={bad}")));
            assert_eq!(r.status, 400, "{handler} seconds={bad}: {r:?}");
            assert!(r.text().contains("seconds"), "{r:?}");
        }
        let r = c.request(&get(&format!("/demo/{handler}/?seconds=0")));
        assert_sleep_answer(&r, handler);
    }
    assert_serves(&server);
}

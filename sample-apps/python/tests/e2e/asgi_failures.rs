//! When an ASGI request goes wrong: the client leaves (the application's
//! receive() says `http.disconnect`), the application never answers (the
//! host's app deadline answers 504 and cancels its task), it raises before
//! its response starts (500, the traceback logged) or after (the response
//! cut short), or it blocks the event loop (a warning naming the request).

use crate::asgi_host::{fastapi, fastapi_with, pure, python_has, wait_seen};
use crate::bridge::Bridge;
use crate::client::get;
use std::time::{Duration, Instant};

fn a_client_that_leaves_is_seen_by_the_app(poller: &str) {
    let bridge = fastapi(poller, "/api", &[]);
    let mut c = bridge.server.connect();
    c.send(&get("/api/wait-disconnect?tag=d1"));
    assert!(
        wait_seen(&bridge, "/api/seen", "waiting d1"),
        "{}",
        bridge.server.log()
    );
    drop(c);
    assert!(
        wait_seen(&bridge, "/api/seen", "disconnected d1"),
        "the application never heard the client go:\n{}",
        bridge.server.log()
    );
    // A task that never asks is cancelled once its client has gone.
    let mut c = bridge.server.connect();
    c.send(&get("/api/never"));
    assert!(wait_seen(&bridge, "/api/seen", "never started"));
    drop(c);
    assert!(
        wait_seen(&bridge, "/api/seen", "cancelled"),
        "the task outlived its client:\n{}",
        bridge.server.log()
    );
}

/// An endless stream whose client leaves: the next `send` raises (ASGI
/// spec 2.4: an `OSError`, which Starlette turns into its
/// `ClientDisconnect`), the generator stops, and no error is logged.
fn a_stream_whose_client_leaves_stops_quietly(poller: &str) {
    let bridge = fastapi(poller, "/api", &[]);
    let mut c = bridge.server.connect();
    c.send(&get("/api/sse-forever?tag=s1"));
    assert!(
        wait_seen(&bridge, "/api/seen", "streaming s1"),
        "{}",
        bridge.server.log()
    );
    drop(c);
    assert!(
        wait_seen(&bridge, "/api/seen", "stream stopped s1"),
        "the stream went on after its client left:\n{}",
        bridge.server.log()
    );
    let log = bridge.server.log();
    assert!(
        !log.contains("sse-forever?tag=s1: the ASGI application raised")
            && !log.contains("GET /api/sse-forever: the ASGI application raised"),
        "a client leaving a stream is no application error:\n{log}"
    );
    assert_eq!(bridge.server.get("/api/hello").text(), "Hello World!");
}

fn the_app_deadline_answers_504_and_cancels_the_task(poller: &str) {
    let bridge = fastapi_with(poller, "/api", "app_timeout = \"1s\"", &[]);
    let started = Instant::now();
    let r = bridge.server.get("/api/never");
    let took = started.elapsed();
    assert_eq!(r.status, 504, "{r:?}");
    assert!(took >= Duration::from_millis(900), "504 after {took:?}");
    assert!(
        wait_seen(&bridge, "/api/seen", "cancelled"),
        "the task went on after the 504:\n{}",
        bridge.server.log()
    );
    assert_eq!(bridge.server.get("/api/hello").text(), "Hello World!");
}

/// `path` answers 500 and the log has the bridge's line and `message`
/// (from the traceback).
fn answers_500_and_logs(bridge: &Bridge, path: &str, message: &str) {
    let r = bridge.server.get(path);
    assert_eq!(r.status, 500, "{r:?}");
    assert!(
        bridge.server.wait_log(&["the ASGI application raised"]),
        "{}",
        bridge.server.log()
    );
    assert!(
        bridge.server.wait_log(&[message]),
        "{}",
        bridge.server.log()
    );
}

/// `path` starts a chunked 200 with a first chunk, then the connection
/// closes without the terminating chunk.
fn is_cut_short(bridge: &Bridge, path: &str) {
    let mut c = bridge.server.connect();
    c.send(&get(path));
    let raw = c.read_until_closed();
    let text = String::from_utf8_lossy(&raw).into_owned();
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.contains("Transfer-Encoding: chunked"), "{text}");
    assert!(text.contains("first chunk\n"), "{text}");
    assert!(!text.ends_with("0\r\n\r\n"), "a complete body: {text}");
}

/// `app` (its routes under `prefix`, its messages starting with `app`)
/// raising before its response starts (500, logged) and after (cut
/// short, logged), then answering on.
fn raises_before_and_after(bridge: &Bridge, prefix: &str, app: &str, hello: &str) {
    let message = format!("{app} raised before the response on purpose");
    answers_500_and_logs(bridge, &format!("{prefix}/raise"), &message);
    is_cut_short(bridge, &format!("{prefix}/raise-later"));
    let message = format!("{app} raised after the response started on purpose");
    assert!(
        bridge.server.wait_log(&[&message]),
        "{}",
        bridge.server.log()
    );
    assert_eq!(bridge.server.get(&format!("{prefix}/hello")).text(), hello);
}

fn exceptions_before_and_after_the_response_starts(poller: &str) {
    let bridge = fastapi(poller, "/api", &[]);
    raises_before_and_after(&bridge, "/api", "fastapp", "Hello World!");
    drop(bridge);
    // The same with no framework catching anything first.
    let bridge = pure(poller, "application", "/pure");
    raises_before_and_after(&bridge, "/pure", "pureasgi", "pure hello");
}

fn a_blocked_event_loop_is_logged_and_the_loop_named(poller: &str) {
    let bridge = fastapi(poller, "/api", &[]);
    let server = &bridge.server;
    let lp = if python_has("uvloop") {
        "uvloop"
    } else {
        "asyncio"
    };
    assert!(
        server.wait_log(&[&format!("ASGI event loop: {lp}")]),
        "{}",
        server.log()
    );
    // A quick request blocks nothing.
    assert_eq!(server.get("/api/hello").text(), "Hello World!");
    let r = server.get("/api/block?ms=600");
    assert_eq!((r.status, r.text()), (200, "blocked"), "{r:?}");
    assert!(
        server.wait_log(&["event loop was blocked", "/api/block"]),
        "{}",
        server.log()
    );
    let quick = server.log_lines(&["event loop was blocked", "/api/hello"]);
    assert!(quick.is_empty(), "{quick:?}");
}

matrix!(
    a_client_that_leaves_is_seen_by_the_app,
    a_stream_whose_client_leaves_stops_quietly,
    the_app_deadline_answers_504_and_cancels_the_task,
    exceptions_before_and_after_the_response_starts,
    a_blocked_event_loop_is_logged_and_the_loop_named
);

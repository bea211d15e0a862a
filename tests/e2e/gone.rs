//! A client that leaves before its answer is complete, and what its app
//! hears of it (`Responder::on_gone`, the test-only `misbehave` plugin's
//! `/_test/gone...` routes): a close, a half-close or a reset while the
//! request is with the app, while its answer streams, or while its app
//! reads its body runs the app's task once; so does a 504 past the app's
//! deadline; an answer that completes drops it unrun. And the WebSocket
//! handshake's answers beyond a plain accept: a `101` with the app's own
//! headers (a subprotocol the client offered; one it did not is dropped
//! with a warning), and a denial answered as an ordinary response. Each
//! on every backend, over plain TCP and TLS.

use crate::client::{get, request};
use crate::harness::{Backend, Server};
use std::time::Duration;

matrix!(
    tls:
    a_client_that_closes_is_gone,
    a_client_that_half_closes_is_gone,
    a_client_that_resets_is_gone,
    a_client_that_leaves_at_once_is_gone,
    a_client_that_leaves_a_stream_is_gone,
    a_client_that_leaves_mid_body_is_gone,
    past_the_app_timeout_the_client_gets_504_and_the_app_hears,
    an_answered_request_is_not_gone,
    a_websocket_accept_carries_the_apps_headers,
    a_denied_websocket_handshake_is_an_ordinary_answer,
);

matrix!(a_client_that_leaves_a_worker_process_is_gone);

fn start(on: Backend) -> Server {
    Server::start(on, &["misbehave"], &[])
}

/// The app's line for a request that was abandoned.
fn gone_line(path: &str) -> String {
    format!("client gone: request {path}")
}

/// Sends `GET path` and waits until the app holds the request.
fn held(server: &Server, path: &str) -> crate::client::Client {
    let mut c = server.connect();
    c.send(&get(path));
    let holding = format!("holding {path}");
    assert!(server.wait_log(&[&holding]), "{}", server.log());
    c
}

fn a_client_that_closes_is_gone(on: Backend) {
    let server = start(on);
    let c = held(&server, "/_test/gone?closed");
    drop(c);
    let line = gone_line("/_test/gone?closed");
    assert!(server.wait_log(&[&line]), "{}", server.log());
    assert_eq!(server.log_lines(&[&line]).len(), 1, "the task runs once");
    // The host serves on.
    assert_eq!(server.get("/_test/ok").text(), "ok");
}

fn a_client_that_half_closes_is_gone(on: Backend) {
    let server = start(on);
    let mut c = held(&server, "/_test/gone?half");
    // The client's FIN (after `close_notify` over TLS): as for nginx and
    // ASGI servers, a client that has stopped sending has left.
    c.shutdown_write();
    let line = gone_line("/_test/gone?half");
    assert!(server.wait_log(&[&line]), "{}", server.log());
    // No answer comes: the host closed the connection.
    c.assert_closed();
}

fn a_client_that_resets_is_gone(on: Backend) {
    let server = start(on);
    let c = held(&server, "/_test/gone?reset");
    // A zero linger time makes the close a reset (RST).
    socket2::SockRef::from(c.stream())
        .set_linger(Some(Duration::ZERO))
        .expect("set SO_LINGER");
    drop(c);
    let line = gone_line("/_test/gone?reset");
    assert!(server.wait_log(&[&line]), "{}", server.log());
}

/// The request and the client's end may come together: the host takes
/// the request to the app, then sees the end.
fn a_client_that_leaves_at_once_is_gone(on: Backend) {
    let server = start(on);
    let mut c = server.connect();
    c.send(&get("/_test/gone?at-once"));
    c.shutdown_write();
    let line = gone_line("/_test/gone?at-once");
    assert!(server.wait_log(&[&line]), "{}", server.log());
}

fn a_client_that_leaves_a_stream_is_gone(on: Backend) {
    let server = start(on);
    let mut c = server.connect();
    c.send(&get("/_test/gone-stream?s"));
    // The registration holds across `stream`: the answer is under way.
    let head = c.read_until(b"tick\n");
    assert!(head.starts_with(b"HTTP/1.1 200"), "{head:?}");
    drop(c);
    let line = gone_line("/_test/gone-stream?s");
    assert!(server.wait_log(&[&line]), "{}", server.log());
}

fn a_client_that_leaves_mid_body_is_gone(on: Backend) {
    let server = start(on);
    let mut c = server.connect();
    let head = request("POST", "/_test/gone-body?b", &["Content-Length: 1000"]);
    c.send(&[head, vec![b'x'; 10]].concat());
    // The registration holds across `read_body`: the app has its sink.
    assert!(
        server.wait_log(&["gone-body got 10 bytes"]),
        "{}",
        server.log()
    );
    drop(c);
    let line = gone_line("/_test/gone-body?b");
    assert!(server.wait_log(&[&line]), "{}", server.log());
}

fn past_the_app_timeout_the_client_gets_504_and_the_app_hears(on: Backend) {
    let server = Server::start(on, &["misbehave"], &["--app-timeout", "1"]);
    let mut c = server.connect();
    let r = c.request(&get("/_test/gone?late"));
    assert_eq!(r.status, 504, "{}", r.text());
    let line = gone_line("/_test/gone?late");
    assert!(server.wait_log(&[&line]), "{}", server.log());
    assert_eq!(server.log_lines(&[&line]).len(), 1, "the task runs once");
}

fn an_answered_request_is_not_gone(on: Backend) {
    let server = start(on);
    let mut c = server.connect();
    // Answered later from another thread, and at once in the handler.
    let r = c.request(&get("/_test/gone-later?answered"));
    assert_eq!(r.text(), "later /_test/gone-later?answered");
    let r = c.request(&get("/_test/gone-now?answered"));
    assert_eq!(r.text(), "now /_test/gone-now?answered");
    drop(c);
    // A later request that is abandoned is heard of; by then the
    // answered ones would have been too.
    drop(held(&server, "/_test/gone?marker"));
    assert!(server.wait_log(&[&gone_line("/_test/gone?marker")]));
    for path in ["/_test/gone-later?answered", "/_test/gone-now?answered"] {
        assert_eq!(
            server.log_lines(&[&gone_line(path)]),
            Vec::<String>::new(),
            "an answered request's task must not run"
        );
    }
}

/// A WebSocket handshake to `path` offering `protocols`.
fn ws_handshake(path: &str, protocols: &str) -> Vec<u8> {
    let offer = format!("Sec-WebSocket-Protocol: {protocols}");
    request(
        "GET",
        path,
        &[
            "Upgrade: websocket",
            "Connection: Upgrade",
            "Sec-WebSocket-Version: 13",
            "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
            &offer,
        ],
    )
}

fn a_websocket_accept_carries_the_apps_headers(on: Backend) {
    let server = start(on);
    let mut c = server.connect();
    let r = c.request(&ws_handshake("/_test/ws-proto?chat", "superchat, chat"));
    assert_eq!(r.status, 101, "{r:?}");
    assert_eq!(r.header("Sec-WebSocket-Protocol"), Some("chat"));
    assert_eq!(r.header("X-Extra"), Some("yes"));
    // The host's own handshake headers, once; the app's `Upgrade` dropped.
    assert_eq!(r.header("Upgrade"), Some("websocket"));
    assert_eq!(r.header_count("Upgrade"), 1);
    // The WebSocket is open: an echo.
    c.send(&crate::websocket::masked(0x1, b"hi"));
    assert_eq!(c.read_bytes(4), [0x81, 2, b'h', b'i']);
    assert!(server.wait_log(&["app misbehave: dropping header \"Upgrade\" from its WebSocket 101"]));
    // A subprotocol the client did not offer is dropped, and said so.
    let mut c = server.connect();
    let r = c.request(&ws_handshake("/_test/ws-proto?other", "chat"));
    assert_eq!(r.status, 101, "{r:?}");
    assert_eq!(r.header("Sec-WebSocket-Protocol"), None);
    assert_eq!(r.header("X-Extra"), Some("yes"));
    assert!(server.wait_log(&[
        "app misbehave: dropping header \"Sec-WebSocket-Protocol\"",
        "did not offer subprotocol \"other\""
    ]));
}

fn a_denied_websocket_handshake_is_an_ordinary_answer(on: Backend) {
    let server = start(on);
    let mut c = server.connect();
    let r = c.request(&ws_handshake("/_test/ws-deny", "chat"));
    assert_eq!((r.status, r.text()), (403, "denied"));
    assert_eq!(r.header("Upgrade"), None);
    assert_eq!(r.header("Sec-WebSocket-Accept"), None);
    // An ordinary answer: the connection goes on with HTTP.
    assert_eq!(c.request(&get("/_test/ok")).text(), "ok");
}

fn a_client_that_leaves_a_worker_process_is_gone(poller: &str) {
    let args = ["--worker-mode", "process", "--workers", "1"];
    let server = Server::start(poller, &["misbehave"], &args);
    let c = held(&server, "/_test/gone?process");
    drop(c);
    let line = gone_line("/_test/gone?process");
    assert!(server.wait_log(&[&line]), "{}", server.log());
}

//! WebSocket (RFC 6455) through the `demo` app's `/demo/ws`: a real client
//! (Python's `websockets`, run from `websocket_client.py`) passes echo, a
//! message of the whole 64 KiB limit, fragmentation, ping/pong, the close
//! handshake, an oversized message (1009), invalid UTF-8 (1007), an
//! unmasked frame (1002) and a broadcast room; raw handshakes get 101 with
//! the RFC's accept value or 400/426; a drain closes open WebSockets with
//! 1001 and status counts them: each on every backend over `ws://` and over
//! `wss://` (a `tls://` bind; the Python client trusts the test CA). And a
//! thousand WebSockets at once each echo a message on epoll (floods:
//! `websocket_flood`).

use crate::client::{request, tls_fixture, Client, Transport};
use crate::common::status;
use crate::harness::{wait_until, Backend, Server, WAIT};
use rustix::process::Signal;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

matrix!(
    tls:
    a_real_client_passes_every_websocket_case,
    bad_handshakes_are_refused_naming_the_fault,
    a_raw_handshake_switches_and_frames_sent_with_it_are_read,
    a_drain_closes_open_websockets_with_1001_and_status_counts_them,
    a_silent_peer_is_pinged_then_dropped,
);

const CLIENT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../tests/e2e/websocket_client.py"
);

/// The cases `websocket_client.py` runs on every backend.
const CASES: [&str; 9] = [
    "echo",
    "large",
    "fragmentation",
    "ping_pong",
    "close_handshake",
    "oversized",
    "invalid_utf8",
    "unmasked",
    "broadcast",
];

/// The demo app with a 64 KiB message limit (the oversized case sends
/// 100 KiB).
fn demo(on: Backend) -> Server {
    Server::start(on, &["demo"], &["--ws-max-message", "64K"])
}

/// `python3 websocket_client.py PORT ARGS...` (`--ca` and the test CA
/// first over TLS), its stdout piped.
fn client(port: u16, transport: Transport, args: &[&str]) -> Child {
    let mut cmd = Command::new("python3");
    cmd.arg(CLIENT);
    if transport == Transport::Tls {
        cmd.arg("--ca").arg(tls_fixture("ca.pem"));
    }
    cmd.arg(port.to_string())
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 is needed for the WebSocket tests (apt-get install -y python3)")
}

/// Runs the client to its end over plain TCP: its stdout, after checking
/// it could run.
pub fn run_client(port: u16, args: &[&str]) -> String {
    run_client_over(port, Transport::Plain, args)
}

/// Runs the client to its end over `transport`: its stdout, after
/// checking it could run.
fn run_client_over(port: u16, transport: Transport, args: &[&str]) -> String {
    let out = client(port, transport, args)
        .wait_with_output()
        .expect("wait for python3");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(
        out.status.code(),
        Some(3),
        "Python's websockets package is needed for the WebSocket tests \
         (python3 -m pip install websockets): {stderr}"
    );
    String::from_utf8_lossy(&out.stdout).into_owned() + &stderr
}

fn a_real_client_passes_every_websocket_case(on: Backend) {
    let server = demo(on);
    let out = run_client_over(server.port, on.transport, &CASES);
    for case in CASES {
        assert!(
            out.lines().any(|l| l == format!("{case} ok")),
            "case {case} on {on}:\n{out}\nhost log:\n{}",
            server.log()
        );
    }
}

/// A handshake to `/demo/ws` with `lines` as its headers.
fn handshake(method: &str, lines: &[&str]) -> Vec<u8> {
    request(method, "/demo/ws", lines)
}

const KEY: &str = "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==";

fn bad_handshakes_are_refused_naming_the_fault(on: Backend) {
    let server = demo(on);
    let upgrade = ["Upgrade: websocket", "Connection: Upgrade"];
    let v13 = "Sec-WebSocket-Version: 13";
    let cases: [(Vec<u8>, u16, &str); 5] = [
        (
            handshake(
                "POST",
                &[upgrade[0], upgrade[1], v13, KEY, "Content-Length: 0"],
            ),
            400,
            "must be a GET",
        ),
        (
            handshake("GET", &[upgrade[0], upgrade[1], v13]),
            400,
            "Sec-WebSocket-Key",
        ),
        (
            handshake(
                "GET",
                &[upgrade[0], upgrade[1], v13, "Sec-WebSocket-Key: c2hvcnQ="],
            ),
            400,
            "16 bytes",
        ),
        (
            handshake("GET", &[upgrade[0], v13, KEY]),
            400,
            "Connection: Upgrade",
        ),
        (
            handshake(
                "GET",
                &[upgrade[0], upgrade[1], "Sec-WebSocket-Version: 8", KEY],
            ),
            426,
            "Sec-WebSocket-Version: 13",
        ),
    ];
    for (bytes, code, names) in cases {
        let r = server.connect().request(&bytes);
        assert_eq!(r.status, code, "{}", String::from_utf8_lossy(&bytes));
        assert!(
            r.text().contains(names),
            "{:?} should name {names}",
            r.text()
        );
        if code == 426 {
            assert_eq!(r.header("Sec-WebSocket-Version"), Some("13"));
        }
    }
    // A plain GET of a WebSocket-only resource: 426 and how to ask.
    let r = server.get("/demo/ws");
    assert_eq!(r.status, 426, "{}", r.text());
    assert_eq!(r.header("Upgrade"), Some("websocket"));
    // The connection stays usable after a refusal.
    let mut c = server.connect();
    assert_eq!(c.request(&handshake("GET", &[upgrade[0], v13])).status, 400);
    assert_eq!(c.request(&crate::client::get("/demo/justnow/")).status, 200);
}

/// A masked client frame.
pub fn masked(opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mask = [1u8, 2, 3, 4];
    let len = u8::try_from(payload.len()).expect("a short payload");
    let mut f = vec![0x80 | opcode, 0x80 | len];
    f.extend_from_slice(&mask);
    f.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    f
}

fn a_raw_handshake_switches_and_frames_sent_with_it_are_read(on: Backend) {
    let server = demo(on);
    let mut c = server.connect();
    // The handshake and a first frame in one write.
    let mut bytes = handshake(
        "GET",
        &[
            "Upgrade: websocket",
            "Connection: keep-alive, Upgrade",
            "Sec-WebSocket-Version: 13",
            KEY,
        ],
    );
    bytes.extend(masked(0x1, b"early"));
    c.send(&bytes);
    let r = c.read_response();
    assert_eq!(r.status, 101, "{r:?}");
    // RFC 6455 §1.3's worked example.
    assert_eq!(
        r.header("Sec-WebSocket-Accept"),
        Some("s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
    );
    assert_eq!(r.header("Upgrade"), Some("websocket"));
    // The echo: an unmasked text frame.
    assert_eq!(c.read_bytes(7), b"\x81\x05early");
    c.send(&masked(0x8, &[0x03, 0xe8]));
    assert_eq!(c.read_bytes(4), b"\x88\x02\x03\xe8", "the close echo");
    c.assert_closed();
}

/// A raw client that completes the handshake, then neither sends nor
/// answers anything.
pub fn silent_websocket(server: &Server) -> Client {
    let mut c = server.connect();
    let r = c.request(&handshake(
        "GET",
        &[
            "Upgrade: websocket",
            "Connection: Upgrade",
            "Sec-WebSocket-Version: 13",
            KEY,
        ],
    ));
    assert_eq!(r.status, 101, "{r:?}");
    c
}

fn a_silent_peer_is_pinged_then_dropped(on: Backend) {
    let server = Server::start(on, &["demo"], &["--ws-ping-interval", "300ms"]);
    let mut c = silent_websocket(&server);
    // A ping with no payload, then (unanswered) the end of the connection.
    assert_eq!(c.read_bytes(2), b"\x89\x00", "a ping");
    c.assert_closed();
    let gone = wait_until(WAIT, || status(&server)["websockets"]["open"] == 0);
    assert!(gone, "status: {}", status(&server));
}

fn a_drain_closes_open_websockets_with_1001_and_status_counts_them(on: Backend) {
    let mut server = demo(on);
    let mut held = client(server.port, on.transport, &["hold"]);
    let mut lines = BufReader::new(held.stdout.take().expect("piped stdout")).lines();
    let first = lines.next().and_then(Result::ok).unwrap_or_default();
    assert_eq!(first, "open", "the client could not open: {}", server.log());
    let counted = wait_until(WAIT, || status(&server)["websockets"]["open"] == 1);
    assert!(counted, "status: {}", status(&server));
    server.signal(Signal::TERM);
    let closed = lines.next().and_then(Result::ok).unwrap_or_default();
    assert_eq!(closed, "closed 1001", "log:\n{}", server.log());
    let exit = server
        .wait_exit(Duration::from_secs(10))
        .and_then(|e| e.code());
    assert_eq!(exit, Some(0), "log:\n{}", server.log());
    let _ = held.wait();
}

/// A thousand WebSockets open at once on epoll, each echoing a message
/// (the concurrency case; the other backends pass the same cases
/// one connection at a time above).
#[test]
fn a_thousand_websockets_echo_at_once_on_epoll() {
    let server = Server::start("epoll", &["demo"], &["--workers", "2"]);
    let out = run_client(server.port, &["many", "1000"]);
    assert!(
        out.lines().any(|l| l == "many 1000 ok"),
        "{out}\nhost log:\n{}",
        server.log()
    );
    assert_eq!(status(&server)["websockets"]["opened"], 1000);
}

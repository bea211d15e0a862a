//! WebSockets served by ASGI applications: FastAPI's echo and broadcast
//! room pass the real client's cases (tests/e2e/websocket_client.py of the
//! main suite, the ones the native `/demo/ws` passes); the `chat`
//! subprotocol is chosen in the 101, with the accept's headers; the
//! application hears the client's close code, and its own close carries
//! its code and reason; a close before accepting refuses the
//! handshake with 403; a denial response (`websocket.http.response.*`)
//! is the HTTP answer, from FastAPI's `send_denial_response` and written
//! by hand.

use crate::asgi_host::{fastapi, pure, wait_seen};
use crate::client::{request, Client};
use crate::harness::Server;
use std::process::Command;

const CLIENT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../tests/e2e/websocket_client.py"
);

/// The client's cases (its oversized case sends 100 KiB past a 64 KiB
/// limit).
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

/// Runs the client against `path`: its stdout and stderr.
fn run_client(port: u16, path: &str, cases: &[&str]) -> String {
    let out = Command::new("python3")
        .arg(CLIENT)
        .args(["--path", path, &port.to_string()])
        .args(cases)
        .output()
        .expect("python3 is needed for the WebSocket tests");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(
        out.status.code(),
        Some(3),
        "Python's websockets package is needed (python3 -m pip install websockets): {stderr}"
    );
    String::from_utf8_lossy(&out.stdout).into_owned() + &stderr
}

fn fastapi_passes_the_websocket_cases(poller: &str) {
    let bridge = fastapi(poller, "/api", &["--ws-max-message", "64K"]);
    let out = run_client(bridge.server.port, "/api/ws", &CASES);
    for case in CASES {
        assert!(
            out.lines().any(|l| l == format!("{case} ok")),
            "case {case} on {poller}:\n{out}\nhost log:\n{}",
            bridge.server.log()
        );
    }
    // The room route too.
    let out = run_client(bridge.server.port, "/api/ws/room", &["broadcast"]);
    assert!(out.lines().any(|l| l == "broadcast ok"), "{out}");
}

const KEY: &str = "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==";

/// A WebSocket handshake to `path` with the extra header lines.
fn handshake(path: &str, extra: &[&str]) -> Vec<u8> {
    let mut lines = vec![
        "Upgrade: websocket",
        "Connection: Upgrade",
        "Sec-WebSocket-Version: 13",
        KEY,
    ];
    lines.extend_from_slice(extra);
    request("GET", path, &lines)
}

/// A masked client frame with a short payload.
fn masked_frame(opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mask = [9u8, 8, 7, 6];
    let len = u8::try_from(payload.len()).expect("a short payload");
    let mut f = vec![0x80 | opcode, 0x80 | len];
    f.extend_from_slice(&mask);
    f.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    f
}

/// Sends a text frame and reads its echo, then closes with 1000.
fn echo_then_close(c: &mut Client) {
    c.send(&masked_frame(0x1, b"hi"));
    assert_eq!(c.read_bytes(4), b"\x81\x02hi", "the echo");
    c.send(&masked_frame(0x8, &[0x03, 0xe8]));
    let close = c.read_bytes(2);
    assert_eq!(close[0], 0x88, "a close frame: {close:?}");
}

fn the_subprotocol_is_chosen_in_the_101(poller: &str) {
    let bridge = fastapi(poller, "/api", &[]);
    let mut c = bridge.server.connect();
    let r = c.request(&handshake(
        "/api/ws",
        &["Sec-WebSocket-Protocol: superchat, chat"],
    ));
    assert_eq!(r.status, 101, "{r:?}");
    assert_eq!(
        r.header("Sec-WebSocket-Accept"),
        Some("s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
    );
    assert_eq!(r.header("Sec-WebSocket-Protocol"), Some("chat"), "{r:?}");
    // The accept's own headers.
    assert_eq!(r.header("X-Ws-App"), Some("fastapp"), "{r:?}");
    echo_then_close(&mut c);
    // The application heard the client's close code.
    assert!(
        wait_seen(&bridge, "/api/seen", "ws disconnect 1000"),
        "{}",
        bridge.server.log()
    );
    // Offered none: none chosen.
    let mut c = bridge.server.connect();
    let r = c.request(&handshake("/api/ws", &[]));
    assert_eq!(r.status, 101, "{r:?}");
    assert_eq!(r.header("Sec-WebSocket-Protocol"), None, "{r:?}");
    echo_then_close(&mut c);
}

fn the_app_closes_with_its_code_and_reason(poller: &str) {
    let bridge = fastapi(poller, "/api", &[]);
    let mut c = bridge.server.connect();
    let r = c.request(&handshake("/api/ws/bye", &[]));
    assert_eq!(r.status, 101, "{r:?}");
    assert_eq!(
        c.read_bytes(5),
        b"\x81\x03bye",
        "the message before the close"
    );
    // 4001 and "bye now".
    assert_eq!(
        c.read_bytes(11),
        b"\x88\x09\x0f\xa1bye now",
        "the close frame"
    );
    c.send(&masked_frame(0x8, &[0x0f, 0xa1]));
    c.assert_closed();
}

/// A handshake to `path` is answered `status` with `body`.
fn refused(server: &Server, path: &str, status: u16, body: &str) -> crate::client::Response {
    let r = server.connect().request(&handshake(path, &[]));
    assert_eq!((r.status, r.text()), (status, body), "{path}: {r:?}");
    assert_eq!(r.header("Sec-WebSocket-Accept"), None, "{r:?}");
    r
}

fn a_refusal_before_accepting_is_403_and_a_denial_its_own_answer(poller: &str) {
    let bridge = fastapi(poller, "/api", &[]);
    let r = bridge
        .server
        .connect()
        .request(&handshake("/api/ws/refuse", &[]));
    assert_eq!(r.status, 403, "{r:?}");
    refused(
        &bridge.server,
        "/api/ws/deny",
        401,
        "no entry without a token",
    );
    assert_eq!(bridge.server.get("/api/hello").text(), "Hello World!");
    drop(bridge);
    let bridge = pure(poller, "application", "/pure");
    let r = bridge
        .server
        .connect()
        .request(&handshake("/pure/refuse", &[]));
    assert_eq!(r.status, 403, "{r:?}");
    let r = refused(&bridge.server, "/pure/deny", 401, "denied by hand");
    assert_eq!(r.header("X-Denied"), Some("yes"), "{r:?}");
    // Accepted, the plain application echoes.
    let mut c = bridge.server.connect();
    assert_eq!(c.request(&handshake("/pure/echo", &[])).status, 101);
    echo_then_close(&mut c);
}

matrix!(
    fastapi_passes_the_websocket_cases,
    the_subprotocol_is_chosen_in_the_101,
    the_app_closes_with_its_code_and_reason,
    a_refusal_before_accepting_is_403_and_a_denial_its_own_answer
);

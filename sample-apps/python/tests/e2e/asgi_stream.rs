//! Bodies that flow through an ASGI application: Server-Sent Events
//! produced as fast as the application can, read slowly by the client,
//! with the host's memory bounded (send() waits for room); a large upload,
//! with a Content-Length and chunked, read piece by piece with
//! `request.stream()`, whole by its SHA-256, with the host's memory
//! bounded.

use crate::asgi_host::{dechunk, fastapi, rss_kib};
use crate::bridge::{json, Bridge};
use crate::client::{get, Client, Response};
use crate::harness::TempDir;
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// How much the host's peak RSS may grow while 40 MB go through it.
const GROWTH_KIB: u64 = 16 * 1024;

/// The SSE answer: this many events of this many data bytes (40 MiB).
const EVENTS: usize = 640;
const EVENT_DATA: usize = 64 * 1024;

fn sse_read_slowly_keeps_host_memory_bounded(poller: &str) {
    let bridge = fastapi(poller, "/api", &[]);
    // Warm up the route: the idle figure includes its one-time costs.
    let r = bridge
        .server
        .get(&format!("/api/sse?n=8&size={EVENT_DATA}"));
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(
        r.body.len(),
        8 * event_len(EVENT_DATA, 7),
        "{:?}",
        r.header("Transfer-Encoding")
    );
    let idle_peak = rss_kib(&bridge, "VmHWM");

    let mut stream = TcpStream::connect(("127.0.0.1", bridge.server.port)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("a read timeout");
    let path = format!("/api/sse?n={EVENTS}&size={EVENT_DATA}");
    stream.write_all(&get(&path)).expect("send the request");
    let total = EVENTS * event_len(EVENT_DATA, EVENTS - 1);
    let raw = read_slowly(&bridge, &mut stream, total);
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(0, |i| i + 4);
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(head.contains("text/event-stream"), "{head}");
    assert!(head.contains("Transfer-Encoding: chunked"), "{head}");
    let body = dechunk(&raw[split..]).expect("a whole chunked body");
    let ids: Vec<usize> = String::from_utf8_lossy(&body)
        .lines()
        .filter_map(|l| l.strip_prefix("id: ")?.parse().ok())
        .collect();
    assert_eq!(
        ids,
        (0..EVENTS).collect::<Vec<_>>(),
        "every event, in order"
    );
    let peak = rss_kib(&bridge, "VmHWM");
    eprintln!(
        "{poller}: {} bytes of events read slowly; host peak RSS {idle_peak} -> {peak} KiB",
        body.len()
    );
    assert!(
        peak <= idle_peak + GROWTH_KIB,
        "the host's peak RSS rose from {idle_peak} KiB to {peak} KiB while a slow client read {} bytes",
        body.len()
    );
    // The same connection goes on.
    let mut c = Client::from_stream(stream);
    assert_eq!(c.request(&get("/api/hello")).text(), "Hello World!");
}

/// The length of event `id` with `data` bytes of data (`id: N\ndata: ..\n\n`).
fn event_len(data: usize, id: usize) -> usize {
    format!("id: {id}\ndata: \n\n").len() + data
}

/// Reads the response (head and chunked body, about `total` body bytes)
/// to its terminating chunk, pausing a second at a quarter, a half and
/// three quarters: the application produces all the while, so only
/// send()'s wait for room keeps the host from holding what the client
/// leaves.
fn read_slowly(bridge: &Bridge, stream: &mut TcpStream, total: usize) -> Vec<u8> {
    let mut pauses = [total / 4, total / 2, 3 * total / 4].into_iter().peekable();
    let mut raw = Vec::with_capacity(total + 64 * 1024);
    let mut buf = vec![0u8; 256 * 1024];
    while !raw.ends_with(b"\r\n0\r\n\r\n") {
        if pauses.peek().is_some_and(|at| raw.len() >= *at) {
            pauses.next();
            std::thread::sleep(Duration::from_secs(1));
            eprintln!(
                "paused at {} bytes: host RSS {} KiB",
                raw.len(),
                rss_kib(bridge, "VmRSS")
            );
        }
        match stream.read(&mut buf) {
            Ok(0) => panic!("closed after {} bytes:\n{}", raw.len(), bridge.server.log()),
            Ok(n) => raw.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => panic!("read failed after {} bytes: {e}", raw.len()),
        }
    }
    raw
}

/// The upload: 64 MiB of a pattern no two MiB of which are alike.
const UPLOAD: usize = 64 << 20;

fn upload_bytes() -> Vec<u8> {
    (0..UPLOAD)
        .map(|i| ((i % 251) as u8) ^ ((i >> 20) as u8))
        .collect()
}

/// `sha256sum` of `bytes`, in hex.
fn sha256_hex(bytes: &[u8]) -> String {
    let dir = TempDir::new("asgi-upload");
    let file = dir.path().join("upload.bin");
    std::fs::write(&file, bytes).expect("write the upload");
    let out = std::process::Command::new("sha256sum")
        .arg(&file)
        .output()
        .expect("sha256sum (coreutils) is needed");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string()
}

/// Sends `head` then `body` in 1 MiB writes (each framed as a chunk when
/// `chunked`), stopping early if the host closes, and reads the answer.
fn upload(c: &mut Client, head: &[u8], body: &[u8], chunked: bool) -> Response {
    let mut send = |bytes: &[u8]| c.io().write_all(bytes);
    let mut sent = send(head);
    for piece in body.chunks(1 << 20) {
        if sent.is_err() {
            break;
        }
        sent = if chunked {
            send(format!("{:x}\r\n", piece.len()).as_bytes())
                .and_then(|()| send(piece))
                .and_then(|()| send(b"\r\n"))
        } else {
            send(piece)
        };
    }
    if chunked && sent.is_ok() {
        sent = send(b"0\r\n\r\n");
    }
    if let Err(e) = sent {
        eprintln!("the host stopped reading the upload: {e}");
    }
    c.read_response()
}

/// The application's answer to the upload: every byte, by its SHA-256
/// (`want`), in more than one piece; how many.
fn uploaded_whole(bridge: &Bridge, r: &Response, want: &str) -> u64 {
    assert_eq!(r.status, 200, "{r:?}\n{}", bridge.server.log());
    let got = json(&r.body);
    assert_eq!(
        (got["bytes"].as_u64(), got["sha256"].as_str()),
        (Some(UPLOAD as u64), Some(want))
    );
    let pieces = got["chunks"].as_u64().unwrap_or_default();
    assert!(pieces > 1, "the body came whole, not as it arrived: {got}");
    pieces
}

fn a_large_upload_streams_into_the_app(poller: &str) {
    let bridge = fastapi(poller, "/api", &[]);
    let body = upload_bytes();
    let want = sha256_hex(&body);
    // Warm up the route with a small upload.
    let mut c = bridge.server.connect();
    let small = b"warm";
    let head = b"POST /api/upload HTTP/1.1\r\nHost: localhost\r\nContent-Length: 4\r\n\r\n";
    let r = upload(&mut c, head, small, false);
    assert_eq!(json(&r.body)["bytes"], 4, "{r:?}");
    let idle_peak = rss_kib(&bridge, "VmHWM");

    let head = format!(
        "POST /api/upload HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/octet-stream\r\n\
         Content-Length: {UPLOAD}\r\n\r\n"
    );
    let r = upload(&mut c, head.as_bytes(), &body, false);
    let pieces = uploaded_whole(&bridge, &r, &want);
    let after_length = rss_kib(&bridge, "VmHWM");

    let head = "POST /api/upload HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n";
    let r = upload(&mut c, head.as_bytes(), &body, true);
    uploaded_whole(&bridge, &r, &want);
    let peak = rss_kib(&bridge, "VmHWM");
    eprintln!(
        "{poller}: two {UPLOAD}-byte uploads in {pieces} pieces; host peak RSS {idle_peak} -> {after_length} (Content-Length) -> {peak} KiB (chunked)"
    );
    assert!(
        after_length <= idle_peak + GROWTH_KIB,
        "the host's peak RSS rose from {idle_peak} KiB to {after_length} KiB during a {UPLOAD}-byte upload with a Content-Length"
    );
    assert!(
        peak <= idle_peak + GROWTH_KIB,
        "the host's peak RSS rose from {idle_peak} KiB to {peak} KiB during a chunked {UPLOAD}-byte upload"
    );
}

matrix!(
    sse_read_slowly_keeps_host_memory_bounded,
    a_large_upload_streams_into_the_app
);

//! Request bodies read as they arrive: `/demo/upload` hashes an upload of
//! any size (chunked or by Content-Length) with the host's memory bounded,
//! and a streamed body past the app's limit gets the app's 413.

use crate::harness::Server;
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

matrix!(
    a_large_chunked_upload_is_hashed_with_bounded_memory,
    a_content_length_upload_is_hashed_and_the_connection_goes_on,
    a_streamed_body_past_the_limit_gets_413
);

/// The upload size on epoll: the 1 GiB; 64 MiB on the others.
const BIG_ON_EPOLL: u64 = 1 << 30;
const BIG_ELSEWHERE: u64 = 64 << 20;

/// SHA-256 of `n` bytes of the alphabet repeated (`pattern`), by Python's
/// hashlib.
const DIGESTS: [(u64, &str); 3] = [
    (
        1 << 30,
        "fbce5c669c038e5503fcc56bd6092c77cd780b9e647e60df22ecf24f671cec5d",
    ),
    (
        64 << 20,
        "3ccf628e91e9ff5dbcf375819a160ae3d49c4055caf814132c8e0b9c683e5db2",
    ),
    (
        5 << 20,
        "3619d194f69d90bf1d050a5cc27c02b6dec57e3211eca4e25e404e04bf3c04ba",
    ),
];

/// How far the host's peak RSS may rise over its idle peak.
const GROWTH_KIB: u64 = 4 << 10;

/// 256 KiB of the alphabet, starting at `a` (a multiple of 26 long is not
/// needed: each piece is cut from its offset modulo 26).
fn pattern() -> Vec<u8> {
    (0..(256 << 10) + 26)
        .map(|i| b'a' + (i % 26) as u8)
        .collect()
}

fn digest_of(n: u64) -> &'static str {
    DIGESTS
        .iter()
        .find(|(size, _)| *size == n)
        .map(|(_, d)| *d)
        .unwrap_or_else(|| panic!("no digest for {n}"))
}

fn peak_kib(server: &Server) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{}/status", server.pid()))
        .expect("read the server's /proc status");
    text.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no VmHWM in {text}"))
}

/// Sends `size` bytes of the pattern, chunked (256 KiB chunks) or raw.
fn send_body(stream: &mut TcpStream, size: u64, chunked: bool) {
    let pattern = pattern();
    let mut sent = 0u64;
    while sent < size {
        let len = (size - sent).min(256 << 10) as usize;
        let at = (sent % 26) as usize;
        let piece = &pattern[at..at + len];
        if chunked {
            stream
                .write_all(format!("{len:x}\r\n").as_bytes())
                .expect("send a chunk size");
        }
        stream.write_all(piece).expect("send the body");
        if chunked {
            stream.write_all(b"\r\n").expect("send a chunk end");
        }
        sent += len as u64;
    }
    if chunked {
        stream.write_all(b"0\r\n\r\n").expect("send the last chunk");
    }
}

/// Reads one response as text (Content-Length framed).
fn read_answer(stream: &mut TcpStream) -> String {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&got).into_owned();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let len = head
                .lines()
                .find_map(|l| l.strip_prefix("Content-Length: "))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or_else(|| panic!("no Content-Length in {head}"));
            if body.len() >= len {
                return text;
            }
        }
        match stream.read(&mut buf) {
            Ok(0) => panic!("closed before a whole answer: {text:?}"),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => panic!("no answer ({e}): {text:?}"),
        }
    }
}

fn connect(server: &Server) -> TcpStream {
    let stream = TcpStream::connect(("127.0.0.1", server.port)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .expect("a read timeout");
    stream
}

fn a_large_chunked_upload_is_hashed_with_bounded_memory(poller: &str) {
    let server = Server::start(poller, &["demo"], &["--max-body", "2G"]);
    let size = if poller == "epoll" {
        BIG_ON_EPOLL
    } else {
        BIG_ELSEWHERE
    };
    // Warm up: the idle peak includes the route's first use.
    let mut warm = connect(&server);
    warm.write_all(
        b"POST /demo/upload HTTP/1.1\r\nHost: localhost\r\nContent-Length: 3\r\n\r\nabc",
    )
    .expect("send");
    assert!(read_answer(&mut warm).contains("  3 bytes"));
    let idle = peak_kib(&server);
    let mut stream = connect(&server);
    stream
        .write_all(
            b"POST /demo/upload HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n",
        )
        .expect("send the head");
    send_body(&mut stream, size, true);
    let answer = read_answer(&mut stream);
    let peak = peak_kib(&server);
    eprintln!("{poller}: {size}-byte chunked upload; host peak RSS {idle} -> {peak} KiB");
    assert!(
        answer.starts_with("HTTP/1.1 200 OK")
            && answer.contains(&format!("{}  {size} bytes\n", digest_of(size))),
        "{answer}"
    );
    assert!(
        peak <= idle + GROWTH_KIB,
        "the host's peak RSS rose from {idle} KiB to {peak} KiB during a {size}-byte upload"
    );
}

fn a_content_length_upload_is_hashed_and_the_connection_goes_on(poller: &str) {
    let server = Server::start(poller, &["demo"], &["--max-body", "8M"]);
    let size: u64 = 5 << 20;
    let mut stream = connect(&server);
    let head =
        format!("POST /demo/upload HTTP/1.1\r\nHost: localhost\r\nContent-Length: {size}\r\n\r\n");
    stream.write_all(head.as_bytes()).expect("send the head");
    send_body(&mut stream, size, false);
    let answer = read_answer(&mut stream);
    assert!(
        answer.contains(&format!("{}  {size} bytes\n", digest_of(size))),
        "{answer}"
    );
    // The body was read to its end: the next request on the connection is
    // read as one.
    stream
        .write_all(b"GET /demo/justnow/ HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .expect("send");
    let next = read_answer(&mut stream);
    assert!(next.ends_with(crate::common::JUSTNOW_BODY), "{next}");
}

fn a_streamed_body_past_the_limit_gets_413(poller: &str) {
    let server = Server::start(poller, &["demo"], &["--max-body", "1M"]);
    let mut stream = connect(&server);
    stream
        .write_all(
            b"POST /demo/upload HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n",
        )
        .expect("send the head");
    // The host may answer and close before the whole body is sent.
    let pattern = pattern();
    for _ in 0..8 {
        let piece = &pattern[..256 << 10];
        let chunk = [format!("{:x}\r\n", piece.len()).as_bytes(), piece, b"\r\n"].concat();
        if stream.write_all(&chunk).is_err() {
            break;
        }
    }
    let answer = read_answer(&mut stream);
    assert!(answer.starts_with("HTTP/1.1 413 "), "{answer}");
    assert!(answer.contains("Connection: close"), "{answer}");
    assert!(answer.contains("upload larger than max_body"), "{answer}");
}

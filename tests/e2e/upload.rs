//! Request bodies read as they arrive: `/demo/upload` hashes an upload of
//! any size (chunked or by Content-Length) with the host's memory bounded,
//! under its own limit (`--max-stream-body`, 4 GiB by default) while the
//! routes that take a body whole keep `--max-body`; and a streamed body
//! past its limit gets a 413 naming `max_stream_body`.

use crate::harness::{wait_until, Server, TempDir};
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

matrix!(
    a_gib_upload_passes_by_default_while_whole_bodies_keep_max_body,
    a_large_chunked_upload_is_hashed_with_bounded_memory,
    a_content_length_upload_is_hashed_and_the_connection_goes_on,
    a_streamed_body_past_the_limit_gets_413,
    a_pool_sink_holding_a_piece_stalls_neither_its_worker_nor_the_window
);

/// An app's own `max_stream_body`, read from its table, holds in every
/// worker process too (backend-free, process mode).
#[test]
fn an_apps_own_max_stream_body_holds_in_process_mode() {
    let dir = TempDir::new("stream-limit");
    let config = dir.path().join("stoa.toml");
    let text = "max_body = \"4K\"\n[apps.demo]\nmount = \"/demo\"\nmax_stream_body = \"16K\"\n";
    std::fs::write(&config, text).expect("write the config");
    let config = config.to_str().expect("a UTF-8 temp path");
    let args = [
        "--worker-mode",
        "process",
        "--workers",
        "2",
        "--config",
        config,
    ];
    let server = Server::launch("epoll").apps(&["demo"]).args(&args).start();
    // Above the server-wide max_body, within the app's own streamed limit.
    for _ in 0..4 {
        let size: u64 = 12_000;
        let (_, answer) = upload(&server, size, false);
        assert!(answer.contains(&format!("  {size} bytes\n")), "{answer}");
    }
    let mut stream = connect(&server);
    let head = "POST /demo/upload HTTP/1.1\r\nHost: localhost\r\nContent-Length: 20000\r\n\r\n";
    stream.write_all(head.as_bytes()).expect("send the head");
    let answer = read_answer(&mut stream);
    assert!(answer.starts_with("HTTP/1.1 413 "), "{answer}");
    assert!(answer.contains("larger than max_stream_body"), "{answer}");
}

/// The size of the chunked upload (1 GiB goes by Content-Length on every
/// backend).
const BIG_CHUNKED: u64 = 64 << 20;

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

/// Warms the route up (the idle peak then includes its first use) and
/// returns the host's peak RSS.
fn warm_peak(server: &Server) -> u64 {
    let mut warm = connect(server);
    warm.write_all(
        b"POST /demo/upload HTTP/1.1\r\nHost: localhost\r\nContent-Length: 3\r\n\r\nabc",
    )
    .expect("send");
    assert!(read_answer(&mut warm).contains("  3 bytes"));
    peak_kib(server)
}

/// Uploads `size` bytes (chunked or by Content-Length) on a new
/// connection and returns the answer.
fn upload(server: &Server, size: u64, chunked: bool) -> (TcpStream, String) {
    let mut stream = connect(server);
    let framing = if chunked {
        "Transfer-Encoding: chunked".to_string()
    } else {
        format!("Content-Length: {size}")
    };
    let head = format!("POST /demo/upload HTTP/1.1\r\nHost: localhost\r\n{framing}\r\n\r\n");
    stream.write_all(head.as_bytes()).expect("send the head");
    send_body(&mut stream, size, chunked);
    let answer = read_answer(&mut stream);
    (stream, answer)
}

/// An upload of `size` bytes is hashed right while the host's peak RSS
/// stays within `GROWTH_KIB` of its idle peak.
fn hashed_in_bounded_memory(server: &Server, poller: &str, size: u64, chunked: bool) {
    let idle = warm_peak(server);
    let (_, answer) = upload(server, size, chunked);
    let peak = peak_kib(server);
    eprintln!(
        "{poller}: {size}-byte upload (chunked: {chunked}); host peak RSS {idle} -> {peak} KiB"
    );
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

fn a_gib_upload_passes_by_default_while_whole_bodies_keep_max_body(poller: &str) {
    // Default limits: --max-body 8M, --max-stream-body 4G.
    let server = Server::start(poller, &["demo", "article"], &[]);
    hashed_in_bounded_memory(&server, poller, 1 << 30, false);
    // A route that takes its body whole still stops at --max-body.
    let mut stream = connect(&server);
    let over = (8 << 20) + 1;
    let head =
        format!("POST /article HTTP/1.1\r\nHost: localhost\r\nContent-Length: {over}\r\n\r\n");
    stream.write_all(head.as_bytes()).expect("send the head");
    let answer = read_answer(&mut stream);
    assert!(answer.starts_with("HTTP/1.1 413 "), "{answer}");
    assert!(answer.contains("body larger than max_body"), "{answer}");
}

fn a_large_chunked_upload_is_hashed_with_bounded_memory(poller: &str) {
    let server = Server::start(poller, &["demo"], &[]);
    hashed_in_bounded_memory(&server, poller, BIG_CHUNKED, true);
}

fn a_content_length_upload_is_hashed_and_the_connection_goes_on(poller: &str) {
    let server = Server::start(poller, &["demo"], &[]);
    let size: u64 = 5 << 20;
    let (mut stream, answer) = upload(&server, size, false);
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

/// Sends `chunk` `times` times; every write must go through: the host,
/// having answered, reads and drops the rest (a lingering close), so the
/// client meets no reset before it reads the answer.
fn send_all(stream: &mut TcpStream, chunk: &[u8], times: usize) {
    for i in 0..times {
        if let Err(e) = stream.write_all(chunk) {
            panic!("write {i} of {times} failed ({e}): the host reset the connection");
        }
    }
}

fn a_streamed_body_past_the_limit_gets_413(poller: &str) {
    // --max-body below the 1M streamed limit: a streamed body's own limit
    // is the one it meets.
    let flags = ["--max-stream-body", "1M", "--max-body", "64K"];
    let server = Server::start(poller, &["demo"], &flags);
    let piece = &pattern()[..256 << 10];
    // Chunked: the app hears its body is too large, and answers 413.
    let mut stream = connect(&server);
    stream
        .write_all(
            b"POST /demo/upload HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n",
        )
        .expect("send the head");
    let chunk = [format!("{:x}\r\n", piece.len()).as_bytes(), piece, b"\r\n"].concat();
    send_all(&mut stream, &chunk, 8);
    let answer = read_answer(&mut stream);
    assert!(answer.starts_with("HTTP/1.1 413 "), "{answer}");
    assert!(answer.contains("Connection: close"), "{answer}");
    assert!(
        answer.contains("upload larger than max_stream_body"),
        "{answer}"
    );
    // By Content-Length: the host answers 413 at the head, naming the limit.
    let mut stream = connect(&server);
    let head = format!(
        "POST /demo/upload HTTP/1.1\r\nHost: localhost\r\nContent-Length: {}\r\n\r\n",
        2 << 20
    );
    stream.write_all(head.as_bytes()).expect("send the head");
    send_all(&mut stream, piece, 8);
    let answer = read_answer(&mut stream);
    assert!(answer.starts_with("HTTP/1.1 413 "), "{answer}");
    assert!(answer.contains("Connection: close"), "{answer}");
    assert!(answer.contains("larger than max_stream_body"), "{answer}");
    // Up to the limit, above --max-body, the upload passes.
    let size: u64 = 1 << 20;
    let (_, answer) = upload(&server, size, false);
    assert!(answer.contains(&format!("  {size} bytes\n")), "{answer}");
}

/// `GET path` on a new connection, answered (Content-Length framed).
fn get_text(server: &Server, path: &str) -> String {
    let mut stream = connect(server);
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n");
    stream.write_all(request.as_bytes()).expect("send");
    read_answer(&mut stream)
}

fn a_pool_sink_holding_a_piece_stalls_neither_its_worker_nor_the_window(poller: &str) {
    // One worker: a sink on its loop would stall every other request.
    let server = Server::start(poller, &["misbehave"], &["--workers", "1"]);
    let idle = peak_kib(&server);
    let size: u64 = 64 << 20;
    let mut upload = connect(&server);
    let head = format!(
        "POST /_test/pool-sink HTTP/1.1\r\nHost: localhost\r\nContent-Length: {size}\r\n\r\n"
    );
    upload.write_all(head.as_bytes()).expect("send the head");
    upload
        .write_all(&pattern()[..4096])
        .expect("send the first piece");
    // The sink holds its first piece on a pool thread; the worker's loop
    // answers meanwhile (the state request itself is one).
    let in_data = || get_text(&server, "/_test/pool-sink/state").contains("in data");
    assert!(
        wait_until(Duration::from_secs(30), in_data),
        "the sink never got its first piece"
    );
    assert!(get_text(&server, "/_test/ok").ends_with("ok"));
    // While the piece is held the host reads no more of the body: the
    // client's writes stop at full socket buffers, well before 64 MiB, and
    // the host holds none of it.
    upload.set_nonblocking(true).expect("nonblocking");
    let piece = &pattern()[..256 << 10];
    let mut sent: u64 = 4096;
    let mut blocked = false;
    while sent < size {
        let len = (size - sent).min(piece.len() as u64) as usize;
        match upload.write(&piece[..len]) {
            Ok(n) => sent += n as u64,
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                blocked = true;
                break;
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => panic!("send the body: {e}"),
        }
    }
    assert!(
        blocked,
        "the host took all {size} bytes while its sink held a piece"
    );
    let state = get_text(&server, "/_test/pool-sink/state");
    assert!(state.contains("in data, 4096 bytes"), "{state}");
    let peak = peak_kib(&server);
    assert!(
        peak <= idle + GROWTH_KIB,
        "the host's peak RSS rose from {idle} KiB to {peak} KiB with {sent} bytes sent"
    );
    assert!(get_text(&server, "/_test/pool-sink/release").ends_with("released"));
    // The rest of the body goes, piece by piece, and is counted whole.
    upload.set_nonblocking(false).expect("blocking");
    let at = sent;
    let mut left = size - at;
    while left > 0 {
        let len = left.min(piece.len() as u64) as usize;
        upload.write_all(&piece[..len]).expect("send the rest");
        left -= len as u64;
    }
    let answer = read_answer(&mut upload);
    assert!(
        answer.contains(&format!("Complete: {size} bytes")),
        "{answer}"
    );
    let largest: usize = answer
        .rsplit("largest piece ")
        .next()
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no largest piece in {answer}"));
    assert!(largest <= 128 << 10, "a piece of {largest} bytes: {answer}");
}

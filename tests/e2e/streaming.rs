//! Streamed responses through the demo app: Server-Sent Events that keep
//! the connection open, a large download whose memory stays bounded while
//! the client reads slowly, the framing the host picks (chunked, HTTP/1.0's
//! close-delimited body, nothing for HEAD), pipelined requests answered in
//! order behind a stream, and a client that leaves mid-stream freeing it.

use crate::client::{request, Client};
use crate::common::{rss_kib, status, JUSTNOW_BODY};
use crate::harness::{wait_until, Server};
use rustix::process::Signal;
use std::io::{ErrorKind, Read, Write};
use std::time::Duration;

matrix!(
    sse_events_arrive_in_order_and_a_leaving_client_frees_the_stream,
    a_slow_reader_of_a_large_download_keeps_memory_bounded,
    http10_gets_a_close_delimited_body,
    head_gets_no_body_and_the_connection_goes_on,
    a_pipelined_request_behind_a_stream_is_answered_after_it,
    a_bad_n_is_refused_naming_n,
    a_blocking_producer_on_the_pool_waits_for_room,
    a_drain_lets_streams_finish_then_cuts_the_rest,
    stream_flags_out_of_range_are_refused_naming_them
);

/// The download size on epoll: the 1 GiB of the issue. The other backends
/// stream 64 MiB (the same code path past the queue's bound many times
/// over), so the suite stays quick on a debug build.
const BIG_ON_EPOLL: u64 = 1 << 30;
const BIG_ELSEWHERE: u64 = 64 << 20;

/// How far the host's peak RSS may rise over its idle peak during the
/// download (the queue is 256 KiB; without the bound, the 1 s pauses of
/// the reader would let the host buffer hundreds of MiB).
const GROWTH_KIB: u64 = 4 << 10;

fn start(poller: &str) -> Server {
    Server::start(poller, &["demo"], &[])
}

/// The byte at offset `i` of a `/demo/bytes` body (the app's `byte_at`).
fn byte_at(i: u64) -> u8 {
    b'a' + (i % 26) as u8
}

/// Open streams by the status endpoint.
fn open_streams(server: &Server) -> u64 {
    status(server)["streams"]["open"]
        .as_u64()
        .expect("streams.open in the status JSON")
}

/// Waits (up to 10 s) until no stream is open; fails naming the count.
fn assert_no_stream_left(server: &Server) {
    let freed = wait_until(Duration::from_secs(10), || open_streams(server) == 0);
    assert!(
        freed,
        "{} stream(s) still open; log:\n{}",
        open_streams(server),
        server.log()
    );
}

/// Reads the raw stream until `needle` has arrived (or fails).
fn read_until(stream: &mut std::net::TcpStream, got: &mut Vec<u8>, needle: &str) {
    let mut chunk = [0u8; 4096];
    while !String::from_utf8_lossy(got).contains(needle) {
        match stream.read(&mut chunk) {
            Ok(0) => panic!(
                "closed before {needle:?}; got {:?}",
                String::from_utf8_lossy(got)
            ),
            Ok(n) => got.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => panic!(
                "no {needle:?} ({e}); got {:?}",
                String::from_utf8_lossy(got)
            ),
        }
    }
}

fn sse_events_arrive_in_order_and_a_leaving_client_frees_the_stream(poller: &str) {
    let server = start(poller);
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", server.port)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("a read timeout");
    stream
        .write_all(&crate::client::get("/demo/clock"))
        .expect("send the request");
    let mut got = Vec::new();
    read_until(&mut stream, &mut got, "id: 2\n");
    let text = String::from_utf8_lossy(&got).into_owned();
    let head = text.split("\r\n\r\n").next().unwrap_or_default();
    let wanted = [
        "HTTP/1.1 200 OK",
        "Transfer-Encoding: chunked",
        "Content-Type: text/event-stream",
        "X-Accel-Buffering: no",
    ];
    let missing: Vec<&str> = wanted.into_iter().filter(|l| !head.contains(l)).collect();
    assert!(missing.is_empty(), "no {missing:?} in the head:\n{head}");
    let ids: Vec<&str> = text.lines().filter(|l| l.starts_with("id: ")).collect();
    assert_eq!(ids, ["id: 0", "id: 1", "id: 2"], "{text}");
    // Still open: the next read brings the next event, not the end.
    let mut more = Vec::new();
    read_until(&mut stream, &mut more, "id: 3\n");
    assert_eq!(open_streams(&server), 1);
    // The client leaves mid-stream: the host frees the stream.
    drop(stream);
    assert_no_stream_left(&server);
}

fn a_slow_reader_of_a_large_download_keeps_memory_bounded(poller: &str) {
    let server = start(poller);
    let size = if poller == "epoll" {
        BIG_ON_EPOLL
    } else {
        BIG_ELSEWHERE
    };
    // Warm up the route: the idle figure includes its one-time costs.
    let r = server.get("/demo/bytes?n=300000");
    assert_eq!(r.body.len(), 300_000);
    let idle_peak = rss_kib(&server, "VmHWM");
    let idle = rss_kib(&server, "VmRSS");
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", server.port)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("a read timeout");
    let path = format!("/demo/bytes?n={size}");
    stream
        .write_all(&crate::client::get(&path))
        .expect("send the request");
    let mut head = Vec::new();
    read_until(&mut stream, &mut head, "\r\n\r\n");
    let split = head
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(0, |i| i + 4);
    let text = String::from_utf8_lossy(&head[..split]).into_owned();
    assert!(
        text.contains(&format!("Content-Length: {size}\r\n")),
        "{text}"
    );
    let mut offset = 0u64;
    let check = |offset: u64, bytes: &[u8]| {
        let (first, last) = (bytes[0], bytes[bytes.len() - 1]);
        let end = offset + bytes.len() as u64 - 1;
        assert_eq!(
            (first, last),
            (byte_at(offset), byte_at(end)),
            "at {offset}"
        );
    };
    if head.len() > split {
        check(0, &head[split..]);
        offset = (head.len() - split) as u64;
    }
    // The reader pauses three times, one second each, at a quarter, half
    // and three quarters: the app keeps producing meanwhile, so only the
    // queue's bound keeps the host from buffering what the client leaves.
    let mut pauses = [size / 4, size / 2, 3 * size / 4].into_iter().peekable();
    let mut during = 0;
    let mut buf = vec![0u8; 256 * 1024];
    while offset < size {
        if pauses.peek().is_some_and(|at| offset >= *at) {
            pauses.next();
            std::thread::sleep(Duration::from_secs(1));
            during = during.max(rss_kib(&server, "VmRSS"));
        }
        let n = match stream.read(&mut buf) {
            Ok(0) => panic!("closed after {offset} of {size} bytes"),
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => panic!("read failed after {offset} of {size} bytes: {e}"),
        };
        check(offset, &buf[..n]);
        offset += n as u64;
    }
    assert_eq!(offset, size, "more bytes than the Content-Length");
    let peak = rss_kib(&server, "VmHWM");
    eprintln!(
        "{poller}: {size} bytes; host RSS idle {idle} KiB, during the pauses {during} KiB; peak {idle_peak} -> {peak} KiB"
    );
    assert!(
        peak <= idle_peak + GROWTH_KIB,
        "the host's peak RSS rose from {idle_peak} KiB to {peak} KiB during a {size}-byte download"
    );
    // The same connection goes on.
    let mut client = Client::from_stream(stream);
    let r = client.request(&crate::client::get("/demo/justnow/"));
    assert_eq!(r.text(), JUSTNOW_BODY);
    assert_no_stream_left(&server);
}

fn http10_gets_a_close_delimited_body(poller: &str) {
    let server = start(poller);
    let mut client = server.connect();
    client.send(b"GET /demo/clock?count=2 HTTP/1.0\r\nHost: localhost\r\n\r\n");
    let r = client.read_response();
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.header("Transfer-Encoding"), None, "{r:?}");
    assert_eq!(r.header("Content-Length"), None, "{r:?}");
    assert_eq!(r.header("Connection"), Some("close"), "{r:?}");
    let ids: Vec<&str> = r.text().lines().filter(|l| l.starts_with("id: ")).collect();
    assert_eq!(ids, ["id: 0", "id: 1"], "{r:?}");
    // An HTTP/1.0 download with a declared length keeps it.
    let mut client = server.connect();
    let r = client.request(b"GET /demo/bytes?n=5 HTTP/1.0\r\nHost: localhost\r\n\r\n");
    assert_eq!((r.header("Content-Length"), r.text()), (Some("5"), "abcde"));
    assert_no_stream_left(&server);
}

fn head_gets_no_body_and_the_connection_goes_on(poller: &str) {
    let server = start(poller);
    let mut client = server.connect();
    client.send(&request("HEAD", "/demo/clock?count=1", &[]));
    let r = client.read_head_response();
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.header("Transfer-Encoding"), None, "{r:?}");
    client.send(&request("HEAD", "/demo/bytes?n=10", &[]));
    let r = client.read_head_response();
    assert_eq!(r.header("Content-Length"), Some("10"), "{r:?}");
    // No body bytes came: the next answer on the connection is whole.
    let r = client.request(&crate::client::get("/demo/justnow/"));
    assert_eq!(r.text(), JUSTNOW_BODY, "{r:?}");
    assert_no_stream_left(&server);
}

fn a_pipelined_request_behind_a_stream_is_answered_after_it(poller: &str) {
    let server = start(poller);
    let mut client = server.connect();
    let mut both = crate::client::get("/demo/clock?count=2");
    both.extend_from_slice(&crate::client::get("/demo/bytes?n=300000"));
    both.extend_from_slice(&crate::client::get("/demo/justnow/"));
    client.send(&both);
    let events = client.read_response();
    assert_eq!(events.header("Transfer-Encoding"), Some("chunked"));
    let ids: Vec<&str> = events
        .text()
        .lines()
        .filter(|l| l.starts_with("id: "))
        .collect();
    assert_eq!(ids, ["id: 0", "id: 1"], "{events:?}");
    let bytes = client.read_response();
    assert_eq!(bytes.body.len(), 300_000);
    let expected: Vec<u8> = (0..300_000).map(byte_at).collect();
    assert!(bytes.body == expected, "the download's bytes differ");
    assert_eq!(client.read_response().text(), JUSTNOW_BODY);
    assert_no_stream_left(&server);
}

fn a_bad_n_is_refused_naming_n(poller: &str) {
    let server = start(poller);
    let r = server.get("/demo/bytes?n=-3");
    assert_eq!(
        (r.status, r.text()),
        (400, "n must be a whole number of bytes, got \"-3\"\n")
    );
    let r = server.get("/demo/bytes");
    assert_eq!(r.status, 400, "{r:?}");
    assert!(r.text().contains("n is missing"), "{r:?}");
}

fn a_drain_lets_streams_finish_then_cuts_the_rest(poller: &str) {
    let mut server = Server::start(poller, &["demo"], &["--graceful-timeout", "3"]);
    let open = |path: &str| {
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", server.port)).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("a read timeout");
        stream
            .write_all(&crate::client::get(path))
            .expect("send the request");
        let mut got = Vec::new();
        read_until(&mut stream, &mut got, "id: 0\n");
        (stream, got)
    };
    let (mut short, mut short_got) = open("/demo/clock?count=2");
    let (mut endless, mut endless_got) = open("/demo/clock");
    server.signal(Signal::TERM);
    // The short stream finishes within the graceful timeout: both events
    // and the terminating chunk, then the close (the host is draining).
    short
        .read_to_end(&mut short_got)
        .expect("read the short stream to its end");
    let short_text = String::from_utf8_lossy(&short_got);
    assert!(short_text.contains("id: 1\n"), "{short_text}");
    assert!(short_text.ends_with("\r\n0\r\n\r\n"), "{short_text:?}");
    // The endless one is cut when the graceful timeout passes: the end of
    // stream comes without a terminating chunk.
    let cut = endless.read_to_end(&mut endless_got);
    let endless_text = String::from_utf8_lossy(&endless_got);
    assert!(
        cut.is_ok()
            || cut
                .as_ref()
                .is_err_and(|e| e.kind() == ErrorKind::ConnectionReset),
        "{cut:?}"
    );
    assert!(!endless_text.ends_with("\r\n0\r\n\r\n"), "{endless_text:?}");
    assert!(
        server.wait_exit(Duration::from_secs(10)).is_some(),
        "the host did not exit after the graceful timeout; log:\n{}",
        server.log()
    );
    assert!(
        server.wait_log(&["graceful timeout; closing"]),
        "{}",
        server.log()
    );
}

fn stream_flags_out_of_range_are_refused_naming_them(poller: &str) {
    let refusal = |flag: &str, value: &str| {
        let (status, log) = Server::launch(poller)
            .apps(&["demo"])
            .args(&[flag, value])
            .refused();
        assert!(!status.success(), "{flag} {value} was taken");
        log
    };
    let small = refusal("--stream-queue", "1K");
    assert!(
        small.contains("--stream-queue")
            && small.contains(r#"stream queue "1K" is out of range: give 4K to 64M"#),
        "{small}"
    );
    let idle = refusal("--stream-idle-timeout", "0");
    assert!(
        idle.contains("--stream-idle-timeout") && idle.contains("is not a positive duration"),
        "{idle}"
    );
}

fn a_blocking_producer_on_the_pool_waits_for_room(poller: &str) {
    let server = start(poller);
    let size: u64 = 16 << 20;
    let mut client = server.connect();
    client.send(&crate::client::get(&format!(
        "/demo/bytes?n={size}&from=pool"
    )));
    // Not read for a second: the producer fills the queue and waits.
    std::thread::sleep(Duration::from_secs(1));
    let r = client.read_response();
    assert_eq!(r.body.len() as u64, size, "{:?}", r.headers);
    let wrong = r
        .body
        .iter()
        .enumerate()
        .position(|(i, b)| *b != byte_at(i as u64));
    assert_eq!(wrong, None, "the body differs from the pattern");
    assert_no_stream_left(&server);
}

//! The host-wide budget of what clients make the host hold
//! (`--max-buffered`) and the least rate of a body (`--body-min-rate`):
//! unfinished bodies keep the host's memory within the budget and the rest
//! are answered 503 naming the limit, with Retry-After; a WebSocket
//! message past the budget closes with 1013; a body dripped a byte at a
//! time is cut with 408 while a slow but steady one passes, and a stalled
//! message closes with 1008; a blocking route's copy of a body counts
//! once. Status and metrics count the refusals, and closed connections
//! give their bytes back.

use crate::client::Client;
use crate::common::{metrics, status};
use crate::harness::{wait_until, Server, WAIT};
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

matrix!(
    held_bodies_stay_within_max_buffered_and_the_rest_get_503,
    a_websocket_message_past_max_buffered_closes_with_1013,
    a_dripped_body_is_cut_with_408_and_a_steady_one_passes,
    a_stalled_websocket_message_closes_with_1008,
    a_blocking_routes_copy_of_a_body_counts_once,
    streamed_answers_to_clients_that_do_not_read_hold_the_budget,
);

const MIB: usize = 1 << 20;
/// The read buffer every busy connection has before any budget is drawn.
const FIRST_BUFFER: usize = 16 << 10;

/// A line of `/proc/<pid>/status`, in KiB.
fn proc_kib(server: &Server, field: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{}/status", server.pid()))
        .expect("read the server's /proc status");
    text.lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in {text}"))
}

/// True once the host has sent something (or closed).
fn answered(s: &TcpStream) -> bool {
    s.set_nonblocking(true).expect("non-blocking");
    let r = s.peek(&mut [0u8; 1]);
    s.set_nonblocking(false).expect("blocking");
    !matches!(r, Err(e) if e.kind() == ErrorKind::WouldBlock)
}

/// What the host sent before it closed (a reset ends it too).
fn read_rest(s: &mut TcpStream) -> String {
    s.set_read_timeout(Some(WAIT)).expect("read timeout");
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n @ 1..) = s.read(&mut buf) {
        got.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&got).into_owned()
}

/// What came of a body the client does not finish.
enum Fate {
    /// Everything sent but the last byte, and no answer.
    Held(TcpStream),
    /// The host answered (and closed) before the client was done.
    Answered(String),
}

/// Sends a head declaring `len` bytes and all of them but the last, in
/// pieces; stops when the host answers.
fn unfinished_body(port: u16, len: usize) -> Fate {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect to stoa");
    s.set_write_timeout(Some(WAIT)).expect("write timeout");
    let head = format!("POST /hello/ HTTP/1.1\r\nHost: localhost\r\nContent-Length: {len}\r\n\r\n");
    let piece = vec![b'x'; 64 << 10];
    let mut left = len - 1;
    let mut sent = s.write_all(head.as_bytes());
    while sent.is_ok() && left > 0 && !answered(&s) {
        let n = left.min(piece.len());
        sent = s.write_all(&piece[..n]);
        left -= n;
    }
    if sent.is_err() || answered(&s) {
        return Fate::Answered(read_rest(&mut s));
    }
    Fate::Held(s)
}

fn held_bodies_stay_within_max_buffered_and_the_rest_get_503(poller: &str) {
    const BODY: usize = 8 * MIB;
    const CLIENTS: usize = 60;
    const BUDGET: usize = 64 * MIB;
    // The host's own allocations besides the bodies (the 16K first buffer
    // of each connection, allocator slack).
    const MARGIN_KIB: u64 = 40 << 10;
    let server = Server::start(poller, &["hello-project"], &["--max-buffered", "64M"]);
    let idle_peak = proc_kib(&server, "VmHWM:");
    let mut held = Vec::new();
    let mut refused = Vec::new();
    for _ in 0..CLIENTS {
        match unfinished_body(server.port, BODY) {
            Fate::Held(s) => held.push(s),
            Fate::Answered(text) => refused.push(text),
        }
    }
    // Bodies whose bytes were still in the kernel's buffers may yet be
    // refused: wait until the host holds every body still open in full.
    let settled = wait_until(WAIT, || {
        let (still, answered): (Vec<_>, Vec<_>) = held.drain(..).partition(|s| !answered(s));
        refused.extend(answered.into_iter().map(|mut s| read_rest(&mut s)));
        held = still;
        let buffered = &status(&server)["buffered"];
        buffered["bytes"].as_u64().unwrap_or(0) as usize >= held.len() * (BODY - FIRST_BUFFER)
            && buffered["bodies_refused"] == refused.len() as u64
    });
    let buffered = status(&server)["buffered"].clone();
    assert!(
        settled,
        "held {}, refused {}: {buffered}",
        held.len(),
        refused.len()
    );
    assert_eq!(held.len() + refused.len(), CLIENTS);
    assert!(
        (1..=BUDGET / (BODY - FIRST_BUFFER)).contains(&held.len()),
        "{} bodies held within a 64M budget: {buffered}",
        held.len()
    );
    for text in &refused {
        assert!(text.starts_with("HTTP/1.1 503 "), "{text:?}");
        assert!(text.contains("\r\nRetry-After: 1\r\n"), "{text:?}");
        assert!(text.contains("max_buffered (64M)"), "{text:?}");
    }
    let growth = proc_kib(&server, "VmHWM:").saturating_sub(idle_peak);
    assert!(
        growth <= (BUDGET >> 10) as u64 + MARGIN_KIB,
        "peak RSS grew by {growth} KiB holding {} bodies under a 64M budget",
        held.len()
    );
    assert_eq!(buffered["max"], BUDGET as u64);
    let m = metrics(&server);
    assert_eq!(
        m.get("stoa_buffered_refused_total{kind=\"body\"}"),
        Some(&(refused.len() as f64))
    );
    assert_eq!(m.get("stoa_buffered_max_bytes"), Some(&(BUDGET as f64)));
    assert!(server.wait_log(&["WARN", "max_buffered (64M) is full"]));
    // Closed connections give their bytes back; the host serves on.
    drop(held);
    let returned = wait_until(WAIT, || status(&server)["buffered"]["bytes"] == 0);
    assert!(returned, "{}", status(&server)["buffered"]);
    assert_eq!(server.get("/hello/").status, 200);
}

/// A masked client frame of any length (the mask is zero: the payload
/// goes as it is).
fn frame(first: u8, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![first, 0x80 | 127];
    f.extend_from_slice(&(payload.len() as u64).to_be_bytes());
    f.extend_from_slice(&[0; 4]);
    f.extend_from_slice(payload);
    f
}

/// A WebSocket on the demo app's echo.
fn websocket(server: &Server) -> Client {
    let mut c = Client::connect(server.port);
    let r = c.request(
        b"GET /demo/ws HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\n\
          Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n\
          Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
    );
    assert_eq!(r.status, 101, "{r:?}");
    c
}

/// Sends the fragments of a binary message of `mib` MiB, never its last;
/// stops when the host answers (or closes).
fn unfinished_message(c: &Client, mib: usize) {
    let piece = vec![b'm'; MIB];
    let mut s = c.stream();
    for i in 0..mib {
        let first = if i == 0 { 0x02 } else { 0x00 };
        if answered(s) || s.write_all(&frame(first, &piece)).is_err() {
            return;
        }
    }
}

fn a_websocket_message_past_max_buffered_closes_with_1013(poller: &str) {
    let args = ["--ws-max-message", "16M", "--max-buffered", "32M"];
    let server = Server::start(poller, &["demo"], &args);
    // Two messages of 15 MiB fit, each held once the host has read it.
    let mut open = Vec::new();
    for n in 1..=2 {
        let c = websocket(&server);
        unfinished_message(&c, 15);
        let held = wait_until(WAIT, || {
            status(&server)["buffered"]["bytes"].as_u64().unwrap_or(0) >= (n * 15 * MIB) as u64
        });
        assert!(held, "message {n}: {}", status(&server)["buffered"]);
        assert!(!answered(c.stream()), "message {n} was refused");
        open.push(c);
    }
    // The third does not: its WebSocket closes with 1013.
    let mut third = websocket(&server);
    unfinished_message(&third, 15);
    let close = third.read_bytes(4);
    assert_eq!(close[0], 0x88, "a close frame: {close:?}");
    assert_eq!(u16::from_be_bytes([close[2], close[3]]), 1013, "{close:?}");
    let reason = third.read_bytes(usize::from(close[1]) - 2);
    let reason = String::from_utf8_lossy(&reason);
    assert!(reason.contains("max_buffered (32M)"), "{reason}");
    let counted = wait_until(WAIT, || {
        status(&server)["buffered"]["messages_refused"] == 1
    });
    assert!(counted, "{}", status(&server)["buffered"]);
    let m = metrics(&server);
    assert_eq!(
        m.get("stoa_buffered_refused_total{kind=\"message\"}"),
        Some(&1.0)
    );
    drop((open, third));
    let returned = wait_until(WAIT, || status(&server)["buffered"]["bytes"] == 0);
    assert!(returned, "{}", status(&server)["buffered"]);
}

fn a_dripped_body_is_cut_with_408_and_a_steady_one_passes(poller: &str) {
    let args = ["--body-timeout", "1s", "--body-min-rate", "100"];
    let server = Server::start(poller, &["environ"], &args);
    let post = |len: usize| {
        let s = TcpStream::connect(("127.0.0.1", server.port)).expect("connect to stoa");
        let head =
            format!("POST /_environ HTTP/1.1\r\nHost: localhost\r\nContent-Length: {len}\r\n\r\n");
        (&s).write_all(head.as_bytes()).expect("send the head");
        s
    };
    // A byte every 250 ms: each gap is well within --body-timeout, but
    // the body averages 4 bytes/s.
    let mut drip = post(1000);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !answered(&drip) && Instant::now() < deadline {
        let _ = drip.write_all(b"d");
        std::thread::sleep(Duration::from_millis(250));
    }
    let text = read_rest(&mut drip);
    assert!(text.starts_with("HTTP/1.1 408 "), "{text:?}");
    assert!(text.contains("body_min_rate (100 bytes/s"), "{text:?}");
    // 50 bytes every 50 ms (1,000 bytes/s) for 2 s: slow, but ten times
    // the rate, so a test thread a loaded machine leaves waiting for half a
    // second is still above it.
    let len = 2000;
    let mut steady = post(len);
    for _ in 0..len / 50 {
        assert!(!answered(&steady), "cut short: {}", read_rest(&mut steady));
        steady.write_all(&[b's'; 50]).expect("send a piece");
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut c = Client::from_stream(steady);
    let r = c.read_response();
    assert_eq!(r.status, 200, "{r:?}");
}

fn a_stalled_websocket_message_closes_with_1008(poller: &str) {
    let args = ["--body-timeout", "1s", "--body-min-rate", "100"];
    let server = Server::start(poller, &["demo"], &args);
    let mut c = websocket(&server);
    // A message's first fragment, and nothing more: below 100 bytes/s
    // once the second of grace has passed (pings stay 30 s away).
    let mut s = c.stream();
    s.write_all(&frame(0x01, b"the start of it"))
        .expect("send a fragment");
    let close = c.read_bytes(4);
    assert_eq!(close[0], 0x88, "a close frame: {close:?}");
    assert_eq!(u16::from_be_bytes([close[2], close[3]]), 1008, "{close:?}");
    let reason = c.read_bytes(usize::from(close[1]) - 2);
    let reason = String::from_utf8_lossy(&reason);
    assert!(reason.contains("body_min_rate (100 bytes/s"), "{reason}");
}

/// A budget that could never hold the largest body or message is refused
/// at start-up, naming both flags and the least value (backend-free).
#[test]
fn a_budget_below_the_largest_body_or_message_is_refused() {
    let cases: [(&[&str], &[&str]); 2] = [
        (
            &["--max-buffered", "1M"],
            &[
                "--max-buffered 1M",
                "--ws-max-message 16M",
                "give --max-buffered 16M",
            ],
        ),
        (
            &[
                "--max-buffered",
                "10M",
                "--max-body",
                "12M",
                "--ws-max-message",
                "1M",
            ],
            &[
                "--max-buffered 10M",
                "--max-body 12M",
                "give --max-buffered 12M",
            ],
        ),
    ];
    for (args, needles) in cases {
        let (exit, log) = Server::launch("epoll").args(args).refused();
        assert!(!exit.success(), "{args:?}");
        for needle in needles {
            assert!(log.contains(needle), "{args:?}: {needle:?} not in {log}");
        }
    }
}

fn a_blocking_routes_copy_of_a_body_counts_once(poller: &str) {
    const BODY: usize = 7 * MIB;
    // Room for two such bodies counted once each, not for one counted twice
    // and another.
    let server = Server::start(poller, &["demo"], &["--max-buffered", "16M"]);
    let post = || {
        let mut c = Client::connect(server.port);
        let head = format!(
            "POST /demo/syncsleep-handler/?seconds=2 HTTP/1.1\r\nHost: localhost\r\n\
             Content-Length: {BODY}\r\n\r\n"
        );
        let mut bytes = head.into_bytes();
        bytes.resize(bytes.len() + BODY, b'p');
        c.send(&bytes);
        c
    };
    let busy = |n: u64| {
        wait_until(WAIT, || {
            status(&server)["blocking_pool"]["apps"]["demo"]["busy"] == n
        })
    };
    let mut first = post();
    assert!(busy(1), "{}", status(&server)["blocking_pool"]);
    // The job may start before its loop gives the connection's buffer
    // back (a moment later): wait for the one copy to be all it holds.
    let held = || status(&server)["buffered"]["bytes"].as_u64().unwrap_or(0) as usize;
    let once = wait_until(WAIT, || (BODY..BODY + FIRST_BUFFER).contains(&held()));
    assert!(once, "one 7M body on the pool holds {} bytes", held());
    let mut second = post();
    assert!(busy(2), "{}", status(&server)["blocking_pool"]);
    // Each answer comes after the app's 2 s sleep and the pool's turn,
    // which a loaded machine stretches (the subject is the count, not the
    // time).
    for c in [&mut first, &mut second] {
        let r = c.read_response_within(Duration::from_secs(30));
        assert_eq!(r.status, 200, "{r:?}");
    }
    let returned = wait_until(WAIT, || status(&server)["buffered"]["bytes"] == 0);
    assert!(returned, "{}", status(&server)["buffered"]);
}

/// Streamed answers whose clients do not read hold their queued bytes of
/// the budget: past it, a new body is refused 503; once the clients go,
/// the bytes come back and the same body is served.
fn streamed_answers_to_clients_that_do_not_read_hold_the_budget(poller: &str) {
    // /demo/bytes sends 64 KiB chunks, each as soon as its queue drains.
    const CHUNK: usize = 64 << 10;
    const FRAMING: usize = 1 << 10;
    const READERS: usize = 6;
    let args = [
        "--max-buffered",
        "1M",
        "--max-body",
        "256K",
        "--ws-max-message",
        "64K",
        "--stream-queue",
        "512K",
    ];
    let server = Server::start(poller, &["demo", "environ"], &args);
    let request = "GET /demo/bytes?n=100000000 HTTP/1.1\r\nHost: localhost\r\n\r\n";
    let silent: Vec<TcpStream> = (0..READERS)
        .map(|_| {
            let s = TcpStream::connect(("127.0.0.1", server.port)).expect("connect to stoa");
            (&s).write_all(request.as_bytes())
                .expect("send the request");
            s
        })
        .collect();
    // The streams fill the kernel's buffers, then their queues, until
    // the budget is held: within one chunk of it (a chunk past the limit
    // waits while its queue holds another), far more than the 256 KiB
    // body below (--max-body) leaves room for. The kernel's send buffers
    // may still take a little more from the queues for a moment after:
    // the budget counts as held once two readings 300 ms apart agree.
    const POST: usize = 256 << 10;
    let bytes_held = || status(&server)["buffered"]["bytes"].as_u64().unwrap_or(0) as usize;
    let held = wait_until(Duration::from_secs(10), || {
        let before = bytes_held();
        std::thread::sleep(Duration::from_millis(300));
        before >= MIB - CHUNK - FRAMING && bytes_held() == before
    });
    let buffered = status(&server)["buffered"].clone();
    assert!(held, "the streams never held the budget: {buffered}");
    // At most one chunk per stream past the limit (a chunk into an empty
    // queue is never refused), with its chunked framing and the head.
    let bytes = buffered["bytes"].as_u64().unwrap_or(0) as usize;
    assert!(bytes <= MIB + READERS * (CHUNK + FRAMING), "{buffered}");
    let post = || {
        let body = vec![b'p'; POST];
        let mut c = Client::connect(server.port);
        let head = format!(
            "POST /_environ HTTP/1.1\r\nHost: localhost\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        c.request(&[head.as_bytes(), &body[..]].concat())
    };
    let refused = post();
    assert_eq!(refused.status, 503, "{refused:?}");
    assert!(refused.text().contains("max_buffered (1M)"), "{refused:?}");
    drop(silent);
    let returned = wait_until(WAIT, || status(&server)["buffered"]["bytes"] == 0);
    assert!(returned, "{}", status(&server)["buffered"]);
    assert_eq!(post().status, 200);
}

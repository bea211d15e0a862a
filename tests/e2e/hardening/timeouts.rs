//! Every timeout at half a second: a stalled head or body is 408 naming the
//! timeout, an idle keep-alive or silent connection is closed quietly, a
//! slow app is 504 naming the app (and the late answer dropped), a client
//! that stops reading is cut off by the send timeout; and a slowloris crowd
//! is cut off by the head timeout while a normal client is served. Over TLS
//! the clients trickle records (one byte of plaintext each) after their
//! handshakes, and the silent connections are one after its handshake and
//! one that never sends its ClientHello.

use super::{flags, justnow, start};
use crate::client::{get, Client, Transport};
use crate::common::{assert_serves, wait_for_open, JUSTNOW_BODY};
use crate::harness::{Backend, Server};
use std::io::{ErrorKind, Read, Write};
use std::time::{Duration, Instant};

matrix!(
    tls:
    head_timeout_is_408,
    body_stall_is_408,
    idle_keep_alive_closes_quietly,
    app_timeout_is_504_and_names_the_app,
    send_timeout_closes_a_stalled_reader,
    slowloris_crowd_is_cut_off_by_head_timeout,
    silent_connection_is_closed,
);

/// Every timeout at half a second.
const SHORT: &str = "--head-timeout 0.5 --body-timeout 0.5 --keep-alive-timeout 0.5 \
                     --app-timeout 0.5 --send-timeout 0.5 --tls-handshake-timeout 0.5";

/// Sends `bytes`, then waits for a refusal with `status` naming `needle`,
/// which must not come before most of the half second has passed.
fn refused_after(server: &Server, bytes: &[u8], status: u16, needle: &str) {
    let mut c = server.connect();
    let started = Instant::now();
    let r = c.request(bytes);
    let took = started.elapsed();
    assert_eq!(r.status, status, "{r:?}");
    assert!(
        r.text().contains(needle),
        "body does not name {needle}: {r:?}"
    );
    assert_eq!(r.header("Connection"), Some("close"), "{r:?}");
    assert!(
        took >= Duration::from_millis(400),
        "answered after only {took:?}"
    );
    c.assert_closed();
}

fn head_timeout_is_408(on: Backend) {
    let server = start(on, &flags(SHORT));
    let partial = b"GET /demo/justnow/ HTTP/1.1\r\nHost: loc";
    refused_after(&server, partial, 408, "head_timeout");
    assert_serves(&server);
}

fn body_stall_is_408(on: Backend) {
    let server = start(on, &flags(SHORT));
    let stalled = justnow("POST", &["Content-Length: 10"], b"abc");
    refused_after(&server, &stalled, 408, "body_timeout");
    let stalled = justnow("POST", &["Transfer-Encoding: chunked"], b"5\r\nab");
    refused_after(&server, &stalled, 408, "body_timeout");
    assert_serves(&server);
}

fn idle_keep_alive_closes_quietly(on: Backend) {
    let server = start(on, &flags(SHORT));
    let mut c = server.connect();
    let r = c.request(&get("/demo/justnow/"));
    assert_eq!(r.status, 200);
    assert_eq!(r.header("Connection"), None, "{r:?}");
    // No 408 for an idle keep-alive connection: just the close.
    c.assert_closed();
    assert_serves(&server);
}

/// A connection that never sends a byte is closed quietly too (it used to
/// get no deadline until its first event, so poll and select kept it).
/// Over TLS that is one that never sends its ClientHello (closed at the
/// handshake timeout: it gets at most an alert record, then the close),
/// and one silent after its handshake.
fn silent_connection_is_closed(on: Backend) {
    let server = start(on, &flags(SHORT));
    let mut tcp = Client::connect(server.port);
    let mut silent = server.connect();
    silent.assert_closed();
    if on.transport == Transport::Tls {
        let got = tcp.read_until_closed();
        assert!(got.is_empty() || got[0] == 0x15, "not a TLS alert: {got:?}");
    } else {
        tcp.assert_closed();
    }
    assert_serves(&server);
}

fn app_timeout_is_504_and_names_the_app(on: Backend) {
    let server = start(on, &flags(SHORT));
    let timer = get("/demo/sleep-handler/?seconds=3");
    refused_after(&server, &timer, 504, "app_timeout");
    assert!(
        server.wait_log(&["WARN", "app demo", "app_timeout"]),
        "no warning naming the app"
    );
    // A job hung on the blocking pool: reported with the app and its path.
    let sync = get("/demo/syncsleep-handler/?seconds=2");
    refused_after(&server, &sync, 504, "app_timeout");
    assert!(
        server.wait_log(&["app demo", "/demo/syncsleep-handler/", "app_timeout"]),
        "no warning naming the app and path of the hung job"
    );
    assert_serves(&server);
    // The late answers (at 2 s and 3 s) are dropped safely.
    std::thread::sleep(Duration::from_millis(2700));
    assert_serves(&server);
    assert_eq!(wait_for_open(&server, 0), 0);
}

fn send_timeout_closes_a_stalled_reader(on: Backend) {
    let server = start(on, &["--send-timeout", "0.5"]);
    // A small receive buffer (no autotuning) and 16 MiB asked for: the
    // host's output cannot all fit in the socket buffers.
    let socket =
        socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("a socket");
    socket.set_recv_buffer_size(64 * 1024).expect("SO_RCVBUF");
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], server.port));
    socket.connect(&addr.into()).expect("connect to stoa");
    let mut c = Client::over(socket.into(), on.transport);
    c.send(&get("/_test/big").repeat(4));
    assert_eq!(wait_for_open(&server, 1), 1, "the reader's connection");
    // Never read: the host gives up after the send timeout. Then what it
    // sent is counted off the socket (ciphertext, over TLS).
    assert_eq!(wait_for_open(&server, 0), 0, "the stalled reader was kept");
    let mut stream = c.stream();
    let mut got = 0usize;
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == ErrorKind::ConnectionReset => break,
            Err(e) => panic!("no end of stream after {got} bytes: {e}"),
        }
    }
    assert!(got < 4 * (4 << 20), "all {got} bytes were sent");
    assert_serves(&server);
}

/// How many slowloris connections trickle at once.
const CROWD: usize = 200;

fn slowloris_crowd_is_cut_off_by_head_timeout(on: Backend) {
    let server = start(on, &["--head-timeout", "1"]);
    let head = b"GET /demo/justnow/ HTTP/1.1\r\nHost: localhost\r\nX-Slow: ";
    struct Slow {
        client: Client,
        opened: Instant,
        sent: usize,
        got: Vec<u8>,
        /// How long after its connect it was closed.
        closed: Option<Duration>,
    }
    let mut crowd: Vec<Slow> = (0..CROWD)
        .map(|_| {
            let opened = Instant::now();
            let client = server.connect();
            client.stream().set_nonblocking(true).expect("non-blocking");
            let (sent, got, closed) = (0, Vec::new(), None);
            Slow {
                client,
                opened,
                sent,
                got,
                closed,
            }
        })
        .collect();
    let started = Instant::now();
    let (port, transport) = (server.port, server.transport);
    let normal = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        let asked = Instant::now();
        let r = Client::connect_over(port, transport).request(&get("/demo/justnow/"));
        (r, asked.elapsed())
    });
    // One byte per connection every 100 ms until each is answered or closed.
    while crowd.iter().any(|s| s.closed.is_none()) && started.elapsed() < Duration::from_secs(8) {
        for s in crowd.iter_mut().filter(|s| s.closed.is_none()) {
            let mut buf = [0u8; 1024];
            loop {
                match s.client.io().read(&mut buf) {
                    Ok(0) => s.closed = Some(s.opened.elapsed()),
                    Ok(n) => {
                        s.got.extend_from_slice(&buf[..n]);
                        continue;
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                    Err(_) => s.closed = Some(s.opened.elapsed()),
                }
                break;
            }
            if s.closed.is_none() && s.got.is_empty() {
                let byte = head.get(s.sent).copied().unwrap_or(b'a');
                if s.client.io().write(&[byte]).is_ok() {
                    s.sent += 1;
                }
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let (r, took) = normal.join().expect("the normal client");
    assert_eq!((r.status, r.text()), (200, JUSTNOW_BODY));
    assert!(
        took < Duration::from_secs(3),
        "the normal client waited {took:?}"
    );
    let open = crowd.iter().filter(|s| s.closed.is_none()).count();
    assert_eq!(
        open, 0,
        "{open} of {CROWD} trickling connections still open"
    );
    let mut timed_out = 0;
    for (i, s) in crowd.iter().enumerate() {
        let text = String::from_utf8_lossy(&s.got);
        assert!(
            s.got.is_empty() || text.starts_with("HTTP/1.1 408 "),
            "connection {i} got {text:?}"
        );
        timed_out += usize::from(!s.got.is_empty());
        let closed = s.closed.unwrap_or_default();
        assert!(
            closed >= Duration::from_millis(700),
            "connection {i} closed early: {closed:?}"
        );
    }
    assert!(timed_out > 0, "not one 408 among {CROWD} connections");
    assert_eq!(wait_for_open(&server, 0), 0, "connections left open");
    assert_serves(&server);
}

//! HTTP hardening (issue 7), through the `demo` app: every limit at a small
//! flag value answers its own status with a body naming the limit, then
//! `Connection: close` and the close; every timeout at a short flag value;
//! every strict-framing rule of RFC 9112, request smuggling attempts that
//! must get exactly one answer, and a slowloris crowd cut off by the head
//! timeout while a normal client is served; trailers and Host fields are
//! checked too. Each test then checks that the server still serves a fresh
//! request.

use crate::async_apps::{assert_serves, wait_for_open, JUSTNOW_BODY};
use crate::client::{get, with_body, Response};
use crate::harness::Server;
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

matrix!(
    each_limit_has_its_status,
    requests_per_connection_limit,
    head_timeout_is_408,
    body_stall_is_408,
    idle_keep_alive_closes_quietly,
    app_timeout_is_504_and_names_the_app,
    send_timeout_closes_a_stalled_reader,
    framing_errors_are_refused_and_close,
    smuggling_attempts_get_one_answer,
    request_target_forms,
    slowloris_crowd_is_cut_off_by_head_timeout,
    trailers_are_bounded,
    silent_connection_is_closed,
    unterminated_trailer_line_is_bounded,
    malformed_trailer_is_400,
    http_1_0_transfer_encoding_closes,
    host_field_rules_in_any_version,
);

matrix!(expect_100_continue_is_ignored_for_http_1_0);

/// The demo app, with these flags.
fn start(poller: &str, args: &[&str]) -> Server {
    Server::start(poller, &["demo", "misbehave"], args)
}

/// Sends `bytes` on a new connection and asserts the refusal: `status`, a
/// body containing `needle`, `Connection: close`, then the close.
fn refused(server: &Server, what: &str, bytes: &[u8], status: u16, needle: &str) -> Response {
    let mut c = server.connect();
    let r = c.request(bytes);
    assert_eq!(r.status, status, "{what}: {r:?}");
    assert!(
        String::from_utf8_lossy(&r.body).contains(needle),
        "{what}: body does not name {needle:?}: {r:?}"
    );
    assert_eq!(r.header("Connection"), Some("close"), "{what}: {r:?}");
    c.assert_closed();
    r
}

/// Asserts a request is served (`/demo/justnow/` answers any method).
fn accepted(server: &Server, what: &str, bytes: &[u8]) {
    let r = server.connect().request(bytes);
    assert_eq!((r.status, r.text()), (200, JUSTNOW_BODY), "{what}: {r:?}");
}

/// A request to `/demo/justnow/` with these extra header lines and body.
fn justnow(method: &str, headers: &[&str], body: &[u8]) -> Vec<u8> {
    with_body(method, "/demo/justnow/", headers, body)
}

/// Splits a flag string into the arguments `Server::start` takes.
fn flags(s: &str) -> Vec<&str> {
    s.split_whitespace().collect()
}

const LIMITS: &str = "--max-request-line 100 --max-header-field 100 --max-headers 5 \
                      --max-head 400 --max-body 1000";

fn each_limit_has_its_status(poller: &str) {
    let server = start(poller, &flags(LIMITS));
    let target = |len: usize| get(&format!("/demo/justnow/?p={}", "a".repeat(len - 17)));
    let field = |len: usize| format!("X-Long: {}", "v".repeat(len));
    let fields: Vec<String> = (0..5).map(|i| format!("X-{i}: v")).collect();
    let fields: Vec<&str> = fields.iter().map(String::as_str).collect();
    // Four fields short enough for max_header_field, past max_head together.
    let pads: Vec<String> = (0..4)
        .map(|i| format!("X-Pad-{i}: {}", "p".repeat(95)))
        .collect();
    let pads: Vec<&str> = pads.iter().map(String::as_str).collect();
    let te = ["Transfer-Encoding: chunked"];
    let body = vec![b'b'; 1000];
    let chunked_1000 = [&b"3e8\r\n"[..], &body, b"\r\n0\r\n\r\n"].concat();
    let two_chunks = [&b"258\r\n"[..], &[b'c'; 600], b"\r\n258\r\n"].concat();
    let expect = |len: &str| justnow("POST", &["Expect: 100-continue", len], b"");
    // Each limit exactly reached is served.
    #[rustfmt::skip]
    let served: Vec<(&str, Vec<u8>)> = vec![
        ("100-byte target", target(100)),
        ("100-byte field", justnow("GET", &[&field(100)], b"")),
        ("Host and 4 fields", justnow("GET", &fields[..4], b"")),
        ("1000-byte body", justnow("POST", &["Content-Length: 1000"], &body)),
        ("1000 chunked bytes", justnow("POST", &te, &chunked_1000)),
    ];
    for (what, bytes) in served {
        accepted(&server, what, &bytes);
    }
    // One past it is refused, the body by its Content-Length before any
    // body byte is sent, a chunked body while decoding; and a request
    // that expects 100-continue gets its 413 at once, no 100 Continue.
    #[rustfmt::skip]
    let cases: Vec<(&str, Vec<u8>, u16, &str)> = vec![
        ("101-byte target", target(101), 414, "414 URI Too Long: request-target longer than max_request_line"),
        ("101-byte field", justnow("GET", &[&field(101)], b""), 431, "max_header_field"),
        ("6 fields", justnow("GET", &fields, b""), 431, "max_headers"),
        ("head past 400 bytes", justnow("GET", &pads, b""), 431, "larger than max_head\n"),
        ("1001-byte body", justnow("POST", &["Content-Length: 1001"], b""), 413, "413 Content Too Large: body larger than max_body"),
        ("one 1001-byte chunk", justnow("POST", &te, b"3e9\r\n"), 413, "max_body"),
        ("two 600-byte chunks", justnow("POST", &te, &two_chunks), 413, "max_body"),
        ("100-continue over max_body", expect("Content-Length: 1001"), 413, "max_body"),
    ];
    for (what, bytes, status, needle) in cases {
        refused(&server, what, &bytes, status, needle);
    }
    // Within the limit: 100 Continue, then the answer once the body is sent.
    let mut c = server.connect();
    c.send(&expect("Content-Length: 10"));
    assert_eq!(c.read_response().status, 100);
    let r = c.request(b"0123456789");
    assert_eq!((r.status, r.text()), (200, JUSTNOW_BODY));
    assert_serves(&server);
}

fn requests_per_connection_limit(poller: &str) {
    let server = start(poller, &["--max-requests-per-conn", "3"]);
    let mut c = server.connect();
    for i in 1..=3 {
        let r = c.request(&get("/demo/justnow/"));
        assert_eq!((r.status, r.text()), (200, JUSTNOW_BODY), "request {i}");
        let close = r.header("Connection") == Some("close");
        assert_eq!(close, i == 3, "request {i}: {r:?}");
    }
    c.assert_closed();
    // Pipelined: three answers, the last with close, and nothing for the rest.
    let mut c = server.connect();
    c.send(&get("/demo/justnow/").repeat(5));
    for i in 1..=3 {
        let r = c.read_response();
        assert_eq!(r.status, 200, "pipelined request {i}");
        assert_eq!(r.header("Connection") == Some("close"), i == 3, "{r:?}");
    }
    c.assert_closed();
    assert_serves(&server);
}

/// Every timeout at half a second.
const SHORT: &str = "--head-timeout 0.5 --body-timeout 0.5 --keep-alive-timeout 0.5 \
                     --app-timeout 0.5 --send-timeout 0.5";

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

fn head_timeout_is_408(poller: &str) {
    let server = start(poller, &flags(SHORT));
    let partial = b"GET /demo/justnow/ HTTP/1.1\r\nHost: loc";
    refused_after(&server, partial, 408, "head_timeout");
    assert_serves(&server);
}

fn body_stall_is_408(poller: &str) {
    let server = start(poller, &flags(SHORT));
    let stalled = justnow("POST", &["Content-Length: 10"], b"abc");
    refused_after(&server, &stalled, 408, "body_timeout");
    let stalled = justnow("POST", &["Transfer-Encoding: chunked"], b"5\r\nab");
    refused_after(&server, &stalled, 408, "body_timeout");
    assert_serves(&server);
}

fn idle_keep_alive_closes_quietly(poller: &str) {
    let server = start(poller, &flags(SHORT));
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
fn silent_connection_is_closed(poller: &str) {
    let server = start(poller, &flags(SHORT));
    let mut silent = server.connect();
    silent.assert_closed();
    assert_serves(&server);
}

fn app_timeout_is_504_and_names_the_app(poller: &str) {
    let server = start(poller, &flags(SHORT));
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

fn send_timeout_closes_a_stalled_reader(poller: &str) {
    let server = start(poller, &["--send-timeout", "0.5"]);
    // A small receive buffer (no autotuning) and 16 MiB asked for: the
    // host's output cannot all fit in the socket buffers.
    let socket =
        socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("a socket");
    socket.set_recv_buffer_size(64 * 1024).expect("SO_RCVBUF");
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], server.port));
    socket.connect(&addr.into()).expect("connect to stoa");
    let mut stream: TcpStream = socket.into();
    stream
        .write_all(&get("/_test/big").repeat(4))
        .expect("send");
    assert_eq!(wait_for_open(&server, 1), 1, "the reader's connection");
    // Never read: the host gives up after the send timeout.
    assert_eq!(wait_for_open(&server, 0), 0, "the stalled reader was kept");
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("read timeout");
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

fn framing_errors_are_refused_and_close(poller: &str) {
    let server = start(poller, &[]);
    let post = |headers: &[&str], body: &[u8]| justnow("POST", headers, body);
    let te = ["Transfer-Encoding: chunked"];
    let long_ext = format!("1;{}\r\na\r\n0\r\n\r\n", "e".repeat(5000));
    #[rustfmt::skip]
    let cases: Vec<(&str, Vec<u8>, u16)> = vec![
        ("CL and TE", post(&["Content-Length: 5", te[0]], b"0\r\n\r\n"), 400),
        ("differing CLs", post(&["Content-Length: 1", "Content-Length: 2"], b"ab"), 400),
        ("CL +5", post(&["Content-Length: +5"], b"abcde"), 400),
        ("CL 5x", post(&["Content-Length: 5x"], b"abcde"), 400),
        ("CL -1", post(&["Content-Length: -1"], b""), 400),
        ("CL 0x5", post(&["Content-Length: 0x5"], b"abcde"), 400),
        ("empty CL", post(&["Content-Length: "], b""), 400),
        ("TE chunked, gzip", post(&["Transfer-Encoding: chunked, gzip"], b""), 400),
        ("TE gzip alone", post(&["Transfer-Encoding: gzip"], b""), 400),
        ("TE twice", post(&[te[0], te[0]], b"0\r\n\r\n"), 400),
        ("TE gzip, chunked", post(&["Transfer-Encoding: gzip, chunked"], b"0\r\n\r\n"), 501),
        ("chunk size zz", post(&te, b"zz\r\nabc\r\n0\r\n\r\n"), 400),
        ("chunk size -1", post(&te, b"-1\r\n\r\n"), 400),
        ("chunk size LF only", post(&te, b"3\nabc\r\n0\r\n\r\n"), 400),
        ("no CRLF after chunk", post(&te, b"3\r\nabcX\r\n0\r\n\r\n"), 400),
        ("long chunk extension", post(&te, long_ext.as_bytes()), 400),
        ("1.1 without Host", b"GET /demo/justnow/ HTTP/1.1\r\n\r\n".to_vec(), 400),
        ("two Hosts", justnow("GET", &["Host: other"], b""), 400),
        ("HTTP/2.0", b"GET /demo/justnow/ HTTP/2.0\r\nHost: l\r\n\r\n".to_vec(), 505),
        ("HTTP/3.0", b"GET /demo/justnow/ HTTP/3.0\r\nHost: l\r\n\r\n".to_vec(), 505),
        ("HTTP/1.x", b"GET /demo/justnow/ HTTP/1.x\r\nHost: l\r\n\r\n".to_vec(), 400),
        ("Expect: teapot", post(&["Expect: teapot", "Content-Length: 0"], b""), 417),
        ("obs-fold", justnow("GET", &["X-A: a", " b"], b""), 400),
        ("NUL in a value", justnow("GET", &["X-A: a\0b"], b""), 400),
        ("CTL in a value", justnow("GET", &["X-A: a\x01b"], b""), 400),
        ("DEL in a value", justnow("GET", &["X-A: a\x7fb"], b""), 400),
        ("CR in a value", justnow("GET", &["X-A: a\rb"], b""), 400),
        ("space before colon", justnow("GET", &["X-A : b"], b""), 400),
        ("whitespace before the first field", b"GET /demo/justnow/ HTTP/1.1\r\n X: b\r\nHost: l\r\n\r\n".to_vec(), 400),
        ("bad header name", justnow("GET", &["X(A): b"], b""), 400),
        ("bad method token", justnow("G@T", &[], b""), 400),
        ("space in the method", justnow("GE T", &[], b""), 400),
    ];
    for (what, bytes, status) in cases {
        refused(&server, what, &bytes, status, &status.to_string());
    }
    assert_serves(&server);
}

/// The request hidden in the smuggling attempts' bodies.
const HIDDEN: &str = "GET /demo/justnow/?smuggled HTTP/1.1\r\nHost: localhost\r\n\r\n";

fn smuggling_attempts_get_one_answer(poller: &str) {
    let server = start(poller, &[]);
    let cl = format!("Content-Length: {}", 5 + HIDDEN.len());
    let hidden_chunk = format!("0\r\n\r\n{HIDDEN}");
    let te = "Transfer-Encoding: chunked";
    let chunk = hidden_chunk.as_bytes();
    let bad_size = format!("5x\r\nabcde\r\n{hidden_chunk}");
    #[rustfmt::skip]
    let attempts: Vec<(&str, Vec<&str>, &[u8])> = vec![
        ("CL.TE", vec![&cl, te], chunk),
        ("TE.CL", vec![te, &cl], chunk),
        ("CL.CL", vec!["Content-Length: 0", &cl], chunk),
        ("TE.TE", vec![te, "Transfer-Encoding: identity"], chunk),
        ("TE folded", vec!["Transfer-Encoding: identity", " chunked"], chunk),
        ("TE space before colon", vec!["Transfer-Encoding : chunked", &cl], chunk),
        ("TE xchunked with CL", vec!["Transfer-Encoding: xchunked", &cl], chunk),
        ("bad chunk size", vec![te], bad_size.as_bytes()),
        ("CL with a sign", vec!["Content-Length: +0"], HIDDEN.as_bytes()),
    ];
    for (what, headers, body) in attempts {
        let mut c = server.connect();
        let r = c.request(&justnow("POST", &headers, body));
        assert_eq!(r.status, 400, "{what}: {r:?}");
        assert_eq!(r.header("Connection"), Some("close"), "{what}");
        let rest = c.read_until_closed();
        assert!(
            rest.is_empty(),
            "{what}: a second answer followed: {:?}",
            String::from_utf8_lossy(&rest)
        );
    }
    assert_serves(&server);
}

fn request_target_forms(poller: &str) {
    let server = start(poller, &[]);
    let line = |l: &str| format!("{l}\r\nHost: localhost\r\n\r\n").into_bytes();
    let absolute = line("GET http://localhost/demo/justnow/ HTTP/1.1");
    accepted(&server, "absolute-form", &absolute);
    // Allowed forms that no app serves here.
    for l in ["OPTIONS * HTTP/1.1", "CONNECT localhost:443 HTTP/1.1"] {
        let r = server.connect().request(&line(l));
        assert_eq!(r.status, 404, "{l} is an allowed form: {r:?}");
    }
    for l in [
        "GET * HTTP/1.1",
        "GET localhost:80 HTTP/1.1",
        "CONNECT /demo/justnow/ HTTP/1.1",
        "GET justnow HTTP/1.1",
        "GET ftp://localhost/demo/justnow/ HTTP/1.1",
    ] {
        refused(&server, l, &line(l), 400, "request-target form not allowed");
    }
    assert_serves(&server);
}

/// How many slowloris connections trickle at once.
const CROWD: usize = 200;

fn slowloris_crowd_is_cut_off_by_head_timeout(poller: &str) {
    let server = start(poller, &["--head-timeout", "1"]);
    let head = b"GET /demo/justnow/ HTTP/1.1\r\nHost: localhost\r\nX-Slow: ";
    struct Slow {
        stream: TcpStream,
        sent: usize,
        got: Vec<u8>,
        closed: Option<Duration>,
    }
    let mut crowd: Vec<Slow> = (0..CROWD)
        .map(|_| {
            let stream = TcpStream::connect(("127.0.0.1", server.port)).expect("connect");
            stream.set_nodelay(true).expect("TCP_NODELAY");
            stream.set_nonblocking(true).expect("non-blocking");
            let (sent, got, closed) = (0, Vec::new(), None);
            Slow {
                stream,
                sent,
                got,
                closed,
            }
        })
        .collect();
    let started = Instant::now();
    let port = server.port;
    let normal = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        let asked = Instant::now();
        let r = crate::client::Client::connect(port).request(&get("/demo/justnow/"));
        (r, asked.elapsed())
    });
    // One byte per connection every 100 ms until each is answered or closed.
    while crowd.iter().any(|s| s.closed.is_none()) && started.elapsed() < Duration::from_secs(8) {
        for s in crowd.iter_mut().filter(|s| s.closed.is_none()) {
            let mut buf = [0u8; 1024];
            loop {
                match s.stream.read(&mut buf) {
                    Ok(0) => s.closed = Some(started.elapsed()),
                    Ok(n) => {
                        s.got.extend_from_slice(&buf[..n]);
                        continue;
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                    Err(_) => s.closed = Some(started.elapsed()),
                }
                break;
            }
            if s.closed.is_none() && s.got.is_empty() {
                let byte = head.get(s.sent).copied().unwrap_or(b'a');
                if s.stream.write(&[byte]).is_ok() {
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

/// A chunked request whose trailer section is `trailers` (after `0\r\n`).
fn with_trailers(trailers: &[u8]) -> Vec<u8> {
    let mut body = b"3\r\nabc\r\n0\r\n".to_vec();
    body.extend_from_slice(trailers);
    justnow("POST", &["Transfer-Encoding: chunked"], &body)
}

fn trailers_are_bounded(poller: &str) {
    let server = start(poller, &[]);
    accepted(&server, "a trailer", &with_trailers(b"X-T: v\r\n\r\n"));
    let many = with_trailers(&[&b"X-T: aaaa\r\n".repeat(3000)[..], b"\r\n"].concat());
    refused(&server, "33 KB of trailers", &many, 431, "431");
    assert_serves(&server);
}

/// A trailer line that never ends is refused once past the 16 KiB trailer
/// bound, as complete lines are, not buffered until the body timeout.
fn unterminated_trailer_line_is_bounded(poller: &str) {
    let server = start(poller, &[]);
    let line = with_trailers(&[&b"X-T: "[..], &[b'a'; 20 * 1024]].concat());
    refused(&server, "unterminated trailer", &line, 431, "431");
    assert_serves(&server);
}

/// Trailer fields follow the header field rules: no NUL, a colon.
fn malformed_trailer_is_400(poller: &str) {
    let server = start(poller, &[]);
    let nul = with_trailers(b"X-T: a\0b\r\n\r\n");
    refused(&server, "NUL in a trailer", &nul, 400, "400");
    let garbage = with_trailers(b"garbage\r\n\r\n");
    refused(&server, "trailer without a colon", &garbage, 400, "400");
    assert_serves(&server);
}

/// RFC 9112 6.1: an HTTP/1.0 message with Transfer-Encoding has faulty
/// framing: 400, the close, and the request that follows is not served.
fn http_1_0_transfer_encoding_closes(poller: &str) {
    let server = start(poller, &[]);
    let mut c = server.connect();
    let first = "POST /demo/justnow/ HTTP/1.0\r\nConnection: keep-alive\r\n\
                 Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n";
    let next = "GET /demo/justnow/?next HTTP/1.0\r\nConnection: keep-alive\r\n\r\n";
    let r = c.request(format!("{first}{next}").as_bytes());
    assert_eq!(r.status, 400, "{r:?}");
    assert_eq!(r.header("Connection"), Some("close"), "{r:?}");
    let rest = c.read_until_closed();
    assert!(rest.is_empty(), "{:?}", String::from_utf8_lossy(&rest));
    assert_serves(&server);
}

/// RFC 9112 3.2: several Host fields (in any version) or an invalid one is 400.
fn host_field_rules_in_any_version(poller: &str) {
    let server = start(poller, &[]);
    let two = b"GET /demo/justnow/ HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n";
    refused(
        &server,
        "HTTP/1.0 with two Hosts",
        two,
        400,
        "more than one Host",
    );
    let bad = b"GET /demo/justnow/ HTTP/1.1\r\nHost: a b\r\n\r\n";
    refused(&server, "Host: a b", bad, 400, "invalid Host");
    assert_serves(&server);
}

/// RFC 9110 10.1.1 and 15.2: a server ignores `Expect: 100-continue` from
/// an HTTP/1.0 client and never sends it a 1xx: only the 200 comes back.
fn expect_100_continue_is_ignored_for_http_1_0(poller: &str) {
    let server = start(poller, &[]);
    let mut c = server.connect();
    let head = "POST /demo/justnow/ HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n";
    c.send(head.as_bytes());
    // Give the host the head alone, as a client awaiting 100 would.
    std::thread::sleep(Duration::from_millis(300));
    let r = c.request(b"abcde");
    assert_eq!((r.status, r.text()), (200, JUSTNOW_BODY), "{r:?}");
    c.assert_closed();
    assert_serves(&server);
}

//! Strict framing (RFC 9112): each malformed length, transfer coding, chunk,
//! version, field or method is refused with its status and the close;
//! request smuggling attempts get exactly one answer; the request-target
//! forms; Transfer-Encoding in HTTP/1.0; the Host field rules in any
//! version; and `Expect: 100-continue` from an HTTP/1.0 client.

use super::{accepted, justnow, refused, start};
use crate::common::{assert_serves, JUSTNOW_BODY};
use crate::harness::Backend;
use std::time::Duration;

matrix!(
    tls:
    framing_errors_are_refused_and_close,
    smuggling_attempts_get_one_answer,
    request_target_forms,
    http_1_0_transfer_encoding_closes,
    host_field_rules_in_any_version,
);

matrix!(tls: expect_100_continue_is_ignored_for_http_1_0);

fn framing_errors_are_refused_and_close(on: Backend) {
    let server = start(on, &[]);
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

fn smuggling_attempts_get_one_answer(on: Backend) {
    let server = start(on, &[]);
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

fn request_target_forms(on: Backend) {
    let server = start(on, &[]);
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

/// RFC 9112 6.1: an HTTP/1.0 message with Transfer-Encoding has faulty
/// framing: 400, the close, and the request that follows is not served.
fn http_1_0_transfer_encoding_closes(on: Backend) {
    let server = start(on, &[]);
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
fn host_field_rules_in_any_version(on: Backend) {
    let server = start(on, &[]);
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
fn expect_100_continue_is_ignored_for_http_1_0(on: Backend) {
    let server = start(on, &[]);
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

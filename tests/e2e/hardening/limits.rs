//! Every limit at a small flag value: exactly reached is served, one past
//! it answers its own status (414, 431, 413) naming the limit, with
//! `Connection: close` and the close; `Expect: 100-continue` over the body
//! limit gets its 413 at once; `--max-requests-per-conn` closes after the
//! last answer, pipelined too.

use super::{accepted, flags, justnow, refused, start};
use crate::client::get;
use crate::common::{assert_serves, JUSTNOW_BODY};
use crate::harness::Backend;

matrix!(tls: each_limit_has_its_status, requests_per_connection_limit);

const LIMITS: &str = "--max-request-line 100 --max-header-field 100 --max-headers 5 \
                      --max-head 400 --max-body 1000";

fn each_limit_has_its_status(on: Backend) {
    let server = start(on, &flags(LIMITS));
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

fn requests_per_connection_limit(on: Backend) {
    let server = start(on, &["--max-requests-per-conn", "3"]);
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

//! Requests the host refuses by itself, before any app sees them: each
//! limit and unsupported feature gets its own status, `Connection: close`
//! and the close, and the server keeps serving. Also the request-target
//! forms and framing leniencies RFC 9112 asks servers to accept.

use crate::client::{request, with_body};
use crate::harness::Server;

matrix!(refusals_have_their_own_status, accepted_request_forms);

fn refusals_have_their_own_status(poller: &str) {
    let server = Server::samples(poller);
    let long_target = format!(
        "GET /{} HTTP/1.1\r\nHost: localhost\r\n\r\n",
        "a".repeat(9000)
    );
    let many_headers = format!(
        "GET / HTTP/1.1\r\nHost: localhost\r\n{}\r\n",
        (0..120)
            .map(|i| format!("X-{i}: v\r\n"))
            .collect::<String>()
    );
    let long_header = format!(
        "GET / HTTP/1.1\r\nHost: localhost\r\nX-Long: {}\r\n\r\n",
        "v".repeat(9000)
    );
    let cases: Vec<(&str, Vec<u8>, u16)> = vec![
        ("request-target too long", long_target.into_bytes(), 414),
        ("too many header fields", many_headers.into_bytes(), 431),
        ("header field too long", long_header.into_bytes(), 431),
        (
            "body over max_body",
            request("POST", "/_environ", &["Content-Length: 99999999999"]),
            413,
        ),
        (
            "unknown expectation",
            request(
                "POST",
                "/_environ",
                &["Expect: teapot", "Content-Length: 0"],
            ),
            417,
        ),
        (
            "unknown transfer coding",
            with_body(
                "POST",
                "/_environ",
                &["Transfer-Encoding: gzip, chunked"],
                b"0\r\n\r\n",
            ),
            501,
        ),
        (
            "HTTP/2.0 request line",
            b"GET / HTTP/2.0\r\nHost: localhost\r\n\r\n".to_vec(),
            505,
        ),
    ];
    for (what, bytes, status) in cases {
        let mut c = server.connect();
        let r = c.request(&bytes);
        assert_eq!(r.status, status, "{what}: {r:?}");
        assert_eq!(r.header("Connection"), Some("close"), "{what}");
        assert!(r.header("Date").is_some(), "{what}");
        c.assert_closed();
    }
    assert_eq!(server.get("/hello/").text(), "Hello World!");
}

fn accepted_request_forms(poller: &str) {
    let server = Server::samples(poller);
    let mut c = server.connect();
    // Absolute-form (RFC 9112 §3.2.2): routed by its path.
    let r = c.request(b"GET http://localhost/hello/ HTTP/1.1\r\nHost: localhost\r\n\r\n");
    assert_eq!((r.status, r.text()), (200, "Hello World!"));
    // An empty line before the request line is ignored (§2.2).
    let r = c.request(b"\r\nGET /article HTTP/1.1\r\nHost: localhost\r\n\r\n");
    assert_eq!((r.status, r.body.len()), (200, 49));
    // Header names are case-insensitive, `Connection: Close` too.
    let r = c.request(b"GET /hello/ HTTP/1.1\r\nhost: localhost\r\nconnection: Close\r\n\r\n");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("Connection"), Some("close"));
    c.assert_closed();
    // HTTP/1.0 needs no Host header.
    let r = server.connect().request(b"GET /article HTTP/1.0\r\n\r\n");
    assert_eq!(r.status, 200);
    assert_eq!(server.get("/hello/").status, 200);
}

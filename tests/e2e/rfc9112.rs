//! RFC 9112 / 9110 corners found against a conformance corpus: the
//! absolute-form target's authority is the host (the Host field is ignored,
//! so host checks cannot be bypassed) and, with an empty path, its path is
//! `/` (a `/` in its query does not route it), later HTTP/1.x minors are served as
//! 1.1, whitespace before a chunk extension, Transfer-Encoding as one list
//! across its lines, 414 before 431 for a long target, a repeated
//! Content-Length, and each status's registered reason phrase; over plain
//! TCP and over TLS.

use crate::client::{request, with_body, Response};
use crate::harness::{Backend, Server};
use serde_json::{json, Value};

matrix!(
    tls:
    absolute_form_target_sets_the_host,
    absolute_form_without_a_path_is_routed_as_root,
    later_http_1_minor_is_served_as_1_1,
    whitespace_before_a_chunk_extension,
    transfer_encoding_lines_form_one_list,
    long_target_is_414_even_past_the_head_limit,
    repeated_content_length_is_400,
);

/// Sends raw bytes on a new connection and reads one response.
fn raw(server: &Server, bytes: &[u8]) -> Response {
    server.connect().request(bytes)
}

fn absolute_form_target_sets_the_host(on: Backend) {
    let server = Server::start(on, &["environ", "hello-project"], &[]);
    let r = raw(
        &server,
        b"GET http://a.example/_environ/ HTTP/1.1\r\nHost: b.example\r\n\r\n",
    );
    assert_eq!(r.status, 200, "{r:?}");
    let v: Value = serde_json::from_slice(&r.body).expect("environ JSON");
    let hosts: Vec<&Value> = v["headers"]
        .as_array()
        .expect("headers")
        .iter()
        .filter(|h| {
            h[0].as_str()
                .is_some_and(|n| n.eq_ignore_ascii_case("host"))
        })
        .collect();
    assert_eq!(hosts, [&json!(["Host", "a.example"])], "{v}");
    // The hello project's allowed-hosts check sees the target's host: an
    // outside host in the target is refused even with an allowed Host field.
    let r = raw(
        &server,
        b"GET http://evil.example/hello/ HTTP/1.1\r\nHost: localhost\r\n\r\n",
    );
    assert_eq!(r.status, 400, "{r:?}");
    let r = raw(
        &server,
        b"GET http://localhost/hello/ HTTP/1.1\r\nHost: evil.example\r\n\r\n",
    );
    assert_eq!((r.status, r.text()), (200, "Hello World!"), "{r:?}");
}

/// `http://host?/x`: the path is `/` and `/x` is the query; the query
/// never picks the app.
fn absolute_form_without_a_path_is_routed_as_root(on: Backend) {
    let server = Server::start(on, &["environ"], &["--mount", "environ=/"]);
    let r = raw(
        &server,
        b"GET http://a.example?/_environ/x HTTP/1.1\r\nHost: a.example\r\n\r\n",
    );
    assert_eq!(r.status, 200, "{r:?}");
    let v: Value = serde_json::from_slice(&r.body).expect("environ JSON");
    let seen = (&v["script_name"], &v["path_info"], &v["query_string"]);
    assert_eq!(
        seen,
        (&json!(""), &json!("/"), &json!("/_environ/x")),
        "{v}"
    );
    let r = raw(
        &server,
        b"GET http://a.example/p?/q HTTP/1.1\r\nHost: a.example\r\n\r\n",
    );
    let v: Value = serde_json::from_slice(&r.body).expect("environ JSON");
    let seen = (&v["path_info"], &v["query_string"]);
    assert_eq!(seen, (&json!("/p"), &json!("/q")), "{v}");
}

fn later_http_1_minor_is_served_as_1_1(on: Backend) {
    let server = Server::samples(on);
    let mut c = server.connect();
    for _ in 0..2 {
        let r = c.request(b"GET /hello/ HTTP/1.2\r\nHost: localhost\r\n\r\n");
        assert_eq!((r.status, r.text()), (200, "Hello World!"), "{r:?}");
        // Kept alive as 1.1 is.
        assert_eq!(r.header("Connection"), None);
    }
    let r = raw(&server, b"GET /hello/ HTTP/2.0\r\nHost: localhost\r\n\r\n");
    assert_eq!(r.status, 505);
}

fn whitespace_before_a_chunk_extension(on: Backend) {
    let server = Server::start(on, &["environ"], &[]);
    let r = raw(
        &server,
        &with_body(
            "POST",
            "/_environ/",
            &["Transfer-Encoding: chunked"],
            b"5\t;a=b\r\nhello\r\n6 ;c\r\n world\r\n0\r\n\r\n",
        ),
    );
    assert_eq!(r.status, 200, "{r:?}");
    let v: Value = serde_json::from_slice(&r.body).expect("environ JSON");
    assert_eq!(v["body"], "hello world", "{v}");
}

fn transfer_encoding_lines_form_one_list(on: Backend) {
    let server = Server::start(on, &["environ"], &[]);
    let post = |lines: &[&str]| {
        raw(
            &server,
            &with_body("POST", "/_environ/", lines, b"5\r\nhello\r\n0\r\n\r\n"),
        )
    };
    let r = post(&["Transfer-Encoding: gzip", "Transfer-Encoding: chunked"]);
    assert_eq!(r.status, 501, "{r:?}");
    assert!(
        r.text().contains("transfer coding not implemented"),
        "{r:?}"
    );
    let r = post(&["Transfer-Encoding: gzip, chunked"]);
    assert_eq!(r.status, 501, "{r:?}");
    let r = post(&["Transfer-Encoding: chunked", "Transfer-Encoding: chunked"]);
    assert_eq!(r.status, 400, "{r:?}");
    assert!(r.text().contains("chunked applied more than once"), "{r:?}");
    let r = post(&["Transfer-Encoding: chunked", "Transfer-Encoding: gzip"]);
    assert_eq!(r.status, 400, "{r:?}");
    assert!(r.text().contains("does not end in chunked"), "{r:?}");
}

fn long_target_is_414_even_past_the_head_limit(on: Backend) {
    let server = Server::samples(on);
    let target = format!("/{}", "a".repeat(100 * 1024));
    let r = raw(&server, &request("GET", &target, &[]));
    assert_eq!(r.status, 414, "{}", r.text());
    assert!(r.text().contains("max_request_line"), "{}", r.text());
}

fn repeated_content_length_is_400(on: Backend) {
    let server = Server::start(on, &["environ"], &[]);
    for lines in [
        &["Content-Length: 5", "Content-Length: 5"][..],
        &["Content-Length: 5, 5"][..],
    ] {
        let r = raw(&server, &with_body("POST", "/_environ/", lines, b"hello"));
        assert_eq!(r.status, 400, "{lines:?}: {r:?}");
        assert!(r.text().contains("Content-Length"), "{lines:?}: {r:?}");
    }
}

/// An app's status goes out with its registered reason phrase (RFC 9110
/// §15, the IANA registry), not `Unknown`; an unregistered code gets its
/// class's name. Backend-free: one backend, over TCP and over TLS.
#[test]
fn statuses_carry_their_registered_reason_phrases() {
    reason_phrases(Backend::plain("epoll"));
}

#[test]
fn statuses_carry_their_registered_reason_phrases_over_tls() {
    reason_phrases(Backend::tls("epoll"));
}

fn reason_phrases(on: Backend) {
    let server = Server::start(on, &["misbehave"], &[]);
    for (code, phrase) in [
        (200u16, "OK"),
        (410, "Gone"),
        (418, "I'm a teapot"),
        (426, "Upgrade Required"),
        (451, "Unavailable For Legal Reasons"),
        (511, "Network Authentication Required"),
        (299, "Successful"),
        (399, "Redirection"),
        (499, "Client Error"),
        (599, "Server Error"),
    ] {
        let r = server.get(&format!("/_test/status?{code}"));
        assert_eq!((r.status, r.reason.as_str()), (code, phrase), "{r:?}");
    }
}

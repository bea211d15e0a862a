//! The environ sample app at `/_environ`: the JSON dump shows the request
//! exactly as the app received it, so it checks what the host hands over
//! (method, SCRIPT_NAME / PATH_INFO split, raw query, headers in order with
//! byte values, de-chunked body).

use crate::harness::Server;
use serde_json::{json, Value};

matrix!(
    dump_of_odd_headers_and_a_chunked_body,
    dump_of_a_plain_get,
    dump_of_an_http_1_0_content_length_post,
);

fn dump(server: &Server, bytes: &[u8]) -> Value {
    let r = server.connect().request(bytes);
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.header("Content-Type"), Some("application/json"));
    serde_json::from_slice(&r.body).expect("the dump is JSON")
}

fn dump_of_odd_headers_and_a_chunked_body(poller: &str) {
    let server = Server::samples(poller);
    let mut bytes = b"POST /_environ/some/path;p=1?x=1&y=%20z&x=2 HTTP/1.1\r\n\
Host: localhost\r\n\
X-Repeat: one\r\n\
X-Empty:\r\n\
X-Latin: caf"
        .to_vec();
    bytes.push(0xE9);
    bytes.extend_from_slice(
        b"\r\n\
X-Repeat: two\r\n\
Transfer-Encoding: chunked\r\n\
\r\n\
5\r\nhello\r\n\
8;ext=1\r\n, chunky\r\n\
1\r\n!\r\n\
0\r\n\
\r\n",
    );
    let v = dump(&server, &bytes);
    assert_eq!(v["method"], "POST");
    assert_eq!(v["version"], "HTTP/1.1");
    assert_eq!(v["scheme"], "http");
    assert_eq!(v["server_port"], server.port);
    assert_eq!(v["script_name"], "/_environ");
    assert_eq!(v["path_info"], "/some/path;p=1");
    assert_eq!(v["query_string"], "x=1&y=%20z&x=2");
    let peer = v["remote_addr"].as_str().unwrap_or_default();
    assert!(peer.starts_with("127.0.0.1:"), "{peer}");
    assert_eq!(
        v["headers"],
        json!([
            ["Host", "localhost"],
            ["X-Repeat", "one"],
            ["X-Empty", ""],
            ["X-Latin", "caf\u{fffd}"],
            ["X-Repeat", "two"],
            ["Transfer-Encoding", "chunked"],
        ])
    );
    assert_eq!(v["body_length"], 14);
    assert_eq!(v["body"], "hello, chunky!");
}

fn dump_of_a_plain_get(poller: &str) {
    let server = Server::samples(poller);
    let v = dump(
        &server,
        b"GET /_environ HTTP/1.1\r\nHost: localhost\r\nAccept: */*\r\n\r\n",
    );
    assert_eq!(v["method"], "GET");
    assert_eq!(v["script_name"], "/_environ");
    assert_eq!(v["path_info"], "");
    assert_eq!(v["query_string"], "");
    assert_eq!(
        v["headers"],
        json!([["Host", "localhost"], ["Accept", "*/*"]])
    );
    assert_eq!(v["body_length"], 0);
    assert_eq!(v["body"], "");
    let v = dump(
        &server,
        b"GET /_environ/?q HTTP/1.1\r\nHost: localhost\r\n\r\n",
    );
    assert_eq!(
        (v["path_info"].as_str(), v["query_string"].as_str()),
        (Some("/"), Some("q"))
    );
}

fn dump_of_an_http_1_0_content_length_post(poller: &str) {
    let server = Server::samples(poller);
    let mut c = server.connect();
    c.send(b"PUT /_environ/x HTTP/1.0\r\nContent-Length: 11\r\n\r\nhello world");
    let r = c.read_response();
    assert_eq!(r.status, 200);
    let v: Value = serde_json::from_slice(&r.body).expect("the dump is JSON");
    assert_eq!(v["method"], "PUT");
    assert_eq!(v["version"], "HTTP/1.0");
    assert_eq!(v["path_info"], "/x");
    assert_eq!(v["headers"], json!([["Content-Length", "11"]]));
    assert_eq!(v["body_length"], 11);
    assert_eq!(v["body"], "hello world");
    c.assert_closed();
}

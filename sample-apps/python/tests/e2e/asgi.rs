//! ASGI applications answering through the bridge: FastAPI's plain
//! answers, path-parameter and body validation (422), the http scope as
//! the application sees it (root_path, the whole path, raw_path,
//! query_string, headers, client, server, scheme from a trusted proxy,
//! lifespan state), and, with no framework in between, the receive()
//! messages, `http.disconnect` after the response, and
//! `http.response.pathsend`.

use crate::asgi_host::{fastapi, pure, wait_seen};
use crate::bridge::{json, test_apps};
use crate::client::{get, request, with_body};
use serde_json::json;

fn fastapi_answers_its_routes(poller: &str) {
    let bridge = fastapi(poller, "/api", &[]);
    // One keep-alive connection for every request.
    let mut c = bridge.server.connect();
    let r = c.request(&get("/api/hello"));
    assert_eq!((r.status, r.text()), (200, "Hello World!"), "{r:?}");
    assert_eq!(r.header("Content-Type"), Some("text/plain; charset=utf-8"));

    let r = c.request(&get("/api/article"));
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(
        r.body,
        br#"{"Name":"A Royal Baby","Body":"A slow news week"}"#.to_vec(),
        "{r:?}"
    );
    assert_eq!(r.header("Content-Type"), Some("application/json"));

    let r = c.request(&get("/api/items/42"));
    assert_eq!((r.status, json(&r.body)), (200, json!({"item_id": 42})));
    let r = c.request(&get("/api/items/forty-two"));
    assert_eq!(r.status, 422, "{r:?}");
    assert_eq!(
        json(&r.body)["detail"][0]["loc"],
        json!(["path", "item_id"])
    );

    let post = |body: &[u8]| {
        with_body(
            "POST",
            "/api/articles",
            &[
                "Content-Type: application/json",
                &format!("Content-Length: {}", body.len()),
            ],
            body,
        )
    };
    let r = c.request(&post(br#"{"Name":"Launch","Body":"It flew"}"#));
    assert_eq!(r.status, 201, "{r:?}");
    assert_eq!(
        json(&r.body),
        json!({"id": 1, "Name": "Launch", "Body": "It flew"})
    );
    // A field missing, then a body that is not JSON: 422, and the
    // connection goes on.
    let r = c.request(&post(br#"{"Name":"no body"}"#));
    assert_eq!(r.status, 422, "{r:?}");
    assert_eq!(json(&r.body)["detail"][0]["loc"], json!(["body", "Body"]));
    let r = c.request(&post(b"{not json"));
    assert_eq!(r.status, 422, "{r:?}");
    let r = c.request(&get("/api/nothing-here"));
    assert_eq!(r.status, 404, "{r:?}");
    assert_eq!(c.request(&get("/api/hello")).text(), "Hello World!");
}

fn the_scope_says_what_the_request_was(poller: &str) {
    let bridge = fastapi(poller, "/api", &[]);
    let server = &bridge.server;
    let mut c = server.connect();
    let r = c.request(&request(
        "GET",
        "/api/scope/caf%C3%A9%20x?q=a%20b&r=1",
        &["Accept-Language: fr", "X-Multi: 1", "X-Multi: 2"],
    ));
    assert_eq!(r.status, 200, "{r:?}");
    let s = json(&r.body);
    assert_eq!(s["type"], "http");
    assert_eq!(s["asgi"], json!({"version": "3.0", "spec_version": "2.4"}));
    assert_eq!(s["http_version"], "1.1");
    assert_eq!(s["method"], "GET");
    assert_eq!(s["scheme"], "http");
    // The mount is the root_path; the path is the whole path, decoded.
    assert_eq!(s["root_path"], "/api");
    assert_eq!(s["path"], "/api/scope/café x");
    assert_eq!(
        s["rest"], "café x",
        "the route saw the path under the mount"
    );
    assert_eq!(s["raw_path"], "/api/scope/caf%C3%A9%20x");
    assert_eq!(s["query_string"], "q=a%20b&r=1");
    let headers = s["headers"].as_array().cloned().unwrap_or_default();
    for want in [
        json!(["host", "localhost"]),
        json!(["accept-language", "fr"]),
        json!(["x-multi", "1"]),
        json!(["x-multi", "2"]),
    ] {
        assert!(headers.contains(&want), "no {want} in {headers:?}");
    }
    assert_eq!(s["client"][0], "127.0.0.1");
    assert!(s["client"][1].as_u64().is_some_and(|p| p > 0), "{s}");
    assert_eq!(s["server"], json!(["127.0.0.1", server.port]));
    assert_eq!(s["state"], json!(["greeting", "started"]));
    assert!(
        s["extensions"]
            .as_array()
            .is_some_and(|e| e.contains(&json!("http.response.pathsend"))),
        "{s}"
    );

    // The mount's own path, and HTTP/1.0.
    c.send(b"GET /api/scope HTTP/1.0\r\nHost: localhost\r\n\r\n");
    let r = c.read_response();
    assert_eq!(r.status, 200, "{r:?}");
    let s = json(&r.body);
    assert_eq!(s["http_version"], "1.0");
    assert_eq!(
        (s["path"].as_str(), s["raw_path"].as_str()),
        (Some("/api/scope"), Some("/api/scope"))
    );
    assert_eq!(s["query_string"], "");
}

fn scheme_is_https_only_from_a_trusted_proxy(poller: &str) {
    let forwarded = ["X-Forwarded-Proto: https"];
    let bridge = fastapi(poller, "/api", &[]);
    let r = bridge
        .server
        .connect()
        .request(&request("GET", "/api/scope", &forwarded));
    assert_eq!(json(&r.body)["scheme"], "http", "{r:?}");
    drop(bridge);
    let bridge = fastapi(poller, "/api", &["--trusted-proxy", "127.0.0.1/32"]);
    let r = bridge
        .server
        .connect()
        .request(&request("GET", "/api/scope", &forwarded));
    assert_eq!(json(&r.body)["scheme"], "https", "{r:?}");
}

fn lifespan_state_reaches_the_routes(poller: &str) {
    let bridge = fastapi(poller, "/api", &[]);
    // Startup ran before the app served.
    assert!(
        bridge.server.log_contains("fastapp lifespan startup"),
        "{}",
        bridge.server.log()
    );
    let r = bridge.server.get("/api/state");
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(
        json(&r.body),
        json!({"started": "yes", "greeting": "hello from the lifespan"})
    );
    // Each request has a copy of the state: what one adds, the next
    // does not see.
    let r = bridge.server.get("/api/state?scribble=x");
    assert_eq!(json(&r.body)["started"], "yes", "{r:?}");
    let s = json(&bridge.server.get("/api/scope").body);
    assert_eq!(s["state"], json!(["greeting", "started"]));
}

/// The messages themselves, with no framework: a small body in one
/// `http.request`, a large one in pieces adding up to it, the last
/// without `more_body`; after a whole response receive() says
/// `http.disconnect`; pathsend sends the file.
fn the_receive_messages_and_pathsend(poller: &str) {
    let bridge = pure(poller, "application", "/pure");
    let mut c = bridge.server.connect();
    let r = c.request(&get("/pure/hello"));
    assert_eq!((r.status, r.text()), (200, "pure hello"), "{r:?}");

    let r = c.request(&with_body(
        "POST",
        "/pure/receive",
        &["Content-Length: 3"],
        b"abc",
    ));
    assert_eq!(
        json(&r.body),
        json!([{"type": "http.request", "body": 3, "more_body": false}])
    );
    let big = vec![b'z'; 1 << 20];
    let r = c.request(&with_body(
        "POST",
        "/pure/receive",
        &[&format!("Content-Length: {}", big.len())],
        &big,
    ));
    let messages = json(&r.body);
    let list = messages.as_array().cloned().unwrap_or_default();
    let total: u64 = list.iter().filter_map(|m| m["body"].as_u64()).sum();
    assert_eq!(total, 1 << 20, "{messages}");
    assert!(
        list.iter().all(|m| m["type"] == "http.request"),
        "{messages}"
    );
    let last = list.last().map(|m| m["more_body"].clone());
    assert_eq!(last, Some(json!(false)), "{messages}");

    let r = c.request(&get("/pure/after-response"));
    assert_eq!(r.text(), "answered");
    assert!(
        wait_seen(&bridge, "/pure/seen", "after-response http.disconnect"),
        "{}",
        bridge.server.log()
    );

    let r = c.request(&get("/pure/pathsend"));
    assert_eq!(r.status, 200, "{r:?}");
    let file = std::fs::read(test_apps().join("pureasgi.py")).expect("read pureasgi.py");
    assert_eq!(r.body, file, "the file, whole");
}

matrix!(
    fastapi_answers_its_routes,
    the_scope_says_what_the_request_was,
    scheme_is_https_only_from_a_trusted_proxy,
    lifespan_state_reaches_the_routes,
    the_receive_messages_and_pathsend
);

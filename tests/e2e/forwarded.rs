//! The client behind the deploy nginx (`deploy/nginx.conf` in front of a
//! Stoa started with `--trusted-proxy 127.0.0.1/32`): what apps
//! (`remote_addr`), the access log and the status allow-list see for the
//! `X-Forwarded-For` a client sends. An entry that is not an address never
//! makes the client the proxy: where the walk from the right reaches it,
//! the client is `unknown` (refused by the allow-list); `ip:port` and
//! `[v6]:port` are addresses. Backend-free, so on one backend; nginx
//! missing fails the test naming it.

use crate::balancers::start_nginx;
use crate::client::{request, Client, Response};
use crate::common::STATUS;
use crate::harness::Server;
use serde_json::Value;

/// `GET path` through nginx on `port`, with this `X-Forwarded-For` if any.
fn via(port: u16, path: &str, xff: Option<&str>) -> Response {
    let line = xff.map(|v| format!("X-Forwarded-For: {v}"));
    let headers: Vec<&str> = line.iter().map(String::as_str).collect();
    Client::connect(port).request(&request("GET", path, &headers))
}

/// The `remote_addr` the environ app sees through nginx.
fn remote_addr(port: u16, xff: Option<&str>) -> String {
    let r = via(port, "/_environ/", xff);
    assert_eq!(r.status, 200, "{xff:?}: {r:?}");
    let v: Value = serde_json::from_slice(&r.body).expect("environ JSON");
    v["remote_addr"].as_str().unwrap_or_default().to_string()
}

#[test]
fn an_unreadable_forwarded_for_entry_never_makes_the_client_the_proxy() {
    let server = Server::launch("epoll")
        .apps(&["environ"])
        .args(&["--trusted-proxy", "127.0.0.1/32"])
        .access_log()
        .start();
    let (_nginx, dir, port) = start_nginx(&[server.port]);
    let nginx_log =
        || std::fs::read_to_string(dir.path().join("logs/error.log")).unwrap_or_default();

    // Status: nginx opens /.well-known/stoa/ to 127.0.0.1 (us) and passes
    // the client's X-Forwarded-For on as sent. Without one, the client is
    // nginx's peer, us, on loopback: allowed.
    assert_eq!(via(port, STATUS, None).status, 200, "{}", nginx_log());
    for xff in [
        "203.0.113.5",
        // An unreadable entry left of the client is not reached.
        "x, 203.0.113.5",
        // Reached: an unknown client, whom no allow-list admits.
        "203.0.113.5, x",
        "unknown",
        "127.0.0.1, 999.0.0.1",
        "[2001:db8::1]:443",
    ] {
        let r = via(port, STATUS, Some(xff));
        assert_eq!(r.status, 403, "X-Forwarded-For: {xff}: {r:?}");
    }

    // Apps: nginx's location / appends our address (127.0.0.1, trusted).
    let cases = [
        (None, "127.0.0.1:0"),
        (Some("x, 203.0.113.5"), "203.0.113.5:0"),
        (Some("198.51.100.7, x"), "unknown"),
        (Some("203.0.113.5, 127.0.0.1, bogus"), "unknown"),
        (Some("203.0.113.5:4711"), "203.0.113.5:4711"),
        (Some("[2001:db8::1]:443"), "[2001:db8::1]:443"),
        (Some("203.0.113.5, 127.0.0.1:8080"), "203.0.113.5:0"),
    ];
    for (xff, seen) in cases {
        assert_eq!(remote_addr(port, xff), seen, "X-Forwarded-For: {xff:?}");
    }

    // The access log: each request's client, without its port (the status
    // requests first, then the environ ones).
    let lines = server.access_lines(7 + cases.len());
    let clients: Vec<&str> = lines
        .iter()
        .filter(|l| l.contains("/_environ/"))
        .map(|l| l.split(' ').next().unwrap_or_default())
        .collect();
    assert_eq!(
        clients,
        [
            "127.0.0.1",
            "203.0.113.5",
            "unknown",
            "unknown",
            "203.0.113.5",
            "[2001:db8::1]",
            "203.0.113.5"
        ],
        "{lines:#?}"
    );
}

//! Security: status and metrics obey `--status-allow` for the client a
//! trusted proxy speaks for (not for the proxy), the access log records that
//! client, and an app cannot send an interim (1xx) or invalid status as its
//! answer: that would let a client read the next pipelined response as this
//! one's. Over plain TCP and over TLS.

use crate::client::{get, request};
use crate::common::{METRICS, STATUS};
use crate::harness::{Backend, Server};
use serde_json::Value;

matrix!(
    tls:
    status_allow_applies_to_the_forwarded_client,
    access_log_records_the_forwarded_client,
    app_statuses_outside_200_599_become_500,
);

fn status_with(server: &Server, path: &str, headers: &[&str]) -> u16 {
    server
        .connect()
        .request(&request("GET", path, headers))
        .status
}

fn status_allow_applies_to_the_forwarded_client(on: Backend) {
    let server = Server::start(
        on,
        &["article"],
        &[
            "--trusted-proxy",
            "127.0.0.1/32",
            "--status-allow",
            "127.0.0.0/8",
            "--status-allow",
            "10.1.2.0/24",
        ],
    );
    for path in [STATUS, METRICS] {
        // The proxy (127.0.0.1) forwards an outside client: refused.
        let outside = status_with(&server, path, &["X-Forwarded-For: 8.8.8.8"]);
        assert_eq!(outside, 403, "{path} for a forwarded 8.8.8.8");
        // A forwarded client inside the allow-list: served.
        let inside = status_with(&server, path, &["X-Forwarded-For: 10.1.2.3"]);
        assert_eq!(inside, 200, "{path} for a forwarded 10.1.2.3");
        // A direct loopback request (no X-Forwarded-For): the peer itself.
        assert_eq!(status_with(&server, path, &[]), 200, "{path} direct");
    }
    // Apps are unaffected: the forwarded outside client is served.
    assert_eq!(
        status_with(&server, "/article", &["X-Forwarded-For: 8.8.8.8"]),
        200
    );
}

fn access_log_records_the_forwarded_client(on: Backend) {
    let server = Server::launch(on)
        .apps(&["article"])
        .args(&["--trusted-proxy", "127.0.0.1/32"])
        .access_log()
        .start();
    let r = status_with(&server, "/article", &["X-Forwarded-For: 203.0.113.9"]);
    assert_eq!(r, 200);
    assert_eq!(status_with(&server, "/article", &[]), 200);
    let lines = server.access_lines(2);
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(lines[0].starts_with("203.0.113.9 - - ["), "{}", lines[0]);
    assert!(lines[1].starts_with("127.0.0.1 - - ["), "{}", lines[1]);
}

fn app_statuses_outside_200_599_become_500(on: Backend) {
    let server = Server::start(on, &["misbehave"], &[]);
    let mut client = server.connect();
    for code in [100u16, 101, 103, 0, 199, 600, 700, 999, 1000] {
        // The odd answer and a second request in one write: each response
        // must answer its own request.
        let mut both = get(&format!("/_test/status?{code}"));
        both.extend_from_slice(&get("/_test/ok"));
        client.send(&both);
        let first = client.read_response();
        assert_eq!(first.status, 500, "app status {code}: {first:?}");
        let second = client.read_response();
        assert_eq!(
            (second.status, second.text()),
            (200, "ok"),
            "after app status {code}"
        );
        assert!(
            server.wait_log(&[
                "app misbehave answered status",
                &format!("status {code},"),
                "sending 500"
            ]),
            "no log line for status {code}"
        );
    }
    // Valid statuses at both ends pass through.
    for code in [200u16, 599] {
        let r = server.get(&format!("/_test/status?{code}"));
        assert_eq!(r.status, code);
    }
    // The counters record the 500s sent, not the app's raw statuses.
    let r = server.connect().request(&get(STATUS));
    let v: Value = serde_json::from_slice(&r.body).expect("status JSON");
    let counts = &v["requests"]["misbehave"];
    assert_eq!(counts["1xx"], 0, "{counts}");
    assert_eq!(counts["5xx"], 10, "9 invalid + the valid 599: {counts}");
    assert_eq!(counts["2xx"], 10, "9 /ok + the valid 200: {counts}");
}

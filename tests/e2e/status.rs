//! The host's own endpoints: status and metrics count what was sent (per
//! app, per class, per worker), status and metrics obey `--status-allow`
//! while health and ready answer anyone (ready is 503 with no app), and
//! `--trusted-proxy` decides whether X-Forwarded-For and X-Forwarded-Proto
//! are believed.

use crate::client::{get, request};
use crate::common::{metrics, status, STATUS};
use crate::harness::Server;
use serde_json::{json, Value};

matrix!(
    status_and_metrics_count_the_requests,
    status_allow_health_and_ready,
    trusted_proxy_decides_client_and_scheme,
);

fn status_and_metrics_count_the_requests(poller: &str) {
    let server = Server::start(poller, &["article"], &["--workers", "2"]);
    let mut c = server.connect();
    for _ in 0..7 {
        assert_eq!(c.request(&get("/article")).status, 200);
    }
    for path in ["/article/no-such-article", "/not-mounted", "/nothing"] {
        assert_eq!(c.request(&get(path)).status, 404, "{path}");
    }
    let s = status(server.port);
    assert_eq!(
        (&s["poller"], &s["draining"]),
        (&json!(poller), &json!(false))
    );
    let a = &s["requests"]["article"];
    assert_eq!(
        (&a["requests"], &a["2xx"], &a["4xx"], &a["5xx"]),
        (&json!(8), &json!(7), &json!(1), &json!(0))
    );
    assert!(a["mean_latency_ms"].as_f64() >= Some(0.0), "{s}");
    assert_eq!(s["requests"]["(host)"]["4xx"], 2, "{s}");
    assert!(s["connections"]["open"].as_u64() >= Some(1), "{s}");
    let app = &s["apps"][0];
    assert_eq!(
        (&app["name"], &app["mount"]),
        (&json!("article"), &json!("/article"))
    );
    assert!(
        app["file"]
            .as_str()
            .is_some_and(|f| f.ends_with("libarticle.so")),
        "{s}"
    );
    assert_eq!(
        (s["apps"].as_array().map(Vec::len), &s["refused"]),
        (Some(1), &json!([]))
    );

    let m = metrics(server.port);
    let get = |series: &str| {
        *m.get(series)
            .unwrap_or_else(|| panic!("no {series} in {m:?}"))
    };
    let requests = |app: &str, class: &str| {
        get(&format!(
            "stoa_requests_total{{app=\"{app}\",class=\"{class}\"}}"
        ))
    };
    assert_eq!(requests("article", "2xx"), 7.0);
    assert_eq!(requests("article", "4xx"), 1.0);
    assert_eq!(requests("article", "5xx"), 0.0);
    assert_eq!(requests("(host)", "4xx"), 2.0);
    assert_eq!(requests("(host)", "2xx"), 1.0, "the status request before");
    let duration = |suffix: &str| get(&format!("stoa_request_duration_seconds_{suffix}"));
    assert_eq!(duration("count{app=\"article\"}"), 8.0);
    assert_eq!(duration("bucket{app=\"article\",le=\"+Inf\"}"), 8.0);
    assert!(duration("sum{app=\"article\"}") >= 0.0);
    assert_eq!(get("stoa_apps_loaded"), 1.0);
    assert_eq!(get("stoa_plugins_refused"), 0.0);
    assert_eq!(get("stoa_blocking_queue_depth"), 0.0);
    assert_eq!(get("stoa_draining"), 0.0);
    assert_eq!(
        get(&format!(
            "stoa_info{{poller=\"{poller}\",workers=\"2\",worker_mode=\"thread\"}}"
        )),
        1.0
    );
    let open: f64 = (0..2)
        .map(|w| get(&format!("stoa_connections_open{{worker=\"{w}\"}}")))
        .sum();
    assert!(
        open >= 2.0,
        "our keep-alive connection and this one: {open}"
    );
}

fn status_allow_health_and_ready(poller: &str) {
    let server = Server::start(poller, &["article"], &["--status-allow", "10.0.0.0/8"]);
    for path in [STATUS, "/.well-known/stoa/metrics"] {
        assert_eq!(server.get(path).status, 403, "{path} from 127.0.0.1");
    }
    let r = server.get("/.well-known/stoa/health");
    assert_eq!((r.status, r.text()), (200, "ok\n"));
    assert_eq!(server.get("/.well-known/stoa/ready").status, 200);
    assert_eq!(server.get("/.well-known/stoa/nope").status, 404);
    let open = Server::start(poller, &["article"], &["--status-allow", "127.0.0.1/32"]);
    assert_eq!(open.get(STATUS).status, 200);

    let empty = Server::start(poller, &[], &[]);
    assert_eq!(empty.get("/.well-known/stoa/ready").status, 503);
    assert_eq!(empty.get("/.well-known/stoa/health").status, 200);
    assert_eq!(status(empty.port)["apps"], json!([]));
}

/// The environ dump of `/_environ/` with these extra headers, and our local port.
fn environ(server: &Server, headers: &[&str]) -> (Value, u16) {
    let mut c = server.connect();
    let local = c.stream().local_addr().expect("local address").port();
    let r = c.request(&request("GET", "/_environ/", headers));
    assert_eq!(r.status, 200, "{r:?}");
    (serde_json::from_slice(&r.body).expect("JSON"), local)
}

fn trusted_proxy_decides_client_and_scheme(poller: &str) {
    let forwarded = ["X-Forwarded-For: 203.0.113.9", "X-Forwarded-Proto: https"];
    let trusting = Server::start(poller, &["environ"], &["--trusted-proxy", "127.0.0.1/32"]);
    let (v, _) = environ(&trusting, &forwarded);
    let addr = v["remote_addr"].as_str().unwrap_or_default();
    assert!(addr.starts_with("203.0.113.9:"), "{v}");
    assert_eq!(v["scheme"], "https");
    // Walked right to left past trusted hops.
    let (v, _) = environ(&trusting, &["X-Forwarded-For: 198.51.100.7, 127.0.0.1"]);
    assert_eq!(
        (&v["remote_addr"], &v["scheme"]),
        (&json!("198.51.100.7:0"), &json!("http"))
    );

    let plain = Server::start(poller, &["environ"], &[]);
    let other = Server::start(poller, &["environ"], &["--trusted-proxy", "10.0.0.0/8"]);
    for server in [&plain, &other] {
        let (v, local) = environ(server, &forwarded);
        assert_eq!(v["remote_addr"], format!("127.0.0.1:{local}"), "{v}");
        assert_eq!(v["scheme"], "http");
        for h in forwarded {
            let (name, value) = h.split_once(": ").expect("a header line");
            let seen = v["headers"]
                .as_array()
                .expect("headers")
                .contains(&json!([name, value]));
            assert!(seen, "{h} not passed on: {v}");
        }
    }
}

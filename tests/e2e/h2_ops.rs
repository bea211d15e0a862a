//! HTTP/2 as an operator sees it, on every backend: status and metrics
//! count its connections, streams, refusals and the RST_STREAM and GOAWAY
//! frames each way by error code; the answers held for a client that
//! never opens its windows count in `--max-buffered`, and once it is full a
//! new stream is answered 503 naming it (no app works for it) while
//! HTTP/1.1 is served, and a closed connection gives its bytes back. And
//! each stream is a request of its own: reset by the client (its app's
//! `on_gone` runs), timed out (504), and logged, while the others go on.

use crate::common::{metrics, status};
use crate::h2::frames;
use crate::h2_client::Steered;
use crate::harness::{wait_until, Backend, Server, WAIT};
use serde_json::Value;

matrix!(
    status_and_metrics_count_connections_streams_goaways_and_resets,
    answers_held_for_closed_windows_count_in_max_buffered,
    each_stream_is_reset_timed_out_and_logged_alone,
);

/// The `http2` section of the status document.
fn http2(server: &Server) -> Value {
    status(server)["http2"].clone()
}

/// The count of `code` in `counts` (a map by code name).
fn count(counts: &Value, code: &str) -> u64 {
    counts[code].as_u64().unwrap_or(0)
}

fn status_and_metrics_count_connections_streams_goaways_and_resets(poller: &str) {
    let server = Server::samples(poller);
    // Rapid Reset (CANCELs received, GOAWAY ENHANCE_YOUR_CALM sent), one
    // stream past the limit (REFUSED_STREAM sent), and a client's GOAWAY.
    let cases = [
        "attack/rapid-reset",
        "attack/too-many-streams",
        "generic/3.8/1",
    ];
    let (ok, text) = frames(&server, Backend::plain(poller), &cases);
    assert!(ok, "{text}\n{}", server.log());
    // Each case had a connection of its own; all three have ended.
    let settled = wait_until(WAIT, || {
        let h = http2(&server);
        h["connections"].as_u64() >= Some(3) && h["connections_open"].as_u64() == Some(0)
    });
    let h = http2(&server);
    assert!(settled, "{h:#}");
    assert!(h["streams"].as_u64() > Some(100), "{h:#}");
    assert!(h["streams_refused"].as_u64() >= Some(1), "{h:#}");
    assert!(count(&h["resets_received"], "CANCEL") >= 1, "{h:#}");
    assert!(count(&h["resets_sent"], "REFUSED_STREAM") >= 1, "{h:#}");
    assert!(count(&h["goaways_sent"], "ENHANCE_YOUR_CALM") >= 1, "{h:#}");
    assert!(count(&h["goaways_received"], "NO_ERROR") >= 1, "{h:#}");
    // An HTTP/1.1 connection is none of them.
    assert_eq!(server.get("/article").status, 200);
    let m = metrics(&server);
    let series = |s: &str| m.get(s).copied().unwrap_or(-1.0);
    assert_eq!(series("stoa_h2_connections_open"), 0.0, "{m:?}");
    assert!(series("stoa_h2_connections_total") >= 3.0, "{m:?}");
    assert!(series("stoa_h2_streams_refused_total") >= 1.0, "{m:?}");
    let calm = r#"stoa_h2_goaways_total{direction="sent",code="ENHANCE_YOUR_CALM"}"#;
    assert!(series(calm) >= 1.0, "{m:?}");
    let cancel = r#"stoa_h2_resets_total{direction="received",code="CANCEL"}"#;
    assert!(series(cancel) >= 1.0, "{m:?}");
    // Every code is a series, counted or not.
    let quiet = r#"stoa_h2_resets_total{direction="sent",code="HTTP_1_1_REQUIRED"}"#;
    assert_eq!(series(quiet), 0.0, "{m:?}");
}

/// The `buffered` section of the status document.
fn buffered(server: &Server) -> Value {
    status(server)["buffered"].clone()
}

fn answers_held_for_closed_windows_count_in_max_buffered(poller: &str) {
    let args = [
        "--max-buffered",
        "1M",
        "--max-body",
        "64K",
        "--ws-max-message",
        "64K",
    ];
    let server = Server::start(poller, &["misbehave", "article"], &args);
    // A whole answer of 4 MiB on a stream whose window stays shut.
    let mut client = Steered::start(&server, &["--window", "0"]);
    client.say("get /_test/big");
    assert!(
        client.saw("status 1 200"),
        "{}\n{}",
        client.text(),
        server.log()
    );
    // What waits for the window counts, past the limit (it is there).
    let full = wait_until(WAIT, || {
        buffered(&server)["bytes"].as_u64() >= Some(4 << 20)
    });
    assert!(full, "{:#}\n{}", buffered(&server), server.log());
    // A new stream now: 503 at once, naming the limit in the log.
    client.say("get /_test/big");
    assert!(
        client.saw("status 3 503"),
        "{}\n{}",
        client.text(),
        server.log()
    );
    assert!(buffered(&server)["streams_refused"].as_u64() >= Some(1));
    assert!(
        server.wait_log(&[
            "WARN",
            "max_buffered (1M) is full",
            "HTTP/2 stream(s) answered 503"
        ]),
        "{}",
        server.log()
    );
    // HTTP/1.1 is served meanwhile.
    let r = server.get("/article");
    assert_eq!(r.status, 200, "{r:?}");
    // The client goes: its connection's bytes come back.
    let Steered { input, lines, .. } = client;
    drop(input);
    assert!(
        lines.wait(WAIT, |t| t.contains("closed\n")),
        "{}",
        lines.text()
    );
    let freed = wait_until(WAIT, || buffered(&server)["bytes"].as_u64() == Some(0));
    assert!(freed, "{:#}", buffered(&server));
}

/// Two requests held by their app on one connection: the client resets
/// one (its app's `on_gone` runs, the other's does not), the other passes
/// `--app-timeout` (504 on its stream, its app hears), and the connection
/// serves a third; the access log has a line for each answer.
fn each_stream_is_reset_timed_out_and_logged_alone(poller: &str) {
    let server = Server::launch(poller)
        .apps(&["misbehave"])
        .args(&["--app-timeout", "2"])
        .access_log()
        .start();
    let mut client = Steered::start(&server, &[]);
    client.say("get /_test/gone?one");
    client.say("get /_test/gone?two");
    let holding = ["holding /_test/gone?one", "holding /_test/gone?two"];
    assert!(
        server.wait_log(&holding[..1]) && server.wait_log(&holding[1..]),
        "{}",
        server.log()
    );
    client.say("reset 1");
    let one = "client gone: request /_test/gone?one";
    assert!(server.wait_log(&[one]), "{}", server.log());
    assert!(
        client.saw("status 3 504"),
        "{}\n{}",
        client.text(),
        server.log()
    );
    let two = "client gone: request /_test/gone?two";
    assert!(server.wait_log(&[two]), "{}", server.log());
    assert_eq!(server.log_lines(&[one]).len(), 1, "{}", server.log());
    client.say("get /_test/ok");
    assert!(
        client.saw("status 5 200") && client.saw("end 5"),
        "{}",
        client.text()
    );
    let logged = server.wait_access_log(&[
        "\"GET /_test/gone?two HTTP/2.0\" 504",
        "\"GET /_test/ok HTTP/2.0\" 200",
    ]);
    assert!(logged, "{}", server.access_log_text());
}

//! Each point of PEP 3333 through the host, with the test application
//! (tests/python/pep3333.py) behind wsgiref.validate's checker and
//! Python warnings turned into errors: a warning fails the request.

use crate::bridge::{
    curl_json, https_port, json, require_python, test_apps, tls_args, tls_fixture, Bridge,
};
use crate::client::{get, request, with_body, Response};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

fn start(poller: &str, args: &[&str]) -> Bridge {
    require_python(&["wsgiref.validate"]);
    Bridge::start(poller, "pep3333:application", &test_apps(), "/pep", args)
}

fn ok(r: &Response) -> &Response {
    assert_eq!(r.status, 200, "{r:?}");
    r
}

fn environ_and_input(poller: &str) {
    let bridge = start(poller, &[]);
    let mut c = bridge.server.connect();
    // One keep-alive connection for every request.
    let r = c.request(&request(
        "GET",
        "/pep/environ/caf%C3%A9%20x?q=a%20b&r=1",
        &[
            "Accept-Language: fr",
            "Cookie: a=1",
            "Cookie: b=2",
            "X_Spoof: no",
            "X-Multi: 1",
            "X-Multi: 2",
        ],
    ));
    let env = json(&ok(&r).body);
    assert_eq!(env["REQUEST_METHOD"], "GET");
    assert_eq!(env["SCRIPT_NAME"], "/pep");
    // Percent-decoded, then each byte one latin-1 character.
    assert_eq!(env["PATH_INFO"], "/environ/caf\u{c3}\u{a9} x");
    let raw: Vec<u64> = "/environ/café x".bytes().map(u64::from).collect();
    assert_eq!(env["path_bytes"], serde_json::json!(raw));
    assert_eq!(env["QUERY_STRING"], "q=a%20b&r=1");
    assert_eq!(env["SERVER_NAME"], "127.0.0.1");
    assert_eq!(env["SERVER_PORT"], bridge.server.port.to_string());
    assert_eq!(env["SERVER_PROTOCOL"], "HTTP/1.1");
    assert_eq!(env["REMOTE_ADDR"], "127.0.0.1");
    assert_eq!(env["HTTP_HOST"], "localhost");
    assert_eq!(env["HTTP_ACCEPT_LANGUAGE"], "fr");
    assert_eq!(env["HTTP_COOKIE"], "a=1; b=2");
    assert_eq!(env["HTTP_X_MULTI"], "1, 2");
    assert!(env.get("HTTP_X_SPOOF").is_none(), "{env}");
    assert!(env.get("CONTENT_LENGTH").is_none(), "{env}");
    assert_eq!(env["wsgi.url_scheme"], "http");
    assert_eq!(env["wsgi.version"], serde_json::json!([1, 0]));
    assert_eq!(env["wsgi.multithread"], true);
    assert_eq!(env["wsgi.multiprocess"], false);
    assert_eq!(env["wsgi.run_once"], false);

    let body = b"abcdef\nline two\nthree\nfour\nfive";
    let r = c.request(&with_body(
        "POST",
        "/pep/input",
        &[
            "Content-Type: text/plain",
            &format!("Content-Length: {}", body.len()),
        ],
        body,
    ));
    let got = json(&ok(&r).body);
    assert_eq!(got["read3"], "abc");
    assert_eq!(got["readline"], "def\n");
    assert_eq!(got["readline2"], "li");
    assert_eq!(got["readlines"], serde_json::json!(["ne two\n"]));
    assert_eq!(
        got["iterated"],
        serde_json::json!(["three\n", "four\n", "five"])
    );
    assert_eq!(got["after"], "");
    assert_eq!(got["content_length"], body.len().to_string());
    assert_eq!(got["content_type"], "text/plain");

    // A chunked body arrives de-chunked, with its length.
    let r = c.request(&with_body(
        "POST",
        "/pep/input",
        &["Transfer-Encoding: chunked"],
        b"5\r\nab\ncd\r\n0\r\n\r\n",
    ));
    let got = json(&ok(&r).body);
    assert_eq!(
        (got["read3"].as_str(), got["readline"].as_str()),
        (Some("ab\n"), Some("cd"))
    );
    assert_eq!(got["iterated"], serde_json::json!([]));
    assert_eq!(got["content_length"], "5");
}

fn responses(poller: &str) {
    let bridge = start(poller, &[]);
    let server = &bridge.server;
    let r = server.get("/pep/write");
    assert_eq!(ok(&r).text(), "written,iterated");

    // Every chunk, in order; the iterable is closed once per request.
    let before: u32 = server.get("/pep/closed").text().parse().expect("a count");
    let r = server.get("/pep/chunks");
    assert_eq!(ok(&r).text(), "one,two,three");
    assert_eq!(r.header("X-Chunks"), Some("4"));
    let after: u32 = server.get("/pep/closed").text().parse().expect("a count");
    assert_eq!(after, before + 1);

    let r = server.get("/pep/headers");
    assert_eq!(ok(&r).header_count("Set-Cookie"), 2);
    assert_eq!(r.header("Content-Type"), Some("text/plain; charset=utf-8"));

    // exc_info before the head went: the application's new head is sent.
    let r = server.get("/pep/exc-info");
    assert_eq!((r.status, r.text()), (503, "recovered"), "{r:?}");
    assert_eq!(r.header("Retry-After"), Some("7"));

    // wsgi.errors lines reach the host's log.
    assert_eq!(ok(&server.get("/pep/errors")).text(), "logged");
    assert!(
        server.wait_log(&["wsgi.errors: pep3333 first line"]),
        "{}",
        server.log()
    );
    assert!(
        server.wait_log(&["wsgi.errors: pep3333 second line"]),
        "{}",
        server.log()
    );

    // Nothing the checker would flag was raised as a warning-turned-error.
    assert!(!server.log_contains("WSGIWarning"), "{}", server.log());
}

/// A generator's chunks reach the client as they are produced: the first
/// one arrives while the generator waits for another request; a one-item
/// list is answered whole, with its length.
fn iterables_stream_chunk_by_chunk(poller: &str) {
    let bridge = start(poller, &[]);
    let server = &bridge.server;
    let mut s = TcpStream::connect(("127.0.0.1", server.port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    s.write_all(&get("/pep/stream")).expect("send");
    let mut seen = Vec::new();
    let first = read_until(&mut s, &mut seen, b"first,");
    assert!(
        first,
        "no first chunk before the generator went on: {:?}",
        String::from_utf8_lossy(&seen)
    );
    let head = String::from_utf8_lossy(&seen).to_ascii_lowercase();
    assert!(head.contains("transfer-encoding: chunked"), "{head}");
    assert!(!head.contains("second"), "{head}");
    assert_eq!(ok(&server.get("/pep/release")).text(), "released");
    assert!(
        read_until(&mut s, &mut seen, b"0\r\n\r\n"),
        "{:?}",
        String::from_utf8_lossy(&seen)
    );
    assert!(String::from_utf8_lossy(&seen).contains("second"));

    // A one-item list is answered whole (Django's small declared length:
    // tests/e2e/django.rs).
    let r = server.get("/pep/raw/list");
    assert_eq!(
        (ok(&r).text(), r.header("Content-Length")),
        ("whole", Some("5")),
        "{r:?}"
    );
    assert_eq!(r.header("Transfer-Encoding"), None, "{r:?}");
}

/// Reads into `seen` until it holds `needle`; false on timeout or close.
fn read_until(s: &mut TcpStream, seen: &mut Vec<u8>, needle: &[u8]) -> bool {
    let mut buf = [0u8; 4096];
    while !seen.windows(needle.len()).any(|w| w == needle) {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return false,
            Ok(n) => seen.extend_from_slice(&buf[..n]),
        }
    }
    true
}

fn failures_are_500_with_a_traceback(poller: &str) {
    let bridge = start(poller, &[]);
    let server = &bridge.server;
    let cases = [
        ("/pep/raise", "RuntimeError: boom from the pep3333 app"),
        ("/pep/raw/bad-status", "is not a three-digit code"),
        ("/pep/raw/bad-header", "control character"),
        ("/pep/raw/hop-by-hop", "hop-by-hop"),
        (
            "/pep/raw/twice",
            "start_response called a second time without exc_info",
        ),
        ("/pep/raw/str-body", "yielded str, not bytes"),
        ("/pep/raw/no-start", "without calling start_response"),
    ];
    let mut c = server.connect();
    for (path, why) in cases {
        let r = c.request(&get(path));
        assert_eq!(r.status, 500, "{path}: {r:?}");
        assert!(
            r.text().starts_with("Internal Server Error"),
            "{path}: {r:?}"
        );
        assert!(
            !r.text().contains(why),
            "{path}: details stay in the log: {r:?}"
        );
        assert!(
            server.wait_log(&[why]),
            "{path}: no {why:?} in the log:\n{}",
            server.log()
        );
    }
    assert!(server.wait_log(&["GET /pep/raise: the WSGI application raised"]));
    assert!(server.wait_log(&["Traceback (most recent call last):"]));
    // The connection and the app still serve.
    assert_eq!(
        ok(&c.request(&get("/pep/write"))).text(),
        "written,iterated"
    );
}

fn url_scheme_from_trusted_proxies_only(poller: &str) {
    let forwarded = ["X-Forwarded-Proto: https"];
    let bridge = start(poller, &[]);
    let r = bridge
        .server
        .connect()
        .request(&request("GET", "/pep/environ", &forwarded));
    assert_eq!(json(&ok(&r).body)["wsgi.url_scheme"], "http");
    drop(bridge);
    let bridge = start(poller, &["--trusted-proxy", "127.0.0.1/32"]);
    let r = bridge
        .server
        .connect()
        .request(&request("GET", "/pep/environ", &forwarded));
    assert_eq!(json(&ok(&r).body)["wsgi.url_scheme"], "https");
}

/// Over a `tls://` bind the environ says so (`wsgi.url_scheme` https
/// whatever a proxy's header says, `HTTPS`, `SSL_*`), and with a client
/// certificate under mutual TLS its subject and `SUCCESS`; curl speaks
/// HTTP/2 there (ALPN), which `SERVER_PROTOCOL` says, and HTTP/1.1 when
/// asked.
fn tls_keys_over_https(poller: &str) {
    let args = tls_args();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let bridge = start(poller, &args);
    let server = &bridge.server;
    let port = https_port(server);
    let curl = |extra: &[&str]| curl_json(port, "/pep/environ", extra);
    let env = curl(&[]);
    assert_eq!(env["SERVER_PROTOCOL"], "HTTP/2", "{env}");
    assert_eq!(env["wsgi.url_scheme"], "https", "{env}");
    assert_eq!(env["HTTPS"], "on");
    assert_eq!(env["SSL_PROTOCOL"], "TLSv1.3");
    assert!(
        env["SSL_CIPHER"]
            .as_str()
            .is_some_and(|c| c.starts_with("TLS_")),
        "{env}"
    );
    assert_eq!(env["SSL_TLS_SNI"], "localhost");
    assert_eq!(env["SSL_CLIENT_VERIFY"], "NONE");
    assert!(env.get("SSL_CLIENT_S_DN").is_none(), "{env}");
    let (cert, key) = (tls_fixture("client.pem"), tls_fixture("client-key.pem"));
    let env = curl(&["--cert", &cert, "--key", &key]);
    assert_eq!(env["SSL_CLIENT_VERIFY"], "SUCCESS", "{env}");
    assert_eq!(env["SSL_CLIENT_S_DN"], "CN=client one,O=Stoa tests");
    let env = curl(&["--http1.1"]);
    assert_eq!(env["SERVER_PROTOCOL"], "HTTP/1.1", "{env}");
    assert_eq!(env["HTTPS"], "on", "{env}");
    // Plain HTTP has none of them.
    let r = server
        .connect()
        .request(&request("GET", "/pep/environ", &[]));
    let env = json(&ok(&r).body);
    assert!(
        env.get("HTTPS").is_none() && env.get("SSL_PROTOCOL").is_none(),
        "{env}"
    );
}

/// A pool thread keeps its Python thread state between requests, as a
/// thread of gunicorn or uWSGI does: what a request leaves in a
/// `threading.local` or a `contextvars.ContextVar` is there for the next
/// request on that thread (one blocking thread: every request runs on it).
fn a_thread_keeps_its_python_state_between_requests(poller: &str) {
    let bridge = start(poller, &["--blocking-threads", "1"]);
    let mut c = bridge.server.connect();
    let seen: Vec<_> = (0..3)
        .map(|_| json(&ok(&c.request(&get("/pep/thread-state"))).body))
        .collect();
    for (i, s) in seen.iter().enumerate() {
        assert_eq!(s["local"], i + 1, "{seen:?}");
        assert_eq!(s["context"], i + 1, "{seen:?}");
        assert_eq!(s["thread"], seen[0]["thread"], "{seen:?}");
    }
}

matrix!(
    a_thread_keeps_its_python_state_between_requests,
    tls_keys_over_https,
    environ_and_input,
    responses,
    iterables_stream_chunk_by_chunk,
    failures_are_500_with_a_traceback,
    url_scheme_from_trusted_proxies_only,
    a_large_upload_is_read_piecewise_with_bounded_memory
);

/// The server's peak RSS (VmHWM), KiB.
fn peak_kib(bridge: &Bridge) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{}/status", bridge.server.pid()))
        .expect("read the server's /proc status");
    text.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no VmHWM in {text}"))
}

/// A body of 64 MiB, past the host's --max-body (8 MiB: read whole it
/// would be refused), streams into wsgi.input: the application reads it
/// 64 KiB at a time, and the process holds a window of it, not the body.
fn a_large_upload_is_read_piecewise_with_bounded_memory(poller: &str) {
    let bridge = start(poller, &[]);
    // Warm up: the idle peak includes the route's first use.
    let r = bridge.server.connect().request(&with_body(
        "POST",
        "/pep/upload",
        &["Content-Length: 3"],
        b"abc",
    ));
    assert_eq!(json(&ok(&r).body)["bytes"], 3);
    let idle = peak_kib(&bridge);
    let size: usize = 64 << 20;
    let mut stream = TcpStream::connect(("127.0.0.1", bridge.server.port)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .expect("a read timeout");
    let head = format!("POST /pep/upload HTTP/1.1\r\nHost: localhost\r\nContent-Length: {size}\r\nConnection: close\r\n\r\n");
    stream.write_all(head.as_bytes()).expect("send the head");
    let piece = vec![b'u'; 256 << 10];
    for _ in 0..size / piece.len() {
        stream.write_all(&piece).expect("send the body");
    }
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).expect("read the answer");
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let peak = peak_kib(&bridge);
    assert!(answer.starts_with("HTTP/1.1 200 "), "{answer}");
    // The one JSON chunk of the (chunked) body.
    let body = match (answer.find('{'), answer.rfind('}')) {
        (Some(a), Some(b)) if a < b => &answer[a..=b],
        _ => panic!("no JSON in {answer}"),
    };
    let report = json(body.as_bytes());
    assert_eq!(report["bytes"], size, "{report}");
    assert_eq!(report["content_length"], size.to_string(), "{report}");
    assert!(
        report["largest"].as_u64().is_some_and(|n| n <= 65536),
        "{report}"
    );
    // Read whole, the body (and its copies) would be in the host's memory.
    assert!(
        peak <= idle + (16 << 10),
        "the peak RSS rose from {idle} KiB to {peak} KiB during a {size}-byte upload"
    );
}

/// Process mode: each worker process has an interpreter of its own, so
/// two requests run at once in two of them (two pids, overlapping in
/// time), and the environ says so (`wsgi.multiprocess`).
#[test]
fn two_worker_processes_run_two_python_requests_at_once() {
    let bridge = start("epoll", &["--worker-mode", "process", "--workers", "2"]);
    let port = bridge.server.port;
    let mut seen = std::collections::HashMap::new();
    // Two slow requests at a time until both workers have answered one
    // together (a connection goes to whichever worker accepts first).
    for _ in 0..20 {
        let pair: Vec<_> = (0..2)
            .map(|_| {
                std::thread::spawn(move || {
                    let r = crate::client::Client::connect(port).request(&request(
                        "GET",
                        "/pep/process?ms=500",
                        &["Connection: close"],
                    ));
                    json(&ok(&r).body)
                })
            })
            .collect();
        let got: Vec<serde_json::Value> = pair
            .into_iter()
            .map(|t| t.join().expect("client"))
            .collect();
        for g in &got {
            assert_eq!(g["multiprocess"], true, "{g}");
            seen.insert(g["pid"].to_string(), ());
        }
        let overlap = got[0]["started"].as_f64() < got[1]["ended"].as_f64()
            && got[1]["started"].as_f64() < got[0]["ended"].as_f64();
        if got[0]["pid"] != got[1]["pid"] && overlap {
            return;
        }
    }
    panic!("never two Python requests at once in two processes (pids seen: {seen:?})");
}

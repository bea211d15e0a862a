//! What a TLS bind serves, from its `[tls."ADDR"]` table or the flags:
//! two certificates chosen by SNI, mutual TLS (required, optional, a
//! client refused), the oldest version offered, and what apps see of the
//! session (the environ app's `tls` field). Python's `ssl` is the client.

use crate::harness::{Server, TempDir};
use crate::tls::{fixture, tls_port};
use serde_json::Value;
use std::process::Command;

matrix!(
    sni_picks_the_certificate_for_the_name_asked,
    apps_see_the_session_and_the_client_certificate,
    optional_client_certificates_are_seen_when_sent,
    required_client_certificates_refuse_a_client_without_or_with_a_rogue_one,
    a_table_with_tls_1_3_only_refuses_tls_1_2,
    hsts_on_tls_answers_and_plain_binds_redirecting,
    sessions_resume_with_tickets,
);

/// One client: connects to argv 1's JSON `port`, trusting `ca`, naming
/// `sni`, with a client certificate (`cert`, `key`) if given, at most TLS
/// `max` ("1.2") if given; GETs `path` and prints a JSON line: `ok`, the
/// negotiated `version`, the answer's `status` and `body` (JSON if it
/// parses), or `error`.
const CLIENT: &str = r#"
import json, socket, ssl, sys
a = json.loads(sys.argv[1])
out = {"ok": False}
try:
    ctx = ssl.create_default_context(cafile=a["ca"])
    ctx.set_alpn_protocols(["http/1.1"])
    if a.get("cert"):
        ctx.load_cert_chain(a["cert"], a["key"])
    if a.get("max") == "1.2":
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    with socket.create_connection(("127.0.0.1", a["port"]), timeout=20) as raw:
        with ctx.wrap_socket(raw, server_hostname=a["sni"]) as s:
            out["version"] = s.version()
            s.sendall(b"GET " + a["path"].encode() + b" HTTP/1.1\r\nHost: " + a["sni"].encode()
                      + b"\r\nConnection: close\r\n\r\n")
            got = b""
            while True:
                piece = s.recv(65536)
                if not piece:
                    break
                got += piece
    head, _, body = got.partition(b"\r\n\r\n")
    out["status"] = int(head.split(b" ")[1]) if head else 0
    try:
        out["body"] = json.loads(body)
    except ValueError:
        out["body"] = body.decode("latin-1")
    out["ok"] = True
except Exception as e:
    out["error"] = "%s: %s" % (type(e).__name__, e)
print(json.dumps(out))
"#;

/// What one client run saw.
struct Seen {
    ok: bool,
    version: String,
    status: u64,
    body: Value,
    error: String,
}

/// Runs `CLIENT` with `args` (`port`, `ca`, `sni`, `path` and the rest).
fn client(args: Value) -> Seen {
    let out = Command::new("python3")
        .args(["-c", CLIENT, &args.to_string()])
        .output()
        .unwrap_or_else(|e| panic!("python3 is needed ({e})"));
    let text = String::from_utf8_lossy(&out.stdout);
    let v: Value = serde_json::from_str(text.trim()).unwrap_or_else(|e| {
        panic!(
            "no JSON from the client ({e}): {text}{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    Seen {
        ok: v["ok"] == true,
        version: v["version"].as_str().unwrap_or_default().to_string(),
        status: v["status"].as_u64().unwrap_or(0),
        body: v["body"].clone(),
        error: v["error"].as_str().unwrap_or_default().to_string(),
    }
}

/// A host with the sample apps and a TLS bind on a port of its own whose
/// `[tls."127.0.0.1:PORT"]` table is `table` (TOML lines), with `flags`;
/// its TLS port.
fn with_table(poller: &str, table: &str, flags: &[&str]) -> (TempDir, Server, u16) {
    let dir = TempDir::new("tls-table");
    let port = crate::deploy::free_port();
    let config = dir.path().join("stoa.toml");
    std::fs::write(&config, format!("[tls.\"127.0.0.1:{port}\"]\n{table}\n")).expect("write");
    let bind = format!("tls://127.0.0.1:{port}");
    let config = config.display().to_string();
    let server = Server::launch(poller)
        .apps(&["article", "environ"])
        .args(&["--config", &config, "--bind", &bind])
        .args(flags)
        .start();
    let seen = tls_port(&server);
    assert_eq!(seen, port, "{}", server.log());
    (dir, server, port)
}

/// A host with the sample apps and a TLS bind serving the localhost
/// certificate through the flags, and `extra`; its TLS port.
fn flags_site(poller: &str, extra: &[&str]) -> (Server, u16) {
    let (cert, key) = (fixture("cert.pem"), fixture("key.pem"));
    let server = Server::launch(poller)
        .apps(&["article", "environ"])
        .args(&[
            "--bind",
            "tls://127.0.0.1:0",
            "--tls-cert",
            &cert,
            "--tls-key",
            &key,
        ])
        .args(extra)
        .start();
    let port = tls_port(&server);
    (server, port)
}

/// Two certificates, the localhost one the default.
fn two_certs() -> String {
    format!(
        "certs = [{{ cert = {:?}, key = {:?} }}, {{ cert = {:?}, key = {:?} }}]",
        fixture("cert.pem"),
        fixture("key.pem"),
        fixture("other.pem"),
        fixture("other-key.pem")
    )
}

fn sni_picks_the_certificate_for_the_name_asked(poller: &str) {
    let (_dir, server, port) = with_table(poller, &two_certs(), &[]);
    let ask = |ca: &str, sni: &str| {
        client(serde_json::json!({
            "port": port, "ca": fixture(ca), "sni": sni, "path": "/_environ",
        }))
    };
    // Each name gets the certificate for it: the client trusts only the
    // CA of the one it should get.
    let api = ask("ca-other.pem", "api.example.test");
    assert!(api.ok, "{}\n{}", api.error, server.log());
    assert_eq!(api.body["tls"]["server_name"], "api.example.test");
    let wild = ask("ca-other.pem", "x.apps.example.test");
    assert!(wild.ok, "{}", wild.error);
    let local = ask("ca.pem", "localhost");
    assert!(local.ok && local.status == 200, "{}", local.error);
    // A name no certificate is for gets the first (the default), which the
    // other CA does not vouch for.
    let unknown = ask("ca-other.pem", "nobody.example.test");
    assert!(!unknown.ok, "{:?}", unknown.body);
    assert!(
        unknown.error.contains("CERTIFICATE_VERIFY_FAILED"),
        "{}",
        unknown.error
    );
    let default = ask("ca.pem", "localhost");
    assert!(default.ok, "{}", default.error);
}

/// A table serving the localhost certificate with the client CA, and
/// `more` lines.
fn client_ca_table(more: &str) -> String {
    format!(
        "cert = {:?}\nkey = {:?}\nclient_ca = {:?}\n{more}",
        fixture("cert.pem"),
        fixture("key.pem"),
        fixture("client-ca.pem")
    )
}

fn apps_see_the_session_and_the_client_certificate(poller: &str) {
    let (_dir, server, port) = with_table(poller, &client_ca_table(""), &[]);
    let seen = client(serde_json::json!({
        "port": port, "ca": fixture("ca.pem"), "sni": "localhost", "path": "/_environ",
        "cert": fixture("client.pem"), "key": fixture("client-key.pem"),
    }));
    assert!(
        seen.ok && seen.status == 200,
        "{}\n{}",
        seen.error,
        server.log()
    );
    let tls = &seen.body["tls"];
    assert_eq!(tls["version"], "TLSv1.3", "{tls}");
    assert_eq!(seen.version, "TLSv1.3");
    assert!(
        tls["cipher"]
            .as_str()
            .is_some_and(|c| c.starts_with("TLS_")),
        "{tls}"
    );
    assert_eq!(tls["server_name"], "localhost");
    assert_eq!(tls["client_subject"], "CN=client one,O=Stoa tests", "{tls}");
    assert_eq!(tls["client_verified"], true);
    assert_eq!(seen.body["scheme"], "https");
    // Over plain HTTP the app sees no session.
    let plain = server.get("/_environ");
    let v: Value = serde_json::from_slice(&plain.body).expect("JSON");
    assert_eq!(v["tls"], Value::Null, "{v}");
}

fn optional_client_certificates_are_seen_when_sent(poller: &str) {
    let optional = client_ca_table("client_auth = \"optional\"\n");
    let (_dir, server, port) = with_table(poller, &optional, &[]);
    let base = serde_json::json!({
        "port": port, "ca": fixture("ca.pem"), "sni": "localhost", "path": "/_environ",
    });
    let without = client(base.clone());
    assert!(
        without.ok && without.status == 200,
        "{}\n{}",
        without.error,
        server.log()
    );
    assert_eq!(without.body["tls"]["client_verified"], false);
    assert_eq!(without.body["tls"]["client_subject"], Value::Null);
    let mut with = base.clone();
    with["cert"] = fixture("client.pem").into();
    with["key"] = fixture("client-key.pem").into();
    let with = client(with);
    assert!(with.ok, "{}", with.error);
    assert_eq!(with.body["tls"]["client_verified"], true);
    // A certificate no client CA signed is refused even when optional.
    let mut rogue = base;
    rogue["cert"] = fixture("rogue.pem").into();
    rogue["key"] = fixture("rogue-key.pem").into();
    let rogue = client(rogue);
    assert!(!rogue.ok || rogue.status == 0, "{:?}", rogue.body);
}

fn required_client_certificates_refuse_a_client_without_or_with_a_rogue_one(poller: &str) {
    // The flags' site: --tls-client-ca applies to every tls:// bind.
    let (server, port) = flags_site(poller, &["--tls-client-ca", &fixture("client-ca.pem")]);
    let base = serde_json::json!({
        "port": port, "ca": fixture("ca.pem"), "sni": "localhost", "path": "/article",
    });
    for (cert, key) in [(None, None), (Some("rogue.pem"), Some("rogue-key.pem"))] {
        let mut args = base.clone();
        if let (Some(c), Some(k)) = (cert, key) {
            args["cert"] = fixture(c).into();
            args["key"] = fixture(k).into();
        }
        let seen = client(args);
        // TLS 1.3 clients learn of the refusal at their first read.
        assert!(!seen.ok, "{cert:?}: {:?}", seen.body);
        assert!(
            seen.error.contains("SSL")
                || seen.error.contains("reset")
                || seen.error.contains("EOF"),
            "{cert:?}: {}",
            seen.error
        );
    }
    let mut good = base;
    good["cert"] = fixture("client.pem").into();
    good["key"] = fixture("client-key.pem").into();
    let seen = client(good);
    assert!(
        seen.ok && seen.status == 200,
        "{}\n{}",
        seen.error,
        server.log()
    );
}

fn a_table_with_tls_1_3_only_refuses_tls_1_2(poller: &str) {
    let table = format!(
        "cert = {:?}\nkey = {:?}\nmin_version = \"1.3\"\n",
        fixture("cert.pem"),
        fixture("key.pem")
    );
    let (_dir, server, port) = with_table(poller, &table, &[]);
    let base = serde_json::json!({
        "port": port, "ca": fixture("ca.pem"), "sni": "localhost", "path": "/article",
    });
    let mut old = base.clone();
    old["max"] = "1.2".into();
    let old = client(old);
    assert!(!old.ok, "{:?}", old.body);
    assert!(
        old.error.contains("VERSION") || old.error.contains("version"),
        "{}",
        old.error
    );
    let new = client(base);
    assert!(
        new.ok && new.version == "TLSv1.3",
        "{}\n{}",
        new.error,
        server.log()
    );
}

/// A table is refused when it names no tls:// bind, or a file that does
/// not load (naming the table and the file).
#[test]
fn a_table_for_no_bind_or_with_a_bad_file_is_refused() {
    let dir = TempDir::new("tls-table-bad");
    let config = dir.path().join("stoa.toml");
    let cert = fixture("cert.pem");
    let key = fixture("key.pem");
    std::fs::write(
        &config,
        format!("[tls.\"127.0.0.1:1\"]\ncert = {cert:?}\nkey = {key:?}\n"),
    )
    .expect("write");
    let config_arg = config.display().to_string();
    let (_, log) = Server::launch("epoll")
        .apps(&["article"])
        .args(&["--config", &config_arg, "--bind", "tls://127.0.0.1:2"])
        .args(&["--tls-cert", &cert, "--tls-key", &key])
        .refused();
    assert!(
        log.contains("[tls.\"127.0.0.1:1\"]: no --bind tls://127.0.0.1:1; the tls:// binds are tls://127.0.0.1:2"),
        "{log}"
    );
    let port = crate::deploy::free_port();
    std::fs::write(
        &config,
        format!(
            "[tls.\"127.0.0.1:{port}\"]\ncerts = [{{ cert = {cert:?}, key = {:?} }}]\n",
            fixture("other-key.pem")
        ),
    )
    .expect("write");
    let bind = format!("tls://127.0.0.1:{port}");
    let (_, log) = Server::launch("epoll")
        .apps(&["article"])
        .args(&["--config", &config_arg, "--bind", &bind])
        .refused();
    assert!(
        log.contains(&format!("[tls.\"127.0.0.1:{port}\"]"))
            && log.contains("cert.pem")
            && log.contains("other-key.pem"),
        "{log}"
    );
}

/// `--hsts` marks answers on the TLS bind (not the plain ones), and
/// `--https-redirect` answers the plain bind's requests 308 to the same
/// host and target on the TLS port, keeping the method.
fn hsts_on_tls_answers_and_plain_binds_redirecting(poller: &str) {
    let extra = ["--hsts", "365d", "--hsts-subdomains", "--https-redirect"];
    let (server, port) = flags_site(poller, &extra);
    let out = Command::new("curl")
        .args([
            "-sS",
            "-i",
            "--max-time",
            "20",
            "--cacert",
            &fixture("ca.pem"),
        ])
        .arg(format!("https://localhost:{port}/article"))
        .output()
        .unwrap_or_else(|e| panic!("curl is needed ({e})"));
    let text = String::from_utf8_lossy(&out.stdout);
    // curl speaks HTTP/2 here (ALPN), whose field names are lowercase.
    assert!(
        text.contains("strict-transport-security: max-age=31536000; includeSubDomains\r\n"),
        "{text}"
    );
    assert!(text.starts_with("HTTP/2 200"), "{text}");
    let r = server.connect().request(
        b"POST /article/x?y=1 HTTP/1.1\r\nHost: example.test:8080\r\nContent-Length: 2\r\n\r\nhi",
    );
    assert_eq!(r.status, 308, "{r:?}");
    let want = format!("https://example.test:{port}/article/x?y=1");
    assert_eq!(r.header("Location"), Some(want.as_str()), "{r:?}");
    assert_eq!(r.header("Strict-Transport-Security"), None, "{r:?}");
    // Without a Host (HTTP/1.0) the listener's address stands for it.
    let r = server.connect().request(b"GET / HTTP/1.0\r\n\r\n");
    let want = format!("https://127.0.0.1:{port}/");
    assert_eq!(r.header("Location"), Some(want.as_str()), "{r:?}");
}

#[test]
fn hsts_and_the_redirect_without_a_tls_bind_are_refused() {
    for flags in [&["--https-redirect"][..], &["--hsts", "1d"][..]] {
        let (_, log) = Server::launch("epoll")
            .apps(&["article"])
            .args(flags)
            .refused();
        assert!(
            log.contains(&format!("{} serve tls:// binds", flags[0])),
            "{log}"
        );
    }
    let (_, log) = Server::launch("epoll")
        .apps(&["article"])
        .args(&["--hsts", "3y"])
        .refused();
    assert!(log.contains("give at most 730d"), "{log}");
}

/// Connects `count` times more after a first session, offering its
/// ticket each time; prints how many resumed.
const RESUME: &str = r#"
import socket, ssl, sys
ctx = ssl.create_default_context(cafile=sys.argv[1])
ctx.set_alpn_protocols(["http/1.1"])
session, reused = None, 0
for i in range(1 + int(sys.argv[3])):
    with socket.create_connection(("127.0.0.1", int(sys.argv[2])), timeout=20) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost", session=session) as s:
            s.sendall(b"GET /article HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            got = b""
            while True:
                piece = s.recv(65536)
                if not piece:
                    break
                got += piece
            assert got.startswith(b"HTTP/1.1 200"), got[:100]
            reused += 1 if (i > 0 and s.session_reused) else 0
            session = s.session
print(reused)
"#;

/// How many of `count` connections after a first one resumed its session.
fn resumed(port: u16, count: usize) -> String {
    let out = Command::new("python3")
        .args([
            "-c",
            RESUME,
            &fixture("ca.pem"),
            &port.to_string(),
            &count.to_string(),
        ])
        .output()
        .unwrap_or_else(|e| panic!("python3 is needed ({e})"));
    String::from_utf8_lossy(&out.stdout).trim().to_string() + &String::from_utf8_lossy(&out.stderr)
}

/// Two worker threads share the process's ticket keys.
fn sessions_resume_with_tickets(poller: &str) {
    let (server, port) = flags_site(poller, &["--workers", "2"]);
    assert_eq!(resumed(port, 6), "6", "{}", server.log());
}

/// Worker processes share the supervisor's ticket keys: a session made on
/// one resumes on whichever worker takes the next connection (each is
/// as likely; twelve resumed in a row by chance alone would be 1 in 4096).
#[test]
fn sessions_resume_on_every_worker_process() {
    let (server, port) = flags_site("epoll", &["--worker-mode", "process", "--workers", "2"]);
    server.wait_lines(&["supervisor", ") ready"], 2);
    assert_eq!(resumed(port, 12), "12", "{}", server.log());
}

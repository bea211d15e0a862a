//! HTTPS on `tls://` binds beside plain ones: curl and Python's `ssl`
//! against the test certificate (tests/fixtures/tls), keep-alive,
//! pipelining and a chunked upload, streamed answers, the scheme apps see, TLS files
//! refused naming the flag, and worker processes serving TLS across an
//! upgrade.

use crate::harness::{Server, TempDir, START_TIMEOUT};
use rustix::process::Signal;
use std::process::Command;

matrix!(
    https_beside_http_with_keep_alive,
    pipelined_requests_and_a_chunked_upload_over_tls,
    a_head_and_its_body_in_records_of_their_own_are_answered,
    sighup_reloads_the_certificate_and_a_bad_file_keeps_the_old,
    streamed_answers_over_tls,
);

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/tls");

pub(crate) fn fixture(name: &str) -> String {
    format!("{FIXTURES}/{name}")
}

/// A server with the sample apps on a plain and a TLS bind; its TLS port.
pub(crate) fn with_tls(poller: &str, extra: &[&str]) -> (Server, u16) {
    tls_host(poller, &fixture("cert.pem"), &fixture("key.pem"), extra)
}

/// A server with the sample apps on a plain and a TLS bind serving `cert`
/// and `key`; its TLS port.
pub(crate) fn tls_host(poller: &str, cert: &str, key: &str, extra: &[&str]) -> (Server, u16) {
    let server = Server::launch(poller)
        .apps(&["article", "environ", "demo"])
        .args(&[
            "--bind",
            "tls://127.0.0.1:0",
            "--tls-cert",
            cert,
            "--tls-key",
            key,
        ])
        .args(extra)
        .start();
    let port = tls_port(&server);
    (server, port)
}

/// The port of the `listening on https://` line.
pub(crate) fn tls_port(server: &Server) -> u16 {
    let said = server
        .stdout
        .wait(START_TIMEOUT, |t| t.contains("listening on https://"));
    let text = server.stdout.text();
    let port = text
        .lines()
        .find_map(|l| l.strip_prefix("listening on https://127.0.0.1:"))
        .and_then(|p| p.split_whitespace().next()?.parse().ok());
    match (said, port) {
        (true, Some(port)) => port,
        _ => panic!("no https line: {text}\n{}", server.log()),
    }
}

/// curl against `urls` (in one run, so one connection when it can keep
/// it), trusting the test CA; each URL's `code connects scheme-line`.
pub(crate) fn curl(urls: &[String], extra: &[&str]) -> (bool, String) {
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "20", "--cacert", &fixture("ca.pem")])
        .args(["-w", "\n%{http_code} %{num_connects}\n"])
        .args(extra)
        .args(urls)
        .output()
        .unwrap_or_else(|e| panic!("curl is needed: `apt-get install -y curl` ({e})"));
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

fn https_beside_http_with_keep_alive(poller: &str) {
    let (server, port) = with_tls(poller, &[]);
    let urls = [
        format!("https://localhost:{port}/article"),
        format!("https://localhost:{port}/_environ"),
    ];
    let (ok, text) = curl(&urls, &[]);
    assert!(ok, "{text}\n{}", server.log());
    // Two answers over one connection: the second made none.
    assert!(
        text.contains("\n200 1\n") && text.contains("\n200 0\n"),
        "{text}"
    );
    assert!(text.contains("\"scheme\": \"https\""), "{text}");
    // A proxy's header does not make a TLS request plain, nor a plain
    // one TLS (the peer is no trusted proxy).
    let plain = server.get("/_environ");
    assert_eq!(plain.status, 200);
    assert!(plain.text().contains("\"scheme\": \"http\""), "{plain:?}");
    let (ok, text) = curl(
        &[format!("https://localhost:{port}/_environ")],
        &["-H", "X-Forwarded-Proto: http"],
    );
    assert!(ok && text.contains("\"scheme\": \"https\""), "{text}");
}

/// Streamed answers over TLS: Server-Sent Events arrive in order as they
/// are made and end, and a large streamed download arrives whole.
fn streamed_answers_over_tls(poller: &str) {
    let (server, port) = with_tls(poller, &[]);
    let (ok, text) = curl(
        &[format!("https://localhost:{port}/demo/clock?count=3")],
        &["-N"],
    );
    assert!(ok, "{text}\n{}", server.log());
    let ids: Vec<&str> = text.lines().filter(|l| l.starts_with("id: ")).collect();
    assert_eq!(ids, ["id: 0", "id: 1", "id: 2"], "{text}");
    let size = 8_000_000;
    let (ok, text) = curl(
        &[format!("https://localhost:{port}/demo/bytes?n={size}")],
        &["-o", "/dev/null", "-w", "%{size_download} %{http_code}\n"],
    );
    assert!(ok, "{text}\n{}", server.log());
    assert!(text.contains(&format!("{size} 200")), "{text}");
}

/// What the Python clients below share: `session(send)` opens a TLS
/// connection trusting the test CA (argv 1) to the port (argv 2), offering
/// ALPN http/1.1, lets `send` write on it, and returns every byte the host
/// sends until it closes.
const SESSION: &str = r#"
import socket, ssl, sys
def session(send):
    ctx = ssl.create_default_context(cafile=sys.argv[1])
    ctx.set_alpn_protocols(["http/1.1"])
    with socket.create_connection(("127.0.0.1", int(sys.argv[2])), timeout=20) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as s:
            assert s.selected_alpn_protocol() == "http/1.1", s.selected_alpn_protocol()
            send(s)
            got = b""
            while True:
                piece = s.recv(65536)
                if not piece:
                    return got
                got += piece
"#;

/// Three pipelined GETs in one write, then a chunked POST of 300 KiB,
/// each answer read in order.
const PIPELINE: &str = r#"
def send(s):
    s.sendall(b"GET /article HTTP/1.1\r\nHost: localhost\r\n\r\n" * 3)
    body = b"x" * (300 * 1024)
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(body[i:i + 7000]), body[i:i + 7000])
                      for i in range(0, len(body), 7000))
    s.sendall(b"POST /_environ HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n"
              b"Connection: close\r\n\r\n" + chunks + b"0\r\n\r\n")
got = session(send)
print(got.count(b"HTTP/1.1 200 OK"), b'"body_length": 307200' in got)
"#;

fn pipelined_requests_and_a_chunked_upload_over_tls(poller: &str) {
    python_over_tls(poller, PIPELINE, "4 True");
}

/// A head and then its body in writes (so TLS records) of their own, as
/// `http.client` sends a file body, twice on one connection; then both
/// answers.
const SPLIT: &str = r#"
def send(s):
    for last in (False, True):
        close = b"Connection: close\r\n" if last else b""
        s.sendall(b"POST /_environ HTTP/1.1\r\nHost: localhost\r\nContent-Length: 8000\r\n"
                  + close + b"\r\n")
        s.sendall(b"b" * 8000)
got = session(send)
print(got.count(b"HTTP/1.1 200 OK"), got.count(b'"body_length": 8000'))
"#;

fn a_head_and_its_body_in_records_of_their_own_are_answered(poller: &str) {
    python_over_tls(poller, SPLIT, "2 2");
}

/// Runs `script` (Python, after `SESSION`) against a host on `poller`;
/// it must print `expect`.
fn python_over_tls(poller: &str, script: &str, expect: &str) {
    let (server, port) = with_tls(poller, &[]);
    let program = format!("{SESSION}{script}");
    let out = Command::new("python3")
        .args(["-c", &program, &fixture("ca.pem"), &port.to_string()])
        .output()
        .unwrap_or_else(|e| panic!("python3 is needed ({e})"));
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        said.trim(),
        expect,
        "{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        server.log()
    );
}

#[test]
fn a_tls_bind_without_its_files_or_with_a_wrong_key_is_refused() {
    let (_, log) = Server::launch("epoll")
        .apps(&["article"])
        .args(&["--bind", "tls://127.0.0.1:0"])
        .refused();
    assert!(
        log.contains("needs --tls-cert FILE and --tls-key FILE"),
        "{log}"
    );
    let (ca, key) = (fixture("ca.pem"), fixture("key.pem"));
    let (_, log) = Server::launch("epoll")
        .apps(&["article"])
        .args(&[
            "--bind",
            "tls://127.0.0.1:0",
            "--tls-cert",
            &ca,
            "--tls-key",
            &key,
        ])
        .refused();
    assert!(log.contains("ca.pem") && log.contains("key.pem"), "{log}");
    let (cert, key) = (fixture("cert.pem"), fixture("key.pem"));
    let (_, log) = Server::launch("epoll")
        .apps(&["article"])
        .args(&["--tls-cert", &cert, "--tls-key", &key])
        .refused();
    assert!(log.contains("no --bind is one"), "{log}");
    // The harness binds 127.0.0.1:PORT plainly here (a free port, not a
    // fixed one: another server may hold any given port).
    let port = crate::deploy::free_port();
    let tls_bind = format!("tls://0.0.0.0:{port}");
    let (_, log) = Server::launch("epoll")
        .apps(&["article"])
        .port(port)
        .args(&["--bind", &tls_bind, "--tls-cert", &cert, "--tls-key", &key])
        .refused();
    assert!(log.contains("take the same port"), "{log}");
}

/// Worker processes serve TLS on the supervisor's socket (its name goes
/// with it), also after SIGUSR2 replaced them and the supervisor.
#[test]
fn worker_processes_serve_tls_across_an_upgrade() {
    let (server, port) = with_tls("epoll", &["--worker-mode", "process", "--workers", "2"]);
    let url = [format!("https://localhost:{port}/article")];
    let (ok, text) = curl(&url, &[]);
    assert!(ok && text.contains("\n200 1\n"), "{text}\n{}", server.log());
    server.signal(Signal::USR2);
    assert!(
        server.wait_log(&["supervisor re-executed in place from"]),
        "{}",
        server.log()
    );
    for _ in 0..4 {
        let (ok, text) = curl(&url, &[]);
        assert!(ok && text.contains("\n200 1\n"), "{text}\n{}", server.log());
    }
}

/// Prints 1 if the certificate the host at the port serves is the one in
/// the file given, else 0 (no verification: the bytes are compared).
const SERVED: &str = r#"
import socket, ssl, sys
want = ssl.PEM_cert_to_DER_cert(open(sys.argv[1]).read())
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
with socket.create_connection(("127.0.0.1", int(sys.argv[2])), timeout=20) as raw:
    with ctx.wrap_socket(raw, server_hostname="localhost") as s:
        print(1 if s.getpeercert(binary_form=True) == want else 0)
"#;

/// True if the host on `port` serves the certificate in `file`.
pub(crate) fn serves(file: &str, port: u16) -> bool {
    let out = Command::new("python3")
        .args(["-c", SERVED, file, &port.to_string()])
        .output()
        .unwrap_or_else(|e| panic!("python3 is needed ({e})"));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    said.trim() == "1"
}

/// A host whose certificate and key are copies in a directory of its own
/// (`cert.pem`, `key.pem`), on a TLS bind; its TLS port.
pub(crate) fn with_copied_files(poller: &str, extra: &[&str]) -> (TempDir, Server, u16) {
    let dir = TempDir::new("tls-reload");
    for (from, to) in [("cert.pem", "cert.pem"), ("key.pem", "key.pem")] {
        std::fs::copy(fixture(from), dir.path().join(to)).expect("copy a fixture");
    }
    let cert = dir.path().join("cert.pem").display().to_string();
    let key = dir.path().join("key.pem").display().to_string();
    let (server, port) = tls_host(poller, &cert, &key, extra);
    (dir, server, port)
}

/// The second certificate and its key over the host's copies.
fn swap_in_the_second(dir: &TempDir) {
    std::fs::copy(fixture("key2.pem"), dir.path().join("key.pem")).expect("key2");
    std::fs::copy(fixture("cert2.pem"), dir.path().join("cert.pem")).expect("cert2");
}

fn sighup_reloads_the_certificate_and_a_bad_file_keeps_the_old(poller: &str) {
    let (dir, server, port) = with_copied_files(poller, &[]);
    assert!(serves(&fixture("cert.pem"), port), "{}", server.log());
    swap_in_the_second(&dir);
    server.signal(Signal::HUP);
    assert!(
        server.wait_log(&["SIGHUP: reloaded the TLS certificate"]),
        "{}",
        server.log()
    );
    assert!(serves(&fixture("cert2.pem"), port), "{}", server.log());
    std::fs::write(dir.path().join("cert.pem"), "not a certificate").expect("spoil it");
    server.signal(Signal::HUP);
    assert!(
        server.wait_log(&["SIGHUP: cannot reload the TLS certificate", "cert.pem"]),
        "{}",
        server.log()
    );
    assert!(serves(&fixture("cert2.pem"), port), "{}", server.log());
    let (ok, text) = curl(&[format!("https://localhost:{port}/article")], &["-k"]);
    assert!(ok && text.contains("\n200 1\n"), "{text}");
}

/// In process mode SIGHUP reaches every worker, and each reloads.
#[test]
fn every_worker_process_reloads_the_certificate_on_sighup() {
    let (dir, server, port) =
        with_copied_files("epoll", &["--worker-mode", "process", "--workers", "2"]);
    server.wait_lines(&["supervisor", ") ready"], 2);
    swap_in_the_second(&dir);
    server.signal(Signal::HUP);
    let reloaded = server.wait_lines(&["SIGHUP: reloaded the TLS certificate"], 2);
    assert_eq!(reloaded.len(), 2, "{}", server.log());
    for _ in 0..6 {
        assert!(serves(&fixture("cert2.pem"), port), "{}", server.log());
    }
}

/// A thread-mode upgrade hands the TLS socket on by its name: the new
/// process serves TLS on it.
#[test]
fn a_thread_mode_upgrade_keeps_serving_tls() {
    let (server, port) = with_tls("epoll", &["--workers", "2"]);
    server.signal(Signal::USR2);
    assert!(
        server.wait_log(&["upgrade: the new stoa (pid", "is ready and serves"]),
        "{}",
        server.log()
    );
    assert!(
        server.wait_log(&["listening on https://", "(socket tls)"]),
        "{}",
        server.log()
    );
    for _ in 0..4 {
        let (ok, text) = curl(&[format!("https://localhost:{port}/article")], &[]);
        assert!(ok && text.contains("\n200 1\n"), "{text}\n{}", server.log());
    }
}

//! Certificates that rotate without a signal: a file rewritten in place
//! and a Kubernetes Secret volume's `..data` swap are noticed by their
//! content (`--tls-watch-interval`), a bad new file is logged naming it
//! while the old certificate serves, a rotation under a stream of new
//! connections fails none of them, and in process mode every worker
//! reloads; status and metrics show each certificate's expiry, and one
//! near it is a warning at start.

use crate::common::{metrics, status};
use crate::harness::{Group, Server, TempDir};
use crate::tls::{fixture, serves, tls_host, with_copied_files};
use crate::tls_certs::{not_after, self_signed, shown};
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};

matrix!(
    a_file_rewritten_in_place_is_picked_up_and_status_shows_its_expiry,
    a_kubernetes_secret_swap_is_picked_up,
    a_bad_new_file_is_logged_once_and_the_old_certificate_serves,
    a_rotation_under_new_connections_fails_none,
);

/// Files are looked at this often in these tests.
const WATCH: [&str; 2] = ["--tls-watch-interval", "200ms"];

/// What the host logs once a changed file is loaded.
const RELOADED: &str = "changed: reloaded the TLS certificate";

/// Writes `from`'s bytes over `to` in place (same inode).
fn rewrite(from: &str, to: &Path) {
    let bytes = std::fs::read(from).expect("a fixture");
    std::fs::write(to, bytes).expect("rewrite in place");
}

/// The status's certificates, and the metrics' two series of the one
/// served from `file`: seconds left and notAfter as a Unix time.
fn expiry_shown(server: &Server, file: &str) -> (serde_json::Value, f64, f64) {
    let certs = status(server)["tls_certificates"].clone();
    let m = metrics(server);
    let series = |name: &str| {
        let key = format!("{name}{{site=\"--tls-cert/--tls-key\",file=\"{file}\"}}");
        *m.get(&key).unwrap_or_else(|| panic!("no {key}: {m:?}"))
    };
    (
        certs,
        series("stoa_tls_certificate_expiry_seconds"),
        series("stoa_tls_certificate_not_after_timestamp_seconds"),
    )
}

/// Status and metrics show the certificate `served` (a fixture) as the
/// one in `file`, with the notAfter `openssl x509 -enddate` gives.
fn assert_expiry_shown(server: &Server, file: &str, served: &str) {
    let want = not_after(Path::new(served));
    let (certs, left, at) = expiry_shown(server, file);
    let cert = &certs[0];
    assert_eq!(cert["not_after"], want.as_str(), "{certs}");
    assert_eq!(cert["file"], file, "{certs}");
    assert_eq!(cert["site"], "--tls-cert/--tls-key", "{certs}");
    assert_eq!(cert["names"], serde_json::json!(["localhost"]), "{certs}");
    let unix = humantime::parse_rfc3339(&want)
        .expect("an RFC 3339 date")
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs() as f64;
    assert_eq!(at, unix);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs() as f64;
    // Seconds left as of the request, a moment ago.
    assert!((unix - now - left).abs() < 60.0, "{left} vs {}", unix - now);
    let seconds_left = cert["seconds_left"].as_f64().expect("seconds_left");
    assert!((seconds_left - left).abs() < 60.0, "{certs}");
}

/// One keep-alive connection to the port (argv 2), trusting the CA
/// (argv 1), that GETs once, waits for a line on stdin, GETs again;
/// prints both statuses, whether the second went over the same socket,
/// and whether the certificate it saw is the one in argv 3.
const KEPT_SESSION: &str = r#"
import http.client, ssl, sys
ctx = ssl.create_default_context(cafile=sys.argv[1])
conn = http.client.HTTPSConnection("localhost", int(sys.argv[2]), context=ctx, timeout=20)
conn.request("GET", "/article")
first = conn.getresponse()
first.read()
sock = conn.sock
print("asked", flush=True)
sys.stdin.readline()
conn.request("GET", "/article")
second = conn.getresponse()
second.read()
want = ssl.PEM_cert_to_DER_cert(open(sys.argv[3]).read())
print(first.status, second.status, conn.sock is sock, conn.sock.getpeercert(binary_form=True) == want)
"#;

fn a_file_rewritten_in_place_is_picked_up_and_status_shows_its_expiry(poller: &str) {
    use std::io::{BufRead, Write};
    let (dir, server, port) = with_copied_files(poller, &WATCH);
    let cert = shown(&dir.path().join("cert.pem"));
    assert!(serves(&fixture("cert.pem"), port), "{}", server.log());
    assert_expiry_shown(&server, &cert, &fixture("cert.pem"));
    let mut kept = Command::new("python3");
    kept.args(["-c", KEPT_SESSION, &fixture("ca.pem"), &port.to_string()])
        .arg(fixture("cert.pem"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    let mut kept = Group::spawn(&mut kept).unwrap_or_else(|e| panic!("python3 is needed ({e})"));
    let mut said = std::io::BufReader::new(kept.0.stdout.take().expect("piped"));
    let mut line = String::new();
    let _ = said.read_line(&mut line);
    assert_eq!(line.trim(), "asked", "{}", server.log());
    // The key first, then the certificate, as a renewal tool may write
    // them: a look between the two sees a pair that does not load.
    rewrite(&fixture("key2.pem"), &dir.path().join("key.pem"));
    rewrite(&fixture("cert2.pem"), &dir.path().join("cert.pem"));
    assert!(server.wait_log(&[RELOADED]), "{}", server.log());
    assert!(serves(&fixture("cert2.pem"), port), "{}", server.log());
    // The connection opened before goes on in its session.
    if let Some(mut stdin) = kept.0.stdin.take() {
        let _ = stdin.write_all(b"go\n");
    }
    line.clear();
    let _ = said.read_line(&mut line);
    assert_eq!(line.trim(), "200 200 True True", "{}", server.log());
    assert_expiry_shown(&server, &cert, &fixture("cert2.pem"));
    assert!(server.log_lines(&["SIGHUP"]).is_empty(), "{}", server.log());
}

/// A Kubernetes Secret volume: `tls.crt` -> `..data/tls.crt`, `..data`
/// -> `..<timestamp>` (a directory of the files), renewed by a new
/// timestamped directory and a new `..data` link renamed over the old.
fn secret_volume(dir: &Path, version: &str, cert: &str, key: &str) {
    let files = dir.join(version);
    std::fs::create_dir(&files).expect("a version directory");
    std::fs::copy(fixture(cert), files.join("tls.crt")).expect("tls.crt");
    std::fs::copy(fixture(key), files.join("tls.key")).expect("tls.key");
    std::os::unix::fs::symlink(version, dir.join("..data_tmp")).expect("..data_tmp");
    std::fs::rename(dir.join("..data_tmp"), dir.join("..data")).expect("swap ..data");
}

fn a_kubernetes_secret_swap_is_picked_up(poller: &str) {
    let dir = TempDir::new("tls-secret");
    let d = dir.path();
    secret_volume(d, "..2026_12_01_10_00_00.1", "cert.pem", "key.pem");
    for f in ["tls.crt", "tls.key"] {
        std::os::unix::fs::symlink(format!("..data/{f}"), d.join(f)).expect("a file's link");
    }
    let (cert, key) = (shown(&d.join("tls.crt")), shown(&d.join("tls.key")));
    let (server, port) = tls_host(poller, &cert, &key, &WATCH);
    assert!(serves(&fixture("cert.pem"), port), "{}", server.log());
    secret_volume(d, "..2026_12_02_10_00_00.2", "cert2.pem", "key2.pem");
    assert!(server.wait_log(&[RELOADED]), "{}", server.log());
    assert!(serves(&fixture("cert2.pem"), port), "{}", server.log());
}

fn a_bad_new_file_is_logged_once_and_the_old_certificate_serves(poller: &str) {
    let (dir, server, port) = with_copied_files(poller, &WATCH);
    let cert = dir.path().join("cert.pem");
    std::fs::write(&cert, "not a certificate").expect("spoil it");
    let refused = [
        "cert.pem changed: cannot reload the TLS certificate",
        "no PEM certificate",
        "the certificate loaded before keeps serving",
    ];
    assert!(server.wait_log(&refused), "{}", server.log());
    assert!(serves(&fixture("cert.pem"), port), "{}", server.log());
    // Several more looks at the same bad file: no more lines.
    std::thread::sleep(std::time::Duration::from_secs(1));
    rewrite(&fixture("cert.pem"), &cert);
    assert!(server.wait_log(&[RELOADED]), "{}", server.log());
    assert_eq!(server.log_lines(&refused[..1]).len(), 1, "{}", server.log());
    assert!(serves(&fixture("cert.pem"), port), "{}", server.log());
}

/// Opens new TLS connections to the port (argv 3), each for one GET, at
/// least 300 and until the file argv 4 exists, trusting both test
/// certificates (the CA, argv 1, and the self-signed second, argv 2);
/// prints `done failed certificates-seen` and the first errors.
const NEW_CONNECTIONS: &str = r#"
import os, socket, ssl, sys
ctx = ssl.create_default_context(cafile=sys.argv[1])
ctx.load_verify_locations(cafile=sys.argv[2])
ctx.set_alpn_protocols(["http/1.1"])
port, stop = int(sys.argv[3]), sys.argv[4]
done = failed = 0
seen, errors = set(), []
while (done < 300 or not os.path.exists(stop)) and done < 20000:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=20) as raw:
            with ctx.wrap_socket(raw, server_hostname="localhost") as s:
                seen.add(s.getpeercert(binary_form=True))
                s.sendall(b"GET /article HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                got = s.makefile("rb").read()
        if not got.startswith(b"HTTP/1.1 200 "):
            failed += 1
            errors.append(got[:60])
    except Exception as e:
        failed += 1
        errors.append(repr(e))
    done += 1
print(done, failed, len(seen), errors[:3])
"#;

fn a_rotation_under_new_connections_fails_none(poller: &str) {
    let (dir, server, port) = with_copied_files(poller, &WATCH);
    let stop = dir.path().join("stop");
    let mut client = Command::new("python3");
    client
        .args([
            "-c",
            NEW_CONNECTIONS,
            &fixture("ca.pem"),
            &fixture("cert2.pem"),
        ])
        .arg(port.to_string())
        .arg(&stop)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut client =
        Group::spawn(&mut client).unwrap_or_else(|e| panic!("python3 is needed ({e})"));
    // Each swap as a deploy tool makes it: new files renamed over the old,
    // the key first.
    for swap in 1..=6 {
        let (cert, key) = match swap % 2 {
            1 => ("cert2.pem", "key2.pem"),
            _ => ("cert.pem", "key.pem"),
        };
        for (from, to) in [(key, "key.pem"), (cert, "cert.pem")] {
            let new = dir.path().join(format!("{to}.new"));
            std::fs::copy(fixture(from), &new).expect("a new file");
            std::fs::rename(&new, dir.path().join(to)).expect("rename it over");
        }
        let reloaded = server.wait_lines(&[RELOADED], swap);
        assert!(reloaded.len() >= swap, "swap {swap}: {}", server.log());
    }
    std::fs::write(&stop, "").expect("the stop file");
    let (mut said, mut errors) = (String::new(), String::new());
    let piped = client.0.stdout.take().zip(client.0.stderr.take());
    if let Some((mut stdout, mut stderr)) = piped {
        let _ = stdout.read_to_string(&mut said);
        let _ = stderr.read_to_string(&mut errors);
    }
    let fields: Vec<&str> = said.split_whitespace().collect();
    assert!(
        fields.len() >= 3 && fields[1] == "0" && fields[2] == "2",
        "want `N 0 2` (done, failed, certificates seen): {said}{errors}\n{}",
        server.log()
    );
    let done: u32 = fields[0].parse().expect("a count");
    assert!(done >= 300, "{said}");
}

/// A certificate 3 days from its end: a warning at start, naming it.
#[test]
fn a_certificate_near_its_end_is_a_warning_at_start() {
    let dir = TempDir::new("tls-expiring");
    let (cert, key) = self_signed(dir.path(), "soon", 3);
    let (server, _) = tls_host("epoll", &shown(&cert), &shown(&key), &WATCH);
    let warned = [
        "WARN",
        "the TLS certificate",
        "soon.pem",
        "expires in",
        "renew it",
    ];
    assert!(server.wait_log(&warned), "{}", server.log());
    let left = status(&server)["tls_certificates"][0]["seconds_left"]
        .as_i64()
        .expect("seconds_left");
    assert!(left > 2 * 86_400 && left <= 3 * 86_400, "{left}");
}

/// Process mode: every worker reloads a changed file; the expiry warning
/// is the supervisor's alone; status (a worker's) follows the renewal.
#[test]
fn every_worker_process_reloads_a_changed_file() {
    let dir = TempDir::new("tls-process");
    let (cert, key) = self_signed(dir.path(), "soon", 3);
    let file = shown(&cert);
    let mut extra = vec!["--worker-mode", "process", "--workers", "2"];
    extra.extend(WATCH);
    let (server, port) = tls_host("epoll", &file, &shown(&key), &extra);
    server.wait_lines(&["supervisor", ") ready"], 2);
    let warned = ["the TLS certificate", "soon.pem", "expires in"];
    assert!(server.wait_log(&warned), "{}", server.log());
    assert!(serves(&file, port), "{}", server.log());
    rewrite(&fixture("key2.pem"), &key);
    rewrite(&fixture("cert2.pem"), &cert);
    let reloaded = server.wait_lines(&[RELOADED], 2);
    assert_eq!(reloaded.len(), 2, "{}", server.log());
    for _ in 0..6 {
        assert!(serves(&fixture("cert2.pem"), port), "{}", server.log());
    }
    assert_expiry_shown(&server, &file, &fixture("cert2.pem"));
    // Both workers have looked at the files since they started: none said
    // the warning, the supervisor did, once.
    assert_eq!(server.log_lines(&warned).len(), 1, "{}", server.log());
}

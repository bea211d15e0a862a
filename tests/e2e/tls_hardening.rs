//! TLS hardening, on every backend: a handshake slowloris closed at
//! `--tls-handshake-timeout` while another client is served, garbage
//! before a ClientHello refused, plain HTTP on the TLS port answered 400
//! in plaintext that the client can read, an oversized record refused
//! with an alert, renegotiation refused, 0-RTT off, sessions resumed
//! (TLS 1.3 and 1.2), and failed handshakes counted by kind in status and
//! metrics (summed over worker processes too). Then testssl.sh, once, on
//! epoll: no weak protocol or cipher, nothing vulnerable.

use crate::common::{metrics, status};
use crate::harness::{wait_until, Captured, Server, TempDir, WAIT};
use crate::tls::{curl, fixture, with_tls};
use serde_json::Value;
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

matrix!(
    a_handshake_slowloris_is_closed_at_the_timeout_while_others_are_served,
    garbage_before_a_client_hello_is_refused,
    plain_http_on_the_tls_port_gets_a_readable_400,
    an_oversized_record_is_refused_with_an_alert,
    renegotiation_is_refused,
    sessions_resume_and_early_data_is_not_taken,
    failures_are_counted_by_kind_in_status_and_metrics,
    worker_processes_sum_their_failures,
);

/// How long a client waits for the host to close: far past the timeouts
/// the tests set, far short of the 30 s head and keep-alive timeouts.
const CLOSE_WAIT: Duration = Duration::from_secs(8);

/// The start of a ClientHello: a handshake record of 256 bytes holding a
/// ClientHello (type 1) of 252, TLS 1.2's version, then its random.
const HELLO_START: [u8; 11] = [
    0x16, 0x03, 0x01, 0x01, 0x00, 0x01, 0x00, 0x00, 0xfc, 0x03, 0x03,
];

/// The kinds failed handshakes are counted by.
const KINDS: [&str; 8] = [
    "timeout",
    "plain_http",
    "not_tls",
    "protocol",
    "certificate",
    "alert",
    "closed",
    "other",
];

/// The failed handshakes status counts, by kind.
fn failures(server: &Server) -> Vec<u64> {
    let s = status(server);
    let counted = &s["connections"]["tls_handshake_failures"];
    KINDS
        .iter()
        .map(|k| {
            counted[k]
                .as_u64()
                .unwrap_or_else(|| panic!("no {k} in {counted}"))
        })
        .collect()
}

/// Waits until status and metrics both count `n` failed handshakes of
/// `kind` (in process mode a worker answers with the others' counters as
/// they last published them, a tick ago at most).
fn assert_failed(server: &Server, kind: &str, n: u64) {
    let i = KINDS.iter().position(|k| *k == kind).expect("a kind");
    let series = format!("stoa_tls_handshake_failures_total{{kind=\"{kind}\"}}");
    let mut counted = (0, None);
    wait_until(WAIT, || {
        counted = (failures(server)[i], metrics(server).get(&series).copied());
        counted == (n, Some(n as f64))
    });
    assert_eq!(counted, (n, Some(n as f64)), "{kind}\n{}", server.log());
}

/// Connects to the TLS port, sends `bytes`, and reads until the host
/// closes (its FIN, or a reset); what came, and the reset if any. Panics
/// if the host has not closed within `CLOSE_WAIT`.
fn send_raw(port: u16, bytes: &[u8]) -> (Vec<u8>, Option<io::Error>) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.write_all(bytes).expect("send");
    read_to_close(&mut s)
}

/// Reads `s` until the host closes it (see `send_raw`).
fn read_to_close(s: &mut TcpStream) -> (Vec<u8>, Option<io::Error>) {
    s.set_read_timeout(Some(CLOSE_WAIT)).expect("timeout");
    let mut got = Vec::new();
    match s.read_to_end(&mut got) {
        Ok(_) => (got, None),
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ) =>
        {
            panic!("not closed within {CLOSE_WAIT:?}; got {got:?}")
        }
        Err(e) => (got, Some(e)),
    }
}

/// The host still serves HTTPS.
fn assert_serves_tls(server: &Server, port: u16) {
    let (ok, text) = curl(&[format!("https://localhost:{port}/article")], &[]);
    assert!(ok && text.contains("\n200 1\n"), "{text}\n{}", server.log());
}

/// A client sends the start of a ClientHello a byte every 100 ms; the
/// host closes it at the handshake timeout, without a plaintext answer
/// (the 30 s head timeout never applies: no request byte can come before
/// the handshake), and serves another client meanwhile.
fn a_handshake_slowloris_is_closed_at_the_timeout_while_others_are_served(poller: &str) {
    let (server, port) = with_tls(poller, &["--tls-handshake-timeout", "1s"]);
    let mut slow = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    let mut writer = slow.try_clone().expect("a second handle");
    let stop = Arc::new(AtomicBool::new(false));
    let stopped = stop.clone();
    let drip = std::thread::spawn(move || {
        let bytes = HELLO_START.iter().chain(std::iter::repeat_n(&0u8, 245));
        for b in bytes {
            if stopped.load(Ordering::Relaxed) || writer.write_all(&[*b]).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    assert_serves_tls(&server, port);
    let (got, _) = read_to_close(&mut slow);
    stop.store(true, Ordering::Relaxed);
    let _ = drip.join();
    assert!(!got.windows(5).any(|w| w == b"HTTP/"), "{got:?}");
    assert_failed(&server, "timeout", 1);
    assert_serves_tls(&server, port);
}

/// Bytes that are no TLS record before any ClientHello: closed, never
/// answered in plaintext.
fn garbage_before_a_client_hello_is_refused(poller: &str) {
    let (server, port) = with_tls(poller, &[]);
    let (got, _) = send_raw(port, b"\x00\x01\x02\x03 garbage\r\n\r\n");
    assert!(!got.windows(5).any(|w| w == b"HTTP/"), "{got:?}");
    assert_failed(&server, "not_tls", 1);
    assert_serves_tls(&server, port);
}

/// What nginx answers plain HTTP on an HTTPS port with.
const PLAIN_ANSWER: &str = "The plain HTTP request was sent to HTTPS port";

/// Plain HTTP on the TLS port: 400 in plaintext with `Connection: close`,
/// then a clean close (a FIN, no reset, also while the client is still
/// sending a large body), as nginx answers it.
fn plain_http_on_the_tls_port_gets_a_readable_400(poller: &str) {
    let (server, port) = with_tls(poller, &[]);
    let (ok, text) = curl(&[format!("http://localhost:{port}/article")], &[]);
    assert!(ok && text.contains("\n400 1\n"), "{text}");
    assert!(text.contains(PLAIN_ANSWER), "{text}");
    let body = vec![b'x'; 1 << 20];
    let mut request =
        b"POST /article HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1048576\r\n\r\n".to_vec();
    request.extend_from_slice(&body);
    let (got, reset) = send_raw(port, &request);
    assert!(reset.is_none(), "{reset:?} after {got:?}");
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{text}");
    assert!(text.contains("\r\nConnection: close\r\n"), "{text}");
    assert!(text.ends_with(&format!("{PLAIN_ANSWER}\n")), "{text}");
    assert_failed(&server, "plain_http", 2);
    assert_serves_tls(&server, port);
}

/// A record header claiming more than TLS allows (16384 + 2048 bytes):
/// a fatal alert, the connection closed, the host unharmed.
fn an_oversized_record_is_refused_with_an_alert(poller: &str) {
    let (server, port) = with_tls(poller, &[]);
    let record = [&[0x16, 0x03, 0x01, 0x48, 0x01][..], &[0u8; 2000]].concat();
    let (got, _) = send_raw(port, &record);
    // An alert record (21), TLS 1.2's version, 2 bytes, level fatal (2).
    assert!(
        got.starts_with(&[0x15, 0x03, 0x03, 0x00, 0x02, 0x02]),
        "{got:?}"
    );
    assert_failed(&server, "not_tls", 1);
    assert_serves_tls(&server, port);
}

/// `openssl s_client` running against the TLS port, its output collected.
struct SClient {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    out: Arc<Captured>,
    err: Arc<Captured>,
}

impl SClient {
    /// Starts `openssl s_client` to the TLS port (TLS 1.3 unless `args`
    /// say), trusting the test CA, with `args`.
    fn start(port: u16, args: &[&str]) -> SClient {
        let mut child = Command::new("openssl")
            .args(["s_client", "-connect", &format!("127.0.0.1:{port}")])
            .args(["-CAfile", &fixture("ca.pem"), "-servername", "localhost"])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("openssl is needed: `apt-get install -y openssl` ({e})"));
        let out = Captured::collect(child.stdout.take().expect("stdout"));
        let err = Captured::collect(child.stderr.take().expect("stderr"));
        let stdin = child.stdin.take();
        SClient {
            child,
            stdin,
            out,
            err,
        }
    }

    /// Writes `bytes` to its standard input (kept open until it exits).
    fn send(&mut self, bytes: &[u8]) {
        if let Some(stdin) = &mut self.stdin {
            stdin.write_all(bytes).expect("s_client's input");
        }
    }

    /// Waits until it has printed `needle`.
    fn wait_for(&self, needle: &str) -> bool {
        self.out
            .wait(Duration::from_secs(20), |t| t.contains(needle))
    }

    /// Waits for it to exit (it must, within 20 s); everything it printed.
    fn finish(mut self) -> String {
        let child = &mut self.child;
        let exited = wait_until(Duration::from_secs(20), || {
            matches!(child.try_wait(), Ok(Some(_)))
        });
        self.stdin = None;
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.out.wait_ended(WAIT);
        self.err.wait_ended(WAIT);
        let text = self.out.text() + &self.err.text();
        assert!(exited, "s_client did not end: {text}");
        text
    }
}

/// Runs `s_client` with `args`, `input` then the end on its standard
/// input (with `-ign_eof` it reads on to the host's close); everything it
/// printed.
fn s_client(port: u16, args: &[&str], input: &[u8]) -> String {
    let mut client = SClient::start(port, args);
    client.send(input);
    // Without `-ign_eof`, the end of its input ends it after the handshake.
    client.stdin = None;
    client.finish()
}

/// A GET that closes its connection, for `s_client -ign_eof`.
const GET: &[u8] = b"GET /article HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";

/// A TLS 1.2 client asks to renegotiate (s_client's `R`): refused (rustls
/// answers `no_renegotiation`, which OpenSSL takes as fatal), and the host
/// serves on.
fn renegotiation_is_refused(poller: &str) {
    let (server, port) = with_tls(poller, &[]);
    let mut client = SClient::start(port, &["-tls1_2"]);
    assert!(client.wait_for("Verify return code"), "no handshake");
    client.send(b"R\n");
    let text = client.finish();
    assert!(text.contains("Protocol  : TLSv1.2"), "{text}");
    assert!(text.contains("RENEGOTIATING"), "{text}");
    assert!(text.contains("no renegotiation"), "{text}");
    assert_serves_tls(&server, port);
}

/// A session saved by one connection resumes on the next (TLS 1.3 and
/// 1.2: `Reused`); early data offered on a resumed TLS 1.3 session is not
/// taken (the host's tickets allow none: `Max Early Data: 0`).
fn sessions_resume_and_early_data_is_not_taken(poller: &str) {
    let (server, port) = with_tls(poller, &[]);
    let dir = TempDir::new("sessions");
    let file = |name: &str| dir.path().join(name).display().to_string();
    let early = file("early.txt");
    std::fs::write(&early, GET).expect("early data file");
    let first = s_client(port, &["-ign_eof", "-sess_out", &file("s1")], GET);
    assert!(first.contains("New, TLSv1.3"), "{first}");
    assert!(first.contains("HTTP/1.1 200 OK"), "{first}");
    assert!(first.contains("Max Early Data: 0"), "{first}");
    let args = [
        "-ign_eof",
        "-sess_in",
        &file("s1"),
        "-sess_out",
        &file("s2"),
    ];
    let second = s_client(port, &args, GET);
    assert!(second.contains("Reused, TLSv1.3"), "{second}");
    assert!(second.contains("HTTP/1.1 200 OK"), "{second}");
    let args = ["-sess_in", &file("s2"), "-early_data", &early];
    let third = s_client(port, &args, b"");
    assert!(third.contains("Reused, TLSv1.3"), "{third}");
    assert!(
        third.contains("Early data was not sent") || third.contains("Early data was rejected"),
        "{third}"
    );
    assert!(!third.contains("Early data was accepted"), "{third}");
    let twelve = ["-tls1_2", "-ign_eof", "-sess_out", &file("t1")];
    assert!(s_client(port, &twelve, GET).contains("New, TLSv1.2"));
    let twelve = ["-tls1_2", "-ign_eof", "-sess_in", &file("t1")];
    let again = s_client(port, &twelve, GET);
    assert!(again.contains("Reused, TLSv1.2"), "{again}");
    assert_eq!(failures(&server).iter().sum::<u64>(), 0, "{}", server.log());
}

/// One failed handshake of each kind a client can cause (all but
/// `other`), on a bind that takes optional client certificates; status
/// and metrics count exactly those.
fn failures_are_counted_by_kind_in_status_and_metrics(poller: &str) {
    let client_ca = fixture("client-ca.pem");
    let args = [
        "--tls-handshake-timeout",
        "1s",
        "--tls-client-auth",
        "optional",
    ];
    let (server, port) = with_tls(
        poller,
        &[&args[..], &["--tls-client-ca", &client_ca]].concat(),
    );
    // timeout: a client that sends nothing.
    let mut idle = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    // plain_http, not_tls.
    let (ok, text) = curl(&[format!("http://localhost:{port}/article")], &[]);
    assert!(ok && text.contains("\n400 1\n"), "{text}");
    send_raw(port, b"\x00garbage");
    // protocol: a client that offers only a protocol the host does not
    // speak (RFC 7301: no_application_protocol).
    let only_spdy = s_client(port, &["-alpn", "spdy/3.1"], b"");
    assert!(only_spdy.contains("no application protocol"), "{only_spdy}");
    // alert: a client that does not trust the certificate says so.
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "20"])
        .arg(format!("https://localhost:{port}/article"))
        .output()
        .expect("curl");
    assert!(!out.status.success(), "{out:?}");
    // certificate: a client certificate no CA of the bind's signed.
    let (rogue, rogue_key) = (fixture("rogue.pem"), fixture("rogue-key.pem"));
    s_client(port, &["-cert", &rogue, "-key", &rogue_key], b"");
    // closed: half a ClientHello, then the client's FIN.
    let mut half = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    half.write_all(&HELLO_START).expect("half a hello");
    half.shutdown(Shutdown::Write).expect("FIN");
    read_to_close(&mut half);
    read_to_close(&mut idle);
    let want = vec![1, 1, 1, 1, 1, 1, 1, 0];
    let mut counted = Vec::new();
    wait_until(WAIT, || {
        counted = failures(&server);
        counted == want
    });
    assert_eq!(counted, want, "{KINDS:?}\n{}", server.log());
    let m = metrics(&server);
    for (kind, n) in KINDS.iter().zip(want) {
        let series = format!("stoa_tls_handshake_failures_total{{kind=\"{kind}\"}}");
        assert_eq!(m.get(&series).copied(), Some(n as f64), "{series}");
    }
}

/// Worker processes count their own failures; status and metrics, from
/// whichever worker answers, sum them: plain HTTP requests are sent until
/// both workers have counted some. The handshake timeout holds there too.
fn worker_processes_sum_their_failures(poller: &str) {
    let args = ["--worker-mode", "process", "--workers", "2"];
    let (server, port) = with_tls(
        poller,
        &[&args[..], &["--tls-handshake-timeout", "1s"]].concat(),
    );
    let mut idle = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    let (got, _) = read_to_close(&mut idle);
    assert!(!got.windows(5).any(|w| w == b"HTTP/"), "{got:?}");
    assert_failed(&server, "timeout", 1);
    let per_worker = || -> Vec<u64> {
        let s = status(&server);
        let workers = s["per_worker"].as_array().cloned().unwrap_or_default();
        workers
            .iter()
            .map(|w: &Value| w["tls_handshake_failures"].as_u64().unwrap_or(0))
            .collect()
    };
    let mut sent = 0;
    while sent < 60 {
        let (ok, text) = curl(&[format!("http://localhost:{port}/article")], &[]);
        assert!(ok && text.contains("\n400 1\n"), "{text}");
        sent += 1;
        let counted = per_worker();
        if counted.len() == 2 && counted.iter().all(|n| *n > 0) {
            break;
        }
    }
    // Each worker's count is of every kind: the timeout's too.
    let summed =
        |c: &[u64]| c.len() == 2 && c.iter().all(|n| *n > 0) && c.iter().sum::<u64>() == sent + 1;
    let mut counted = Vec::new();
    wait_until(WAIT, || {
        counted = per_worker();
        summed(&counted)
    });
    assert!(
        summed(&counted),
        "{counted:?} after {sent}: {}\n{}",
        status(&server)["per_worker"],
        server.log()
    );
    assert_failed(&server, "plain_http", sent);
}

/// testssl.sh against a TLS bind, with the checks that finish within
/// about half a minute: protocols (`-p`), cipher categories (`-s`),
/// forward secrecy (`-f`) and every vulnerability (`-U`). Every finding
/// must be OK or INFO: no protocol or cipher offered that it counts as
/// weak (LOW and up), nothing vulnerable, no check that could not run
/// (WARN).
#[test]
fn testssl_finds_no_weak_protocol_cipher_or_vulnerability() {
    let (server, port) = with_tls("epoll", &[]);
    let dir = TempDir::new("testssl");
    let json = dir.path().join("findings.json");
    let out = Command::new("testssl")
        .args(["--quiet", "--color", "0", "--warnings", "off"])
        .args(["-p", "-s", "-f", "-U", "--jsonfile"])
        .arg(&json)
        .arg(format!("127.0.0.1:{port}"))
        .output()
        .unwrap_or_else(|e| panic!("testssl.sh is needed: `apt-get install -y testssl.sh` ({e})"));
    let report = String::from_utf8_lossy(&out.stdout).into_owned();
    let text = std::fs::read_to_string(&json).unwrap_or_else(|e| panic!("{e}: {report}"));
    let findings: Vec<Value> = serde_json::from_str(&text).expect("testssl's JSON");
    let finding = |id: &str| {
        findings
            .iter()
            .find(|f| f["id"] == id)
            .unwrap_or_else(|| panic!("no {id} in {report}"))["finding"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    for id in ["SSLv2", "SSLv3", "TLS1", "TLS1_1"] {
        assert!(finding(id).starts_with("not offered"), "{id}: {report}");
    }
    for id in ["TLS1_2", "TLS1_3"] {
        assert!(finding(id).starts_with("offered"), "{id}: {report}");
    }
    for id in [
        "heartbleed",
        "CCS",
        "secure_client_renego",
        "ROBOT",
        "LUCKY13",
    ] {
        finding(id);
    }
    let flagged: Vec<&Value> = findings
        .iter()
        .filter(|f| !matches!(f["severity"].as_str(), Some("OK" | "INFO")))
        .collect();
    assert!(
        flagged.is_empty(),
        "{flagged:#?}\n{report}\n{}",
        server.log()
    );
}

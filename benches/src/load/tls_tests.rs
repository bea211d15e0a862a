//! The load generator over TLS against a tiny in-test rustls server with
//! the host's test certificate: keep-alive runs make one handshake per
//! connection, connection-per-request runs one per request (full, or
//! resumed when asked), and a server the CA does not vouch for fails
//! every request instead of being answered.

use super::tests::accept_until;
use super::*;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ServerConfig, ServerConnection, StreamOwned};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::Arc;
use std::thread::JoinHandle;

fn fixture(name: &str) -> PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/tls")
        .join(name)
}

/// A blocking TLS server, a thread per connection: answers each request
/// with `hello`, and closes after it (with `close_notify`) when the
/// request was HTTP/1.0.
struct TlsServer {
    addr: SocketAddr,
    connections: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    acceptor: Option<JoinHandle<()>>,
}

impl TlsServer {
    fn start(cert: &str, key: &str) -> TlsServer {
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(fixture(cert))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let key = PrivateKeyDer::from_pem_file(fixture(key)).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .unwrap();
        let config = Arc::new(config);
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let connections = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let count = connections.clone();
        let acceptor = accept_until(&stop, listener, move |sock| {
            count.fetch_add(1, Ordering::Relaxed);
            let tls = ServerConnection::new(config.clone()).unwrap();
            std::thread::spawn(move || serve(StreamOwned::new(tls, sock)));
        });
        TlsServer {
            addr,
            connections,
            stop,
            acceptor: Some(acceptor),
        }
    }

    fn config(&self, mode: Mode, requests: u64, resume: bool) -> Config {
        Config {
            target: Target::parse(&format!("https://{}/x", self.addr)).unwrap(),
            mode,
            connections: 4,
            requests,
            max_time: Duration::from_secs(20),
            threads: 1,
            timeout: Duration::from_secs(10),
            tls: Some(TlsOptions {
                ca: fixture("ca.pem"),
                resume,
                suites: vec!["TLS13_AES_128_GCM_SHA256".into()],
            }),
        }
    }
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.acceptor.take() {
            let _ = t.join();
        }
    }
}

fn serve(mut stream: StreamOwned<ServerConnection, TcpStream>) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        buf.extend_from_slice(&chunk[..n]);
        while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let close = buf.starts_with(b"GET /x HTTP/1.0");
            buf.drain(..end + 4);
            let answer: &[u8] = if close {
                b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 5\r\n\r\nhello"
            } else {
                b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"
            };
            if stream.write_all(answer).is_err() {
                return;
            }
            if close {
                stream.conn.send_close_notify();
                let _ = stream.flush();
                return;
            }
        }
    }
}

#[test]
fn keep_alive_makes_one_handshake_per_connection() {
    let server = TlsServer::start("cert.pem", "key.pem");
    let report = run(&server.config(Mode::KeepAlive, 200, false)).unwrap();
    assert_eq!(report.completed, 200, "{report:?}");
    assert_eq!(report.error_count(), 0, "{report:?}");
    assert_eq!(report.handshakes, 4);
    assert_eq!(report.resumed, 0);
    let negotiated = report.negotiated.expect("a handshake").describe();
    assert_eq!(negotiated, "TLSv1_3 TLS13_AES_128_GCM_SHA256 X25519");
    assert_eq!(server.connections.load(Ordering::Relaxed), 4);
}

#[test]
fn a_connection_per_request_makes_a_full_handshake_per_request() {
    let server = TlsServer::start("cert.pem", "key.pem");
    let report = run(&server.config(Mode::Close, 60, false)).unwrap();
    assert_eq!(report.completed, 60, "{report:?}");
    assert_eq!(report.error_count(), 0, "{report:?}");
    assert_eq!((report.handshakes, report.resumed), (60, 0));
    assert_eq!(server.connections.load(Ordering::Relaxed), 60);
}

#[test]
fn resumption_when_asked_resumes_the_later_sessions() {
    let server = TlsServer::start("cert.pem", "key.pem");
    let report = run(&server.config(Mode::Close, 60, true)).unwrap();
    assert_eq!(report.completed, 60, "{report:?}");
    assert_eq!(report.handshakes + report.resumed, 60);
    // The first connections start before any ticket came back.
    assert!(report.handshakes >= 1 && report.resumed >= 50, "{report:?}");
}

#[test]
fn a_certificate_the_ca_did_not_sign_fails_every_request() {
    // cert2.pem is self-signed: ca.pem does not vouch for it.
    let server = TlsServer::start("cert2.pem", "key2.pem");
    let report = run(&server.config(Mode::Close, 10, false)).unwrap();
    assert_eq!(report.completed, 0, "{report:?}");
    assert_eq!(report.errors[ErrorKind::Other as usize], 10, "{report:?}");
    let e = report.first_other.unwrap_or_default();
    assert!(e.contains("certificate"), "{e}");
    assert_eq!(report.handshakes, 0);
}

#[test]
fn tls_options_and_the_scheme_must_agree() {
    let server = TlsServer::start("cert.pem", "key.pem");
    let mut config = server.config(Mode::KeepAlive, 1, false);
    config.tls = None;
    let e = run(&config).unwrap_err();
    assert!(e.contains("--ca"), "{e}");
    let mut config = server.config(Mode::KeepAlive, 1, false);
    config.target = Target::parse(&format!("http://{}/x", server.addr)).unwrap();
    let e = run(&config).unwrap_err();
    assert!(e.contains("https://"), "{e}");
}

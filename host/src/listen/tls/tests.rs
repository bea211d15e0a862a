//! The TLS stream over a socket pair: handshakes, reads and writes as a
//! bare socket's, plain HTTP on a TLS port, the kinds of failed
//! handshakes, and the errors of a configuration that cannot load.

use super::*;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore};
use std::path::Path;

/// A server configuration serving `cert` (a PEM chain, the server's
/// certificate first) with `key` (its PEM private key: PKCS#8, PKCS#1 or
/// SEC1; an encrypted key is refused), TLS 1.3 and 1.2, ALPN `http/1.1`
/// only (a client that offers only `h2` is refused with
/// `no_application_protocol`). The error names the file and the reason.
fn server_config(cert: &Path, key: &Path) -> Result<Arc<ServerConfig>, TlsError> {
    let site = crate::settings::Site {
        certs: vec![crate::settings::CertPair {
            cert: cert.to_path_buf(),
            key: key.to_path_buf(),
        }],
        ..Default::default()
    };
    let resumption = Resumption::new(tickets(None));
    config::load(&site, &resumption).map(|l| l.config)
}

fn client(alpn: &[&[u8]]) -> ClientConnection {
    let mut roots = RootCertStore::empty();
    for ca in CertificateDer::pem_file_iter(fixture("ca.pem")).expect("ca.pem") {
        roots
            .add(ca.expect("a CA certificate"))
            .expect("add the CA");
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    let name = ServerName::try_from("localhost").expect("a name");
    ClientConnection::new(Arc::new(config), name).expect("a client session")
}

/// A server session over a loopback connection, and the client's
/// blocking socket.
fn pair() -> (TlsStream, std::net::TcpStream) {
    let config = server_config(&fixture("cert.pem"), &fixture("key.pem")).expect("loads");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let client =
        std::net::TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
    let (server, _) = listener.accept().expect("accept");
    server.set_nonblocking(true).expect("non-blocking");
    let stream = TlsStream::new(Accepted::Tcp(mio::net::TcpStream::from_std(server)), config)
        .expect("a session");
    (stream, client)
}

/// Drives both ends until `done`, the server side by non-blocking
/// reads (as the loop does) and the client's by rustls's own I/O.
fn drive(
    server: &mut TlsStream,
    client: &mut ClientConnection,
    sock: &mut std::net::TcpStream,
    mut done: impl FnMut(&mut TlsStream, &mut ClientConnection) -> bool,
) {
    sock.set_read_timeout(Some(std::time::Duration::from_millis(20)))
        .expect("timeout");
    for _ in 0..500 {
        if done(server, client) {
            return;
        }
        while client.wants_write() {
            client.write_tls(sock).expect("client writes");
        }
        let _ = server.flush();
        match client.read_tls(sock) {
            Ok(_) => {
                client.process_new_packets().expect("client reads");
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => panic!("client read: {e}"),
        }
    }
    panic!("never done");
}

#[test]
fn a_request_and_its_answer_go_through_the_session() {
    let (mut server, mut sock) = pair();
    let mut client = client(&[b"http/1.1"]);
    client
        .writer()
        .write_all(b"GET / HTTP/1.1\r\n\r\n")
        .expect("client queues");
    let mut got = Vec::new();
    drive(&mut server, &mut client, &mut sock, |s, _| {
        let mut buf = [0u8; 64];
        match s.read(&mut buf) {
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => panic!("server read: {e}"),
        }
        got.ends_with(b"\r\n\r\n")
    });
    assert_eq!(got, b"GET / HTTP/1.1\r\n\r\n");
    assert!(!server.is_handshaking());
    assert_eq!(client.alpn_protocol(), Some(&b"http/1.1"[..]));
    assert!(!server.chose_h2());
    let answer = vec![b'a'; 200 << 10];
    let mut sent = 0;
    let mut heard = Vec::new();
    drive(&mut server, &mut client, &mut sock, |s, c| {
        match s.write(&answer[sent..]) {
            Ok(n) => sent += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => panic!("server write: {e}"),
        }
        let mut buf = vec![0u8; 64 << 10];
        while let Ok(n) = c.reader().read(&mut buf) {
            if n == 0 {
                break;
            }
            heard.extend_from_slice(&buf[..n]);
        }
        heard.len() == answer.len()
    });
    assert_eq!(heard, answer);
    assert!(!server.has_buffered_output());
    server.shutdown_write().expect("close_notify and FIN");
    let mut closed = false;
    drive(&mut server, &mut client, &mut sock, |_, c| {
        let mut buf = [0u8; 16];
        closed |= matches!(c.reader().read(&mut buf), Ok(0));
        closed
    });
}

/// The first read on `server` that does not block.
fn first_read(server: &mut TlsStream) -> io::Result<usize> {
    for _ in 0..5000 {
        let mut buf = [0u8; 16];
        match server.read(&mut buf) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::yield_now(),
            other => return other,
        }
    }
    panic!("every read would block");
}

/// A head and a body sent as two records back to back are read in one
/// read: a read that comes back short has drained the socket (the
/// connection's reader, under edge-triggered readiness, relies on it).
#[test]
fn records_waiting_in_the_socket_are_read_in_one_read() {
    let (mut server, mut sock) = pair();
    let mut client = client(&[b"http/1.1"]);
    client.writer().write_all(b"x").expect("client queues");
    let mut first = [0u8; 1];
    drive(&mut server, &mut client, &mut sock, |s, _| {
        matches!(s.read(&mut first), Ok(1))
    });
    // The body in three records: the session reads the socket in
    // several full reads before the short one that ends it.
    let head = b"POST / HTTP/1.1\r\nContent-Length: 40000\r\n\r\n";
    client.writer().write_all(head).expect("the head");
    while client.wants_write() {
        client.write_tls(&mut sock).expect("the head's record");
    }
    client.writer().write_all(&[b'b'; 40000]).expect("the body");
    while client.wants_write() {
        client.write_tls(&mut sock).expect("the body's records");
    }
    std::thread::sleep(std::time::Duration::from_millis(100));
    let mut buf = vec![0u8; 64 << 10];
    let n = server.read(&mut buf).expect("what waits");
    assert_eq!(n, head.len() + 40000);
    let again = server.read(&mut buf).map_err(|e| e.kind());
    assert_eq!(again, Err(io::ErrorKind::WouldBlock));
}

/// The session tickets made when the handshake ends wait for the
/// answer to the request that came with the client's Finished, and go
/// out in its write.
#[test]
fn session_tickets_go_out_with_the_first_answer() {
    let (mut server, mut sock) = pair();
    let mut client = client(&[b"http/1.1"]);
    let get = b"GET / HTTP/1.1\r\n\r\n";
    client.writer().write_all(get).expect("client queues");
    let mut held = None;
    drive(&mut server, &mut client, &mut sock, |s, _| {
        let mut buf = [0u8; 64];
        match s.read(&mut buf) {
            Ok(n) if n == get.len() => {
                held = Some(s.has_buffered_output());
                true
            }
            _ => false,
        }
    });
    assert_eq!(held, Some(true), "the tickets wait for the answer");
    server
        .write_all(b"HTTP/1.1 204 No Content\r\n\r\n")
        .expect("the answer");
    assert!(!server.has_buffered_output(), "tickets and answer went out");
    let mut heard = Vec::new();
    drive(&mut server, &mut client, &mut sock, |_, c| {
        let mut buf = [0u8; 64];
        if let Ok(n) = c.reader().read(&mut buf) {
            heard.extend_from_slice(&buf[..n]);
        }
        heard.ends_with(b"\r\n\r\n")
    });
    assert_eq!(heard, b"HTTP/1.1 204 No Content\r\n\r\n");
}

/// The host prefers HTTP/2: a client offering both gets `h2`, one
/// offering `h2` alone gets it too.
#[test]
fn a_client_offering_h2_gets_it() {
    for offer in [
        &[&b"h2"[..], b"http/1.1"][..],
        &[b"http/1.1", b"h2"],
        &[b"h2"],
    ] {
        let (mut server, mut sock) = pair();
        let mut client = client(offer);
        client.writer().write_all(b"x").expect("client queues");
        drive(&mut server, &mut client, &mut sock, |s, _| {
            let mut buf = [0u8; 1];
            matches!(s.read(&mut buf), Ok(1))
        });
        assert_eq!(client.alpn_protocol(), Some(&b"h2"[..]), "{offer:?}");
        assert!(server.chose_h2());
    }
}

#[test]
fn a_client_offering_no_protocol_the_host_speaks_is_refused() {
    let (mut server, mut sock) = pair();
    let mut client = client(&[b"spdy/3.1"]);
    while client.wants_write() {
        client.write_tls(&mut sock).expect("client hello");
    }
    let e = first_read(&mut server).expect_err("refused");
    assert_eq!(e.kind(), io::ErrorKind::InvalidData);
    assert!(
        e.to_string()
            .contains("peer doesn't support any known protocol"),
        "{e}"
    );
    assert_eq!(server.handshake_failure(), Some(HandshakeFailure::Protocol));
}

/// Reads on `server` until a read fails otherwise than `WouldBlock` or
/// the handshake has failed; the last read's outcome.
fn read_until_failed(server: &mut TlsStream) -> io::Result<usize> {
    for _ in 0..5000 {
        let mut buf = [0u8; 64];
        match server.read(&mut buf) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if server.handshake_failure().is_some() {
                    return Err(e);
                }
                std::thread::yield_now()
            }
            other => return other,
        }
    }
    panic!("every read would block, and the handshake goes on");
}

/// Plain HTTP is told from its first bytes, and the session becomes a
/// bare socket: the answer goes out in plaintext, with no TLS record
/// around it nor after it.
#[test]
fn plain_http_turns_the_session_into_a_bare_socket() {
    let (mut server, mut sock) = pair();
    let request = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    sock.write_all(request).expect("plain bytes");
    let e = read_until_failed(&mut server).expect_err("no plaintext");
    assert_eq!(e.kind(), io::ErrorKind::WouldBlock, "{e}");
    assert_eq!(
        server.handshake_failure(),
        Some(HandshakeFailure::PlainHttp)
    );
    assert!(!server.is_handshaking());
    // What follows the bytes looked at is read as it is.
    let mut rest = [0u8; 64];
    let n = server.read(&mut rest).expect("the rest");
    assert!(n > 0 && request.ends_with(&rest[..n]), "{:?}", &rest[..n]);
    server
        .write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n")
        .expect("answer");
    server.shutdown_write().expect("FIN");
    drop(server);
    let mut got = Vec::new();
    sock.read_to_end(&mut got)
        .expect("the answer, then the FIN");
    assert_eq!(got, b"HTTP/1.1 400 Bad Request\r\n\r\n");
}

/// Other bytes before a ClientHello, and a record longer than TLS
/// allows (16384 + 2048 bytes), are refused; the oversized record with
/// a fatal alert.
#[test]
fn bytes_that_are_no_tls_records_are_refused() {
    let oversized = [&[0x16, 0x03, 0x01, 0x48, 0x01][..], &[0u8; 64]].concat();
    let cases: [(&[u8], bool); 3] = [
        (b"\x00\x01garbage", false),
        (b"get / HTTP/1.1\r\n", false),
        (&oversized, true),
    ];
    for (bytes, alert) in cases {
        let (mut server, mut sock) = pair();
        sock.write_all(bytes).expect("the bytes");
        let e = read_until_failed(&mut server).expect_err("refused");
        assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{bytes:?}: {e}");
        assert_eq!(server.handshake_failure(), Some(HandshakeFailure::NotTls));
        if alert {
            let mut got = [0u8; 7];
            sock.read_exact(&mut got).expect("an alert");
            // An alert record whose level is fatal (2).
            assert_eq!(&got[..6], &[0x15, 0x03, 0x03, 0x00, 0x02, 0x02], "{got:?}");
        }
    }
}

/// A client that closes partway through its ClientHello failed its
/// handshake (`closed`).
#[test]
fn a_close_mid_handshake_counts_as_closed() {
    let (mut server, mut sock) = pair();
    let mut client = client(&[b"http/1.1"]);
    let mut hello = Vec::new();
    client.write_tls(&mut hello).expect("a ClientHello");
    sock.write_all(&hello[..hello.len() / 2])
        .expect("half of it");
    sock.shutdown(std::net::Shutdown::Write).expect("FIN");
    assert_eq!(first_read(&mut server).expect("the end"), 0);
    assert_eq!(server.handshake_failure(), Some(HandshakeFailure::Closed));
}

#[test]
fn a_key_that_is_not_the_certificates_is_refused_naming_both_files() {
    let other = std::env::temp_dir().join(format!("stoa-tls-other-{}.pem", std::process::id()));
    // The CA's certificate as the chain, with the leaf's key.
    let e = server_config(&fixture("ca.pem"), &fixture("key.pem")).expect_err("mismatch");
    assert!(matches!(e, TlsError::KeyMismatch { .. }), "{e}");
    let said = e.to_string();
    assert!(said.contains("ca.pem") && said.contains("key.pem"), "{e}");
    std::fs::write(&other, "not a key").expect("write");
    let e = server_config(&fixture("cert.pem"), &other).expect_err("no key");
    assert!(matches!(e, TlsError::Key { .. }), "{e}");
    assert!(e.to_string().contains(&other.display().to_string()), "{e}");
    let _ = std::fs::remove_file(&other);
    let e = server_config(&fixture("missing.pem"), &fixture("key.pem")).expect_err("missing");
    assert!(matches!(e, TlsError::Read { .. }), "{e}");
    assert!(e.to_string().contains("missing.pem"), "{e}");
    let e = server_config(&fixture("key.pem"), &fixture("key.pem")).expect_err("no chain");
    assert!(matches!(e, TlsError::NoPem { .. }), "{e}");
}

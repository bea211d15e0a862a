//! TLS over an accepted TCP connection, with rustls (ring as its crypto
//! provider): the server's certificate chain and key, loaded once into a
//! configuration, and a non-blocking session that reads and writes
//! plaintext as a bare socket does, ending in `WouldBlock` when it can go
//! no further now, so that a connection over it is driven as one over a
//! socket (`server::conn::Transport`):
//! - `read` fills the buffer from the plaintext decrypted and then from
//!   the socket's ciphertext, until the buffer is full or the socket
//!   would block (so a read that comes back short has drained the socket,
//!   as on a bare socket: a connection under edge-triggered readiness
//!   relies on it; a read of the socket that comes back short counts as
//!   that, without a further one to meet `WouldBlock`), and sends the
//!   handshake's answers as soon as they are made (what is queued with a
//!   request, the session tickets after the handshake, goes out with its
//!   answer);
//! - `write` takes plaintext while the session holds under `SEND_LIMIT` of
//!   ciphertext for the socket, and sends the records held before and the
//!   new ones in one `writev`, as far as the socket takes them;
//! - `has_buffered_output` tells of ciphertext still held for the socket
//!   (the connection keeps waiting to write until it is gone), and
//!   `has_buffered_input` of plaintext decrypted but not yet handed out;
//! - `shutdown_write` sends `close_notify`, then the FIN; a session dropped
//!   without it sends `close_notify` as far as the socket takes it then.
//!
//! The first bytes are looked at before the session takes them
//! (`handshake::Watch`): plain HTTP turns the stream into a bare socket,
//! so the connection can answer it in plaintext; other bytes that are no
//! TLS record are refused. A handshake that fails keeps its kind
//! (`handshake_failure`) for the counters.
//!
//! Used on the connections of `tls://` binds.

use super::handshake::{kind_of, Sniffed, Stage, Watch};
use crate::stats::HandshakeFailure;
use mio::net::TcpStream;
use rustls::{ServerConfig, ServerConnection};
use std::io::{self, IoSlice, Read, Write};
use std::sync::Arc;

/// Most ciphertext a session holds for the socket before `write` takes no
/// more plaintext (the bound a connection keeps on its own output).
pub const SEND_LIMIT: usize = 64 << 10;

mod config;
pub mod expiry;
mod session;
mod sites;
pub mod tickets;
pub mod watch;

pub use crate::error::TlsError;
pub use config::{facts, CertFacts, Resumption};
pub use sites::{log_reload, site_name, TlsSites};

/// Session tickets sealed with `shared` keys (a worker process's, which
/// the supervisor rotates), or with this process's own.
pub fn tickets(
    shared: Option<&'static [std::sync::atomic::AtomicU64]>,
) -> Arc<dyn rustls::server::ProducesTickets> {
    match shared {
        Some(keys) => Arc::new(tickets::SharedTickets::shared(keys)),
        None => Arc::new(tickets::SharedTickets::own()),
    }
}

/// A TLS session over one accepted connection.
pub struct TlsStream {
    sock: TcpStream,
    tls: ServerConnection,
    /// Plaintext decrypted and not yet handed out.
    plain: usize,
    /// The FIN waits for the records before it (`close_notify` last).
    fin_pending: bool,
    /// What apps see of the session, read once after the handshake.
    session: Option<Arc<stoa_app_api::abi::TlsSession>>,
    /// The first bytes, and how the handshake failed.
    watch: Watch,
}

impl TlsStream {
    /// A server session over `sock`, its handshake still to come.
    pub fn new(sock: TcpStream, config: Arc<ServerConfig>) -> io::Result<Self> {
        let mut tls = ServerConnection::new(config).map_err(io::Error::other)?;
        tls.set_buffer_limit(Some(SEND_LIMIT));
        Ok(TlsStream {
            sock,
            tls,
            plain: 0,
            fin_pending: false,
            session: None,
            watch: Watch::default(),
        })
    }

    /// The socket under the session.
    pub fn socket(&self) -> &TcpStream {
        &self.sock
    }

    /// True while ciphertext waits for the socket.
    pub fn has_buffered_output(&self) -> bool {
        self.tls.wants_write()
    }

    /// True while decrypted plaintext waits for a read.
    pub fn has_buffered_input(&self) -> bool {
        self.plain > 0
    }

    /// What apps see of the session (`None` until the handshake is done).
    pub fn session(&mut self) -> Option<Arc<stoa_app_api::abi::TlsSession>> {
        if self.session.is_none() {
            self.session = session::of(&self.tls).map(Arc::new);
        }
        self.session.clone()
    }

    /// True until the handshake is done, or has failed (plain HTTP is no
    /// handshake: the stream is a bare socket then).
    pub fn is_handshaking(&self) -> bool {
        self.watch.stage() != Stage::Plain
            && self.watch.failure().is_none()
            && self.tls.is_handshaking()
    }

    /// How the handshake failed, if it did.
    pub fn handshake_failure(&self) -> Option<HandshakeFailure> {
        self.watch.failure()
    }

    /// Gives the handshake up as failed with `kind` (its time ran out).
    pub fn fail_handshake(&mut self, kind: HandshakeFailure) {
        self.watch.fail(kind);
    }

    /// True once the first bytes were plain HTTP: reads and writes go to
    /// the socket as they are.
    fn passes_through(&self) -> bool {
        self.watch.stage() == Stage::Plain
    }

    /// Ends the sending half: `close_notify`, then the FIN once every
    /// record before it is out (now, or when the socket takes the rest:
    /// `has_buffered_output` is true until then).
    pub fn shutdown_write(&mut self) -> io::Result<()> {
        if self.passes_through() {
            return self.sock.shutdown(std::net::Shutdown::Write);
        }
        self.tls.send_close_notify();
        self.fin_pending = true;
        self.send()
    }

    /// Sends the ciphertext the session holds until the socket would
    /// block (what is left waits: `has_buffered_output`), then a pending
    /// FIN.
    fn send(&mut self) -> io::Result<()> {
        while self.tls.wants_write() {
            match self.tls.write_tls(&mut self.sock) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.broke(e)),
            }
        }
        if std::mem::take(&mut self.fin_pending) {
            self.sock.shutdown(std::net::Shutdown::Write)?;
        }
        Ok(())
    }

    /// A socket error `e`; mid-handshake, the peer has gone (`Closed`).
    fn broke(&mut self, e: io::Error) -> io::Error {
        if self.tls.is_handshaking() {
            self.watch.fail(HandshakeFailure::Closed);
        }
        e
    }

    /// Reads the first bytes (`Watch::sniff`): TLS goes on to the session
    /// (true), plain HTTP is left to the connection to answer (the stream
    /// passes through from now on: `WouldBlock` here), other bytes are an
    /// error, and an end before them the end (false).
    fn sniff(&mut self) -> io::Result<bool> {
        match self.watch.sniff(&mut self.sock)? {
            Sniffed::Tls(mut first) => {
                self.tls.read_tls(&mut first)?;
                self.take_records()?;
                Ok(true)
            }
            Sniffed::PlainHttp => Err(io::ErrorKind::WouldBlock.into()),
            Sniffed::NotTls => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "the first bytes are not a TLS handshake record",
            )),
            Sniffed::Ended => Ok(false),
        }
    }

    /// Decrypts the records read and sends the handshake's answers now;
    /// true if the peer has closed and no plaintext waits. An error that
    /// fails the handshake counts by its kind, and the alert the session
    /// made for it goes out.
    fn take_records(&mut self) -> io::Result<bool> {
        let handshaking = self.tls.is_handshaking();
        let state = match self.tls.process_new_packets() {
            Ok(state) => state,
            Err(e) => {
                if handshaking {
                    self.watch.fail(kind_of(&e));
                }
                let _ = self.send();
                return Err(io::Error::new(io::ErrorKind::InvalidData, e));
            }
        };
        self.plain = state.plaintext_bytes_to_read();
        // Handshake records go at once. Once plaintext comes (a
        // request), what the session queued with it (the session
        // tickets after the handshake) waits for the write of its
        // answer, or the connection's flush after the read, and
        // shares their `writev`.
        if self.plain == 0 {
            self.send()?;
        }
        Ok(self.plain == 0 && state.peer_has_closed())
    }
}

/// The socket as rustls reads it, noting whether the last read came
/// back short of the room it was given: the socket had no more then (as
/// a short read on a bare socket says), so asking again would only meet
/// `WouldBlock`.
struct Drain<'a> {
    sock: &'a mut TcpStream,
    short: bool,
}

impl Read for Drain<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.sock.read(buf)?;
        self.short = n < buf.len();
        Ok(n)
    }
}

impl Read for TlsStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self.watch.stage() {
            Stage::Plain => return self.sock.read(buf),
            Stage::Sniffing if !self.sniff()? => return Ok(0),
            Stage::Sniffing | Stage::Tls => {}
        }
        let mut n = 0;
        let mut drained = false;
        loop {
            if self.plain > 0 {
                let k = self.tls.reader().read(&mut buf[n..])?;
                self.plain = self.plain.saturating_sub(k);
                n += k;
            }
            if n == buf.len() {
                return Ok(n);
            }
            if drained {
                // Every record the socket held is in: what came is all
                // there is until the next readiness.
                if n > 0 {
                    return Ok(n);
                }
                return Err(io::ErrorKind::WouldBlock.into());
            }
            let mut sock = Drain {
                sock: &mut self.sock,
                short: false,
            };
            match self.tls.read_tls(&mut sock) {
                // The peer's FIN, or its close_notify before: the end
                // once what came before it is handed out.
                Ok(0) => {
                    if self.tls.is_handshaking() {
                        self.watch.fail(HandshakeFailure::Closed);
                    }
                    return Ok(n);
                }
                Ok(_) => drained = sock.short,
                Err(e) if n > 0 && e.kind() == io::ErrorKind::WouldBlock => return Ok(n),
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                    ) =>
                {
                    return Err(e)
                }
                Err(e) => return Err(self.broke(e)),
            }
            if self.take_records()? {
                return Ok(n);
            }
        }
    }
}

impl Drop for TlsStream {
    /// A session closed without `shutdown_write` (a connection closed at
    /// once, its answer done) still tells the peer it ended: without
    /// `close_notify` a body that ends at the close could be a cut one.
    fn drop(&mut self) {
        if self.passes_through() {
            return;
        }
        self.tls.send_close_notify();
        let _ = self.send();
    }
}

impl Write for TlsStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_vectored(&[IoSlice::new(buf)])
    }

    /// Encrypts what fits under `SEND_LIMIT` behind what the session
    /// holds already, then sends it all in one go; with no room left,
    /// sends first and tries again. `WouldBlock` only once the socket
    /// would block.
    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        if self.passes_through() {
            return self.sock.write_vectored(bufs);
        }
        let mut n = self.tls.writer().write_vectored(bufs)?;
        if n == 0 && bufs.iter().any(|b| !b.is_empty()) {
            self.send()?;
            n = self.tls.writer().write_vectored(bufs)?;
        }
        self.send()?;
        if n == 0 && bufs.iter().any(|b| !b.is_empty()) {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        Ok(n)
    }

    /// Sends what the socket takes now; the rest waits for it to be
    /// writable (`has_buffered_output`), never an error.
    fn flush(&mut self) -> io::Result<()> {
        self.send()
    }
}

/// A file of tests/fixtures/tls, for the unit tests.
#[cfg(test)]
pub(crate) fn fixture(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/tls")
        .join(name)
}

#[cfg(test)]
mod tests {
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
        let stream = TlsStream::new(TcpStream::from_std(server), config).expect("a session");
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
        let mut client = client(&[b"h2", b"http/1.1"]);
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

    #[test]
    fn a_client_offering_only_h2_is_refused() {
        let (mut server, mut sock) = pair();
        let mut client = client(&[b"h2"]);
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
}

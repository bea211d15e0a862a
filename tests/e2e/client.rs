//! A raw HTTP/1.1 client for the tests: sends bytes exactly as written and
//! parses responses one at a time from a per-connection buffer, so several
//! pipelined responses arriving in one read are split correctly. It speaks
//! plain TCP, or TLS to a `tls://` bind (rustls, trusting the test CA in
//! tests/fixtures/tls, SNI `localhost`, ALPN `http/1.1`), with the same
//! behaviour over both: a `close_notify` or a bare end of stream is the
//! close, as a FIN (or a reset) is on plain TCP.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// How long a read may wait before the test fails.
pub const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// `GET path HTTP/1.1` with `Host: localhost`.
pub fn get(path: &str) -> Vec<u8> {
    request("GET", path, &[])
}

/// A request with `Host: localhost`, the extra header lines and no body.
pub fn request(method: &str, path: &str, headers: &[&str]) -> Vec<u8> {
    let mut text = format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\n");
    for h in headers {
        text.push_str(h);
        text.push_str("\r\n");
    }
    text.push_str("\r\n");
    text.into_bytes()
}

/// A request with `Host: localhost`, the extra header lines and `body`.
pub fn with_body(method: &str, path: &str, headers: &[&str], body: &[u8]) -> Vec<u8> {
    let mut bytes = request(method, path, headers);
    bytes.extend_from_slice(body);
    bytes
}

/// One parsed response.
#[derive(Debug, Clone)]
pub struct Response {
    pub version: String,
    pub status: u16,
    pub reason: String,
    /// In the order received; values decoded lossily.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    /// The first header with this name (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// How many headers have this name.
    pub fn header_count(&self, name: &str) -> usize {
        self.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .count()
    }

    /// The body as text (it must be UTF-8).
    pub fn text(&self) -> &str {
        std::str::from_utf8(&self.body).expect("a UTF-8 body")
    }
}

/// How a client reaches the host: plain TCP, or TLS (a `tls://` bind
/// serving tests/fixtures/tls/cert.pem).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    Plain,
    Tls,
}

/// The test certificates (see their README).
pub const TLS_FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/tls");

/// The path of a file in `TLS_FIXTURES`.
pub fn tls_fixture(name: &str) -> String {
    format!("{TLS_FIXTURES}/{name}")
}

/// The TLS client configuration every test shares: the host's crypto
/// provider (ring), rustls's safe default versions, the test CA as the one
/// root, ALPN `http/1.1`.
fn tls_config() -> Arc<ClientConfig> {
    static CONFIG: OnceLock<Arc<ClientConfig>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let mut roots = RootCertStore::empty();
            let ca = CertificateDer::from_pem_file(tls_fixture("ca.pem")).expect("the test CA");
            roots.add(ca).expect("the test CA as a root");
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let mut config = ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .expect("TLS versions")
                .with_root_certificates(roots)
                .with_no_client_auth();
            config.alpn_protocols = vec![b"http/1.1".to_vec()];
            Arc::new(config)
        })
        .clone()
}

/// The bytes under the HTTP client: the socket, or a TLS session over it
/// (plaintext in and out).
pub enum Io {
    Plain(TcpStream),
    Tls(Box<StreamOwned<ClientConnection, TcpStream>>),
}

impl Io {
    /// A session over `sock` for `transport`; over TLS its handshake is
    /// done (the test fails if it is not) and ALPN chose `http/1.1`.
    fn over(mut sock: TcpStream, transport: Transport) -> Io {
        if transport == Transport::Plain {
            return Io::Plain(sock);
        }
        let name = ServerName::try_from("localhost").expect("a server name");
        let mut tls = ClientConnection::new(tls_config(), name).expect("a TLS client session");
        while tls.is_handshaking() {
            if let Err(e) = tls.complete_io(&mut sock) {
                panic!("no TLS handshake with stoa: {e}");
            }
        }
        assert_eq!(tls.alpn_protocol(), Some(&b"http/1.1"[..]), "ALPN");
        Io::Tls(Box::new(StreamOwned::new(tls, sock)))
    }

    /// The socket (under the session, over TLS).
    fn socket(&self) -> &TcpStream {
        match self {
            Io::Plain(sock) => sock,
            Io::Tls(tls) => &tls.sock,
        }
    }
}

impl Read for Io {
    /// Plaintext; over TLS, 0 at `close_notify`, and an end of stream
    /// without it is `UnexpectedEof`.
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Io::Plain(sock) => sock.read(buf),
            Io::Tls(tls) => tls.read(buf),
        }
    }
}

impl Write for Io {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Io::Plain(sock) => sock.write(buf),
            Io::Tls(tls) => tls.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Io::Plain(sock) => sock.flush(),
            Io::Tls(tls) => tls.flush(),
        }
    }
}

/// One client connection with its unread bytes.
pub struct Client {
    io: Io,
    buf: Vec<u8>,
}

impl Client {
    /// A plain TCP connection to 127.0.0.1:`port`.
    pub fn connect(port: u16) -> Self {
        Client::connect_over(port, Transport::Plain)
    }

    /// A connection to 127.0.0.1:`port` over `transport` (a TLS one has
    /// done its handshake).
    pub fn connect_over(port: u16, transport: Transport) -> Self {
        let stream = TcpStream::connect(("127.0.0.1", port)).expect("connect to stoa");
        stream.set_nodelay(true).expect("set TCP_NODELAY");
        Client::over(stream, transport)
    }

    /// A client over a stream a test has used itself (nothing unread).
    pub fn from_stream(stream: TcpStream) -> Self {
        Client::over(stream, Transport::Plain)
    }

    /// A client over a stream a test has connected itself (say with
    /// socket options of its own), speaking `transport` on it.
    pub fn over(stream: TcpStream, transport: Transport) -> Self {
        stream
            .set_read_timeout(Some(READ_TIMEOUT))
            .expect("set a read timeout");
        Client {
            io: Io::over(stream, transport),
            buf: Vec::new(),
        }
    }

    /// Writes the bytes, all in one `write_all` (over TLS, as records of
    /// at most 16 KiB).
    pub fn send(&mut self, bytes: &[u8]) {
        self.io.write_all(bytes).expect("send a request");
    }

    /// Sends a request and reads its response.
    pub fn request(&mut self, bytes: &[u8]) -> Response {
        self.send(bytes);
        self.read_response()
    }

    /// Reads one response with a body framed by its headers.
    pub fn read_response(&mut self) -> Response {
        self.read(false)
    }

    /// Reads one response, waiting up to `limit` for each read instead of
    /// `READ_TIMEOUT` (an answer that comes after a wait of the app's own).
    pub fn read_response_within(&mut self, limit: Duration) -> Response {
        let set = |c: &Client, t| {
            c.stream()
                .set_read_timeout(Some(t))
                .expect("set a read timeout")
        };
        set(self, limit);
        let r = self.read(false);
        set(self, READ_TIMEOUT);
        r
    }

    /// Reads the response to a HEAD request: headers only.
    pub fn read_head_response(&mut self) -> Response {
        self.read(true)
    }

    /// Reads into the buffer; 0 at end of stream (a reset counts as one,
    /// and over TLS a `close_notify` or a bare end of stream).
    fn fill(&mut self, waiting_for: &str) -> usize {
        let mut chunk = [0u8; 16 * 1024];
        loop {
            match self.io.read(&mut chunk) {
                Ok(n) => {
                    self.buf.extend_from_slice(&chunk[..n]);
                    return n;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::ConnectionReset => return 0,
                Err(e) if e.kind() == ErrorKind::UnexpectedEof => return 0,
                Err(e) if e.kind() == ErrorKind::InvalidData => panic!(
                    "TLS failed before the {waiting_for} ({e}); unread: {:?}",
                    String::from_utf8_lossy(&self.buf)
                ),
                Err(e) => panic!(
                    "no {waiting_for} within {:?} ({e}); unread: {:?}",
                    self.stream().read_timeout().ok().flatten(),
                    String::from_utf8_lossy(&self.buf)
                ),
            }
        }
    }

    fn read(&mut self, head_only: bool) -> Response {
        let head_len = loop {
            if let Some(i) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            if self.fill("response head") == 0 {
                panic!(
                    "connection closed before a complete response head; got {:?}",
                    String::from_utf8_lossy(&self.buf)
                );
            }
        };
        let head = String::from_utf8_lossy(&self.buf[..head_len - 4]).into_owned();
        self.buf.drain(..head_len);
        let mut lines = head.split("\r\n");
        let status_line = lines.next().unwrap_or_default();
        let mut parts = status_line.splitn(3, ' ');
        let version = parts.next().unwrap_or_default().to_string();
        let status = parts
            .next()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("bad status line {status_line:?}"));
        let reason = parts.next().unwrap_or_default().to_string();
        let headers: Vec<(String, String)> = lines
            .map(|l| {
                let (n, v) = l
                    .split_once(':')
                    .unwrap_or_else(|| panic!("bad header line {l:?}"));
                (n.to_string(), v.trim().to_string())
            })
            .collect();
        let mut response = Response {
            version,
            status,
            reason,
            headers,
            body: Vec::new(),
        };
        if head_only || status < 200 || status == 204 || status == 304 {
            return response;
        }
        if response
            .header("Transfer-Encoding")
            .is_some_and(|te| te.eq_ignore_ascii_case("chunked"))
        {
            response.body = self.read_chunked();
            return response;
        }
        match response.header("Content-Length") {
            Some(len) => {
                let len: usize = len.parse().expect("a numeric Content-Length");
                while self.buf.len() < len {
                    if self.fill("response body") == 0 {
                        panic!(
                            "connection closed after {} of {len} body bytes",
                            self.buf.len()
                        );
                    }
                }
                response.body = self.buf.drain(..len).collect();
            }
            None => response.body = self.read_until_closed(),
        }
        response
    }

    /// Reads a chunked body (no trailers) and returns it decoded.
    fn read_chunked(&mut self) -> Vec<u8> {
        let mut body = Vec::new();
        loop {
            let line_end = loop {
                if let Some(i) = self.buf.windows(2).position(|w| w == b"\r\n") {
                    break i;
                }
                assert!(self.fill("chunk size") > 0, "closed inside a chunked body");
            };
            let line = String::from_utf8_lossy(&self.buf[..line_end]).into_owned();
            let size = usize::from_str_radix(line.trim(), 16)
                .unwrap_or_else(|_| panic!("bad chunk size line {line:?}"));
            while self.buf.len() < line_end + 2 + size + 2 {
                assert!(self.fill("chunk data") > 0, "closed inside a chunk");
            }
            body.extend_from_slice(&self.buf[line_end + 2..line_end + 2 + size]);
            self.buf.drain(..line_end + 2 + size + 2);
            if size == 0 {
                return body;
            }
        }
    }

    /// Reads exactly `n` more bytes (after a response, say a `101`'s).
    pub fn read_bytes(&mut self, n: usize) -> Vec<u8> {
        while self.buf.len() < n {
            if self.fill("bytes") == 0 {
                panic!("connection closed after {} of {n} bytes", self.buf.len());
            }
        }
        self.buf.drain(..n).collect()
    }

    /// Reads until `needle` has come (say a streamed answer's first
    /// chunk); returns the bytes up to its end.
    pub fn read_until(&mut self, needle: &[u8]) -> Vec<u8> {
        loop {
            if let Some(at) = self.buf.windows(needle.len()).position(|w| w == needle) {
                return self.buf.drain(..at + needle.len()).collect();
            }
            if self.fill("awaited bytes") == 0 {
                panic!(
                    "connection closed before {:?}; got {:?}",
                    String::from_utf8_lossy(needle),
                    String::from_utf8_lossy(&self.buf)
                );
            }
        }
    }

    /// Reads until the server closes the connection; returns the bytes that
    /// came before the end. Fails the test if it stays open.
    pub fn read_until_closed(&mut self) -> Vec<u8> {
        while self.fill("end of stream") > 0 {}
        std::mem::take(&mut self.buf)
    }

    /// Asserts the server closes the connection with nothing more sent.
    pub fn assert_closed(&mut self) {
        let rest = self.read_until_closed();
        assert!(
            rest.is_empty(),
            "stray bytes before close: {:?}",
            String::from_utf8_lossy(&rest)
        );
    }

    /// Ends the sending half: the FIN, after `close_notify` over TLS (as
    /// a TLS client's half-close is).
    pub fn shutdown_write(&mut self) {
        if let Io::Tls(tls) = &mut self.io {
            tls.conn.send_close_notify();
            while tls.conn.wants_write() {
                tls.conn
                    .write_tls(&mut tls.sock)
                    .expect("send close_notify");
            }
        }
        let sock = self.io.socket();
        sock.shutdown(Shutdown::Write)
            .expect("shut down the write half");
    }

    /// The socket (under the TLS session, over TLS), for tests that set
    /// socket options or read and write it bare.
    pub fn stream(&self) -> &TcpStream {
        self.io.socket()
    }

    /// The plaintext stream, for tests that read and write it themselves
    /// (say without blocking, after `stream().set_nonblocking(true)`).
    pub fn io(&mut self) -> &mut Io {
        &mut self.io
    }
}

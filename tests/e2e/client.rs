//! A raw HTTP/1.1 client for the tests: sends bytes exactly as written and
//! parses responses one at a time from a per-connection buffer, so several
//! pipelined responses arriving in one read are split correctly.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
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

/// One client connection with its unread bytes.
pub struct Client {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Client {
    pub fn connect(port: u16) -> Self {
        let stream = TcpStream::connect(("127.0.0.1", port)).expect("connect to stoa");
        stream
            .set_read_timeout(Some(READ_TIMEOUT))
            .expect("set a read timeout");
        stream.set_nodelay(true).expect("set TCP_NODELAY");
        Client {
            stream,
            buf: Vec::new(),
        }
    }

    /// A client over a stream a test has used itself (nothing unread).
    pub fn from_stream(stream: TcpStream) -> Self {
        stream
            .set_read_timeout(Some(READ_TIMEOUT))
            .expect("set a read timeout");
        Client {
            stream,
            buf: Vec::new(),
        }
    }

    /// Writes the bytes, all in one `write_all`.
    pub fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("send a request");
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

    /// Reads the response to a HEAD request: headers only.
    pub fn read_head_response(&mut self) -> Response {
        self.read(true)
    }

    /// Reads into the buffer; 0 at end of stream (a reset counts as one).
    fn fill(&mut self, waiting_for: &str) -> usize {
        let mut chunk = [0u8; 16 * 1024];
        loop {
            match self.stream.read(&mut chunk) {
                Ok(n) => {
                    self.buf.extend_from_slice(&chunk[..n]);
                    return n;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::ConnectionReset => return 0,
                Err(e) => panic!(
                    "no {waiting_for} within {READ_TIMEOUT:?} ({e}); unread: {:?}",
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

    /// The raw stream, for tests that shut down a half.
    pub fn stream(&self) -> &TcpStream {
        &self.stream
    }
}

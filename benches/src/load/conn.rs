//! One client connection: connect, write the pre-serialised request, read
//! and frame the response. Nothing here allocates after `Conn::new`: the
//! head buffer is the connection's own and the body is counted, not kept.

use super::ErrorKind;
use mio::net::TcpStream;
use std::io::{self, Read, Write};
use std::time::Instant;

/// The head buffer's size; bodies are counted past it, never stored.
const HEAD_BUF: usize = 8 * 1024;
/// Response headers parsed at most (more is an `Other` error).
const MAX_HEADERS: usize = 32;

/// Where a connection is in its current request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// No request in flight (budget spent or not started).
    Idle,
    /// Non-blocking connect in progress.
    Connecting,
    /// Sending the request.
    Writing,
    /// Waiting for (the rest of) the response.
    Reading,
}

/// What the response head said.
#[derive(Clone, Copy, Debug)]
struct Head {
    status: u16,
    /// Declared Content-Length; `None` means the body ends at close.
    length: Option<u64>,
    /// The server will close after this response.
    close: bool,
}

/// A whole response.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Done {
    pub status: u16,
    pub body: u64,
    pub declared: Option<u64>,
    pub bytes: u64,
    pub close: bool,
}

/// Result of reading what is available.
pub(crate) enum ReadOutcome {
    Pending,
    Done(Done),
    Failed(ErrorKind, Option<io::Error>),
}

/// One connection slot; its stream is replaced on reconnects.
pub(crate) struct Conn {
    pub stream: Option<TcpStream>,
    pub phase: Phase,
    /// When the current request began (connect or first write).
    pub started: Instant,
    written: usize,
    buf: Box<[u8]>,
    filled: usize,
    head: Option<Head>,
    body: u64,
    bytes: u64,
}

impl Conn {
    pub fn new(now: Instant) -> Conn {
        Conn {
            stream: None,
            phase: Phase::Idle,
            started: now,
            written: 0,
            buf: vec![0; HEAD_BUF].into_boxed_slice(),
            filled: 0,
            head: None,
            body: 0,
            bytes: 0,
        }
    }

    /// Forgets the previous response; the next write starts from byte 0.
    pub fn reset_request(&mut self) {
        self.written = 0;
        self.filled = 0;
        self.head = None;
        self.body = 0;
        self.bytes = 0;
    }

    /// Whether the non-blocking connect finished: Ok(false) while pending.
    pub fn connected(&mut self) -> io::Result<bool> {
        let Some(stream) = &self.stream else {
            return Err(io::ErrorKind::NotConnected.into());
        };
        if let Some(e) = stream.take_error()? {
            return Err(e);
        }
        match stream.peer_addr() {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotConnected => Ok(false),
            Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Writes what is left of `request`; Ok(true) once all of it is sent.
    pub fn write(&mut self, request: &[u8]) -> io::Result<bool> {
        let Some(stream) = &mut self.stream else {
            return Err(io::ErrorKind::NotConnected.into());
        };
        while self.written < request.len() {
            match stream.write(&request[self.written..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => self.written += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    /// Reads until the response is whole or the socket has nothing more.
    /// Stopping at a whole response (rather than at WouldBlock) is safe with
    /// edge-triggered epoll: pipelining is off, so nothing else is owed
    /// until the next request, whose answer raises a new edge.
    pub fn read(&mut self) -> ReadOutcome {
        loop {
            let Some(stream) = &mut self.stream else {
                return ReadOutcome::Failed(ErrorKind::Other, None);
            };
            let dst = if self.head.is_none() {
                &mut self.buf[self.filled..]
            } else {
                &mut self.buf[..]
            };
            match stream.read(dst) {
                Ok(0) => return self.on_eof(),
                Ok(n) => {
                    self.bytes += n as u64;
                    if self.head.is_none() {
                        self.filled += n;
                        match self.parse_head() {
                            Ok(true) => {}
                            Ok(false) if self.filled == self.buf.len() => {
                                let e = io::Error::other("response head larger than 8 KiB");
                                return ReadOutcome::Failed(ErrorKind::Other, Some(e));
                            }
                            Ok(false) => continue,
                            Err(e) => return ReadOutcome::Failed(ErrorKind::Other, Some(e)),
                        }
                    } else {
                        self.body += n as u64;
                    }
                    if let Some(done) = self.done_by_length() {
                        return ReadOutcome::Done(done);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return ReadOutcome::Pending,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return ReadOutcome::Failed(classify(&e), Some(e)),
            }
        }
    }

    /// Parses the head once it is all in the buffer; Ok(false) if partial.
    fn parse_head(&mut self) -> io::Result<bool> {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut resp = httparse::Response::new(&mut headers);
        let head_len = match resp.parse(&self.buf[..self.filled]) {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) => return Ok(false),
            Err(e) => return Err(io::Error::other(format!("bad response head: {e}"))),
        };
        let status = resp.code.unwrap_or(0);
        let mut close = resp.version == Some(0);
        let mut length = None;
        for h in resp.headers.iter() {
            if h.name.eq_ignore_ascii_case("content-length") {
                let v = std::str::from_utf8(h.value)
                    .ok()
                    .and_then(|v| v.trim().parse().ok());
                length = Some(v.ok_or_else(|| io::Error::other("bad Content-Length"))?);
            } else if h.name.eq_ignore_ascii_case("connection") {
                let v = h.value;
                if contains_token(v, b"close") {
                    close = true;
                } else if contains_token(v, b"keep-alive") {
                    close = false;
                }
            } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                return Err(io::Error::other("chunked responses are not supported"));
            }
        }
        // RFC 9112 section 6.3: 1xx, 204 and 304 responses have no body.
        if status < 200 || status == 204 || status == 304 {
            length = Some(0);
        }
        self.body = (self.filled - head_len) as u64;
        self.head = Some(Head {
            status,
            length,
            close,
        });
        Ok(true)
    }

    fn done_by_length(&self) -> Option<Done> {
        let head = self.head?;
        let declared = head.length?;
        (self.body >= declared).then(|| self.done(head))
    }

    fn on_eof(&mut self) -> ReadOutcome {
        match self.head {
            // A close-delimited body ends here; anything else was cut short.
            Some(head) if head.length.is_none() => ReadOutcome::Done(self.done(Head {
                close: true,
                ..head
            })),
            _ => ReadOutcome::Failed(ErrorKind::Reset, None),
        }
    }

    fn done(&self, head: Head) -> Done {
        Done {
            status: head.status,
            body: self.body,
            declared: head.length,
            bytes: self.bytes,
            close: head.close,
        }
    }
}

/// Maps a socket error to its kind.
pub(crate) fn classify(e: &io::Error) -> ErrorKind {
    match e.kind() {
        io::ErrorKind::ConnectionRefused => ErrorKind::Refused,
        io::ErrorKind::ConnectionReset
        | io::ErrorKind::ConnectionAborted
        | io::ErrorKind::BrokenPipe
        | io::ErrorKind::UnexpectedEof => ErrorKind::Reset,
        io::ErrorKind::TimedOut => ErrorKind::Timeout,
        _ => ErrorKind::Other,
    }
}

/// Whether a comma-separated header value lists `token` (ASCII case-insensitive).
fn contains_token(value: &[u8], token: &[u8]) -> bool {
    value
        .split(|&b| b == b',')
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(token))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_tokens() {
        assert!(contains_token(b"Keep-Alive, close", b"close"));
        assert!(!contains_token(b"closed", b"close"));
    }

    #[test]
    fn errors_classify() {
        let e = io::Error::from(io::ErrorKind::ConnectionRefused);
        assert_eq!(classify(&e), ErrorKind::Refused);
        let e = io::Error::from(io::ErrorKind::BrokenPipe);
        assert_eq!(classify(&e), ErrorKind::Reset);
    }
}

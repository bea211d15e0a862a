//! One client connection: connect, write the pre-serialised request (or a
//! pipelined batch of them), read and frame the responses. Nothing here
//! allocates after `Conn::new`: the read buffer is the connection's own and
//! bodies are counted, not kept.

use super::link::Link;
use super::ErrorKind;
use std::io;
use std::time::Instant;

/// The read buffer's size: a response head must fit; bodies pass through.
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
    /// Sending the request (or batch).
    Writing,
    /// Waiting for (the rest of) the responses.
    Reading,
}

/// What the response head said.
#[derive(Clone, Copy, Debug)]
struct Head {
    status: u16,
    /// The head's own bytes.
    len: u64,
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
pub(crate) struct Conn<L> {
    pub stream: Option<L>,
    pub phase: Phase,
    /// When the current request (or batch) began (connect or first write).
    pub started: Instant,
    /// Requests of the current batch, and those not answered yet.
    pub batch: u32,
    pub outstanding: u32,
    written: usize,
    /// Read bytes not framed yet are `buf[start..end]`.
    buf: Box<[u8]>,
    start: usize,
    end: usize,
    head: Option<Head>,
    body: u64,
}

impl<L: Link> Conn<L> {
    pub fn new(now: Instant) -> Conn<L> {
        Conn {
            stream: None,
            phase: Phase::Idle,
            started: now,
            batch: 0,
            outstanding: 0,
            written: 0,
            buf: vec![0; HEAD_BUF].into_boxed_slice(),
            start: 0,
            end: 0,
            head: None,
            body: 0,
        }
    }

    /// Starts a batch of `n` requests: forgets the previous responses and
    /// the next write starts from byte 0.
    pub fn reset_batch(&mut self, n: u32) {
        self.batch = n;
        self.outstanding = n;
        self.written = 0;
        self.start = 0;
        self.end = 0;
        self.head = None;
        self.body = 0;
    }

    /// Whether the non-blocking connect finished: Ok(false) while pending.
    pub fn connected(&mut self) -> io::Result<bool> {
        let Some(stream) = &self.stream else {
            return Err(io::ErrorKind::NotConnected.into());
        };
        let stream = stream.socket();
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

    /// Reads until a response is whole or the socket has nothing more.
    /// Bytes past that response (the next pipelined answers) stay
    /// buffered for the next call. Stopping at a whole response rather than
    /// at WouldBlock is safe with edge-triggered epoll: the worker calls
    /// again while answers are owed, and once none is, nothing more is
    /// expected until the next batch's answers raise a new edge.
    pub fn read(&mut self) -> ReadOutcome {
        loop {
            match self.frame() {
                Ok(Some(done)) => return ReadOutcome::Done(done),
                Ok(None) => {}
                Err(e) => return ReadOutcome::Failed(ErrorKind::Other, Some(e)),
            }
            if self.start == self.end {
                self.start = 0;
                self.end = 0;
            } else if self.end == self.buf.len() {
                // Only an unfinished head is left: make room after it.
                if self.start == 0 {
                    let e = io::Error::other("response head larger than 8 KiB");
                    return ReadOutcome::Failed(ErrorKind::Other, Some(e));
                }
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            }
            let Some(stream) = &mut self.stream else {
                return ReadOutcome::Failed(ErrorKind::Other, None);
            };
            match stream.read(&mut self.buf[self.end..]) {
                Ok(0) => return self.on_eof(),
                Ok(n) => self.end += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return ReadOutcome::Pending,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return ReadOutcome::Failed(classify(&e), Some(e)),
            }
        }
    }

    /// Frames the buffered bytes: the next head, then body bytes counted
    /// up to its length; a whole response once the body is all there.
    fn frame(&mut self) -> io::Result<Option<Done>> {
        if self.head.is_none() && (self.start == self.end || !self.parse_head()?) {
            return Ok(None);
        }
        let Some(head) = self.head else {
            return Ok(None);
        };
        let available = (self.end - self.start) as u64;
        let take = match head.length {
            Some(len) => len.saturating_sub(self.body).min(available),
            None => available,
        };
        self.body += take;
        self.start += take as usize;
        match head.length {
            Some(len) if self.body >= len => Ok(Some(self.finish(head))),
            _ => Ok(None),
        }
    }

    /// Parses the head once it is all in the buffer; Ok(false) if partial.
    fn parse_head(&mut self) -> io::Result<bool> {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut resp = httparse::Response::new(&mut headers);
        let head_len = match resp.parse(&self.buf[self.start..self.end]) {
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
        self.start += head_len;
        self.body = 0;
        self.head = Some(Head {
            status,
            len: head_len as u64,
            length,
            close,
        });
        Ok(true)
    }

    fn on_eof(&mut self) -> ReadOutcome {
        match self.head {
            // A close-delimited body ends here; anything else was cut short.
            Some(head) if head.length.is_none() => ReadOutcome::Done(self.finish(Head {
                close: true,
                ..head
            })),
            _ => ReadOutcome::Failed(ErrorKind::Reset, None),
        }
    }

    /// The response just framed; the next one starts from the next byte.
    fn finish(&mut self, head: Head) -> Done {
        self.head = None;
        Done {
            status: head.status,
            body: self.body,
            declared: head.length,
            bytes: head.len + self.body,
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

//! One client connection: its socket, buffers and state machine.
//!
//! Phases: `Reading` (parsing the next request from the read buffer),
//! `Dispatched` (one request is with an app; pipelined bytes wait in the
//! buffer so answers stay in order), `Closing` (flush, then close). The
//! buffer is read and written until `WouldBlock` whatever the backend.

use crate::http::chunked::ChunkedDecoder;
use crate::http::parse::{parse_head, BodyKind, Head};
use crate::http::response::{host_response, write_response, Persist};
use crate::http::{ConnParams, HttpError};
use crate::poller::Interest;
use mio::net::TcpStream;
use std::io::{self, Read, Write};
use std::time::Instant;
use stoa_app_api::Response;

/// First read buffer size; it grows (doubling) up to the connection's cap.
const READ_CHUNK: usize = 16 * 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Reading,
    Dispatched,
    Closing,
}

/// Which timeout a connection is under (see `ConnParams`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Deadline {
    /// Between requests: close quietly.
    Idle,
    /// Receiving a request head: 408.
    Head,
    /// Receiving a body: 408.
    Body,
    /// Waiting for the app: 504.
    App,
    /// Sending output: close.
    Send,
}

/// What the access log needs of a request, kept only when it is on.
pub struct AccessInfo {
    pub request_line: String,
    pub referer: String,
    pub user_agent: String,
}

/// The request currently with an app.
pub struct Pending {
    pub id: u64,
    pub head_only: bool,
    pub persist: Persist,
    pub started: Instant,
    /// The app's counters slot; `None` for the host's own answers.
    pub slot: Option<usize>,
    /// The path, kept for jobs on the blocking pool (for the hung-job log).
    pub path: Option<Box<str>>,
    pub access: Option<Box<AccessInfo>>,
}

/// Outcome of reading from the socket.
#[derive(Debug, PartialEq, Eq)]
pub enum ReadState {
    /// The socket has no more bytes for now.
    Open,
    /// The peer closed its sending side (or the socket failed).
    Closed,
}

pub struct Conn {
    pub stream: TcpStream,
    pub peer: std::sync::Arc<str>,
    rbuf: Vec<u8>,
    rstart: usize,
    rend: usize,
    wbuf: Vec<u8>,
    wpos: usize,
    pub phase: Phase,
    head: Option<Head>,
    decoder: Option<ChunkedDecoder>,
    body: Vec<u8>,
    continue_sent: bool,
    pub pending: Option<Pending>,
    pub read_closed: bool,
    pub served: u32,
    /// The interest last registered with the poller.
    pub interest: Interest,
    /// When the current timeout expires, and which one it is.
    pub deadline: Option<(Instant, Deadline)>,
    read_progress: bool,
    write_progress: bool,
}

impl Conn {
    pub fn new(stream: TcpStream, peer: std::sync::Arc<str>) -> Self {
        Conn {
            stream,
            peer,
            rbuf: Vec::new(),
            rstart: 0,
            rend: 0,
            wbuf: Vec::new(),
            wpos: 0,
            phase: Phase::Reading,
            head: None,
            decoder: None,
            body: Vec::new(),
            continue_sent: false,
            pending: None,
            read_closed: false,
            served: 0,
            interest: Interest::READABLE,
            deadline: None,
            read_progress: false,
            write_progress: false,
        }
    }

    /// Reads until `WouldBlock`, EOF, or the buffer cap.
    pub fn fill(&mut self, params: &ConnParams) -> ReadState {
        if self.read_closed {
            return ReadState::Closed;
        }
        let cap = params.max_head + params.max_body + READ_CHUNK;
        loop {
            if self.rstart == self.rend {
                self.rstart = 0;
                self.rend = 0;
            }
            if self.rend == self.rbuf.len() {
                if self.rstart > 0 {
                    self.rbuf.copy_within(self.rstart..self.rend, 0);
                    self.rend -= self.rstart;
                    self.rstart = 0;
                } else if self.rbuf.len() < cap {
                    let grown = (self.rbuf.len() * 2).clamp(READ_CHUNK, cap);
                    self.rbuf.resize(grown, 0);
                } else {
                    // Full of one request that the parser has not refused yet.
                    return ReadState::Open;
                }
            }
            let space = self.rbuf.len() - self.rend;
            match self.stream.read(&mut self.rbuf[self.rend..]) {
                Ok(0) => {
                    self.read_closed = true;
                    return ReadState::Closed;
                }
                Ok(n) => {
                    self.rend += n;
                    self.read_progress = true;
                    // A short read drained the socket: another read would
                    // only say WouldBlock (and an edge comes with new data).
                    if n < space {
                        return ReadState::Open;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return ReadState::Open,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    log::debug!("read from {} failed: {e}", self.peer);
                    self.read_closed = true;
                    return ReadState::Closed;
                }
            }
        }
    }

    /// True if no request bytes are buffered.
    pub fn buffer_empty(&self) -> bool {
        self.rstart == self.rend && self.head.is_none()
    }

    /// Parses the next request. `Ok(true)`: a whole request is ready (see
    /// `head`, `body`); `Ok(false)`: more bytes are needed.
    pub fn next_request(&mut self, params: &ConnParams) -> Result<bool, HttpError> {
        if self.head.is_none() {
            match parse_head(&self.rbuf[self.rstart..self.rend], params)? {
                None => return Ok(false),
                Some(head) => {
                    self.decoder = (head.body == BodyKind::Chunked).then(ChunkedDecoder::default);
                    self.body.clear();
                    self.continue_sent = false;
                    self.head = Some(head);
                }
            }
        }
        let Some(head) = &self.head else {
            return Ok(false);
        };
        let body_start = self.rstart + head.len;
        let complete = match (head.body, &mut self.decoder) {
            (BodyKind::None, _) => true,
            (BodyKind::Length(n), _) => self.rend - body_start >= n,
            (BodyKind::Chunked, Some(decoder)) => {
                let used = decoder.decode(
                    &self.rbuf[body_start..self.rend],
                    &mut self.body,
                    params.max_body,
                )?;
                // Drop the consumed chunk framing so it never piles up.
                self.rbuf
                    .copy_within(body_start + used..self.rend, body_start);
                self.rend -= used;
                decoder.is_done()
            }
            (BodyKind::Chunked, None) => return Err(HttpError::Framing("chunked decoder missing")),
        };
        if !complete && head.expect_continue && !self.continue_sent {
            self.continue_sent = true;
            self.wbuf
                .extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
        }
        Ok(complete)
    }

    /// The ready request's head, buffer (offsets are from `request_start`)
    /// and body.
    pub fn request_parts(&self) -> Option<(&Head, &[u8], &[u8])> {
        let head = self.head.as_ref()?;
        let buf = &self.rbuf[self.rstart..self.rend];
        let body = match head.body {
            BodyKind::None => &[][..],
            BodyKind::Length(n) => buf.get(head.len..head.len + n)?,
            BodyKind::Chunked => &self.body,
        };
        Some((head, buf, body))
    }

    /// Drops the dispatched request's bytes from the read buffer.
    pub fn consume_request(&mut self) {
        if let Some(head) = self.head.take() {
            let body = match head.body {
                BodyKind::Length(n) => n,
                _ => 0,
            };
            self.rstart = (self.rstart + head.len + body).min(self.rend);
        }
        self.decoder = None;
        if self.body.capacity() > READ_CHUNK {
            self.body = Vec::new();
        } else {
            self.body.clear();
        }
    }

    /// Queues a response for the pending request and moves to the next phase.
    pub fn push_response(
        &mut self,
        response: &Response,
        head_only: bool,
        persist: Persist,
        date: &str,
    ) {
        write_response(&mut self.wbuf, response, head_only, persist, date);
        self.served += 1;
        self.phase = if persist == Persist::Close {
            Phase::Closing
        } else {
            Phase::Reading
        };
    }

    /// Answers a request that could not be read, then closes.
    pub fn fail(&mut self, error: &HttpError, date: &str) {
        log::debug!("{}: {error}", self.peer);
        self.head = None;
        self.pending = None;
        let response = host_response(error.status(), &error.to_string());
        write_response(&mut self.wbuf, &response, false, Persist::Close, date);
        self.phase = Phase::Closing;
    }

    /// True while output is waiting for the socket.
    pub fn has_output(&self) -> bool {
        self.wpos < self.wbuf.len()
    }

    /// Writes until the buffer is empty or the socket would block.
    pub fn flush(&mut self) -> io::Result<()> {
        while self.wpos < self.wbuf.len() {
            match self.stream.write(&self.wbuf[self.wpos..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    self.wpos += n;
                    self.write_progress = true;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        self.wpos = 0;
        if self.wbuf.capacity() > 4 * READ_CHUNK {
            self.wbuf = Vec::new();
        } else {
            self.wbuf.clear();
        }
        Ok(())
    }

    /// The interest this connection needs now.
    pub fn wanted_interest(&self) -> Interest {
        let read = self.phase == Phase::Reading && !self.read_closed;
        match (read, self.has_output()) {
            (true, true) => Interest::BOTH,
            (true, false) => Interest::READABLE,
            (false, true) => Interest::WRITABLE,
            // Nothing to do until the app answers; stay registered for
            // hang-ups (poll and select report them regardless).
            (false, false) => Interest::NONE,
        }
    }

    /// Picks the timeout for the connection's state. The head timeout runs
    /// from the head's first byte (trickling bytes do not extend it); the
    /// body, send and idle timeouts restart on progress.
    pub fn update_deadline(&mut self, params: &ConnParams) {
        let want = if self.has_output() {
            Deadline::Send
        } else {
            match self.phase {
                Phase::Dispatched => Deadline::App,
                Phase::Closing => Deadline::Send,
                Phase::Reading if self.head.is_some() => Deadline::Body,
                Phase::Reading if self.rstart == self.rend => Deadline::Idle,
                Phase::Reading => Deadline::Head,
            }
        };
        let progressed = match want {
            Deadline::Idle | Deadline::Body => self.read_progress,
            Deadline::Send => self.write_progress,
            Deadline::Head | Deadline::App => false,
        };
        self.read_progress = false;
        self.write_progress = false;
        if progressed || self.deadline.map(|(_, k)| k) != Some(want) {
            let limit = match want {
                Deadline::Idle => params.keep_alive_timeout,
                Deadline::Head => params.head_timeout,
                Deadline::Body => params.body_timeout,
                Deadline::App => params.app_timeout,
                Deadline::Send => params.send_timeout,
            };
            self.deadline = Some((Instant::now() + limit, want));
        }
    }

    /// True once the connection has nothing left to do and should close.
    pub fn finished(&self) -> bool {
        !self.has_output()
            && match self.phase {
                Phase::Closing => true,
                Phase::Reading => self.read_closed,
                Phase::Dispatched => false,
            }
    }
}

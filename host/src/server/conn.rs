//! One client connection: its socket, buffers and state machine.
//!
//! Phases: `Reading` (parsing the next request from the read buffer),
//! `Dispatched` (one request is with an app; pipelined bytes wait in the
//! buffer so answers stay in order), `Closing` (flush, then close). The
//! buffer is read and written until `WouldBlock` whatever the backend.

use crate::http::parse::Head;
pub use crate::http::reader::ReadState;
use crate::http::reader::{BufPool, RequestReader};
use crate::http::response::{host_response, write_response, Persist};
use crate::http::{ConnParams, HttpError};
use crate::poller::Interest;
use mio::net::TcpStream;
use std::io::{self, Write};
use std::time::Instant;
use stoa_app_api::Response;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Reading,
    Dispatched,
    Closing,
}

thread_local! {
    /// Spare write buffers of this thread's event loop.
    static SPARE_WRITE: std::cell::RefCell<Vec<Vec<u8>>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Spare write buffers kept per loop, and the largest kept.
const MAX_SPARES: usize = 256;
const MAX_SPARE_WRITE: usize = 64 * 1024;

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
    /// The client as resolved through trusted proxies.
    pub client: std::sync::Arc<str>,
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

pub struct Conn {
    pub stream: TcpStream,
    pub peer: std::sync::Arc<str>,
    pub reader: RequestReader,
    wbuf: Vec<u8>,
    wpos: usize,
    pub phase: Phase,
    pub pending: Option<Pending>,
    pub read_closed: bool,
    pub served: u32,
    /// The interest last registered with the poller.
    pub interest: Interest,
    /// When the current timeout expires, and which one it is.
    pub deadline: Option<(Instant, Deadline)>,
    write_progress: bool,
}

impl Conn {
    pub fn new(stream: TcpStream, peer: std::sync::Arc<str>) -> Self {
        Conn {
            stream,
            peer,
            reader: RequestReader::default(),
            wbuf: Vec::new(),
            wpos: 0,
            phase: Phase::Reading,
            pending: None,
            read_closed: false,
            served: 0,
            interest: Interest::READABLE,
            deadline: None,
            write_progress: false,
        }
    }

    /// Reads until `WouldBlock`, EOF, or the buffer cap; `to_end` keeps
    /// reading after a short read (the peer has closed).
    pub fn fill(&mut self, params: &ConnParams, to_end: bool, pool: &mut BufPool) -> ReadState {
        if self.read_closed {
            return ReadState::Closed;
        }
        let state = self.reader.fill(&mut self.stream, params, to_end, pool);
        self.read_closed = state != ReadState::Open;
        state
    }

    /// True if no request bytes are buffered.
    pub fn buffer_empty(&self) -> bool {
        self.reader.is_empty()
    }

    /// Parses the next request; see `RequestReader::next_request`.
    pub fn next_request(&mut self, params: &ConnParams) -> Result<bool, HttpError> {
        let ready = self.reader.next_request(params)?;
        if self.reader.take_continue() {
            self.out()
                .extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
        }
        Ok(ready)
    }

    /// The ready request's head, bytes and body.
    pub fn request_parts(&self) -> Option<(&Head, &[u8], &[u8])> {
        self.reader.parts()
    }

    /// Drops the dispatched request's bytes from the read buffer.
    pub fn consume_request(&mut self) {
        self.reader.consume();
    }

    /// Queues a response for the pending request and moves to the next phase.
    pub fn push_response(
        &mut self,
        response: &Response,
        head_only: bool,
        persist: Persist,
        date: &str,
    ) {
        write_response(self.out(), response, head_only, persist, date);
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
        self.reader.abandon();
        self.pending = None;
        let response = host_response(error.status(), &error.to_string());
        write_response(self.out(), &response, false, Persist::Close, date);
        self.phase = Phase::Closing;
    }

    /// The write buffer, taken from the loop's spares if the connection has
    /// none.
    fn out(&mut self) -> &mut Vec<u8> {
        if self.wbuf.capacity() == 0 {
            self.wbuf = SPARE_WRITE
                .with(|spares| spares.borrow_mut().pop())
                .unwrap_or_default();
        }
        &mut self.wbuf
    }

    /// Gives the read buffer back when nothing is buffered (the write
    /// buffer goes back as soon as it is flushed).
    pub fn release_buffers(&mut self, pool: &mut BufPool) {
        if self.phase == Phase::Reading && !self.has_output() {
            self.reader.release(pool);
        }
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
        // All sent: the buffer goes back to the loop's spares, so an idle
        // connection holds none.
        self.wpos = 0;
        let buf = std::mem::take(&mut self.wbuf);
        if buf.capacity() > 0 && buf.capacity() <= MAX_SPARE_WRITE {
            SPARE_WRITE.with(|spares| {
                let mut spares = spares.borrow_mut();
                if spares.len() < MAX_SPARES {
                    let mut buf = buf;
                    buf.clear();
                    spares.push(buf);
                }
            });
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
            // Nothing to do until the app answers; stay registered (poll
            // and epoll still report hang-ups, select does not: there the
            // answer's write finds the peer gone).
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
                Phase::Reading if self.reader.in_body() => Deadline::Body,
                Phase::Reading if self.reader.is_empty() => Deadline::Idle,
                Phase::Reading => Deadline::Head,
            }
        };
        let progressed = match want {
            Deadline::Idle | Deadline::Body => std::mem::take(&mut self.reader.progressed),
            Deadline::Send => self.write_progress,
            Deadline::Head | Deadline::App => false,
        };
        self.reader.progressed = false;
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

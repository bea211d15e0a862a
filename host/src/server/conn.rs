//! One client connection: its socket, buffers and state machine.
//!
//! Phases: `Reading` (parsing the next request from the read buffer),
//! `Dispatched` (one request is with an app; pipelined bytes wait in the
//! buffer so answers stay in order), `Closing` (flush, then close). The
//! buffer is read and written until `WouldBlock` whatever the backend.
//!
//! Backpressure: while more than `OUTPUT_BOUND` bytes wait for the socket,
//! the connection neither reads nor parses further requests (the kernel's
//! buffer and the TCP window hold what the client sends meanwhile); the
//! read buffer holds no more than the current request needs. Readiness is
//! remembered (`read_ready`), so reading resumes without a new edge.

use crate::http::output::Output;
use crate::http::parse::Head;
pub use crate::http::reader::ReadState;
use crate::http::reader::{BufPool, RequestReader};
use crate::http::answer::HostAnswer;
use crate::http::response::Persist;
use crate::http::{ConnParams, HttpError};
use crate::poller::Interest;
use mio::net::TcpStream;
use std::io;
use std::time::Instant;
use stoa_app_api::Response;

/// Output waiting for the socket above which a connection stops reading
/// and dispatching: a batch of hundreds of small pipelined answers still
/// goes out in one write, while a client that does not read costs at most
/// this plus one answer.
pub const OUTPUT_BOUND: usize = 64 * 1024;

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
    out: Output,
    pub phase: Phase,
    pub pending: Option<Pending>,
    pub read_closed: bool,
    /// The socket may hold bytes not read yet (set by readiness, cleared
    /// by a read that drained it).
    read_ready: bool,
    /// The peer has hung up: read on to the end of stream.
    peer_hup: bool,
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
            out: Output::default(),
            phase: Phase::Reading,
            pending: None,
            read_closed: false,
            read_ready: false,
            peer_hup: false,
            served: 0,
            interest: Interest::READABLE,
            deadline: None,
            write_progress: false,
        }
    }

    /// Records readiness reported by the poller (or assumed: `readable`
    /// after an app's answer, as bytes may have come meanwhile).
    pub fn note_ready(&mut self, readable: bool, hup: bool) {
        self.read_ready |= readable || hup;
        self.peer_hup |= hup;
    }

    /// True if the connection should read now: it is between requests or
    /// receiving one, bytes may be waiting, and its output is not over the
    /// bound.
    pub fn read_due(&self) -> bool {
        self.read_ready && !self.read_closed && self.phase == Phase::Reading && !self.output_full()
    }

    /// Reads until `WouldBlock`, EOF, or the read buffer holds what the
    /// current request needs; after a hang-up, on to the end of stream.
    pub fn fill(&mut self, params: &ConnParams, pool: &mut BufPool) -> ReadState {
        if self.read_closed {
            return ReadState::Closed;
        }
        let state = self
            .reader
            .fill(&mut self.stream, params, self.peer_hup, pool);
        self.read_closed = matches!(state, ReadState::Closed | ReadState::Failed);
        self.read_ready = state == ReadState::Full;
        state
    }

    /// Reads (see `fill`); true if any byte came.
    pub fn read_some(&mut self, params: &ConnParams, pool: &mut BufPool) -> bool {
        let before = self.reader.buffered();
        self.fill(params, pool);
        self.reader.buffered() > before
    }

    /// True if no request bytes are buffered.
    pub fn buffer_empty(&self) -> bool {
        self.reader.is_empty()
    }

    /// Parses the next request; see `RequestReader::next_request`.
    pub fn next_request(&mut self, params: &ConnParams) -> Result<bool, HttpError> {
        let ready = self.reader.next_request(params)?;
        if self.reader.take_continue() {
            self.out.push_bytes(b"HTTP/1.1 100 Continue\r\n\r\n");
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

    /// Queues a response for the pending request (a large body is taken
    /// out of it, not copied) and moves to the next phase.
    pub fn push_response(
        &mut self,
        response: &mut Response,
        head_only: bool,
        persist: Persist,
        date: &str,
    ) {
        self.out.push_response(response, head_only, persist, date);
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
        let mut response = HostAnswer::Http(error.clone()).response();
        self.out
            .push_response(&mut response, false, Persist::Close, date);
        self.phase = Phase::Closing;
    }

    /// Gives the read buffer back when nothing is buffered (the output
    /// buffer goes back as soon as it is flushed).
    pub fn release_buffers(&mut self, pool: &mut BufPool) {
        if self.phase == Phase::Reading && !self.has_output() {
            self.reader.release(pool);
        }
    }

    /// True while output is waiting for the socket.
    pub fn has_output(&self) -> bool {
        !self.out.is_empty()
    }

    /// True while the output waiting is at or over `OUTPUT_BOUND`: no
    /// further request is read or dispatched.
    pub fn output_full(&self) -> bool {
        self.has_output() && self.out.len() >= OUTPUT_BOUND
    }

    /// Writes until the output is empty or the socket would block.
    pub fn flush(&mut self) -> io::Result<()> {
        self.write_progress |= self.out.flush(&mut self.stream)?;
        Ok(())
    }

    /// The interest this connection needs now.
    pub fn wanted_interest(&self) -> Interest {
        let read = self.phase == Phase::Reading && !self.read_closed && !self.output_full();
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

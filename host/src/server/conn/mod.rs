//! One client connection: its transport, buffers and protocol state. The
//! connection owns its state machine (`Phase`, each phase holding what is
//! meaningful in it); the loop asks it what to do next and tells it what
//! happened, through methods that say the intent.
//!
//! The transport (`Transport`: a socket, or a test's buffer) is read and
//! written until `WouldBlock` whatever the backend. Whether the connection
//! stays open after an answer is decided in one place, `persistence`.
//!
//! Backpressure: while more than `OUTPUT_BOUND` bytes wait for the socket,
//! the connection neither reads nor parses further requests (the kernel's
//! buffer and the TCP window hold what the client sends meanwhile); the
//! read buffer holds no more than the current request needs. Readiness is
//! remembered (`read_ready`), so reading resumes without a new edge.
//!
//! Split by concern: `request` (reading, dispatching, answering),
//! `deadline` (which timeout runs), `stream` (a streamed answer), `upgraded`
//! (the WebSocket half), `linger` (the lingering close), `handshake` (a
//! TLS session's, before the first request), `gone` (a client that leaves
//! while its request is pending), `transport`.

mod deadline;
mod gone;
mod h2;
mod handshake;
mod linger;
mod request;
mod stream;
pub(super) mod tail;
mod transport;
mod upgraded;

use crate::http::output::Output;
use crate::http::reader::{BufPool, RequestReader};
use crate::poller::Interest;
use crate::server::body_feed::BodyLink;
use crate::server::exchange::{Exchange, Gone, Pending, Terms};
use crate::server::route::Route;
use crate::server::ws_link::Link;
use linger::LingerState;
use std::sync::Arc;
use std::time::Instant;
use stream::StreamedAnswer;
pub use tail::{Due, Tail};
pub use transport::Transport;

/// Output waiting for the socket above which a connection stops reading
/// and dispatching: a batch of hundreds of small pipelined answers still
/// goes out in one write, while a client that does not read costs at most
/// this plus one answer.
pub const OUTPUT_BOUND: usize = 64 * 1024;

/// Where a connection is in its protocol, with what only that step has.
///
/// Transitions:
/// - `Reading` → `Dispatched` when a request is handed to an app
///   (`begin_dispatch`); → `Closing` when a request cannot be read
///   (`fail`, `refuse`).
/// - `Dispatched` → `Reading` or `Closing` with the answer (`answer`: the
///   keep-alive decision, `persistence`); → `Streaming` when the app
///   starts a streamed answer (`start_stream`); → `Upgraded` on a `101`
///   (`upgrade`); → `Closing` on a refusal (a body timeout).
/// - `Streaming` → `Reading` or `Closing` once the body has ended
///   (`pull_stream`).
/// - `Closing { linger: true }` and `Upgraded` once its link is done →
///   `Lingering` when the answer is out (`linger`).
/// - The connection ends (`finished`, or `linger` says `Close`) from
///   `Closing` once its output is out (with `linger`, at the peer's end of
///   stream), from `Lingering`, and from `Reading` or `Upgraded` at the
///   peer's end of stream.
#[repr(u8)]
enum Phase {
    /// Between requests, or receiving one: parsing the read buffer. A
    /// request with a body is routed once its head is whole, and its route
    /// kept here until it is dispatched (`take_route`).
    Reading(Option<Route<'static>>),
    /// One request is with an app. Pipelined bytes wait so answers stay in
    /// order: no request is parsed meanwhile, and the connection reads
    /// only to see its client leave (`gone`; a body streamed to its app is
    /// read as it comes).
    Dispatched(Dispatch),
    /// A streamed answer is going out; as in `Dispatched`, nothing is
    /// parsed.
    Streaming {
        stream: StreamedAnswer,
        /// The app's task for a request abandoned before its end.
        gone: Option<Gone>,
        /// The app sent something since the deadline was last set.
        progress: bool,
        /// Request bytes were left unread when it began (its request's
        /// body): once it has ended, the connection closes lingering.
        body_left: bool,
    },
    /// Switched to WebSocket (`upgraded`): frames, not requests, from now on.
    Upgraded(Box<Link>),
    /// The answer goes out, then the connection closes; `linger`: request
    /// bytes may be left unread, so it lingers instead of closing at once.
    Closing { linger: bool },
    /// Answered and half-closed: what the client still sends is dropped.
    Lingering(Box<LingerState>),
    /// Switched to HTTP/2 (`h2`): streams, not one request at a time.
    H2(Box<crate::server::h2conn::Session>),
}

/// What a dispatched request holds besides its `Pending`.
struct Dispatch {
    pending: Pending,
    /// The app's sink for the request's streamed body, once it gave one.
    /// Boxed: few requests stream their body to the app, and every
    /// request's phase is moved on its answer.
    body: Option<Box<BodyLink>>,
    /// The streamed body broke or was cut short: close after the answer.
    body_broke: bool,
}

/// Which timeout a connection is under (see `ConnParams`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Deadline {
    /// The transport's handshake (TLS's) is not done: close unanswered.
    Handshake,
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
    /// A streamed answer's app sent nothing for `stream_idle_timeout`:
    /// close (the body ends abnormally).
    StreamIdle,
    /// An open WebSocket's ping or close timeout (`ws_link::Link`).
    WebSocket,
    /// A lingering close's time or its wait for bytes ran out: close.
    Linger,
    /// An HTTP/2 connection's oldest request waits for its app: that
    /// stream is answered 504.
    H2App,
}

/// One client connection over a transport (a socket, or a test's buffer).
pub struct Conn<S> {
    stream: S,
    peer: Arc<str>,
    /// The listener it came in on (its index in the loop's acceptor).
    via: usize,
    reader: RequestReader,
    out: Output,
    phase: Phase,
    /// The peer has finished sending (end of stream, or a failed read).
    read_closed: bool,
    /// The stream may hold bytes not read yet (set by readiness, and while
    /// the transport holds input of its own; cleared by a read that
    /// drained it).
    read_ready: bool,
    /// The peer has hung up: read on to the end of stream.
    peer_hup: bool,
    served: u32,
    /// The interest last registered with the poller.
    interest: Interest,
    /// When the current timeout expires, and which one it is.
    deadline: Option<(Instant, Deadline)>,
    write_progress: bool,
    /// While a body is read (in `Reading`, and on in `Dispatched` when it
    /// is streamed to its app): when it began, and the bytes read by then
    /// (its minimum rate is counted from there).
    body_began: Option<(Instant, u64)>,
    /// The access-log line and byte count of the last streamed answer or
    /// WebSocket, due when its body is all written or the connection goes.
    tail: Option<Box<Tail>>,
    /// The transport holds output of its own for the socket (TLS records
    /// the socket did not take yet), as of its last read or write.
    held: bool,
    /// The transport's handshake is under way, as of its last read.
    handshaking: bool,
}

impl<S> Conn<S> {
    pub fn new(stream: S, peer: Arc<str>) -> Self
    where
        S: Transport,
    {
        Conn {
            handshaking: stream.is_handshaking(),
            stream,
            peer,
            via: 0,
            reader: RequestReader::default(),
            out: Output::default(),
            phase: Phase::Reading(None),
            read_closed: false,
            read_ready: false,
            peer_hup: false,
            served: 0,
            interest: Interest::READABLE,
            deadline: None,
            write_progress: false,
            body_began: None,
            tail: None,
            held: false,
        }
    }

    /// Keeps `tail` for the streamed answer or the WebSocket just begun
    /// (its body is what the output takes from now on, after the head),
    /// behind a previous one whose last bytes are still going out.
    pub fn follow(&mut self, mut tail: Tail) {
        let from = match &self.phase {
            Phase::Streaming { stream, .. } => stream.body_from(),
            _ => self.out.queued(),
        };
        tail.begins_at(from, self.out.written());
        let tail = Box::new(tail);
        match &mut self.tail {
            Some(earlier) => earlier.queue(tail),
            None => self.tail = Some(tail),
        }
    }

    /// Tells the tails what the output has written; each is done once
    /// its body is.
    fn tail_written(&mut self) {
        let written = self.out.written();
        while let Some(tail) = &mut self.tail {
            if !tail.written_to(written) {
                return;
            }
            // The one behind goes first; then this one is done.
            self.tail = tail.take_behind();
        }
    }

    /// The listener the connection came in on.
    pub fn via_index(&self) -> usize {
        self.via
    }

    /// The TLS session apps see (none on a plain connection).
    pub fn tls_session(&mut self) -> Option<Arc<stoa_app_api::abi::TlsSession>>
    where
        S: Transport,
    {
        self.stream.tls_session()
    }

    /// Marks the listener the connection came in on.
    pub fn via(mut self, listener: usize) -> Self {
        self.via = listener;
        self
    }

    pub fn stream(&self) -> &S {
        &self.stream
    }

    /// The transport, to script a test's client.
    #[cfg(test)]
    pub fn stream_mut(&mut self) -> &mut S {
        &mut self.stream
    }

    /// The peer's address, as `ip:port`.
    pub fn peer(&self) -> &Arc<str> {
        &self.peer
    }

    /// Records readiness reported by the poller (or assumed: `readable`
    /// after a streamed answer ends or a body's piece is taken).
    pub fn note_ready(&mut self, readable: bool, hup: bool) {
        self.read_ready |= readable || hup;
        self.peer_hup |= hup;
    }

    /// True if the connection should read now: it is between requests or
    /// receiving one, bytes may be waiting, and its output is not over the
    /// bound.
    pub fn read_due(&self) -> bool {
        self.read_ready && !self.read_closed && self.wants_bytes()
    }

    /// True while the connection reads when bytes come: to take requests,
    /// a body streamed to its app, or to see the client of a pending
    /// request leave.
    fn wants_bytes(&self) -> bool {
        self.may_take_requests() || self.reads_body_now() || self.watches_peer()
    }

    /// True while the streamed body is read now: its app's sink on the
    /// pool is not busy with a piece (its pieces count in the window).
    fn reads_body_now(&self) -> bool {
        self.feeds_body() && !self.body_waits()
    }

    /// True while the app's sink on the pool has a piece it has not
    /// finished: the body's bytes are with the app.
    pub(super) fn body_waits(&self) -> bool {
        match &self.phase {
            Phase::Dispatched(d) => d.body.as_ref().is_some_and(|b| b.waits()),
            _ => false,
        }
    }

    /// True while the request with the app has its body streamed to it
    /// and not all of it has come: the connection reads it.
    pub fn feeds_body(&self) -> bool {
        matches!(self.phase, Phase::Dispatched(_)) && self.reader.feeds_body()
    }

    /// True while the connection may read and parse requests: no request
    /// is with an app, it is not closing, and its output is under the bound.
    pub fn may_take_requests(&self) -> bool {
        matches!(self.phase, Phase::Reading(_)) && !self.output_full()
    }

    /// True while a request is with an app.
    #[cfg(test)]
    pub fn is_dispatched(&self) -> bool {
        matches!(self.phase, Phase::Dispatched(_))
    }

    /// True between requests with nothing buffered either way (what a
    /// drain closes at once).
    pub fn is_idle(&self) -> bool {
        matches!(self.phase, Phase::Reading(_)) && self.reader.is_empty() && !self.has_output()
    }

    /// True between keep-alive requests: idle, with at least one request
    /// served (a connection whose first request has not arrived yet is
    /// not: the client is about to send it).
    pub fn is_between_requests(&self) -> bool {
        self.is_idle() && self.served > 0
    }

    /// True if request `id` is the one this connection waits on.
    pub fn waits_for(&self, id: u64) -> bool {
        self.pending().is_some_and(|p| p.id == id)
    }

    /// The request with an app, if any.
    pub fn pending(&self) -> Option<&Pending> {
        match &self.phase {
            Phase::Dispatched(d) => Some(&d.pending),
            _ => None,
        }
    }

    /// True while output is waiting for the stream (or inside it, for the
    /// socket).
    pub fn has_output(&self) -> bool {
        !self.out.is_empty() || self.held
    }

    /// Bytes written to the transport so far, and bytes waiting for it
    /// (when neither changed, the output did not move), on a transport
    /// that sends at the loop's next wait; `None` on one that sends as it
    /// is written (which tells, with `WouldBlock`, when it is full).
    pub fn output_mark(&self) -> Option<(u64, usize)>
    where
        S: Transport,
    {
        self.stream
            .sends_at_wait()
            .then(|| (self.out.written(), self.out.len()))
    }

    /// True while the output waiting is at or over `OUTPUT_BOUND`: no
    /// further request is read or dispatched.
    pub fn output_full(&self) -> bool {
        self.has_output() && self.out.len() >= OUTPUT_BOUND
    }

    /// The interest this connection needs now.
    fn wanted_interest(&self) -> Interest {
        let other = match self.phase {
            Phase::Upgraded(_) | Phase::H2(_) => !self.output_full(),
            Phase::Lingering(_) => true,
            _ => false,
        };
        let read = (self.wants_bytes() || other) && !self.read_closed;
        match (read, self.has_output()) {
            (true, true) => Interest::BOTH,
            (true, false) => Interest::READABLE,
            (false, true) => Interest::WRITABLE,
            // Nothing to do until the app answers, and the client's
            // leaving cannot be read (pipelined bytes read ahead, a body's
            // rest): stay registered (poll and epoll still report
            // hang-ups, select does not: there the answer's write finds
            // the peer gone).
            (false, false) => Interest::NONE,
        }
    }

    /// The interest to register if it changed since last time (and records
    /// it as registered).
    pub fn interest_change(&mut self) -> Option<Interest> {
        let wanted = self.wanted_interest();
        (wanted != self.interest).then(|| {
            self.interest = wanted;
            wanted
        })
    }

    /// Gives the read buffer back when nothing is buffered, or once
    /// lingering (the output buffer goes back as soon as it is flushed).
    pub fn release_buffers(&mut self, pool: &mut BufPool) {
        let idle = matches!(self.phase, Phase::Reading(_) | Phase::Lingering(_));
        if idle && !self.has_output() {
            self.reader.release(pool);
        }
    }

    /// True once the connection has nothing left to do and should close
    /// (a connection due to linger is not: see `linger`).
    pub fn finished(&self) -> bool {
        !self.has_output()
            && match self.phase {
                Phase::Closing { linger } => !linger || self.read_closed,
                Phase::Dispatched(_) | Phase::Streaming { .. } => false,
                // A WebSocket ends at the peer's EOF, after its last frame.
                Phase::Reading(_) | Phase::Upgraded(_) | Phase::Lingering(_) => self.read_closed,
                // HTTP/2 ends at the peer's EOF, after a connection error,
                // and once idle after a GOAWAY.
                Phase::H2(ref s) => {
                    self.read_closed
                        || s.machine.failed()
                        || (s.machine.going_away() && s.is_idle())
                }
            }
    }
}

/// HTTP/1.1's answering side: the one request a connection has waiting.
impl<S> Exchange for Conn<S> {
    fn pending(&self) -> Option<&Pending> {
        Conn::pending(self)
    }

    fn listener(&self) -> usize {
        self.via
    }

    fn answer(
        &mut self,
        response: &mut stoa_app_api::Response,
        fixed: crate::http::response::Fixed,
        terms: &Terms,
        pool: &mut BufPool,
    ) -> Option<Pending> {
        Conn::answer(self, response, fixed, terms, pool)
    }

    fn start_stream(
        &mut self,
        head: &mut stoa_app_api::Response,
        line: Arc<crate::stream_line::StreamLine>,
        open: Arc<std::sync::atomic::AtomicU64>,
        terms: &Terms,
        pool: &mut BufPool,
    ) -> Option<Pending> {
        Conn::start_stream(self, head, line, open, terms, pool)
    }

    fn follow(&mut self, tail: Tail) {
        Conn::follow(self, tail)
    }
}

/// What the loop does with a connection after a WebSocket pump or a
/// lingering read.
#[derive(Debug, PartialEq, Eq)]
pub enum Flow {
    /// Keep it (waiting for bytes, for the socket, or for the app).
    Open,
    /// Close it now.
    Close,
}

#[cfg(test)]
pub(super) mod mem;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_gone;
#[cfg(test)]
mod tests_h2;
#[cfg(test)]
mod tests_handshake;
#[cfg(test)]
mod tests_ws;

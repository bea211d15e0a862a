//! One client connection: its stream, buffers and protocol state. The
//! connection owns its state machine; the loop asks it what to do next and
//! tells it what happened, through methods that say the intent.
//!
//! Phases: `Reading` (parsing the next request from the read buffer),
//! `Dispatched` (one request is with an app; pipelined bytes wait so answers
//! stay in order, and no request byte is read meanwhile), `Closing` (flush,
//! then close), `Lingering` (flushed and half-closed with request bytes
//! unread: read and drop them, then close; see `linger`). The stream is
//! read and written until `WouldBlock` whatever the backend. Whether the
//! connection stays open after an answer is decided in one place,
//! `persistence`.
//!
//! Backpressure: while more than `OUTPUT_BOUND` bytes wait for the socket,
//! the connection neither reads nor parses further requests (the kernel's
//! buffer and the TCP window hold what the client sends meanwhile); the
//! read buffer holds no more than the current request needs. Readiness is
//! remembered (`read_ready`), so reading resumes without a new edge.

use crate::http::answer::HostAnswer;
use crate::http::framing;
use crate::http::output::Output;
use crate::http::parse::Head;
pub use crate::http::reader::ReadState;
use crate::http::reader::{BodyPlan, BufPool, RequestReader};
use crate::http::response::Fixed;
use crate::http::response::Persist;
use crate::http::HttpError;
use crate::poller::Interest;
use crate::server::body_feed::BodyLink;
use crate::server::conn_stream::ConnStream;
use crate::server::ws::Link;
use crate::settings::ConnParams;
use crate::stream_line::StreamLine;
use std::io::{self, Read, Write};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::{Duration, Instant};
use stoa_app_api::abi::BODY_COMPLETE;
use stoa_app_api::Response;

/// Output waiting for the socket above which a connection stops reading
/// and dispatching: a batch of hundreds of small pipelined answers still
/// goes out in one write, while a client that does not read costs at most
/// this plus one answer.
pub const OUTPUT_BOUND: usize = 64 * 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Reading,
    Dispatched,
    /// A streamed answer is going out; like `Dispatched`, nothing is read.
    Streaming,
    Closing,
    /// Switched to WebSocket (`ws`): frames, not requests, from now on.
    Upgraded,
    /// Answered and half-closed: what the client still sends is dropped.
    Lingering,
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
    /// A streamed answer's app sent nothing for `stream_idle_timeout`:
    /// close (the body ends abnormally).
    StreamIdle,
    /// An open WebSocket's ping or close timeout (`ws::Link`).
    WebSocket,
    /// A lingering close's time or its wait for bytes ran out: close.
    Linger,
}

pub use crate::ops::access_log::AccessInfo;

/// The request currently with an app.
pub struct Pending {
    pub id: u64,
    pub head_only: bool,
    pub started: Instant,
    /// The app's counters slot; `None` for the host's own answers.
    pub slot: Option<usize>,
    /// The path, kept for jobs on the blocking pool (for the hung-job log).
    pub path: Option<Box<str>>,
    pub access: Option<Box<AccessInfo>>,
    /// The app's own `app_timeout`, if it has one.
    pub timeout: Option<Duration>,
    /// What the request's head asked for (version, `Connection`).
    keep_alive: bool,
    version_minor: u8,
}

/// One client connection over a stream (a socket, or a test's buffer).
pub struct Conn<S> {
    stream: S,
    peer: Arc<str>,
    /// The listener it came in on (its index in the loop's acceptor).
    via: usize,
    reader: RequestReader,
    out: Output,
    phase: Phase,
    pending: Option<Pending>,
    read_closed: bool,
    /// The stream may hold bytes not read yet (set by readiness, cleared
    /// by a read that drained it).
    read_ready: bool,
    /// The peer has hung up: read on to the end of stream.
    peer_hup: bool,
    served: u32,
    /// The interest last registered with the poller.
    interest: Interest,
    /// When the current timeout expires, and which one it is.
    deadline: Option<(Instant, Deadline)>,
    write_progress: bool,
    /// The streamed answer going out, if any.
    streamed: Option<ConnStream>,
    /// The stream's app sent something since the deadline was last set.
    stream_progress: bool,
    /// The app's sink for the request's streamed body, once it gave one.
    body: Option<BodyLink>,
    /// A streamed body broke or was cut short: close after the answer.
    close_after: bool,
    /// The WebSocket, once switched to one.
    ws: Option<Box<Link>>,
    /// While a body is read: when it began, and the bytes read by then
    /// (its minimum rate is counted from there).
    body_began: Option<(Instant, u64)>,
    /// Request bytes may be left unread when the answer is out: linger
    /// instead of closing at once.
    linger_due: bool,
    /// The lingering close, once begun.
    lingering: Option<Box<linger::LingerState>>,
}

impl<S> Conn<S> {
    pub fn new(stream: S, peer: Arc<str>) -> Self {
        Conn {
            stream,
            peer,
            via: 0,
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
            streamed: None,
            stream_progress: false,
            body: None,
            close_after: false,
            ws: None,
            body_began: None,
            linger_due: false,
            lingering: None,
        }
    }

    /// Marks the listener the connection came in on.
    pub fn via(mut self, listener: usize) -> Self {
        self.via = listener;
        self
    }

    /// The listener the connection came in on.
    pub fn listener(&self) -> usize {
        self.via
    }

    pub fn stream(&self) -> &S {
        &self.stream
    }

    /// The peer's address, as `ip:port`.
    pub fn peer(&self) -> &Arc<str> {
        &self.peer
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
        self.read_ready && !self.read_closed && (self.may_take_requests() || self.feeds_body())
    }

    /// True while the request with the app has its body streamed to it
    /// and not all of it has come: the connection reads it.
    pub fn feeds_body(&self) -> bool {
        self.phase == Phase::Dispatched && self.reader.feeds_body()
    }

    /// True while the connection may read and parse requests: no request
    /// is with an app, it is not closing, and its output is under the bound.
    pub fn may_take_requests(&self) -> bool {
        self.phase == Phase::Reading && !self.output_full()
    }

    /// True while a request is with an app.
    pub fn is_dispatched(&self) -> bool {
        self.phase == Phase::Dispatched
    }

    /// True between requests with nothing buffered either way (what a
    /// drain closes at once).
    pub fn is_idle(&self) -> bool {
        self.phase == Phase::Reading && self.reader.is_empty() && !self.has_output()
    }

    /// True between keep-alive requests: idle, with at least one request
    /// served (a connection whose first request has not arrived yet is
    /// not: the client is about to send it).
    pub fn is_between_requests(&self) -> bool {
        self.is_idle() && self.served > 0
    }

    /// True if request `id` is the one this connection waits on.
    pub fn waits_for(&self, id: u64) -> bool {
        self.phase == Phase::Dispatched && self.pending.as_ref().is_some_and(|p| p.id == id)
    }

    /// The request with an app, if any.
    pub fn pending(&self) -> Option<&Pending> {
        self.pending.as_ref()
    }

    /// The ready request's head, bytes and body.
    pub fn request_parts(&self) -> Option<(&Head, &[u8], &[u8])> {
        self.reader.parts()
    }

    /// The ready request has gone to an app (`slot`; `None` for the host's
    /// own answers) at `started`: the connection now waits for its answer,
    /// reading nothing meanwhile, and the request's bytes leave the buffer.
    /// HEAD and the keep-alive wishes are taken from its head; `path` is
    /// kept for jobs on the blocking pool.
    pub fn begin_dispatch(
        &mut self,
        (id, started): (u64, Instant),
        slot: Option<usize>,
        path: Option<Box<str>>,
        access: Option<Box<AccessInfo>>,
    ) {
        let (head_only, keep_alive, version_minor) = match self.reader.parts() {
            Some((head, buf, _)) => (
                &buf[head.method.clone()] == b"HEAD",
                head.keep_alive,
                head.version_minor,
            ),
            None => (false, false, 1),
        };
        self.pending = Some(Pending {
            id,
            head_only,
            started,
            slot,
            path,
            access,
            timeout: None,
            keep_alive,
            version_minor,
        });
        self.phase = Phase::Dispatched;
        self.reader.consume();
        // The app has seen the body (or has its own copy): a buffer grown
        // for it goes back to the budget now, not after the answer.
        self.reader.shed_grown();
        if !self.reader.feeds_body() {
            self.body_began = None;
        }
    }

    /// Gives the request with the app its app's own `app_timeout`.
    pub fn set_app_timeout(&mut self, timeout: Duration) {
        if let Some(p) = &mut self.pending {
            p.timeout = Some(timeout);
        }
    }

    /// Whether the connection stays open after answering `pending`: the one
    /// place keep-alive is decided. It does when the request asked for it
    /// (HTTP/1.1 unless `Connection: close`; HTTP/1.0 with `keep-alive`),
    /// this is not the last request `max_requests_per_conn` allows, and
    /// the host does not want it closed (draining, a timed-out app).
    fn persistence(&self, pending: &Pending, params: &ConnParams, close: bool) -> Persist {
        let keep = pending.keep_alive && !close && self.served + 1 < params.max_requests_per_conn;
        match (keep, pending.version_minor) {
            (false, _) => Persist::Close,
            (true, 0) => Persist::KeepAlive10,
            (true, _) => Persist::KeepAlive,
        }
    }

    /// True while output is waiting for the stream.
    pub fn has_output(&self) -> bool {
        !self.out.is_empty()
    }

    /// True while the output waiting is at or over `OUTPUT_BOUND`: no
    /// further request is read or dispatched.
    pub fn output_full(&self) -> bool {
        self.has_output() && self.out.len() >= OUTPUT_BOUND
    }

    /// The interest this connection needs now.
    fn wanted_interest(&self) -> Interest {
        let frames = self.phase == Phase::Upgraded && !self.output_full();
        let dropping = self.phase == Phase::Lingering;
        let read = (self.may_take_requests() || self.feeds_body() || frames || dropping)
            && !self.read_closed;
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

    /// The interest to register if it changed since last time (and records
    /// it as registered).
    pub fn interest_change(&mut self) -> Option<Interest> {
        let wanted = self.wanted_interest();
        (wanted != self.interest).then(|| {
            self.interest = wanted;
            wanted
        })
    }

    /// The current timeout and its kind.
    pub fn deadline(&self) -> Option<(Instant, Deadline)> {
        self.deadline
    }

    /// Brings an idle or lingering connection's deadline forward to `at`
    /// (a drain: a client about to reuse the connection still gets its
    /// answer, with `Connection: close`; one that stays idle is closed at
    /// `at`).
    pub fn close_idle_by(&mut self, at: Instant) {
        if let Some(state) = &mut self.lingering {
            state.end_by(at);
        }
        if let Some((when, kind @ (Deadline::Idle | Deadline::Linger))) = self.deadline {
            self.deadline = Some((when.min(at), kind));
        }
    }

    /// Picks the timeout for the connection's state, counted from `now`
    /// (the loop's clock). The head timeout runs from the head's first byte
    /// (trickling bytes do not extend it); the body, send and idle timeouts
    /// restart on progress.
    pub fn update_deadline(&mut self, params: &ConnParams, now: Instant) {
        if let Some(state) = &self.lingering {
            self.deadline = Some((state.deadline(), Deadline::Linger));
            return;
        }
        if let (false, Some(link)) = (self.has_output(), &self.ws) {
            self.deadline = Some((link.deadline(), Deadline::WebSocket));
            return;
        }
        let want = if self.has_output() {
            Deadline::Send
        } else {
            match self.phase {
                Phase::Dispatched if self.reader.in_body() => Deadline::Body,
                Phase::Dispatched => Deadline::App,
                Phase::Streaming => Deadline::StreamIdle,
                Phase::Closing | Phase::Upgraded | Phase::Lingering => Deadline::Send,
                Phase::Reading if self.reader.in_body() => Deadline::Body,
                Phase::Reading if self.reader.is_empty() => Deadline::Idle,
                Phase::Reading => Deadline::Head,
            }
        };
        match want {
            Deadline::Body if self.body_began.is_none() => {
                self.body_began = Some((now, self.reader.taken()));
            }
            // Output (a 100 Continue) may interrupt a body; it goes on.
            Deadline::Body | Deadline::Send => {}
            _ => self.body_began = None,
        }
        let progressed = match want {
            Deadline::Idle | Deadline::Body => std::mem::take(&mut self.reader.progressed),
            Deadline::Send => self.write_progress,
            Deadline::StreamIdle => self.stream_progress,
            Deadline::Head | Deadline::App | Deadline::WebSocket | Deadline::Linger => false,
        };
        self.stream_progress = false;
        self.reader.progressed = false;
        self.write_progress = false;
        if progressed || self.deadline.map(|(_, k)| k) != Some(want) {
            if want == Deadline::Body {
                let gap = now + params.body_timeout;
                let at = self
                    .body_rate_deadline(params)
                    .map_or(gap, |at| at.min(gap));
                self.deadline = Some((at, want));
                return;
            }
            let limit = match want {
                Deadline::Idle => params.keep_alive_timeout,
                Deadline::Head => params.head_timeout,
                Deadline::Body => params.body_timeout,
                Deadline::App => self
                    .pending
                    .as_ref()
                    .and_then(|p| p.timeout)
                    .unwrap_or(params.app_timeout),
                Deadline::Send | Deadline::WebSocket | Deadline::Linger => params.send_timeout,
                Deadline::StreamIdle => params.stream_idle_timeout,
            };
            self.deadline = Some((now + limit, want));
        }
    }

    /// When the body being read falls below `body_min_rate`: a first
    /// `body_timeout` from its start, and a second more for every
    /// `body_min_rate` bytes read since (Apache's `MinRate`).
    /// A body streamed to its app has none: the host reads it only as
    /// fast as the app takes it, so a slow app is not the client's fault
    /// (its stall bound, `body_timeout`, still holds).
    fn body_rate_deadline(&self, params: &ConnParams) -> Option<Instant> {
        if self.reader.feeds_body() {
            return None;
        }
        let (began, taken) = self.body_began?;
        let rate = params.body_min_rate;
        if rate == 0 {
            return None;
        }
        let read = self.reader.taken().saturating_sub(taken);
        // Past what an `Instant` can hold, there is no deadline.
        let earned = Duration::try_from_secs_f64(read as f64 / rate as f64).ok()?;
        began.checked_add(params.body_timeout.saturating_add(earned))
    }

    /// Why the body's deadline passed at `now`: too slow on the whole, or
    /// stalled.
    pub fn body_timeout_error(&self, params: &ConnParams, now: Instant) -> HttpError {
        match self.body_rate_deadline(params) {
            Some(at) if at <= now => HttpError::BodyTooSlow(params.body_min_rate),
            _ => HttpError::BodyTimeout,
        }
    }

    /// Gives the read buffer back when nothing is buffered, or once
    /// lingering (the output buffer goes back as soon as it is flushed).
    pub fn release_buffers(&mut self, pool: &mut BufPool) {
        let idle = matches!(self.phase, Phase::Reading | Phase::Lingering);
        if idle && !self.has_output() {
            self.reader.release(pool);
        }
    }

    /// True once the connection has nothing left to do and should close
    /// (a connection due to linger is not: see `linger`).
    pub fn finished(&self) -> bool {
        !self.has_output()
            && match self.phase {
                Phase::Closing => !self.linger_due || self.read_closed,
                Phase::Lingering => self.read_closed,
                Phase::Reading => self.read_closed,
                Phase::Dispatched | Phase::Streaming => false,
                // A WebSocket ends at the peer's EOF, after its last frame.
                Phase::Upgraded => self.read_closed,
            }
    }
}

impl<S: Read + Write> Conn<S> {
    /// Reads until `WouldBlock`, EOF, or the read buffer holds what the
    /// current request needs; after a hang-up, on to the end of stream.
    fn fill(&mut self, params: &ConnParams, pool: &mut BufPool) -> ReadState {
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

    /// Parses the next request; true when one is ready to dispatch. An
    /// `Expect: 100-continue` is answered here when the body will be read.
    #[cfg(test)]
    pub fn next_request(
        &mut self,
        params: &ConnParams,
        pool: &mut BufPool,
    ) -> Result<bool, HttpError> {
        self.next_request_with(params, pool, &|_, _| BodyPlan::default())
    }

    /// `next_request`, with a body plan per request (see
    /// `RequestReader::next_request_with`).
    pub fn next_request_with(
        &mut self,
        params: &ConnParams,
        pool: &mut BufPool,
        body_plan: &dyn Fn(&Head, &[u8]) -> BodyPlan,
    ) -> Result<bool, HttpError> {
        let ready = self
            .reader
            .next_request_with(params, pool.budget(), body_plan)?;
        if self.reader.take_continue() {
            self.out.push_bytes(pool, b"HTTP/1.1 100 Continue\r\n\r\n");
        }
        Ok(ready)
    }

    /// Queues the answer to the request with the app (a large body is
    /// taken out of `response`, not copied) and moves on: to the next
    /// request, or to closing. `close` asks for the connection to close
    /// after it whatever the request wanted. Returns the request answered.
    pub fn answer(
        &mut self,
        (response, fixed): (&mut Response, Fixed),
        date: &str,
        params: &ConnParams,
        close: bool,
        pool: &mut BufPool,
    ) -> Option<Pending> {
        let pending = self.pending.take()?;
        // A streamed body not all read (the app answered first) or broken:
        // its rest cannot be told from a next request.
        let body_left = std::mem::take(&mut self.close_after) || self.reader.feeds_body();
        self.reader.abandon_body();
        self.body = None;
        let persist = self.persistence(&pending, params, close || body_left);
        self.out
            .push_response(pool, response, fixed, pending.head_only, persist, date);
        self.served += 1;
        self.phase = if persist == Persist::Close {
            self.linger_due |= body_left || self.bytes_left();
            Phase::Closing
        } else {
            Phase::Reading
        };
        Some(pending)
    }

    /// The app gave its sink for the request's streamed body (a request
    /// whose body is not streamed gets the end at once: its body was in
    /// the request).
    pub fn attach_body(&mut self, link: BodyLink) {
        if self.feeds_body() {
            self.body = Some(link);
        } else {
            link.complete_now();
        }
    }

    /// Hands the streamed body's buffered bytes to the app's sink, and its
    /// end once it has all come, broken, or the client has gone; true if
    /// any byte went.
    pub fn feed_body(&mut self) -> bool {
        let Some(link) = &mut self.body else {
            return false;
        };
        let (fed, outcome) = link.feed(&mut self.reader, self.read_closed, &self.peer);
        let Some(outcome) = outcome else {
            return fed;
        };
        if outcome != BODY_COMPLETE {
            self.reader.abandon_body();
            self.close_after = true;
        }
        if let Some(link) = self.body.take() {
            link.end(outcome);
        }
        fed
    }

    /// True if the streamed answer to request `id` is going out.
    pub fn streams_for(&self, id: u64) -> bool {
        self.streamed.as_ref().is_some_and(|s| s.request_id() == id)
    }

    /// True while a streamed answer is going out.
    pub fn is_streaming(&self) -> bool {
        self.phase == Phase::Streaming
    }

    /// The app started a streamed answer to the request with it: queues
    /// the head (framed as `framing::plan` picks) and moves to streaming;
    /// `open` counts the worker's open streams. Returns the request.
    pub fn start_stream(
        &mut self,
        head: &mut Response,
        (line, open): (Arc<StreamLine>, Arc<AtomicU64>),
        (date, params, close): (&str, &ConnParams, bool),
        pool: &mut BufPool,
    ) -> Option<Pending> {
        let pending = self.pending.take()?;
        let plan = framing::plan(
            pending.head_only,
            head.status,
            line.declared(),
            pending.version_minor,
        );
        let persist = if plan.must_close {
            Persist::Close
        } else {
            self.persistence(&pending, params, close)
        };
        self.out.push_stream_head(pool, head, plan, persist, date);
        self.streamed = Some(ConnStream::new(line, (plan.framing, persist), open));
        self.phase = Phase::Streaming;
        Some(pending)
    }

    /// Takes what the stream's app sent into the output, framed. A body
    /// ended well moves the connection on (to the next request, or to
    /// closing; `close` forces closing); one ended abnormally closes it
    /// after what was queued, without a terminating chunk.
    pub fn pull_stream(&mut self, pool: &mut BufPool, close: bool) {
        let Some(stream) = &self.streamed else {
            return;
        };
        let (progressed, ended) = stream.pull(&mut self.out, pool, close);
        self.stream_progress |= progressed;
        let Some(persist) = ended else {
            return;
        };
        self.streamed = None;
        self.served += 1;
        self.phase = if persist == Persist::Close {
            self.linger_due |= self.bytes_left();
            Phase::Closing
        } else {
            Phase::Reading
        };
    }

    /// Tells the stream's app side how much output still waits (its
    /// queue's room, its drain task).
    pub fn report_stream(&self) {
        if let Some(stream) = &self.streamed {
            stream.report(self.out.len());
        }
    }

    /// Answers a request that could not be read, then closes (lingering:
    /// the client may still be sending it).
    pub fn fail(&mut self, error: &HttpError, date: &str, pool: &mut BufPool) {
        log::debug!("{}: {error}", self.peer);
        self.refuse(HostAnswer::Http(error.clone()), date, pool);
    }

    /// Answers `answer` in place of whatever the client is sending, then
    /// closes, lingering (see `linger`).
    pub fn refuse(&mut self, answer: HostAnswer, date: &str, pool: &mut BufPool) {
        self.reader.abandon();
        self.pending = None;
        self.body = None;
        let mut response = answer.response();
        self.out
            .push_response(pool, &mut response, &[], false, Persist::Close, date);
        self.phase = Phase::Closing;
        self.linger_due = true;
    }

    /// Writes until the output is empty or the stream would block.
    pub fn flush(&mut self, pool: &mut BufPool) -> io::Result<()> {
        self.write_progress |= self.out.flush(pool, &mut self.stream)?;
        Ok(())
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

#[path = "conn_linger.rs"]
mod linger;

#[path = "conn_ws.rs"]
mod ws;

#[cfg(test)]
#[path = "conn_tests.rs"]
mod tests;

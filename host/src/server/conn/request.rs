//! A connection's requests: reading them, handing one to an app, queueing
//! its answer and deciding (once, `persistence`) whether the connection
//! stays open after it; a request body streamed to its app; the refusals
//! that answer in place of a request and close.

use super::{Conn, Dispatch, Phase, Transport};
use crate::http::answer::HostAnswer;
use crate::http::parse::Head;
use crate::http::reader::{BodyPlan, BufPool, ReadState};
use crate::http::response::{Fixed, Persist};
use crate::http::HttpError;
use crate::server::body_feed::BodyLink;
use crate::server::exchange::{Begun, Incoming};
use crate::server::exchange::{Pending, Terms};
use crate::server::route::Route;
use crate::settings::ConnParams;
use std::cell::Cell;
use std::io;
use stoa_app_api::abi::BODY_COMPLETE;
use stoa_app_api::Response;

/// Decides a request's route and body plan once its head is whole, from
/// its head, its bytes, the connection's peer and the listener it came in
/// on.
pub type Router<'a> =
    dyn Fn(&Head, &[u8], &std::sync::Arc<str>, usize) -> (BodyPlan, Route<'static>) + 'a;

impl<S> Conn<S> {
    /// The ready request's head, bytes and body.
    #[cfg(test)]
    pub fn request_parts(&self) -> Option<(&Head, &[u8], &[u8])> {
        self.reader.parts()
    }

    /// The route the request being read was given when its head was whole
    /// (a request with a body; see `next_request_with`), taken to dispatch
    /// it.
    pub fn take_route(&mut self) -> Option<Route<'static>> {
        match &mut self.phase {
            Phase::Reading(route) => route.take(),
            _ => None,
        }
    }

    /// The ready request, as the dispatcher sees it: its route (kept from
    /// its head) taken, its TLS session, its peer and listener.
    pub fn incoming(&mut self) -> Option<Incoming<'_>>
    where
        S: Transport,
    {
        let route = self.take_route();
        let tls = self.stream.tls_session();
        let (head, buf, body) = self.reader.parts()?;
        Some(Incoming {
            head,
            buf,
            body,
            route,
            tls,
            peer: &self.peer,
            via: self.via,
        })
    }

    /// Applies the dispatcher's `Outcome::begun` to the ready request: it
    /// waits here for its answer (`begin_dispatch`), with its entry on the
    /// board of requests in flight, its app's own timeout and, unless it
    /// was `answered` at once, its app's `on_gone` task.
    pub fn begin(&mut self, begun: Begun, answered: bool) {
        let (head_only, keep_alive, version_minor) = self.head_facts();
        let mut pending = Pending::begun(begun, head_only, answered);
        pending.keep_alive = keep_alive;
        pending.version_minor = version_minor;
        self.wait_for(pending);
    }

    /// The ready request has gone to an app (`slot`; `None` for the host's
    /// own answers) at `started`, numbered `id`: the connection now waits
    /// for its answer, reading nothing meanwhile, and the request's bytes
    /// leave the buffer. HEAD and the keep-alive wishes are taken from its
    /// head; `path` is kept for jobs on the blocking pool.
    #[cfg(test)]
    pub fn begin_dispatch(
        &mut self,
        id: u64,
        started: std::time::Instant,
        slot: Option<usize>,
        path: Option<Box<str>>,
        access: Option<Box<crate::ops::access_log::AccessInfo>>,
    ) {
        let (head_only, keep_alive, version_minor) = self.head_facts();
        self.wait_for(Pending {
            id,
            head_only,
            started,
            slot,
            path,
            access,
            timeout: None,
            gone: None,
            on_board: None,
            keep_alive,
            version_minor,
        });
    }

    /// What the ready request's head says of its answer: HEAD, keep-alive,
    /// and its version's minor.
    fn head_facts(&self) -> (bool, bool, u8) {
        match self.reader.parts() {
            Some((head, buf, _)) => (
                &buf[head.method.clone()] == b"HEAD",
                head.keep_alive,
                head.version_minor,
            ),
            None => (false, false, 1),
        }
    }

    /// The connection waits for `pending`'s answer, reading nothing
    /// meanwhile; the request's bytes leave the buffer.
    fn wait_for(&mut self, pending: Pending) {
        self.phase = Phase::Dispatched(Dispatch {
            pending,
            body: None,
            body_broke: false,
        });
        self.reader.consume();
        // The app has seen the body (or has its own copy): a buffer grown
        // for it goes back to the budget now, not after the answer.
        self.reader.shed_grown();
        if !self.reader.feeds_body() {
            self.body_began = None;
        }
    }

    /// Gives the request with the app its app's own `app_timeout`.
    #[cfg(test)]
    pub fn set_app_timeout(&mut self, timeout: std::time::Duration) {
        if let Phase::Dispatched(d) = &mut self.phase {
            d.pending.timeout = Some(timeout);
        }
    }

    /// Whether the connection stays open after answering `pending`: the one
    /// place keep-alive is decided. It does when the request asked for it
    /// (HTTP/1.1 unless `Connection: close`; HTTP/1.0 with `keep-alive`),
    /// this is not the last request `max_requests_per_conn` allows, and
    /// the host does not want it closed (draining, a timed-out app, a
    /// request body left unread).
    pub(super) fn persistence(
        &self,
        pending: &Pending,
        params: &ConnParams,
        close: bool,
    ) -> Persist {
        let keep = pending.keep_alive && !close && self.served + 1 < params.max_requests_per_conn;
        match (keep, pending.version_minor) {
            (false, _) => Persist::Close,
            (true, 0) => Persist::KeepAlive10,
            (true, _) => Persist::KeepAlive,
        }
    }

    /// Takes the request with the app out of `Dispatched` for its answer
    /// (the phase is `Reading` until the caller moves on): the request,
    /// and whether request bytes are left that cannot be told from a next
    /// request (a streamed body not all read, as the app answered first,
    /// or broken). Such a body's rest is dropped, and its sink told it
    /// broke.
    pub(super) fn take_dispatch(&mut self) -> Option<(Pending, bool)> {
        if !matches!(self.phase, Phase::Dispatched(_)) {
            return None;
        }
        let Phase::Dispatched(d) = std::mem::replace(&mut self.phase, Phase::Reading(None)) else {
            return None;
        };
        let body_left = d.body_broke || self.reader.feeds_body();
        self.reader.abandon_body();
        Some((d.pending, body_left))
    }

    /// An answer has gone to the output whole (or a streamed one has
    /// ended): on to the next request, or to closing, lingering if
    /// request bytes may be left unread (`unread`, or bytes buffered or
    /// waiting in the transport).
    pub(super) fn answered(&mut self, persist: Persist, unread: bool) {
        self.served += 1;
        self.phase = self.after_answer(persist, unread);
    }

    /// The phase after an answer that went out as `persist` says.
    fn after_answer(&self, persist: Persist, unread: bool) -> Phase {
        match persist {
            Persist::Close => Phase::Closing {
                linger: unread || self.bytes_left(),
            },
            Persist::KeepAlive | Persist::KeepAlive10 => Phase::Reading(None),
        }
    }

    /// True if request bytes are buffered or may wait in the transport.
    pub(super) fn bytes_left(&self) -> bool {
        self.reader.buffered() > 0 || self.read_ready
    }

    /// Queues `response` (its `fixed` headers after its own) as the answer
    /// to the request with the app (a large body is taken out of
    /// `response`, not copied) and moves on: to the next request, or to
    /// closing. Returns the request answered.
    pub fn answer(
        &mut self,
        response: &mut Response,
        fixed: Fixed,
        terms: &Terms,
        pool: &mut BufPool,
    ) -> Option<Pending> {
        // As `take_dispatch` then `answered`, with the phase moved once: on
        // every answer, so its request is read in place and the phase
        // replaced by the next one directly.
        let Phase::Dispatched(d) = &self.phase else {
            return None;
        };
        let body_left = d.body_broke || self.reader.feeds_body();
        let persist = self.persistence(&d.pending, terms.params, terms.close || body_left);
        let head_only = d.pending.head_only;
        self.out
            .push_response(pool, response, fixed, head_only, persist, terms.date);
        self.reader.abandon_body();
        self.served += 1;
        let next = self.after_answer(persist, body_left);
        match std::mem::replace(&mut self.phase, next) {
            Phase::Dispatched(d) => Some(d.pending),
            _ => None,
        }
    }

    /// The app gave its sink for the request's streamed body (a request
    /// whose body is not streamed gets the end at once: its body was in
    /// the request).
    pub fn attach_body(&mut self, link: BodyLink) {
        match &mut self.phase {
            Phase::Dispatched(d) if self.reader.feeds_body() => d.body = Some(Box::new(link)),
            _ => link.complete_now(),
        }
    }

    /// Hands the streamed body's buffered bytes to the app's sink, and its
    /// end once it has all come, broken, or the client has gone; true if
    /// any byte went.
    pub fn feed_body(&mut self) -> bool {
        let Phase::Dispatched(d) = &mut self.phase else {
            return false;
        };
        let Some(link) = &mut d.body else {
            return false;
        };
        let (fed, outcome) = link.feed(&mut self.reader, self.read_closed, &self.peer);
        let Some(outcome) = outcome else {
            return fed;
        };
        if outcome != BODY_COMPLETE {
            self.reader.abandon_body();
            d.body_broke = true;
        }
        if let Some(link) = d.body.take() {
            link.end(outcome);
        }
        fed
    }

    /// Answers a request that could not be read, then closes (lingering:
    /// the client may still be sending it).
    pub fn fail(&mut self, error: &HttpError, date: &str, pool: &mut BufPool) {
        log::debug!("{}: {error}", self.peer);
        self.refuse(HostAnswer::Http(error.clone()), date, pool);
    }

    /// Answers `answer` in place of whatever the client is sending, then
    /// closes, lingering (see `linger`). A request with an app is dropped
    /// (its streamed body's sink told it broke).
    pub fn refuse(&mut self, answer: HostAnswer, date: &str, pool: &mut BufPool) {
        self.reader.abandon();
        self.phase = Phase::Closing { linger: true };
        let mut response = answer.response();
        self.out
            .push_response(pool, &mut response, &[], false, Persist::Close, date);
    }
}

impl<S: Transport> Conn<S> {
    /// Reads until `WouldBlock`, EOF, or the read buffer holds what the
    /// current request needs; after a hang-up, on to the end of stream.
    /// Input buffered inside the transport keeps the connection readable.
    fn fill(&mut self, params: &ConnParams, pool: &mut BufPool) -> ReadState {
        if self.read_closed {
            return ReadState::Closed;
        }
        let state = self
            .reader
            .fill(&mut self.stream, params, self.peer_hup, pool);
        self.read_closed = matches!(state, ReadState::Closed | ReadState::Failed);
        self.read_ready = state == ReadState::Full || self.stream.has_buffered_input();
        self.held = self.stream.has_buffered_output();
        self.handshaking = self.stream.is_handshaking();
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
        let peer = self.peer.clone();
        self.next_request_with(params, pool, &|_, _, _, _| {
            let route = Route {
                client: peer.clone(),
                scheme: "http",
                target: crate::server::route::Target::NoMount,
            };
            (BodyPlan::default(), route)
        })
    }

    /// `next_request`, with a request's route and body plan decided by
    /// `route` once its head is whole, when it has a body (see
    /// `RequestReader::next_request_with`): the route is kept until the
    /// request is dispatched (`take_route`).
    pub fn next_request_with(
        &mut self,
        params: &ConnParams,
        pool: &mut BufPool,
        route: &Router<'_>,
    ) -> Result<bool, HttpError> {
        let routed = Cell::new(None);
        let (peer, via) = (&self.peer, self.via);
        let plan = |head: &Head, buf: &[u8]| {
            let (plan, route) = route(head, buf, peer, via);
            routed.set(Some(route));
            plan
        };
        let read = self.reader.next_request_with(params, pool.budget(), &plan);
        if let (Some(route), Phase::Reading(kept)) = (routed.take(), &mut self.phase) {
            *kept = Some(route);
        }
        let ready = read?;
        if self.reader.take_continue() {
            self.out.push_bytes(pool, b"HTTP/1.1 100 Continue\r\n\r\n");
        }
        Ok(ready)
    }

    /// Writes until the output is empty or the transport would block.
    pub fn flush(&mut self, pool: &mut BufPool) -> io::Result<()> {
        let wrote = self.out.flush(pool, &mut self.stream);
        if self.tail.is_some() {
            self.tail_written();
        }
        self.write_progress |= wrote?;
        // What the transport holds for the socket goes too (nothing to do
        // on a bare socket).
        self.stream.flush()?;
        self.held = self.stream.has_buffered_output();
        Ok(())
    }
}

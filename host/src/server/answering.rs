//! Queueing an answer on its request's connection: the app's response
//! (made final, with HSTS on a TLS listener), a streamed answer's head,
//! the switch to WebSocket; each counted, and its access-log line written
//! (a streamed answer's and a WebSocket's at their end, `Tail`).

use super::clock::Stamp;
use super::conn::{Conn, Due, Tail, Transport};
use super::dispatch::Dispatcher;
use super::exchange::{Exchange, Pending, Terms};
use super::ws_link::line::Line;
use super::ws_link::{Link, LinkWatch};
use crate::http::answer::{is_final, HostAnswer};
use crate::http::reader::BufPool;
use crate::http::response::Fixed;
use crate::inbox::{Answer, StreamStart, Upgrade};
use crate::ops::access_log::Answered;
use crate::poller::Token;
use crate::server::responder::ReplyTo;
use crate::stats::{bump, Stats};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::{Duration, Instant};
use stoa_app_api::Response;

impl Dispatcher {
    /// Queues `response` (with its constant headers `fixed`) as the answer
    /// to the request `conn` (its protocol's answering side) has waiting, counts it and writes its access-log
    /// line. `close` closes the connection after it (a timed-out app); so
    /// does draining.
    pub(super) fn finish(
        &self,
        conn: &mut impl Exchange,
        response: Response,
        fixed: Fixed,
        close: bool,
        at: Stamp<'_>,
        pool: &mut BufPool,
    ) {
        let Some(slot) = conn.pending().map(|p| p.slot) else {
            return;
        };
        let mut response = final_status(response, slot, &self.handles.stats);
        self.add_hsts(conn.listener(), &mut response);
        let (status, body_len) = (response.status, response.body.len());
        let close = close || self.handles.control.draining();
        // A large body is moved to the output as it is, not copied.
        let terms = Terms {
            date: at.date,
            params: &self.handles.settings.conn,
            close,
        };
        let Some(pending) = conn.answer(&mut response, fixed, &terms, pool) else {
            return;
        };
        self.record(&pending, status, body_len, at.now);
    }

    /// Adds `Strict-Transport-Security` (`--hsts`) to an answer on TLS
    /// listener `via`, unless the app gave its own.
    fn add_hsts(&self, via: usize, response: &mut Response) {
        let Some(value) = &self.handles.settings.hsts else {
            return;
        };
        let own = || {
            response
                .headers
                .iter()
                .any(|h| h.name.eq_ignore_ascii_case("strict-transport-security"))
        };
        if self.serves_tls(via) && !own() {
            response.headers.push(stoa_app_api::Header {
                name: "Strict-Transport-Security".into(),
                value: value.as_bytes().into(),
            });
        }
    }

    /// The app started a streamed answer to the request `conn` waits on:
    /// its head is queued and counted now (its latency is the time to the
    /// head); its access-log line and its bytes wait for its end (`Tail`),
    /// and `open` (the worker's count of open streams) counts it while it
    /// runs. A head with a status that is not final is answered 500
    /// instead.
    pub(super) fn start_stream(
        &self,
        conn: &mut impl Exchange,
        start: StreamStart,
        open: Arc<AtomicU64>,
        at: Stamp<'_>,
        pool: &mut BufPool,
    ) {
        let StreamStart { mut head, line } = start;
        line.attach(self.handles.budget.reservation());
        if !is_final(head.status) {
            line.close();
            // `finish` answers a status that is not final with a 500.
            self.finish(conn, head, &[], false, at, pool);
            return;
        }
        let close = self.handles.control.draining();
        let status = head.status;
        self.add_hsts(conn.listener(), &mut head);
        let terms = Terms {
            date: at.date,
            params: &self.handles.settings.conn,
            close,
        };
        let Some(pending) = conn.start_stream(&mut head, line, open, &terms, pool) else {
            return;
        };
        self.follow(conn, pending, status, at.now);
    }

    /// Counts the streamed answer or WebSocket `conn` has just begun for
    /// `pending` (its head given at `now`) and leaves its access-log line
    /// and bytes to its end.
    fn follow(&self, conn: &mut impl Exchange, mut pending: Pending, status: u16, now: Instant) {
        self.count(&pending, status, 0, now);
        let log = match (&self.handles.access_log, pending.access.take()) {
            (Some(log), Some(info)) => Some((log.clone(), info)),
            _ => None,
        };
        conn.follow(Tail::new(Due {
            log,
            stats: self.handles.stats.clone(),
            worker: self.worker,
            slot: pending.slot,
            status,
            started: pending.started,
        }));
    }

    /// Queues the app's answer to the request `conn` (reported as
    /// `token`) waits on: a response (`finish`), or the switch to
    /// WebSocket.
    #[inline]
    pub(super) fn answer<S: Transport>(
        &self,
        conn: &mut Conn<S>,
        token: Token,
        answer: Answer,
        at: Stamp<'_>,
        pool: &mut BufPool,
    ) {
        match answer {
            Answer::Response(response, fixed) => {
                self.finish(conn, response, fixed, false, at, pool)
            }
            Answer::Upgrade(upgrade) => self.upgrade(conn, token, *upgrade, at, pool),
        }
    }

    /// Answers `101` and opens the app's WebSocket session on `conn`.
    #[cold]
    #[inline(never)]
    fn upgrade<S: Transport>(
        &self,
        conn: &mut Conn<S>,
        token: Token,
        mut upgrade: Upgrade,
        at: Stamp<'_>,
        pool: &mut BufPool,
    ) {
        if self.handles.control.draining() {
            // A WebSocket opened now would be closed at once.
            let draining = HostAnswer::Draining.response();
            return self.finish(conn, draining, &[], true, at, pool);
        }
        let Some(id) = conn.pending().map(|p| p.id) else {
            return;
        };
        let params = &self.handles.settings.conn;
        let reply = ReplyTo {
            queue: self.queue.clone(),
            token,
            id,
        };
        // A WebSocket's queue is bounded as a streamed answer's is.
        let line = Line::new(reply, params.stream_queue, params.send_timeout);
        let accept = upgrade.accept.clone();
        let headers = std::mem::take(&mut upgrade.headers);
        let watch = LinkWatch {
            stats: self.handles.stats.clone(),
            board: self.handles.board.clone(),
            worker: self.worker,
            settings: self.handles.settings.clone(),
        };
        let budget = self.handles.budget.clone();
        let Some(pending) = conn.upgrade((&accept, &headers), at.date, pool, |rest| {
            Link::new(upgrade, line, watch, rest, budget, at.now)
        }) else {
            return;
        };
        self.follow(conn, pending, 101, at.now);
        if let Some(link) = conn.link() {
            log::debug!("WebSocket {id} open for app {}", link.app());
            link.open();
        }
    }

    /// Counts an answer to `pending` given at `now` and writes its
    /// access-log line.
    fn record(&self, pending: &Pending, status: u16, body_len: usize, now: Instant) {
        let bytes = if pending.head_only { 0 } else { body_len };
        let took = self.count(pending, status, bytes, now);
        if let (Some(log), Some(info)) = (&self.handles.access_log, &pending.access) {
            let answered = Answered {
                status,
                bytes,
                micros: u64::try_from(took.as_micros()).unwrap_or(u64::MAX),
            };
            log.write(info, &answered);
        }
    }

    /// Counts an answer to `pending` given at `now` with `bytes` of body;
    /// returns the time it took.
    fn count(&self, pending: &Pending, status: u16, bytes: usize, now: Instant) -> Duration {
        let took = now.saturating_duration_since(pending.started);
        let app = self.handles.stats.worker(self.worker).app(pending.slot);
        app.record(status, took);
        if bytes > 0 {
            bump(&app.bytes, bytes as u64);
        }
        log::trace!("request {} answered {status} in {took:?}", pending.id);
        took
    }
}

/// An app's answer must be a final status (`is_final`); one that is not
/// becomes a 500, logged with the app's name.
fn final_status(response: Response, slot: Option<usize>, stats: &Stats) -> Response {
    if is_final(response.status) {
        return response;
    }
    let app = slot.map_or_else(|| "(host)".into(), |s| stats.app_name(s));
    log::error!(
        "app {app} answered status {}, which is not a final HTTP status (200-599); sending 500",
        response.status
    );
    HostAnswer::InvalidStatus.response()
}

//! The sweep of connection deadlines (a sweep over the slab is cheaper
//! than a timer per connection), and what each kind of deadline does when
//! it passes: 408 for a stalled head or body, 504 for an app that did not
//! answer, a quiet close for an idle or stuck connection or an unfinished
//! TLS handshake, the end of a silent stream, a WebSocket's ping or close
//! timeout, the end of a lingering close.

use super::clock::Stamp;
use super::conn::{Deadline, Flow};
use super::Server;
use crate::http::answer::HostAnswer;
use crate::http::HttpError;
use crate::poller::Token;
use std::time::Instant;

impl Server {
    /// Applies every connection deadline that has passed by `now`.
    pub(super) fn sweep(&mut self, now: Instant) {
        let expired: Vec<(usize, Deadline)> = self
            .conns
            .iter()
            .filter_map(|(k, c)| {
                c.deadline()
                    .filter(|(at, _)| *at <= now)
                    .map(|(_, d)| (k, d))
            })
            .collect();
        for (key, deadline) in expired {
            self.expire(Token(key), deadline, now);
        }
    }

    /// Applies one passed deadline to its connection.
    fn expire(&mut self, token: Token, deadline: Deadline, now: Instant) {
        let Some(conn) = self.conns.get_mut(token.0) else {
            return;
        };
        // The host gives up on a pending request (a 504 for its app, a 408
        // for its body): its app hears of it. (A close runs it too.)
        if matches!(deadline, Deadline::App | Deadline::Body) {
            if let Some(gone) = conn.take_gone() {
                self.run_gone(gone);
            }
        }
        match deadline {
            Deadline::WebSocket => self.expire_ws(token, now),
            Deadline::Linger => self.expire_linger(token),
            Deadline::Handshake => self.expire_handshake(token),
            Deadline::Idle | Deadline::Send => self.close_on(token, deadline),
            Deadline::StreamIdle => self.expire_stream(token),
            Deadline::Head | Deadline::Body => self.expire_read(token, deadline, now),
            Deadline::App => self.expire_app(token, now),
            Deadline::H2App => self.expire_h2_app(token),
        }
    }

    /// An open WebSocket's ping or close timeout.
    fn expire_ws(&mut self, token: Token, now: Instant) {
        let Some(conn) = self.conns.get_mut(token.0) else {
            return;
        };
        match conn.expire_ws(now, &mut self.bufs) {
            Flow::Open => self.pump_ws(token),
            Flow::Close => self.close(token),
        }
    }

    /// A lingering close's wait: read on if it still lingers, else close.
    fn expire_linger(&mut self, token: Token) {
        match self.conns.get(token.0).map(|c| c.lingers_on()) {
            Some(true) => self.settle(token),
            Some(false) => self.close_on(token, Deadline::Linger),
            None => {}
        }
    }

    /// A TLS handshake that did not finish in time: counted, closed.
    fn expire_handshake(&mut self, token: Token) {
        if let Some(conn) = self.conns.get_mut(token.0) {
            conn.handshake_timed_out();
            self.close(token);
        }
    }

    /// An idle connection, one whose output the client does not take, or
    /// a lingering close at its end: closed quietly.
    fn close_on(&mut self, token: Token, deadline: Deadline) {
        if let Some(conn) = self.conns.get(token.0) {
            log::debug!("{}: {deadline:?} timeout, closing", conn.peer());
            self.close(token);
        }
    }

    /// A streamed answer whose app sent nothing for
    /// `stream_idle_timeout`: its body ends abnormally (the close).
    fn expire_stream(&mut self, token: Token) {
        if let Some(conn) = self.conns.get(token.0) {
            log::info!(
                "{}: the app sent nothing for stream_idle_timeout ({:?}); ending its stream",
                conn.peer(),
                self.handles.settings.conn.stream_idle_timeout
            );
            self.close(token);
        }
    }

    /// A request head or body that stalled: 408, then the connection
    /// writes it and closes.
    fn expire_read(&mut self, token: Token, deadline: Deadline, now: Instant) {
        let Some(conn) = self.conns.get_mut(token.0) else {
            return;
        };
        let error = match deadline {
            Deadline::Body => conn.body_timeout_error(&self.handles.settings.conn, now),
            _ => HttpError::HeadTimeout,
        };
        conn.fail(&error, self.date.get(), &mut self.bufs);
        self.pump(token);
    }

    /// An app that did not answer within its `app_timeout`: 504, logged
    /// with the app and the path, and the connection closes after it.
    fn expire_app(&mut self, token: Token, now: Instant) {
        let Some(conn) = self.conns.get_mut(token.0) else {
            return;
        };
        if let Some(pending) = conn.pending() {
            log::warn!(
                "app {} did not answer {} within app_timeout ({:?}); answering 504",
                pending
                    .slot
                    .map_or_else(|| "?".into(), |s| self.handles.stats.app_name(s)),
                pending.path.as_deref().unwrap_or("a request"),
                pending
                    .timeout
                    .unwrap_or(self.handles.settings.conn.app_timeout)
            );
        }
        let timeout = HostAnswer::AppTimeout.response();
        let at = Stamp {
            now,
            date: self.date.get(),
        };
        self.dispatcher
            .finish(conn, timeout, &[], true, at, &mut self.bufs);
        self.pump(token);
    }
}

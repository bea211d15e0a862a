//! Which timeout a connection is under, and when it expires.

use super::{Conn, Deadline, Phase};
use crate::http::HttpError;
use crate::settings::ConnParams;
use std::time::{Duration, Instant};

impl<S> Conn<S> {
    /// The current timeout and its kind.
    pub fn deadline(&self) -> Option<(Instant, Deadline)> {
        self.deadline
    }

    /// Brings an idle or lingering connection's deadline forward to `at`
    /// (a drain: a client about to reuse the connection still gets its
    /// answer, with `Connection: close`; one that stays idle is closed at
    /// `at`).
    pub fn close_idle_by(&mut self, at: Instant) {
        if let Phase::Lingering(state) = &mut self.phase {
            state.end_by(at);
        }
        if let Some((when, kind @ (Deadline::Idle | Deadline::Linger))) = self.deadline {
            self.deadline = Some((when.min(at), kind));
        }
    }

    /// The timeout the connection's state calls for, and whether progress
    /// since it was last set restarts it (taking the progress flags).
    fn wanted_deadline(&mut self) -> (Deadline, bool) {
        let stream_progress = match &mut self.phase {
            Phase::Streaming { progress, .. } => std::mem::take(progress),
            _ => false,
        };
        let want = if self.handshaking {
            // Its answers (held output) are part of it.
            Deadline::Handshake
        } else if self.has_output() {
            Deadline::Send
        } else {
            match self.phase {
                // A piece with the app's sink on the pool: the app's time.
                Phase::Dispatched(_) if self.reader.in_body() && !self.body_waits() => {
                    Deadline::Body
                }
                Phase::Dispatched(_) => Deadline::App,
                Phase::Streaming { .. } => Deadline::StreamIdle,
                Phase::Closing { .. } => Deadline::Send,
                Phase::Upgraded(_) => Deadline::WebSocket,
                // No request with its app (those are set above): idle,
                // whatever the machine holds for a client that reads no
                // more (a window it never opens) or sends no more.
                // Bytes queued for a window the client does not open: as
                // output it does not read.
                Phase::H2(ref s) if s.machine.waits_for_window() => Deadline::Send,
                Phase::H2(_) => Deadline::Idle,
                Phase::Lingering(_) => Deadline::Linger,
                Phase::Reading(_) if self.reader.in_body() => Deadline::Body,
                Phase::Reading(_) if self.reader.is_empty() => Deadline::Idle,
                Phase::Reading(_) => Deadline::Head,
            }
        };
        let progressed = match want {
            // An HTTP/2 read counts as progress (`h2_read`), but not the
            // bytes of a header block that never ends.
            Deadline::Idle if self.is_h2() => self.reader.progressed && !self.h2_receiving_block(),
            Deadline::Idle | Deadline::Body => self.reader.progressed,
            Deadline::Send => self.write_progress,
            Deadline::StreamIdle => stream_progress,
            Deadline::Head
            | Deadline::Handshake
            | Deadline::App
            | Deadline::WebSocket
            | Deadline::Linger
            | Deadline::H2App => false,
        };
        self.reader.progressed = false;
        self.write_progress = false;
        (want, progressed)
    }

    /// Picks the timeout for the connection's state, counted from `now`
    /// (the loop's clock). The handshake timeout runs from the accept, and
    /// the head timeout from the head's first byte (trickling bytes extend
    /// neither); the body, send and idle timeouts restart on progress. The
    /// head's comes after the handshake's, whichever is shorter: no request
    /// byte can come before the handshake is done. A lingering close and an open WebSocket keep
    /// their own (a WebSocket's while no output waits).
    pub fn update_deadline(&mut self, params: &ConnParams, now: Instant) {
        match &self.phase {
            Phase::Lingering(state) => {
                self.deadline = Some((state.deadline(), Deadline::Linger));
                return;
            }
            Phase::Upgraded(link) if !self.has_output() => {
                self.deadline = Some((link.deadline(), Deadline::WebSocket));
                return;
            }
            Phase::H2(s) if !self.has_output() => {
                // The oldest request with its app times out first; a
                // connection whose streams only stream answers has none.
                if let Some(p) = s.oldest_pending() {
                    let limit = p.timeout.unwrap_or(params.app_timeout);
                    self.deadline = Some((p.started + limit, Deadline::H2App));
                    return;
                }
                if s.streams_answers() && !s.machine.waits_for_window() {
                    self.deadline = None;
                    return;
                }
            }
            _ => {}
        }
        let (want, progressed) = self.wanted_deadline();
        match want {
            Deadline::Body if self.body_began.is_none() => {
                self.body_began = Some((now, self.reader.taken()));
            }
            // Output (a 100 Continue) may interrupt a body; it goes on.
            Deadline::Body | Deadline::Send => {}
            _ => self.body_began = None,
        }
        if !progressed && self.deadline.map(|(_, k)| k) == Some(want) {
            return;
        }
        let limit = match want {
            Deadline::Body => {
                let gap = now + params.body_timeout;
                let at = self
                    .body_rate_deadline(params)
                    .map_or(gap, |at| at.min(gap));
                self.deadline = Some((at, want));
                return;
            }
            Deadline::Idle => params.keep_alive_timeout,
            Deadline::Handshake => params.tls_handshake_timeout,
            Deadline::Head => params.head_timeout,
            Deadline::App => self
                .pending()
                .and_then(|p| p.timeout)
                .unwrap_or(params.app_timeout),
            Deadline::Send | Deadline::WebSocket | Deadline::Linger => params.send_timeout,
            // Set above, from the oldest request.
            Deadline::H2App => params.app_timeout,
            Deadline::StreamIdle => params.stream_idle_timeout,
        };
        self.deadline = Some((now + limit, want));
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
}

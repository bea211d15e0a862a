//! The connections of one worker that linger after their answer (see
//! `Conn::linger`): they stay in the slab (and count toward the connection
//! cap), at most `LingerLimits::most` at once (this worker's share of
//! `--max-lingering`); past it the one lingering longest is closed first,
//! after a last read of what it sent. The first such close a minute is
//! logged with the cap. In a drain a connection lingers no longer than an
//! idle one waits (`DRAIN_IDLE_GRACE`).

use super::conn::{Conn, Flow};
use super::Server;
use crate::listen::Accepted;
use crate::poller::Token;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// At most one "too many lingering" line a minute per worker.
const LOG_EVERY: Duration = Duration::from_secs(60);

/// The order connections began to linger in, and how many linger now.
#[derive(Default)]
pub struct Lingerers {
    /// Slab keys with the instant their linger began (a key whose
    /// connection has gone, or lingers since another instant, is stale and
    /// skipped).
    order: VecDeque<(usize, Instant)>,
    live: usize,
    /// Connections whose last call stopped at its turn's bytes with more
    /// to read: read on at the next turn, whether or not the poller
    /// reports them again (a completion backend whose input is over its
    /// bound does not).
    read_on: Vec<Token>,
    logged: Option<Instant>,
}

impl Lingerers {
    /// A connection leaving the slab.
    pub fn left(&mut self, conn: &Conn<Accepted>) {
        if conn.is_lingering() && conn.lingering_counted() {
            self.live = self.live.saturating_sub(1);
        }
    }

    /// True while a connection is to be read on at the next turn.
    pub fn reads_on(&self) -> bool {
        !self.read_on.is_empty()
    }
}

impl Server {
    /// Reads on the lingering connections that stopped with more to read.
    pub(super) fn linger_on(&mut self) {
        for token in std::mem::take(&mut self.lingerers.read_on) {
            if self.conns.get(token.0).is_some_and(Conn::lingers_on) {
                self.settle(token);
            }
        }
    }

    /// Lingers the connection (`Conn::linger`); true if it was closed. A
    /// connection that begins to linger joins the list, which past its
    /// cap closes the one lingering longest.
    pub(super) fn linger(&mut self, token: Token) -> bool {
        let now = self.clock.now();
        let limits = self.handles.settings.conn.linger;
        let Some(conn) = self.conns.get_mut(token.0) else {
            return true;
        };
        let begun = conn.is_lingering();
        if conn.linger(now, &limits) == Flow::Close {
            self.close(token);
            return true;
        }
        // The sweep runs at the pace of the longer timeouts; a lingering
        // connection's own bound brings it forward, and one with more to
        // read is read on at the next turn.
        if conn.lingers_on() {
            if !self.lingerers.read_on.contains(&token) {
                self.lingerers.read_on.push(token);
            }
        } else if let Some(at) = conn.deadline_of_linger() {
            self.next_sweep = self.next_sweep.min(at);
        }
        let Some(since) = conn.lingering_since().filter(|_| !begun) else {
            return false;
        };
        if self.handles.control.draining() {
            // As idle connections in a drain: a short grace, not the full time.
            conn.close_idle_by(now + super::DRAIN_IDLE_GRACE.min(limits.time));
        }
        conn.count_lingering();
        self.lingerers.live += 1;
        self.lingerers.order.push_back((token.0, since));
        let mut closed_self = false;
        while self.lingerers.live > limits.most {
            let Some((key, since)) = self.lingerers.order.pop_front() else {
                break;
            };
            let Some(oldest) = self
                .conns
                .get_mut(key)
                .filter(|c| c.lingering_since() == Some(since))
            else {
                continue;
            };
            // What it sent is read first, so its close is a FIN if it can be.
            let _ = oldest.linger(now, &limits);
            self.log_lingering(now);
            closed_self |= key == token.0;
            self.close(Token(key));
        }
        // Stale entries (connections that closed by themselves) go once
        // they outnumber the live ones.
        if self.lingerers.order.len() > 2 * self.lingerers.live + 64 {
            let conns = &self.conns;
            self.lingerers.order.retain(|&(key, since)| {
                conns
                    .get(key)
                    .is_some_and(|c| c.lingering_since() == Some(since))
            });
        }
        closed_self
    }

    fn log_lingering(&mut self, now: Instant) {
        let lingerers = &mut self.lingerers;
        if lingerers
            .logged
            .is_some_and(|at| now.saturating_duration_since(at) < LOG_EVERY)
        {
            return;
        }
        lingerers.logged = Some(now);
        log::warn!(
            "worker {}: {} connections lingering after their answer, this worker's share \
             of --max-lingering: closing the one lingering longest (its client may see a \
             reset; logged once a minute)",
            self.worker,
            self.handles.settings.conn.linger.most
        );
    }
}

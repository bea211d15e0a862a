//! The host-wide budget for what clients make the host hold
//! (`--max-buffered`): request bodies it buffers for their apps (and heads
//! past the first read buffer), the copy of a body a blocking-pool route
//! gets, WebSocket messages not yet whole, streamed answers' queues
//! (`stream_line`), and the answers an HTTP/2 connection holds for
//! its client's flow-control windows. Every holder takes a
//! `Reservation` that grows as bytes arrive; the bytes go back when it
//! shrinks or is dropped, so a closed connection always returns its share.
//! Past the limit a new body (and a new HTTP/2 stream) is answered 503 and
//! a WebSocket message closes its connection with 1013 (try again later);
//! each is counted.
//!
//! One atomic counter shared by every worker, touched only when a buffer
//! grows past its first `READ_CHUNK`: small requests never touch it. In
//! process mode the counter is a word of the shared area, so the budget is
//! the host's across worker processes, and each worker also counts its own
//! bytes in its row, which the supervisor gives back if that worker dies.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// What was refused for want of room.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// A request body (or head), answered 503.
    Body,
    /// A WebSocket message, closed with 1013.
    Message,
    /// A new HTTP/2 stream's request, answered 503.
    Stream,
}

struct Inner {
    limit: usize,
    held: &'static AtomicU64,
    /// Process mode: this worker process's own bytes.
    mine: Option<&'static AtomicU64>,
    bodies_refused: AtomicU64,
    messages_refused: AtomicU64,
    streams_refused: AtomicU64,
    /// When a refusal was last logged (`stats::stamp`), 0 for never.
    logged: AtomicU64,
}

/// Refusals are logged once a minute at most (each is counted).
const LOG_EVERY_US: u64 = 60_000_000;

/// A handle on the budget: cheap to clone, shared by every worker.
#[derive(Clone)]
pub struct Budget(Arc<Inner>);

impl Default for Budget {
    fn default() -> Self {
        Budget::unlimited()
    }
}

impl Budget {
    /// A budget of `limit` bytes.
    pub fn new(limit: usize) -> Self {
        Budget::over(limit, Box::leak(Box::default()), None)
    }

    /// A budget of `limit` bytes counted in `held` (a word shared by the
    /// worker processes), with this process's own bytes in `mine`.
    pub fn shared(limit: usize, held: &'static AtomicU64, mine: &'static AtomicU64) -> Self {
        Budget::over(limit, held, Some(mine))
    }

    fn over(limit: usize, held: &'static AtomicU64, mine: Option<&'static AtomicU64>) -> Self {
        Budget(Arc::new(Inner {
            limit,
            held,
            mine,
            bodies_refused: AtomicU64::new(0),
            messages_refused: AtomicU64::new(0),
            streams_refused: AtomicU64::new(0),
            logged: AtomicU64::new(0),
        }))
    }

    /// A budget without a limit (tests and tools).
    pub fn unlimited() -> Self {
        Budget::new(usize::MAX)
    }

    /// The limit, in bytes.
    pub fn limit(&self) -> usize {
        self.0.limit
    }

    /// Bytes held now, over every reservation.
    pub fn held(&self) -> usize {
        usize::try_from(self.0.held.load(Relaxed)).unwrap_or(usize::MAX)
    }

    /// True while `n` more bytes would fit under the limit.
    pub fn has_room(&self, n: usize) -> bool {
        self.held().saturating_add(n) <= self.0.limit
    }

    /// How many of `what` were refused so far.
    pub fn refused(&self, what: Refusal) -> u64 {
        match what {
            Refusal::Body => self.0.bodies_refused.load(Relaxed),
            Refusal::Message => self.0.messages_refused.load(Relaxed),
            Refusal::Stream => self.0.streams_refused.load(Relaxed),
        }
    }

    /// Counts one refusal, and says so in the log once a minute at most.
    pub fn note_refused(&self, what: Refusal) {
        let counter = match what {
            Refusal::Body => &self.0.bodies_refused,
            Refusal::Message => &self.0.messages_refused,
            Refusal::Stream => &self.0.streams_refused,
        };
        counter.fetch_add(1, Relaxed);
        let now = crate::stats::stamp(std::time::Instant::now());
        let last = self.0.logged.load(Relaxed);
        let due = last == 0 || now.saturating_sub(last) >= LOG_EVERY_US;
        if due
            && self
                .0
                .logged
                .compare_exchange(last, now, Relaxed, Relaxed)
                .is_ok()
        {
            log::warn!(
                "max_buffered ({}) is full: {} body(ies) and {} HTTP/2 stream(s) answered \
                 503 and {} WebSocket message(s) closed with 1013 so far (raise \
                 --max-buffered, or see buffered in /.well-known/stoa/status)",
                size_text(self.0.limit),
                self.refused(Refusal::Body),
                self.refused(Refusal::Stream),
                self.refused(Refusal::Message)
            );
        }
    }

    /// An empty reservation on this budget.
    pub fn reservation(&self) -> Reservation {
        Reservation {
            budget: self.clone(),
            held: 0,
        }
    }

    /// Takes `n` more bytes if they fit under the limit.
    fn take(&self, n: usize) -> bool {
        let limit = self.0.limit as u64;
        let n = n as u64;
        let taken = self
            .0
            .held
            .fetch_update(Relaxed, Relaxed, |held| {
                held.checked_add(n).filter(|&after| after <= limit)
            })
            .is_ok();
        if let (true, Some(mine)) = (taken, self.0.mine) {
            mine.fetch_add(n, Relaxed);
        }
        taken
    }

    fn force(&self, n: usize) {
        self.0.held.fetch_add(n as u64, Relaxed);
        if let Some(mine) = self.0.mine {
            mine.fetch_add(n as u64, Relaxed);
        }
    }

    fn give(&self, n: usize) {
        if let Some(mine) = self.0.mine {
            mine.fetch_sub(n as u64, Relaxed);
        }
        self.0.held.fetch_sub(n as u64, Relaxed);
    }
}

/// Bytes one holder has taken from the budget; given back on drop.
pub struct Reservation {
    budget: Budget,
    held: usize,
}

impl Reservation {
    /// Grows or shrinks the reservation to `bytes`. Shrinking always
    /// succeeds; growing fails (and changes nothing) past the limit.
    #[must_use]
    pub fn set(&mut self, bytes: usize) -> bool {
        if bytes == self.held {
            return true;
        }
        if bytes > self.held {
            if !self.budget.take(bytes - self.held) {
                return false;
            }
        } else {
            self.budget.give(self.held - bytes);
        }
        self.held = bytes;
        true
    }

    /// Sets the reservation to `bytes` even past the limit: for a copy
    /// whose original is given back at once (it counts once).
    pub fn force(&mut self, bytes: usize) {
        if bytes == self.held {
            return;
        }
        if bytes > self.held {
            self.budget.force(bytes - self.held);
        } else {
            self.budget.give(self.held - bytes);
        }
        self.held = bytes;
    }

    /// The bytes reserved.
    pub fn bytes(&self) -> usize {
        self.held
    }

    /// The budget it draws on.
    pub fn budget(&self) -> &Budget {
        &self.budget
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.budget.give(self.held);
    }
}

impl std::fmt::Debug for Reservation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Reservation({} of {})", self.held, self.budget.limit())
    }
}

/// `n` bytes as the flags write sizes: `64M`, `512K`, or bytes.
pub fn size_text(n: usize) -> String {
    const UNITS: [(usize, &str); 3] = [(1 << 30, "G"), (1 << 20, "M"), (1 << 10, "K")];
    UNITS
        .iter()
        .find(|(unit, _)| n >= *unit && n.is_multiple_of(*unit))
        .map_or_else(
            || n.to_string(),
            |(unit, name)| format!("{}{name}", n / unit),
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservations_grow_to_the_limit_and_give_back_on_drop() {
        let budget = Budget::new(100);
        let mut a = budget.reservation();
        let mut b = budget.reservation();
        assert!(a.set(60));
        assert!(!b.set(50), "past the limit");
        assert_eq!(b.bytes(), 0);
        assert!(b.set(40));
        assert_eq!(budget.held(), 100);
        assert!(a.set(10), "shrinking always succeeds");
        assert_eq!(budget.held(), 50);
        drop(a);
        drop(b);
        assert_eq!(budget.held(), 0);
    }

    #[test]
    fn a_forced_reservation_may_pass_the_limit() {
        let budget = Budget::new(10);
        let mut a = budget.reservation();
        a.force(20);
        assert_eq!(budget.held(), 20);
        let mut b = budget.reservation();
        assert!(!b.set(1));
        drop(a);
        assert!(b.set(10));
    }

    #[test]
    fn sizes_read_as_the_flags_write_them() {
        assert_eq!(size_text(64 << 20), "64M");
        assert_eq!(size_text(3 << 30), "3G");
        assert_eq!(size_text(1536), "1536");
        assert_eq!(size_text(1 << 10), "1K");
    }
}

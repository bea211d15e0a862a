//! The loop's clock: one `Instant` the loop owns and everything on it reads
//! (deadlines, durations, the `Date` header), read from the system after
//! each wait, after each app handler that ran on the loop and around timer
//! callbacks: a request costs one clock read. The time app code held the
//! loop, so read, is logged past `--loop-block-warn` (`warn_if_blocked`,
//! for handlers, timer callbacks and WebSocket callbacks alike).

use std::time::{Duration, Instant};

/// The time on one loop, as last read.
pub(super) struct Clock(Instant);

impl Clock {
    pub(super) fn new() -> Self {
        Clock(Instant::now())
    }

    /// The time last read.
    pub(super) fn now(&self) -> Instant {
        self.0
    }

    /// Reads the system's clock.
    pub(super) fn read(&mut self) -> Instant {
        self.0 = Instant::now();
        self.0
    }

    /// Takes a time read elsewhere on the loop (after an app's handler).
    pub(super) fn advance_to(&mut self, at: Instant) {
        self.0 = at;
    }
}

/// What an answer is stamped with: the loop's time and the `Date` header's
/// value read from it.
#[derive(Clone, Copy)]
pub(super) struct Stamp<'a> {
    pub now: Instant,
    pub date: &'a str,
}

/// Tornado's blocking log threshold: app code should never hold the loop.
/// `who` names the code, `hint` the remedy.
pub(super) fn warn_if_blocked(
    limit: Duration,
    held: Duration,
    who: std::fmt::Arguments<'_>,
    hint: &str,
) {
    if held > limit {
        log::warn!(
            "event loop blocked for {} ms by {who}; {hint}",
            held.as_millis()
        );
    }
}

//! The worker processes the supervisor runs: one place per `--workers`,
//! each with the process serving it, at most one replacement starting, and
//! the old ones draining after a replacement took over. Rows of the shared
//! area are handed out and taken back here.

use super::death::End;
use crate::ops::worker_row::{Phase, Row};
use rustix::process::{Pid, Signal};
use std::time::Instant;

/// One worker process.
pub struct Proc {
    pub pid: Pid,
    pub row_index: usize,
    pub row: Row,
    pub ready: bool,
    /// The loop's pulse word at the last look, and since when it reads so.
    pub pulse: u64,
    pub pulse_since: Instant,
    /// Killed by the supervisor (stuck), so its end is not news.
    pub killed: bool,
    /// Started from the binary an upgrade is trying.
    pub from_candidate: bool,
}

impl Proc {
    pub fn new(pid: Pid, row_index: usize, row: Row) -> Self {
        let now = Instant::now();
        Proc {
            pid,
            row_index,
            row,
            ready: false,
            pulse: 0,
            pulse_since: now,
            killed: false,
            from_candidate: false,
        }
    }

    pub fn pid(&self) -> i32 {
        self.pid.as_raw_nonzero().get()
    }

    /// Sends `signal` (a process already gone is no error).
    pub fn signal(&self, signal: Signal) {
        if let Err(e) = rustix::process::kill_process(self.pid, signal) {
            if e != rustix::io::Errno::SRCH {
                log::warn!("cannot signal worker pid {}: {e}", self.pid());
            }
        }
    }

    /// True once its row says it serves.
    pub fn says_ready(&self) -> bool {
        self.row.phase() == Some(Phase::Ready)
    }
}

/// One of the `--workers` places.
#[derive(Default)]
pub struct Place {
    pub serving: Option<Proc>,
    /// A replacement, not ready yet.
    pub next: Option<Proc>,
    /// Old processes told to drain.
    pub leaving: Vec<Proc>,
    /// When to start a process again (after a death before ready).
    pub start_at: Option<Instant>,
    /// Deaths before ready in a row (the backoff grows with them).
    pub failed_starts: u32,
    pub crashes: u64,
}

/// Which process of a place a pid was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Serving,
    Next,
    Leaving,
}

impl Place {
    /// Takes the process `pid` out of this place, if it is one of its own.
    pub fn take(&mut self, pid: Pid) -> Option<(Proc, Role)> {
        if self.serving.as_ref().is_some_and(|p| p.pid == pid) {
            return self.serving.take().map(|p| (p, Role::Serving));
        }
        if self.next.as_ref().is_some_and(|p| p.pid == pid) {
            return self.next.take().map(|p| (p, Role::Next));
        }
        let i = self.leaving.iter().position(|p| p.pid == pid)?;
        Some((self.leaving.swap_remove(i), Role::Leaving))
    }

    /// Every live process of the place.
    pub fn all(&self) -> impl Iterator<Item = &Proc> {
        self.serving.iter().chain(&self.next).chain(&self.leaving)
    }
}

/// The rows of the shared area not in use.
pub struct Rows {
    area: &'static [std::sync::atomic::AtomicU64],
    free: Vec<usize>,
}

impl Rows {
    pub fn new(area: &'static [std::sync::atomic::AtomicU64], count: usize) -> Self {
        Rows {
            area,
            free: (0..count).rev().collect(),
        }
    }

    /// A cleared row, or `None` when all are in use.
    pub fn take(&mut self) -> Option<(usize, Row)> {
        let i = self.free.pop()?;
        let row = Row::of(self.area, i)?;
        row.reset();
        crate::ops::watchdog::clear_pulse(&row);
        Some((i, row))
    }

    /// Row `i`, in use by an adopted worker (not cleared).
    pub fn claim(&mut self, i: usize) -> Option<Row> {
        let at = self.free.iter().position(|&f| f == i)?;
        self.free.remove(at);
        Row::of(self.area, i)
    }

    pub fn give_back(&mut self, i: usize) {
        self.free.push(i);
    }
}

/// The pause before starting a place's process again after `failed`
/// deaths before ready: 100 ms doubling to 10 s.
pub fn backoff(failed: u32) -> std::time::Duration {
    let ms = 100u64.saturating_mul(1 << failed.min(7));
    std::time::Duration::from_millis(ms.min(10_000))
}

/// What the supervisor says of a death it did not ask for.
pub fn unasked(end: End, killed: bool) -> bool {
    !killed && end.is_crash()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backoff_doubles_to_a_bound() {
        assert_eq!(backoff(0).as_millis(), 100);
        assert_eq!(backoff(1).as_millis(), 200);
        assert_eq!(backoff(30).as_millis(), 10_000);
    }
}

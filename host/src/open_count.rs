//! The host-wide count of open connections against `--max-connections`:
//! one count for every loop, so the cap is the host's, not a share per
//! worker (a share let one worker answer 503 while the host was under its
//! cap). A loop takes a slot for each client (`try_open`: before it
//! accepts under `--overload queue`, once it has accepted under `shed`)
//! and gives it back when the connection closes (`close`); nothing on the
//! request path touches it.
//!
//! Under `--overload queue` a loop that found the host full stops
//! accepting and marks itself waiting (`wait_for_room`: a bit per loop,
//! worker `i` on bit `i % 64`); the loop that closes a connection takes the
//! waiting bits and wakes those loops (`close` returns them), so a loop
//! paused at the cap starts again when another one frees a slot. Both
//! sides use sequentially consistent order: the waiter sets its bit and
//! then looks at the count again (`has_room`), the closer lowers the count
//! and then looks at the bits, so at least one of them sees the other and
//! no waiting loop is left asleep with room free.
//!
//! The two words are plain atomics, valid at all zeros, so they can live
//! in memory shared by several processes (process mode: the shared area's
//! header, with a third word per worker process counting its own slots,
//! which the supervisor gives back if that worker dies); a process whose
//! loops are threads gets them from `OpenCount::new`. Across processes a
//! close cannot wake another process's loop: one paused at the cap looks
//! for room again every `RETRY_ACCEPT` instead.

use std::sync::atomic::{AtomicU64, Ordering::SeqCst};

/// The loops a `close` found waiting for room: wake each `i` with
/// `wants(i)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Waiting(u64);

impl Waiting {
    /// True if no loop waits.
    pub fn none(self) -> bool {
        self.0 == 0
    }

    /// True if worker `i` may be waiting (its bit is set).
    pub fn wants(self, i: usize) -> bool {
        self.0 & bit(i) != 0
    }
}

fn bit(worker: usize) -> u64 {
    1 << (worker % 64)
}

/// The host's open connections and its cap: cheap to copy, shared by every
/// loop.
#[derive(Clone, Copy)]
pub struct OpenCount {
    /// Open connections, host-wide.
    open: &'static AtomicU64,
    /// The loops paused at the cap, a bit each (`i % 64`).
    waiting: &'static AtomicU64,
    /// Process mode: this worker process's own slots.
    mine: Option<&'static AtomicU64>,
    cap: u64,
}

impl OpenCount {
    /// A count of this process's own, at zero, with room for `cap`
    /// connections (its two words live as long as the process).
    pub fn new(cap: usize) -> Self {
        let words: &'static [AtomicU64; 2] = Box::leak(Box::default());
        OpenCount {
            open: &words[0],
            waiting: &words[1],
            mine: None,
            cap: u64::try_from(cap).unwrap_or(u64::MAX),
        }
    }

    /// A count shared by worker processes: `open` and `waiting` host-wide,
    /// `mine` this process's own slots.
    pub fn shared(
        open: &'static AtomicU64,
        waiting: &'static AtomicU64,
        mine: &'static AtomicU64,
        cap: usize,
    ) -> Self {
        OpenCount {
            open,
            waiting,
            mine: Some(mine),
            cap: u64::try_from(cap).unwrap_or(u64::MAX),
        }
    }

    /// True when other processes share the count (a close here cannot
    /// wake their loops).
    pub fn across_processes(&self) -> bool {
        self.mine.is_some()
    }

    /// Takes a slot for one connection; false (and nothing taken) when the
    /// host is at its cap.
    pub fn try_open(&self) -> bool {
        let taken = self
            .open
            .fetch_update(SeqCst, SeqCst, |n| (n < self.cap).then_some(n + 1))
            .is_ok();
        if let (true, Some(mine)) = (taken, self.mine) {
            mine.fetch_add(1, SeqCst);
        }
        taken
    }

    /// Gives a slot back; the loops that were waiting for room (and no
    /// longer are: each must be woken).
    pub fn close(&self) -> Waiting {
        if let Some(mine) = self.mine {
            mine.fetch_sub(1, SeqCst);
        }
        let before = self.open.fetch_sub(1, SeqCst);
        debug_assert!(before > 0, "a slot given back twice");
        if self.waiting.load(SeqCst) == 0 {
            return Waiting(0);
        }
        Waiting(self.waiting.swap(0, SeqCst))
    }

    /// Marks `worker`'s loop as paused at the cap, to be woken by the next
    /// `close`; it must look at `has_room` afterwards (a slot freed before
    /// the mark finds nobody to wake).
    pub fn wait_for_room(&self, worker: usize) {
        self.waiting.fetch_or(bit(worker), SeqCst);
    }

    /// True while the host is under its cap.
    pub fn has_room(&self) -> bool {
        self.open() < self.cap
    }

    /// Open connections, host-wide.
    pub fn open(&self) -> u64 {
        self.open.load(SeqCst)
    }

    /// The host's cap (`--max-connections`).
    pub fn cap(&self) -> u64 {
        self.cap
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_is_one_count_for_every_loop() {
        let count = OpenCount::new(3);
        let other_loop = count;
        assert!(count.try_open() && other_loop.try_open() && count.try_open());
        assert!(!other_loop.try_open(), "the host is full, whoever asks");
        assert_eq!((count.open(), count.has_room()), (3, false));
        assert!(count.close().none());
        assert!(
            other_loop.try_open(),
            "a slot freed by one loop is another's"
        );
        assert_eq!(count.cap(), 3);
    }

    #[test]
    fn a_close_hands_over_the_loops_waiting_for_room_once() {
        let count = OpenCount::new(1);
        assert!(count.try_open());
        count.wait_for_room(1);
        count.wait_for_room(66);
        let woken = count.close();
        assert!(
            woken.wants(1) && woken.wants(2) && !woken.wants(0),
            "{woken:?}"
        );
        assert!(count.has_room());
        assert!(count.try_open());
        assert!(count.close().none(), "taken by the first close");
    }
}

//! The process's spare descriptors (`--overload shed`): one per loop, each
//! `/dev/null` kept open, so that a loop whose `accept` fails with
//! EMFILE/ENFILE can close one, accept the waiting client, answer it 503,
//! close it and open the spare again, instead of leaving clients waiting
//! in silence (the technique libev and nginx document).
//!
//! The loops of a process share one descriptor table, so they share the
//! spares too: the descriptor a loop gives up may be taken by another
//! loop's `accept` before it is reopened, and the pool is then short. Any
//! loop with a spare still in the pool can shed its own backlog, and while
//! the pool is short every loop answers 503 to each client it accepts and
//! closes it at once, so the descriptor comes back to the pool instead of
//! going to an admitted client for good. A short pool is filled again as
//! soon as a descriptor frees up (`refill`, each turn of a loop that lost
//! one).

use std::fs::File;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Mutex;

pub struct Spares {
    files: Mutex<Vec<File>>,
    /// How many files the pool holds (read without the lock on every
    /// accept).
    held: AtomicUsize,
    wanted: usize,
}

impl Spares {
    /// A pool of `wanted` spares (0 under `--overload queue`, which keeps
    /// none), opened now.
    pub fn new(wanted: usize) -> Self {
        let spares = Spares {
            files: Mutex::new(Vec::with_capacity(wanted)),
            held: AtomicUsize::new(0),
            wanted,
        };
        if !spares.refill() {
            log::warn!(
                "cannot open the spare descriptors (/dev/null): clients past the descriptor \
                 limit wait in the backlog until they can be"
            );
        }
        spares
    }

    /// Takes one spare out of the pool, to close it for one `accept`.
    pub fn take(&self) -> Option<File> {
        let mut files = self.files.lock().unwrap_or_else(|e| e.into_inner());
        let file = files.pop();
        self.held.store(files.len(), Relaxed);
        file
    }

    /// True while the pool holds fewer spares than it keeps.
    pub fn short(&self) -> bool {
        self.held.load(Relaxed) < self.wanted
    }

    /// Opens spares until the pool is whole; true if it is.
    pub fn refill(&self) -> bool {
        if !self.short() {
            return true;
        }
        let mut files = self.files.lock().unwrap_or_else(|e| e.into_inner());
        while files.len() < self.wanted {
            match File::open("/dev/null") {
                Ok(f) => files.push(f),
                Err(e) => {
                    log::debug!("cannot open a spare descriptor (/dev/null): {e}");
                    break;
                }
            }
        }
        self.held.store(files.len(), Relaxed);
        files.len() == self.wanted
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_taken_spare_leaves_the_pool_short_until_refilled() {
        let spares = Spares::new(2);
        assert!(!spares.short());
        let one = spares.take().expect("a spare");
        assert!(spares.short());
        drop(one);
        assert!(spares.take().is_some());
        assert!(spares.take().is_none(), "two were kept");
        assert!(spares.refill());
        assert!(!spares.short());
    }

    #[test]
    fn queue_keeps_none_and_is_never_short() {
        let spares = Spares::new(0);
        assert!(spares.take().is_none());
        assert!(!spares.short());
        assert!(spares.refill());
    }
}

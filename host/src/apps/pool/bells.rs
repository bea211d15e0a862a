//! Which idle thread a new job wakes: the one that went idle last.
//!
//! Every idle thread waits on a condition variable of its own, and the
//! idle ones form a stack. A job wakes the top of it, so a steady trickle
//! of requests (one client, or fewer at a time than the threads) keeps
//! running on one thread whose caches, and whose per-thread state an app
//! keeps (a Python thread state, Django's per-thread connections and
//! caches), are warm. One condition variable shared by all would wake
//! the thread that waited longest: each request on a cold thread, in turn.

use std::sync::{Arc, Condvar};

#[derive(Default)]
pub(super) struct Bells {
    /// By thread index (grown as threads start).
    bells: Vec<Arc<Condvar>>,
    /// Threads waiting for a job, the latest last.
    idle: Vec<usize>,
}

impl Bells {
    /// Thread `me` is about to wait: on top of the stack, with its bell.
    pub fn sleep(&mut self, me: usize) -> Arc<Condvar> {
        if self.bells.len() <= me {
            self.bells.resize_with(me + 1, Default::default);
        }
        // A thread leaves the stack as it wakes (`woke`), so it is never
        // on it twice.
        debug_assert!(!self.idle.contains(&me));
        self.idle.push(me);
        self.bells[me].clone()
    }

    /// Thread `me` woke (rung, or its wait timed out): off the stack.
    pub fn woke(&mut self, me: usize) {
        if let Some(at) = self.idle.iter().rposition(|&t| t == me) {
            self.idle.remove(at);
        }
    }

    /// The bell of the thread that went idle last, taken off the stack
    /// (ring it once the pool's lock is let go); none if none is idle.
    pub fn latest(&mut self) -> Option<Arc<Condvar>> {
        let me = self.idle.pop()?;
        self.bells.get(me).cloned()
    }

    /// Threads waiting for a job.
    #[cfg(test)]
    pub fn idle(&self) -> usize {
        self.idle.len()
    }
}

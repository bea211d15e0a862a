//! The event loop's timers: a binary heap ordered by deadline (ties by
//! insertion order). The poller's wait timeout is the next deadline.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};
use stoa_app_api::abi::TaskBox;

struct Entry {
    at: Instant,
    seq: u64,
    /// The slot of the app that set it, if known (for the watchdog).
    app: Option<usize>,
    task: TaskBox,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}

impl Eq for Entry {}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Entry {
    // Reversed: BinaryHeap is a max-heap and the earliest deadline must top it.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

/// Pending timers of one loop.
#[derive(Default)]
pub struct Timers {
    heap: BinaryHeap<Entry>,
    seq: u64,
}

impl Timers {
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    pub fn add(&mut self, at: Instant, app: Option<usize>, task: TaskBox) {
        self.seq += 1;
        self.heap.push(Entry {
            at,
            seq: self.seq,
            app,
            task,
        });
    }

    /// How long the loop may sleep before the next timer is due.
    pub fn timeout(&self, now: Instant) -> Option<Duration> {
        self.heap
            .peek()
            .map(|e| e.at.saturating_duration_since(now))
    }

    /// The next timer due at `now`, if any, and the app that set it.
    pub fn pop_due(&mut self, now: Instant) -> Option<(TaskBox, Option<usize>)> {
        if self.heap.peek().is_some_and(|e| e.at <= now) {
            self.heap.pop().map(|e| (e.task, e.app))
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use abi_stable::sabi_trait::TD_Opaque;
    use std::sync::{Arc, Mutex};
    use stoa_app_api::abi::{Task, Task_TO};

    struct Push(Arc<Mutex<Vec<u32>>>, u32);

    impl Task for Push {
        fn run(self) {
            self.0.lock().unwrap().push(self.1);
        }
    }

    #[test]
    fn fires_in_deadline_order() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let mut t = Timers::default();
        let now = Instant::now();
        for (ms, id) in [(30, 3), (10, 1), (20, 2), (10, 4)] {
            t.add(
                now + Duration::from_millis(ms),
                None,
                Task_TO::from_value(Push(log.clone(), id), TD_Opaque),
            );
        }
        assert_eq!(t.timeout(now), Some(Duration::from_millis(10)));
        assert!(t.pop_due(now).is_none());
        while let Some((task, _)) = t.pop_due(now + Duration::from_millis(30)) {
            task.run();
        }
        assert_eq!(*log.lock().unwrap(), vec![1, 4, 2, 3]);
        assert_eq!(t.timeout(now), None);
    }
}

//! What a streamed answer or a WebSocket leaves to do once it ends: its
//! access-log line, with the bytes actually sent after its head and the
//! whole duration (nginx logs a request when it ends, not when its head
//! goes out), and those bytes in the app's response-bytes counter.
//! Dropping the `Tail` does both, whatever the end: the body written to
//! its last byte, the client gone, a timeout, the host stopping.

use crate::ops::access_log::{AccessInfo, AccessLog, Answered};
use crate::stats::{bump, Stats};
use std::sync::Arc;
use std::time::Instant;

/// What a streamed answer's or a WebSocket's end writes and counts.
pub struct Due {
    /// The access log and the request's line, when the log is on.
    pub log: Option<(Arc<AccessLog>, Box<AccessInfo>)>,
    /// Counted in worker `worker`'s counters of app `slot`.
    pub stats: Arc<Stats>,
    pub worker: usize,
    pub slot: Option<usize>,
    pub status: u16,
    /// When its request was dispatched.
    pub started: Instant,
}

/// A streamed answer's or a WebSocket's line and count, due at its end.
pub struct Tail {
    due: Due,
    /// Where its body begins in the output, and where it ends once it
    /// has (both in `Output::queued` terms).
    from: u64,
    end: Option<u64>,
    /// The output's `written` when last told.
    written: u64,
    /// A later one on the same connection (pipelined), due after it.
    behind: Option<Box<Tail>>,
}

impl Tail {
    pub fn new(due: Due) -> Self {
        Tail {
            due,
            from: 0,
            end: None,
            written: 0,
            behind: None,
        }
    }

    /// Its body begins at `from` and nothing of it is written yet.
    pub(super) fn begins_at(&mut self, from: u64, written: u64) {
        self.from = from;
        self.written = written;
    }

    /// Queues `later` behind this one and any already behind it.
    pub(super) fn queue(&mut self, later: Box<Tail>) {
        match &mut self.behind {
            Some(next) => next.queue(later),
            None => self.behind = Some(later),
        }
    }

    /// The newest body, the one going out now, has ended at `end`.
    pub(super) fn ends_at(&mut self, end: u64) {
        match &mut self.behind {
            Some(next) => next.ends_at(end),
            None => self.end = Some(end),
        }
    }

    /// The output has written `written` bytes; true once this one's body
    /// is all written (it is due).
    pub(super) fn written_to(&mut self, written: u64) -> bool {
        self.written = written;
        if let Some(next) = &mut self.behind {
            next.written_to(written);
        }
        self.end.is_some_and(|end| written >= end)
    }

    /// Takes the one behind it (before this one is done).
    pub(super) fn take_behind(&mut self) -> Option<Box<Tail>> {
        self.behind.take()
    }

    /// Its body ended with `bytes` framed (an HTTP/2 stream's, counted
    /// by the stream, not by the connection's output); it is due.
    pub fn sent_all(&mut self, bytes: u64) {
        self.from = 0;
        self.end = Some(bytes);
        self.written = bytes;
    }

    /// The body bytes written so far.
    fn sent(&self) -> u64 {
        let to = self.end.map_or(self.written, |end| self.written.min(end));
        to.saturating_sub(self.from)
    }
}

impl Drop for Tail {
    fn drop(&mut self) {
        let sent = self.sent();
        let due = &self.due;
        bump(&due.stats.worker(due.worker).app(due.slot).bytes, sent);
        if let Some((log, info)) = &due.log {
            let took = due.started.elapsed();
            log.write(
                info,
                &Answered {
                    status: due.status,
                    bytes: usize::try_from(sent).unwrap_or(usize::MAX),
                    micros: u64::try_from(took.as_micros()).unwrap_or(u64::MAX),
                },
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering::Relaxed;

    fn tail(stats: &Arc<Stats>) -> Tail {
        Tail::new(Due {
            log: None,
            stats: stats.clone(),
            worker: 0,
            slot: Some(0),
            status: 200,
            started: Instant::now(),
        })
    }

    fn counted(stats: &Stats) -> u64 {
        stats.worker(0).app(Some(0)).bytes.load(Relaxed)
    }

    #[test]
    fn a_pipelined_tail_waits_behind_the_one_before_and_each_counts_what_was_sent() {
        let stats = Arc::new(Stats::new(1));
        // The first body is bytes 100..130; the second's head ends at 150.
        let mut first = Box::new(tail(&stats));
        first.begins_at(100, 90);
        first.ends_at(130);
        let mut second = Box::new(tail(&stats));
        second.begins_at(150, 120);
        first.queue(second);
        // The second's end is the newest body's.
        first.ends_at(170);
        assert!(!first.written_to(120));
        assert!(first.written_to(160), "the first body is all written");
        let second = first.take_behind().expect("the second waits behind");
        drop(first);
        assert_eq!(counted(&stats), 30, "the first body, whole");
        // The client goes with 10 bytes of the second body written.
        drop(second);
        assert_eq!(counted(&stats), 40);
    }
}

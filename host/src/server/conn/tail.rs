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
}

impl Tail {
    pub fn new(due: Due) -> Self {
        Tail {
            due,
            from: 0,
            end: None,
            written: 0,
        }
    }

    /// Its body begins at `from` and nothing of it is written yet.
    pub(super) fn begins_at(&mut self, from: u64, written: u64) {
        self.from = from;
        self.written = written;
    }

    /// Its body has ended at `end`.
    pub(super) fn ends_at(&mut self, end: u64) {
        self.end = Some(end);
    }

    /// The output has written `written` bytes; true once its body is all
    /// written (the tail is due).
    pub(super) fn written_to(&mut self, written: u64) -> bool {
        self.written = written;
        self.end.is_some_and(|end| written >= end)
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

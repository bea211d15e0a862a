//! HTTP/2's counters: connections, streams, and the RST_STREAM and GOAWAY
//! frames each way by error code (what status lists under `http2` and
//! metrics as `stoa_h2_*`). A connection's machine counts for itself
//! (`ConnCounts`); its session publishes what changed here, as its loop's
//! only writer. Codes are counted by their wire value (RFC 9113 §7 names
//! 0x0 to 0xd; `http::h2::ErrorCode` gives the names).

use super::bump;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// The error codes RFC 9113 names (0x0 to 0xd).
pub const H2_CODES: usize = 14;

/// One count per error code, by wire value.
pub type ByCode = [u64; H2_CODES];

/// One connection's counts, kept by its machine (and a worker's, summed,
/// in `H2Counts`).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConnCounts {
    /// Streams opened.
    pub streams: u64,
    /// Streams refused past `max_concurrent_streams`.
    pub refused: u64,
    /// RST_STREAM frames sent and received, by error code (a code
    /// received that RFC 9113 does not name counts as INTERNAL_ERROR).
    pub resets_sent: ByCode,
    pub resets_received: ByCode,
    /// GOAWAY frames sent and received, by error code.
    pub goaways_sent: ByCode,
    pub goaways_received: ByCode,
}

/// Counts one frame with the code of wire value `code` in `counts`.
pub fn tally(counts: &mut ByCode, code: u32) {
    if let Some(n) = counts.get_mut(code as usize) {
        *n += 1;
    }
}

/// One worker's HTTP/2 counters.
#[derive(Default)]
pub struct H2Stats {
    /// Connections that became HTTP/2, and those of them that ended.
    pub opened: AtomicU64,
    pub closed: AtomicU64,
    /// Streams opened, and refused past `--h2-max-concurrent-streams`.
    pub streams: AtomicU64,
    pub refused: AtomicU64,
    pub resets_sent: [AtomicU64; H2_CODES],
    pub resets_received: [AtomicU64; H2_CODES],
    pub goaways_sent: [AtomicU64; H2_CODES],
    pub goaways_received: [AtomicU64; H2_CODES],
}

impl H2Stats {
    /// Adds what a connection counted since `before` (its counts when last
    /// published) up to `now`.
    pub fn publish(&self, before: &ConnCounts, now: &ConnCounts) {
        bump(&self.streams, now.streams - before.streams);
        bump(&self.refused, now.refused - before.refused);
        let kinds = [
            (&self.resets_sent, &before.resets_sent, &now.resets_sent),
            (
                &self.resets_received,
                &before.resets_received,
                &now.resets_received,
            ),
            (&self.goaways_sent, &before.goaways_sent, &now.goaways_sent),
            (
                &self.goaways_received,
                &before.goaways_received,
                &now.goaways_received,
            ),
        ];
        for (into, before, now) in kinds {
            for ((counter, b), n) in into.iter().zip(before).zip(now) {
                if n != b {
                    bump(counter, n - b);
                }
            }
        }
    }
}

/// One worker's HTTP/2 counters read out (summed across workers): its
/// connections, and what they counted.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct H2Counts {
    pub opened: u64,
    pub closed: u64,
    #[serde(flatten)]
    pub frames: ConnCounts,
}

fn load(counters: &[AtomicU64; H2_CODES]) -> ByCode {
    counters.each_ref().map(|n| n.load(Relaxed))
}

fn add(into: &mut ByCode, other: &ByCode) {
    for (a, b) in into.iter_mut().zip(other) {
        *a += b;
    }
}

impl H2Counts {
    pub fn of(stats: &H2Stats) -> Self {
        H2Counts {
            opened: stats.opened.load(Relaxed),
            closed: stats.closed.load(Relaxed),
            frames: ConnCounts {
                streams: stats.streams.load(Relaxed),
                refused: stats.refused.load(Relaxed),
                resets_sent: load(&stats.resets_sent),
                resets_received: load(&stats.resets_received),
                goaways_sent: load(&stats.goaways_sent),
                goaways_received: load(&stats.goaways_received),
            },
        }
    }

    pub fn add(&mut self, other: &H2Counts) {
        self.opened += other.opened;
        self.closed += other.closed;
        let (a, b) = (&mut self.frames, &other.frames);
        a.streams += b.streams;
        a.refused += b.refused;
        add(&mut a.resets_sent, &b.resets_sent);
        add(&mut a.resets_received, &b.resets_received);
        add(&mut a.goaways_sent, &b.goaways_sent);
        add(&mut a.goaways_received, &b.goaways_received);
    }

    /// HTTP/2 connections open now.
    pub fn open(&self) -> u64 {
        self.opened.saturating_sub(self.closed)
    }

    /// True while no connection has spoken HTTP/2.
    pub fn is_empty(&self) -> bool {
        self.opened == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CANCEL: u32 = 0x8;
    const ENHANCE_YOUR_CALM: u32 = 0xb;

    #[test]
    fn a_connection_publishes_only_what_changed() {
        let stats = H2Stats::default();
        let mut before = ConnCounts::default();
        let mut now = ConnCounts {
            streams: 3,
            ..ConnCounts::default()
        };
        tally(&mut now.resets_received, CANCEL);
        tally(&mut now.resets_received, CANCEL);
        // A code RFC 9113 does not name is not counted here (the machine
        // counts it as INTERNAL_ERROR).
        tally(&mut now.resets_received, 0xff);
        stats.publish(&before, &now);
        before = now;
        tally(&mut now.goaways_sent, ENHANCE_YOUR_CALM);
        stats.publish(&before, &now);
        let c = H2Counts::of(&stats).frames;
        assert_eq!(c.streams, 3);
        assert_eq!(c.resets_received[CANCEL as usize], 2);
        assert_eq!(c.resets_received.iter().sum::<u64>(), 2);
        assert_eq!(c.goaways_sent[ENHANCE_YOUR_CALM as usize], 1);
        assert_eq!(c.resets_sent, ByCode::default());
        let mut sum = H2Counts::of(&stats);
        sum.add(&H2Counts::of(&stats));
        assert_eq!(sum.frames.resets_received[CANCEL as usize], 4);
    }
}

//! Counters for the status and metrics endpoints, and the app names that
//! label them. Each worker owns its own block of atomics (no cache line is
//! shared between loops on the hot path) and is its only writer (`bump`);
//! readers sum them.

mod h2;
mod handshake;
mod snapshot;
pub use h2::{tally, ByCode, ConnCounts, H2Counts, H2Stats, H2_CODES};
pub use handshake::HandshakeFailure;
pub use snapshot::{AppCounts, Counts, HOST};

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::OnceLock;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Upper bounds (seconds) of the latency histogram's buckets; +Inf is implied.
pub const LATENCY_BUCKETS: [f64; 12] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0,
];

/// Per-app counters within one worker.
#[derive(Default)]
pub struct AppStats {
    /// Responses by status class: 1xx .. 5xx.
    pub by_class: [AtomicU64; 5],
    /// Cumulative-free bucket counts; index `LATENCY_BUCKETS.len()` is +Inf.
    pub latency: [AtomicU64; LATENCY_BUCKETS.len() + 1],
    pub latency_sum_us: AtomicU64,
    /// Response body bytes: an answer's as queued, a streamed answer's or
    /// a WebSocket's as sent, counted when it ends.
    pub bytes: AtomicU64,
}

/// The same bounds in nanoseconds, for counting without floating point.
const LATENCY_BOUNDS_NS: [u128; LATENCY_BUCKETS.len()] = [
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    50_000_000,
    100_000_000,
    250_000_000,
    500_000_000,
    1_000_000_000,
    2_500_000_000,
    10_000_000_000,
];

/// Adds to a counter that only its worker's loop writes (readers only
/// load): a plain load and store, without a locked read-modify-write.
pub fn bump(counter: &AtomicU64, by: u64) {
    counter.store(counter.load(Relaxed).wrapping_add(by), Relaxed);
}

impl AppStats {
    /// Counts one answer; called only by the worker that owns these counters.
    pub fn record(&self, status: u16, elapsed: Duration) {
        let class = usize::from(status / 100).clamp(1, 5) - 1;
        bump(&self.by_class[class], 1);
        let nanos = elapsed.as_nanos();
        let bucket = LATENCY_BOUNDS_NS
            .iter()
            .position(|&b| nanos <= b)
            .unwrap_or(LATENCY_BUCKETS.len());
        bump(&self.latency[bucket], 1);
        bump(
            &self.latency_sum_us,
            u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX),
        );
    }

    pub fn requests(&self) -> u64 {
        self.by_class.iter().map(|c| c.load(Relaxed)).sum()
    }
}

/// Most app slots counted separately; later apps share the last slot.
pub const APP_SLOTS: usize = 64;

/// One worker's counters. Slot `APP_SLOTS` counts requests no app took
/// (404s and the host's own endpoints).
pub struct WorkerStats {
    pub accepted: AtomicU64,
    pub closed: AtomicU64,
    /// WebSockets opened and ended (open = the difference).
    pub ws_opened: AtomicU64,
    pub ws_closed: AtomicU64,
    /// Connections answered 503 at the cap (`--overload shed`).
    pub shed: AtomicU64,
    /// Microseconds accepts were paused, over pauses that have ended.
    pub paused_us: AtomicU64,
    /// When the current pause began (`stamp`), 0 when not paused.
    pub paused_since: AtomicU64,
    /// Streamed answers going out now (each connection's `StreamedAnswer`
    /// counts itself in and out).
    pub streams: Arc<AtomicU64>,
    /// TLS handshakes that failed, by kind (`HandshakeFailure::index`).
    pub tls_failures: [AtomicU64; HandshakeFailure::ALL.len()],
    /// HTTP/2's (each session publishes its connection's counts).
    pub h2: Arc<H2Stats>,
    pub apps: Vec<AppStats>,
}

/// `at` as microseconds since the first stamp of the process, plus one
/// (so 0 can mean "none").
pub fn stamp(at: Instant) -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    let epoch = *EPOCH.get_or_init(Instant::now);
    u64::try_from(at.saturating_duration_since(epoch).as_micros()).unwrap_or(u64::MAX - 1) + 1
}

impl Default for WorkerStats {
    fn default() -> Self {
        WorkerStats {
            accepted: AtomicU64::new(0),
            closed: AtomicU64::new(0),
            ws_opened: AtomicU64::new(0),
            ws_closed: AtomicU64::new(0),
            shed: AtomicU64::new(0),
            paused_us: AtomicU64::new(0),
            paused_since: AtomicU64::new(0),
            streams: Arc::new(AtomicU64::new(0)),
            tls_failures: Default::default(),
            h2: Arc::default(),
            apps: (0..=APP_SLOTS).map(|_| AppStats::default()).collect(),
        }
    }
}

impl WorkerStats {
    /// The counters of app `slot` (or of the host for `None`).
    pub fn app(&self, slot: Option<usize>) -> &AppStats {
        let i = slot.map_or(APP_SLOTS, |s| s.min(APP_SLOTS - 1));
        &self.apps[i]
    }

    pub fn open(&self) -> u64 {
        self.accepted
            .load(Relaxed)
            .saturating_sub(self.closed.load(Relaxed))
    }

    /// Seconds accepts have been paused, the current pause included.
    pub fn accept_paused_secs(&self) -> f64 {
        let since = self.paused_since.load(Relaxed);
        let current = if since == 0 {
            0
        } else {
            stamp(Instant::now()).saturating_sub(since)
        };
        (self.paused_us.load(Relaxed) + current) as f64 / 1e6
    }

    pub fn requests(&self) -> u64 {
        self.apps.iter().map(AppStats::requests).sum()
    }
}

/// Every worker's counters, and the app names their slots count for.
pub struct Stats {
    workers: Box<[WorkerStats]>,
    /// App names by slot, in the order first loaded: stable for the
    /// process's life, shared by every generation of an app.
    names: Mutex<Vec<Arc<str>>>,
}

impl Stats {
    pub fn new(workers: usize) -> Self {
        Stats {
            workers: (0..workers).map(|_| WorkerStats::default()).collect(),
            names: Mutex::new(Vec::new()),
        }
    }

    /// The counters of worker `i` (its index at start-up).
    pub fn worker(&self, i: usize) -> &WorkerStats {
        &self.workers[i.min(self.workers.len().saturating_sub(1))]
    }

    /// Every worker's counters, by worker index.
    pub fn workers(&self) -> &[WorkerStats] {
        &self.workers
    }

    /// The counters slot of app `name`, assigned on its first load.
    pub fn slot(&self, name: &str) -> usize {
        let mut names = self.names.lock().unwrap_or_else(|p| p.into_inner());
        match names.iter().position(|n| &**n == name) {
            Some(i) => i,
            None => {
                names.push(Arc::from(name));
                names.len() - 1
            }
        }
    }

    /// Every app name, by slot.
    pub fn app_names(&self) -> Vec<Arc<str>> {
        self.names.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The app name a counters slot belongs to (`?` for none known).
    pub fn app_name(&self, slot: usize) -> Arc<str> {
        let names = self.names.lock().unwrap_or_else(|p| p.into_inner());
        names.get(slot).cloned().unwrap_or_else(|| Arc::from("?"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_class_and_bucket() {
        let s = AppStats::default();
        s.record(200, Duration::from_millis(3));
        s.record(503, Duration::from_secs(60));
        assert_eq!(s.by_class[1].load(Relaxed), 1);
        assert_eq!(s.by_class[4].load(Relaxed), 1);
        assert_eq!(s.latency[2].load(Relaxed), 1);
        assert_eq!(s.latency[LATENCY_BUCKETS.len()].load(Relaxed), 1);
        assert_eq!(s.requests(), 2);
    }

    #[test]
    fn nanosecond_bounds_are_the_published_buckets() {
        for (ns, secs) in LATENCY_BOUNDS_NS.iter().zip(LATENCY_BUCKETS) {
            assert_eq!(*ns as f64 / 1e9, secs);
        }
        let s = AppStats::default();
        s.record(200, Duration::from_millis(1));
        s.record(200, Duration::from_nanos(1_000_001));
        assert_eq!(s.latency[0].load(Relaxed), 1);
        assert_eq!(s.latency[1].load(Relaxed), 1);
    }

    #[test]
    fn paused_time_counts_the_current_pause() {
        let w = WorkerStats::default();
        assert_eq!(w.accept_paused_secs(), 0.0);
        w.paused_us.store(1_500_000, Relaxed);
        assert_eq!(w.accept_paused_secs(), 1.5);
        w.paused_since
            .store(stamp(Instant::now() - Duration::from_secs(2)), Relaxed);
        assert!(w.accept_paused_secs() >= 1.5);
    }

    #[test]
    fn slots_are_stable_per_name() {
        let s = Stats::new(2);
        assert_eq!(s.slot("a"), 0);
        assert_eq!(s.slot("b"), 1);
        assert_eq!(s.slot("a"), 0);
        assert_eq!(&*s.app_name(1), "b");
        assert_eq!(&*s.app_name(7), "?");
        assert_eq!(s.workers().len(), 2);
    }

    #[test]
    fn host_slot_is_separate() {
        let w = WorkerStats::default();
        w.app(None).record(404, Duration::ZERO);
        w.app(Some(1000)).record(200, Duration::ZERO);
        assert_eq!(w.apps[APP_SLOTS].requests(), 1);
        assert_eq!(w.apps[APP_SLOTS - 1].requests(), 1);
        assert_eq!(w.requests(), 2);
    }
}

//! A worker's counters read out as plain numbers: what status and metrics
//! add up, within a process (one per loop) or across the worker processes
//! of process mode (each publishes its own for the others to read).

use super::{AppStats, H2Counts, HandshakeFailure, Stats, WorkerStats, APP_SLOTS, LATENCY_BUCKETS};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::atomic::Ordering::Relaxed;

/// The label of requests no app took (404s, the host's own endpoints).
pub const HOST: &str = "(host)";

/// One app's counters in one worker.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct AppCounts {
    pub by_class: [u64; 5],
    pub latency: Vec<u64>,
    pub latency_sum_us: u64,
    /// Response body bytes (`AppStats::bytes`).
    #[serde(default)]
    pub bytes: u64,
}

impl AppCounts {
    fn of(a: &AppStats) -> Self {
        AppCounts {
            by_class: std::array::from_fn(|i| a.by_class[i].load(Relaxed)),
            latency: a.latency.iter().map(|c| c.load(Relaxed)).collect(),
            latency_sum_us: a.latency_sum_us.load(Relaxed),
            bytes: a.bytes.load(Relaxed),
        }
    }

    pub fn requests(&self) -> u64 {
        self.by_class.iter().sum()
    }

    fn add(&mut self, other: &AppCounts) {
        for (a, b) in self.by_class.iter_mut().zip(&other.by_class) {
            *a += b;
        }
        if self.latency.len() < other.latency.len() {
            self.latency.resize(other.latency.len(), 0);
        }
        for (a, b) in self.latency.iter_mut().zip(&other.latency) {
            *a += b;
        }
        self.latency_sum_us += other.latency_sum_us;
        self.bytes += other.bytes;
    }

    /// The latency bucket counts, one per bound and +Inf.
    pub fn buckets(&self) -> impl Iterator<Item = u64> + '_ {
        (0..=LATENCY_BUCKETS.len()).map(|i| self.latency.get(i).copied().unwrap_or(0))
    }
}

/// One worker's counters.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct Counts {
    pub accepted: u64,
    pub closed: u64,
    pub ws_opened: u64,
    pub ws_closed: u64,
    pub shed: u64,
    pub streams: u64,
    pub accept_paused_secs: f64,
    /// By app name (`HOST` for requests no app took).
    pub apps: BTreeMap<String, AppCounts>,
    /// Failed TLS handshakes by kind (`HandshakeFailure::name`); a kind
    /// none failed with is left out.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tls_failures: BTreeMap<String, u64>,
    /// HTTP/2 connections, streams and frames by error code; left out
    /// while no connection has spoken it.
    #[serde(default, skip_serializing_if = "H2Counts::is_empty")]
    pub h2: H2Counts,
    /// Process mode: each log's lines (written, dropped, write errors)
    /// by log name, as this worker process counted them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub logs: BTreeMap<String, [u64; 3]>,
    /// Process mode: this worker process's blocking pool, as status shows
    /// it (not summed: each worker has its own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<serde_json::Value>,
}

impl Counts {
    /// Worker `i`'s counters now.
    pub fn of(stats: &Stats, i: usize) -> Self {
        let w: &WorkerStats = stats.worker(i);
        let names = stats.app_names();
        let mut apps = BTreeMap::new();
        for (slot, name) in names.iter().enumerate().take(APP_SLOTS) {
            let counts = AppCounts::of(w.app(Some(slot)));
            if counts.requests() > 0 {
                apps.entry(name.to_string())
                    .or_insert_with(AppCounts::default)
                    .add(&counts);
            }
        }
        apps.insert(HOST.to_string(), AppCounts::of(w.app(None)));
        let tls_failures = HandshakeFailure::ALL
            .iter()
            .map(|k| {
                (
                    k.name().to_string(),
                    w.tls_failures[k.index()].load(Relaxed),
                )
            })
            .filter(|(_, n)| *n > 0)
            .collect();
        Counts {
            accepted: w.accepted.load(Relaxed),
            closed: w.closed.load(Relaxed),
            ws_opened: w.ws_opened.load(Relaxed),
            ws_closed: w.ws_closed.load(Relaxed),
            shed: w.shed.load(Relaxed),
            streams: w.streams.load(Relaxed),
            accept_paused_secs: w.accept_paused_secs(),
            apps,
            tls_failures,
            h2: H2Counts::of(&w.h2),
            logs: BTreeMap::new(),
            pool: None,
        }
    }

    /// Adds `other`'s counters (gauges too: a sum over workers).
    pub fn add(&mut self, other: &Counts) {
        self.accepted += other.accepted;
        self.closed += other.closed;
        self.ws_opened += other.ws_opened;
        self.ws_closed += other.ws_closed;
        self.shed += other.shed;
        self.streams += other.streams;
        self.accept_paused_secs += other.accept_paused_secs;
        for (name, counts) in &other.apps {
            self.apps.entry(name.clone()).or_default().add(counts);
        }
        for (kind, n) in &other.tls_failures {
            *self.tls_failures.entry(kind.clone()).or_default() += n;
        }
        self.h2.add(&other.h2);
        for (name, lines) in &other.logs {
            let sum = self.logs.entry(name.clone()).or_default();
            for (a, b) in sum.iter_mut().zip(lines) {
                *a += b;
            }
        }
    }

    /// What a worker that has ended leaves to the totals: its counters,
    /// without what it had open.
    pub fn retired(mut self) -> Counts {
        self.closed = self.accepted;
        self.ws_closed = self.ws_opened;
        self.streams = 0;
        self.h2.closed = self.h2.opened;
        self.pool = None;
        self
    }

    pub fn open(&self) -> u64 {
        self.accepted.saturating_sub(self.closed)
    }

    pub fn websockets(&self) -> u64 {
        self.ws_opened.saturating_sub(self.ws_closed)
    }

    pub fn requests(&self) -> u64 {
        self.apps.values().map(AppCounts::requests).sum()
    }

    /// The TLS handshakes that failed with `kind`.
    pub fn tls_failed(&self, kind: HandshakeFailure) -> u64 {
        self.tls_failures.get(kind.name()).copied().unwrap_or(0)
    }

    /// App `name`'s counters (zero if it has none).
    pub fn app(&self, name: &str) -> AppCounts {
        self.apps.get(name).cloned().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn counts_add_up_by_app_name() {
        let stats = Stats::new(2);
        let a = stats.slot("article");
        stats
            .worker(0)
            .app(Some(a))
            .record(200, Duration::from_millis(2));
        stats
            .worker(1)
            .app(Some(a))
            .record(503, Duration::from_millis(20));
        stats
            .worker(1)
            .app(None)
            .record(404, Duration::from_micros(10));
        let mut total = Counts::of(&stats, 0);
        total.add(&Counts::of(&stats, 1));
        assert_eq!(total.app("article").by_class, [0, 1, 0, 0, 1]);
        assert_eq!(total.app(HOST).requests(), 1);
        assert_eq!(total.requests(), 3);
        let text = serde_json::to_string(&total).expect("json");
        let back: Counts = serde_json::from_str(&text).expect("back");
        assert_eq!(back, total);
    }

    #[test]
    fn failed_handshakes_add_up_by_kind_across_workers_and_json() {
        let stats = Stats::new(2);
        let count = |w: usize, kind: HandshakeFailure, n: u64| {
            stats.worker(w).tls_failures[kind.index()].store(n, Relaxed);
        };
        count(0, HandshakeFailure::Timeout, 2);
        count(1, HandshakeFailure::Timeout, 3);
        count(1, HandshakeFailure::PlainHttp, 1);
        let mut total = Counts::of(&stats, 0);
        // A worker process publishes its counters as JSON for the others.
        let text = serde_json::to_string(&Counts::of(&stats, 1)).expect("json");
        total.add(&serde_json::from_str(&text).expect("back"));
        assert_eq!(total.tls_failed(HandshakeFailure::Timeout), 5);
        assert_eq!(total.tls_failed(HandshakeFailure::PlainHttp), 1);
        assert_eq!(total.tls_failed(HandshakeFailure::Other), 0);
        // What a worker without the field (an older binary) published.
        let old: Counts = serde_json::from_str(
            r#"{"accepted":1,"closed":1,"ws_opened":0,
            "ws_closed":0,"shed":0,"streams":0,"accept_paused_secs":0.0,"apps":{}}"#,
        )
        .expect("an older worker's counters");
        assert!(old.tls_failures.is_empty());
    }
}

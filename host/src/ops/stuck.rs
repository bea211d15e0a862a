//! A stuck worker as status, metrics and the probes report it, whether
//! this process's watchdog found it (`watchdog::Board::stuck`) or another
//! worker process's did (read from its row, `peers::Peers::stuck`), with
//! the clock stuck times are kept on and what readiness and health make of
//! them. Apart from the watchdog, so that what reads stuck workers need
//! not name the thread that finds them.

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

/// A stuck worker, as status and the endpoints report it.
pub struct StuckWorker {
    pub worker: usize,
    /// Process mode: its process.
    pub pid: Option<u32>,
    pub stuck_for: Duration,
    /// "app NAME PATH", "a timer callback" or "host code".
    pub place: String,
}

/// The monotonic clock now, in milliseconds (as `watchdog::Board` stamps
/// stuck times).
pub fn monotonic_millis() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    let secs = u64::try_from(t.tv_sec).unwrap_or(0);
    let millis = u64::try_from(t.tv_nsec / 1_000_000).unwrap_or(0);
    secs.saturating_mul(1000).saturating_add(millis)
}

/// How long a worker whose pulse is `pulse` has been stuck, if it is, read
/// from another process (`now`: `monotonic_millis`; the pulse's second word
/// is its `stuck_since`, see `watchdog::Beat`).
pub fn stuck_for(pulse: &[AtomicU64], now: u64) -> Option<Duration> {
    let since = pulse.get(1)?.load(Relaxed).checked_sub(1)?;
    Some(Duration::from_millis(now.saturating_sub(since)))
}

/// Why the host is not ready: a worker (of `workers`) is stuck. (The
/// probes are open to anyone: where it is stuck is for status and the
/// log.)
pub fn not_ready(stuck: &[StuckWorker], workers: usize) -> Option<String> {
    let first = stuck.first()?;
    Some(format!(
        "{} of {workers} worker(s) stuck in app code (worker {} for {} s)",
        stuck.len(),
        first.worker,
        first.stuck_for.as_secs(),
    ))
}

/// Why the host is unhealthy: a worker stuck past `unhealthy_after`, or
/// every one of `workers` stuck.
pub fn unhealthy(
    stuck: &[StuckWorker],
    workers: usize,
    unhealthy_after: Duration,
) -> Option<String> {
    if !stuck.is_empty() && stuck.len() >= workers {
        return Some("every worker is stuck in app code".to_string());
    }
    let worst = stuck.iter().max_by_key(|s| s.stuck_for)?;
    (worst.stuck_for >= unhealthy_after).then(|| {
        format!(
            "worker {} stuck in app code for {} s (unhealthy_after {} s)",
            worst.worker,
            worst.stuck_for.as_secs(),
            unhealthy_after.as_secs_f32(),
        )
    })
}

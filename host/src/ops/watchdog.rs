//! The watchdog: notices an event loop that has stopped turning (app code
//! that never returns), reports the app and path it is in, takes its
//! listener out of the accept group so new clients go to live workers, and
//! ends the process when the graceful timeout has passed whatever its
//! threads do. It also asks the blocking pool to report jobs that overran
//! their deadline, and, once a second, notes a Unix socket file of ours
//! unlinked or replaced while serving (`listen::watch_unix_sockets`).
//!
//! Each worker publishes a [`Beat`]: a turn counter with a "waiting in the
//! poller" bit (two relaxed stores per turn), and the app and request it is
//! in while it runs app code inline (its `Spot`: a few relaxed stores per
//! request, no lock, no allocation). The watchdog samples the beats a few
//! times a second.

use crate::apps::pool::Pool;
use crate::apps::services::set_current_app;
use crate::control::Control;
use crate::ops::access_log::AccessLog;
use crate::ops::peers::{process_counts, Peers};
use crate::ops::spot::{Running, Spot, Spotted, IN_HOST, IN_TIMER};
use crate::ops::stuck::{monotonic_millis, not_ready, StuckWorker};
use crate::ops::worker_row::{Recycle, Row};
use crate::stats::Stats;
use socket2::Socket;
use std::net::{Shutdown, SocketAddr};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What a beat's path reads while an app's timer callback runs.
const TIMER_PATH: &str = "(timer callback)";

/// After the graceful timeout has forced the workers closed, how long the
/// watchdog lets them return before it ends the process.
const FORCE_GRACE: Duration = Duration::from_millis(500);

/// One worker's heartbeat: the worker writes it every turn, the watchdog
/// (and in process mode the supervisor) reads it a few times a second. Its
/// words are `[state, stuck_since, spot...]` (`PULSE_WORDS`):
/// - state: `turns << 1 | waiting`, bumped when a turn starts serving, the
///   low bit set while the loop waits in the poller;
/// - stuck_since: the monotonic clock in milliseconds when the turn the
///   watchdog found stuck began, plus one; 0 while the worker is not stuck.
pub struct Beat {
    state: &'static AtomicU64,
    stuck_since: &'static AtomicU64,
    spot: Spot,
    /// Set by the watchdog when it shut this worker's listener down.
    evicted: AtomicBool,
    /// Duplicates of the worker's TCP listeners, for the watchdog to shut
    /// down.
    listeners: Mutex<Vec<Socket>>,
}

impl Beat {
    /// A beat kept in `pulse` (a row's `PULSE_WORDS`).
    fn over(pulse: &'static [AtomicU64]) -> Self {
        pulse[0].store(1, Relaxed);
        Beat {
            state: &pulse[0],
            stuck_since: &pulse[1],
            spot: Spot::over(&pulse[2..]),
            evicted: AtomicBool::new(false),
            listeners: Mutex::new(Vec::new()),
        }
    }

    /// The loop is about to wait in its poller.
    pub fn waiting(&self) {
        let s = self.state.load(Relaxed);
        self.state.store(s | 1, Relaxed);
    }

    /// The loop's wait returned: a new turn starts.
    pub fn turned(&self) {
        let s = self.state.load(Relaxed);
        self.state.store((s | 1).wrapping_add(1), Relaxed);
    }

    /// The loop calls app `slot`'s code for `running` (a request, or a
    /// WebSocket callback).
    pub fn enter(&self, slot: usize, running: &Running<'_>) {
        self.spot.enter(slot, running);
        set_current_app(Some(slot));
    }

    /// The loop runs a timer callback set by app `slot` (if known).
    pub fn enter_timer(&self, slot: Option<usize>) {
        match slot {
            Some(slot) => self.spot.enter(slot, &Running::callback(TIMER_PATH)),
            None => self.spot.enter(IN_TIMER, &Running::callback("")),
        }
        set_current_app(slot);
    }

    /// The loop is back in host code.
    pub fn leave(&self) {
        self.spot.leave();
        set_current_app(None);
    }

    /// True once after the watchdog shut this worker's listener down.
    pub fn evicted(&self) -> bool {
        self.evicted.load(Relaxed) && self.evicted.swap(false, Relaxed)
    }

    /// Keeps duplicates of the worker's (new) TCP listeners for the
    /// watchdog.
    pub fn set_listeners(&self, dups: Vec<Socket>) {
        *self.listeners.lock().unwrap_or_else(|p| p.into_inner()) = dups;
    }

    /// Closes the duplicate: the worker closes its listener (draining or
    /// exiting), and the socket must not outlive it.
    pub fn release_listener(&self) {
        self.listeners
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }

    /// Shuts the listener down (the kernel resets its backlog and leaves
    /// it out of the `SO_REUSEPORT` group); false if there was none.
    fn evict(&self) -> bool {
        let sockets =
            std::mem::take(&mut *self.listeners.lock().unwrap_or_else(|p| p.into_inner()));
        if sockets.is_empty() {
            return false;
        }
        self.evicted.store(true, Relaxed);
        for socket in sockets {
            if let Err(e) = socket.shutdown(Shutdown::Both) {
                log::warn!("cannot shut the stuck worker's listener down: {e}");
            }
        }
        true
    }
}

/// Marks a worker's beat when dropped, as its loop returns or unwinds: a
/// finished loop is not stuck, and the listener's duplicate is closed with
/// the listener.
pub struct Finished<'a>(pub &'a Beat);

impl Drop for Finished<'_> {
    fn drop(&mut self) {
        self.0.waiting();
        self.0.release_listener();
    }
}

/// The workers' beats and the watchdog's bounds.
pub struct Board {
    epoch: Instant,
    /// `epoch` on the monotonic clock, in milliseconds.
    epoch_millis: u64,
    beats: Vec<Beat>,
    /// Each worker's row (shared with the supervisor in process mode).
    rows: Vec<Row>,
    /// A loop that has not turned for this long is stuck.
    pub stuck_after: Duration,
    /// A worker stuck this long makes the process unhealthy.
    pub unhealthy_after: Duration,
    /// Each listener's TCP address (`None` for a Unix socket) and the
    /// backlog, for a worker that re-creates its listeners.
    pub addrs: Vec<Option<SocketAddr>>,
    pub backlog: i32,
}

impl Board {
    /// A board for one loop per row of `rows` (one at least).
    pub fn new(
        rows: Vec<Row>,
        stuck_after: Duration,
        unhealthy_after: Duration,
        addrs: Vec<Option<SocketAddr>>,
        backlog: i32,
    ) -> Self {
        let rows = if rows.is_empty() {
            vec![Row::private()]
        } else {
            rows
        };
        Board {
            epoch: Instant::now(),
            epoch_millis: monotonic_millis(),
            beats: rows.iter().map(|r| Beat::over(r.pulse())).collect(),
            rows,
            stuck_after,
            unhealthy_after,
            addrs,
            backlog,
        }
    }

    /// Worker `i`'s beat.
    pub fn beat(&self, worker: usize) -> &Beat {
        &self.beats[worker.min(self.beats.len() - 1)]
    }

    /// The board of requests worker `worker`'s blocking pool runs (in
    /// process mode where the supervisor reads it).
    pub fn flights(&self, worker: usize) -> crate::ops::in_flight::Flights {
        self.rows[worker.min(self.rows.len() - 1)].flights()
    }

    /// `at` on the machine's monotonic clock, in milliseconds: the same
    /// clock in every process, so a worker process's stuck time reads the
    /// same in the others.
    fn millis(&self, at: Instant) -> u64 {
        let since = u64::try_from(at.saturating_duration_since(self.epoch).as_millis())
            .unwrap_or(u64::MAX / 2);
        self.epoch_millis.saturating_add(since).min(u64::MAX - 1)
    }

    /// Each worker the watchdog has found stuck, and for how long.
    fn stuck_times(&self) -> Vec<(usize, Duration)> {
        let now = self.millis(Instant::now());
        self.beats
            .iter()
            .enumerate()
            .filter_map(|(worker, beat)| {
                let since = beat.stuck_since.load(Relaxed).checked_sub(1)?;
                Some((worker, Duration::from_millis(now.saturating_sub(since))))
            })
            .collect()
    }

    /// The workers the watchdog has found stuck, and where they are.
    pub fn stuck(&self, stats: &Stats) -> Vec<StuckWorker> {
        self.stuck_times()
            .into_iter()
            .map(|(worker, stuck_for)| StuckWorker {
                worker,
                pid: None,
                stuck_for,
                place: place(stats, self.beat(worker)),
            })
            .collect()
    }

    /// The loops this board watches.
    pub fn workers(&self) -> usize {
        self.beats.len()
    }

    /// Why this process is not ready (`not_ready` over its own loops).
    pub fn not_ready(&self) -> Option<String> {
        let stuck: Vec<StuckWorker> = self
            .stuck_times()
            .into_iter()
            .map(|(worker, stuck_for)| StuckWorker {
                worker,
                pid: None,
                stuck_for,
                place: String::new(),
            })
            .collect();
        not_ready(&stuck, self.beats.len())
    }
}

/// Where a worker is: its app (named by its counters slot) and path.
fn place(stats: &Stats, beat: &Beat) -> String {
    let Some(spotted) = (0..3).find_map(|_| beat.spot.read()) else {
        return "app code (changing)".to_string();
    };
    match spotted.slot {
        IN_HOST => "host code".to_string(),
        IN_TIMER => "a timer callback".to_string(),
        slot => format!("app {} {}", stats.app_name(slot), spotted.place()),
    }
}

/// What the watchdog remembers of one worker between samples.
#[derive(Clone, Copy)]
struct Seen {
    state: u64,
    since: Instant,
    stuck: bool,
}

/// How often the Unix socket files are checked to be still there.
const FILES_EVERY: Duration = Duration::from_secs(1);

/// How often the beats are sampled: a tenth of the stuck bound, between
/// 10 ms and 100 ms.
fn tick(stuck_after: Duration) -> Duration {
    (stuck_after / 10).clamp(Duration::from_millis(10), Duration::from_millis(100))
}

/// What the watchdog thread holds: six handles (the workers' beats and
/// rows; the counters, whose app names say where a worker is stuck and
/// whose requests and open connections go into its row; the run state, a
/// forced drain; the pool, whose overruns it reports; in process mode the
/// peers it publishes this worker's counters to, with the access log's
/// line counts) and two settings.
pub struct Watched {
    pub board: Arc<Board>,
    pub stats: Arc<Stats>,
    pub control: Arc<Control>,
    pub pool: Option<Arc<Pool>>,
    /// A worker process's `--worker-max-requests` (with its jitter).
    pub max_requests: Option<u64>,
    /// Process mode: where this worker publishes its counters (with its
    /// access log's line counts).
    pub peers: Option<Arc<Peers>>,
    pub access_log: Option<Arc<AccessLog>>,
    /// Process mode: `--worker-timeout` (a pool hung this long asks for a
    /// replacement).
    pub worker_timeout: Option<Duration>,
}

/// Starts the watchdog thread.
pub fn spawn(watched: Watched) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("stoa-watchdog".into())
        .spawn(move || watch(&watched))
        .map(|_| ())
}

fn watch(watched: &Watched) {
    let board = &watched.board;
    let start = Instant::now();
    let mut seen: Vec<Seen> = board
        .beats
        .iter()
        .map(|b| Seen {
            state: b.state.load(Relaxed),
            since: start,
            stuck: false,
        })
        .collect();
    let mut forced_at = None;
    let mut files_checked = start;
    loop {
        std::thread::sleep(tick(board.stuck_after));
        let now = Instant::now();
        if now.duration_since(files_checked) >= FILES_EVERY {
            files_checked = now;
            crate::listen::watch_unix_sockets();
        }
        for (worker, (beat, seen)) in board.beats.iter().zip(&mut seen).enumerate() {
            sample(watched, worker, beat, seen, now);
        }
        publish(watched);
        if let Some(pool) = &watched.pool {
            pool.report_overruns(now);
        }
        if watched.control.forced() {
            let at = *forced_at.get_or_insert(now);
            if now.duration_since(at) >= FORCE_GRACE {
                give_up(watched);
            }
        }
    }
}

/// Writes what the supervisor reads into each row: the requests served,
/// the app names (when one was added), and asks for a replacement past
/// `--worker-max-requests`.
fn publish(watched: &Watched) {
    for (i, row) in watched.board.rows.iter().enumerate() {
        let served = watched.stats.worker(i).requests();
        row.set_requests(served);
        row.set_open(watched.stats.worker(i).open());
        if watched.max_requests.is_some_and(|most| served >= most) {
            row.ask_recycle(Recycle::MaxRequests);
        }
    }
    if let Some(peers) = &watched.peers {
        peers.publish(&process_counts(
            &watched.stats,
            watched.access_log.as_deref(),
            watched.pool.as_deref(),
        ));
    }
    let hung = watched
        .pool
        .as_ref()
        .and_then(|p| p.exhausted_for(Instant::now()));
    if let (Some(hung), Some(bound)) = (hung, watched.worker_timeout) {
        if hung >= bound {
            for row in &watched.board.rows {
                row.ask_recycle(Recycle::PoolHung);
            }
        }
    }
}

/// Clears a row's pulse for a new worker: its spot in host code.
pub fn clear_pulse(row: &Row) {
    Spot::over(&row.pulse()[2..]);
}

/// The app a row's names give for `slot`, and the digest of its bytes.
pub fn app_in_row(row: &Row, slot: usize) -> (String, Option<String>) {
    let names = row.names().read_settled();
    match names
        .lines()
        .nth(slot)
        .map(|l| l.split_once('\t').unwrap_or((l, "-")))
    {
        Some((name, digest)) => (
            name.to_string(),
            (digest != "-").then(|| digest.to_string()),
        ),
        None => (format!("app #{slot}"), None),
    }
}

/// The counters slot of the app a worker process's loop is in, if any.
pub fn slot_in_row(row: &Row) -> Option<usize> {
    Spot::over_existing(&row.pulse()[2..]).in_app()
}

/// Where the loop of a worker process is, read from its row: its app and
/// "METHOD path", or `None` in host code.
pub fn place_in_row(row: &Row) -> Option<String> {
    spot_in_row(row).map(|(app, spotted)| format!("{app} {}", spotted.place()))
}

/// What the loop of a worker process runs, read from its row: its app's
/// name and the request (or callback), or `None` in host code.
pub fn spot_in_row(row: &Row) -> Option<(String, Spotted)> {
    let spot = Spot::over_existing(&row.pulse()[2..]);
    let slot = spot.in_app()?;
    let spotted = (0..8).find_map(|_| spot.read())?;
    Some((app_in_row(row, slot).0, spotted))
}

/// Compares one worker's beat with the last sample: a worker that has not
/// turned (and is not waiting) for `stuck_after` is reported and evicted.
fn sample(watched: &Watched, worker: usize, beat: &Beat, seen: &mut Seen, now: Instant) {
    let board = &watched.board;
    let state = beat.state.load(Relaxed);
    if state & 1 == 1 || state != seen.state {
        if seen.stuck {
            log::warn!(
                "worker {worker} turned again after {:.1} s stuck",
                now.duration_since(seen.since).as_secs_f32()
            );
            beat.stuck_since.store(0, Relaxed);
            board.rows[worker].note().write("");
        }
        *seen = Seen {
            state,
            since: now,
            stuck: false,
        };
        return;
    }
    if seen.stuck || now.duration_since(seen.since) < board.stuck_after {
        return;
    }
    seen.stuck = true;
    beat.stuck_since
        .store(board.millis(seen.since) + 1, Relaxed);
    let evicted = beat.evict();
    board.rows[worker]
        .note()
        .write(&place(&watched.stats, beat));
    log::error!(
        "worker {worker} stuck: its loop has not turned for {:.1} s (stuck_after {} s), in {}; {}",
        now.duration_since(seen.since).as_secs_f32(),
        board.stuck_after.as_secs_f32(),
        place(&watched.stats, beat),
        if evicted {
            "its listener leaves the accept group, new clients go to the other workers"
        } else {
            "it has no listener to take away"
        }
    );
}

/// The graceful timeout has passed and a worker is still running: log
/// where every busy worker is, and end the process.
fn give_up(watched: &Watched) -> ! {
    let busy: Vec<String> = watched
        .board
        .beats
        .iter()
        .enumerate()
        .filter(|(_, b)| b.state.load(Relaxed) & 1 == 0)
        .map(|(i, b)| format!("worker {i} in {}", place(&watched.stats, b)))
        .collect();
    log::error!(
        "graceful timeout passed and {} still running ({}); exiting",
        if busy.len() == 1 {
            "a worker is"
        } else {
            "workers are"
        },
        busy.join(", ")
    );
    crate::ops::error_log::flush(crate::ops::log_writer::EXIT_FLUSH);
    std::process::exit(1);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn beat_counts_turns_and_waits() {
        let beat = Beat::over(Row::private().pulse());
        let first = beat.state.load(Relaxed);
        beat.turned();
        let busy = beat.state.load(Relaxed);
        assert_eq!(busy & 1, 0);
        assert_ne!(busy, first);
        beat.waiting();
        assert_eq!(beat.state.load(Relaxed), busy | 1);
        beat.turned();
        assert!(beat.state.load(Relaxed) > busy);
    }

    #[test]
    fn tick_is_bounded() {
        assert_eq!(tick(Duration::from_secs(5)), Duration::from_millis(100));
        assert_eq!(tick(Duration::from_millis(50)), Duration::from_millis(10));
    }
}

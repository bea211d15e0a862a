//! What the endpoints read (`Sources`: every live handle of the host) and
//! the one view of the workers both status and metrics are made from: each
//! worker's counters (this process's loops, or every worker process's
//! published ones), the apps' names by slot, the stuck workers, the logs'
//! line counts.

use crate::apps::pool::Pool;
use crate::apps::registry::AppTable;
use crate::budget::Budget;
use crate::control::Control;
use crate::ops::access_log::AccessLog;
use crate::ops::log_writer::LineCounts;
use crate::ops::peers::{process_counts, Peer, Peers};
use crate::ops::stuck::StuckWorker;
use crate::ops::watchdog::Board;
use crate::settings::Settings;
use crate::stats::Stats;
use crate::stats::{Counts, HOST};

/// What the endpoints read: every live handle of the host, since status
/// reports them all.
pub struct Sources<'a> {
    pub settings: &'a Settings,
    pub apps: &'a AppTable,
    pub pool: Option<&'a Pool>,
    pub access_log: Option<&'a AccessLog>,
    /// Process mode: the other worker processes' counters.
    pub peers: Option<&'a Peers>,
    pub control: &'a Control,
    pub board: &'a Board,
    pub stats: &'a Stats,
    pub budget: &'a Budget,
    /// The TLS sites this process serves, if any.
    pub tls: Option<&'a crate::listen::tls::TlsSites>,
}

/// The host's stuck workers, and how many workers it has: this process's
/// loops in thread mode, every worker process in service in process mode.
pub(super) fn stuck_workers(shared: &Sources<'_>) -> (Vec<StuckWorker>, usize) {
    match shared.peers {
        Some(peers) => peers.stuck(),
        None => (shared.board.stuck(shared.stats), shared.board.workers()),
    }
}

/// The name of every mounted app, and the host's own label, sorted.
pub(super) fn names(shared: &Sources<'_>) -> Vec<String> {
    let mut v: Vec<String> = shared
        .apps
        .load()
        .mounts
        .apps()
        .iter()
        .map(|a| a.name.clone())
        .collect();
    v.sort();
    v.dedup();
    v.push(HOST.to_string());
    v
}

/// One worker as status and metrics show it: its counters, and in process
/// mode its pid, memory and crashes.
pub(super) struct WorkerView {
    pub(super) worker: usize,
    pub(super) counts: Counts,
    pub(super) process: Option<(u32, u64)>,
}

/// The whole host's counters: each worker's (each loop's in thread mode,
/// each worker process's in process mode), and their total (with the
/// workers that have ended, in process mode).
pub(super) struct View {
    pub(super) workers: Vec<WorkerView>,
    pub(super) total: Counts,
}

pub(super) fn view(shared: &Sources<'_>) -> View {
    let workers: Vec<WorkerView> = match shared.peers {
        None => (0..shared.stats.workers().len())
            .map(|i| WorkerView {
                worker: i,
                counts: Counts::of(shared.stats, i),
                process: None,
            })
            .collect(),
        Some(peers) => peers
            .workers(&process_counts(
                shared.stats,
                shared.access_log,
                shared.pool,
            ))
            .into_iter()
            .map(
                |Peer {
                     place,
                     pid,
                     counts,
                     rss,
                 }| WorkerView {
                    worker: place,
                    counts,
                    process: Some((pid, rss)),
                },
            )
            .collect(),
    };
    let mut total = shared.peers.map(Peers::retired).unwrap_or_default();
    for w in &workers {
        total.add(&w.counts);
    }
    View { workers, total }
}

/// The logs that are on, with what became of their lines: this process's
/// in thread mode, summed over every worker process (ended ones too) in
/// process mode.
pub(super) fn logs(shared: &Sources<'_>, view: &View) -> Vec<(&'static str, LineCounts)> {
    let error = crate::ops::error_log::counts().map(|c| ("error", c));
    let access = shared.access_log.map(|l| ("access", l.counts()));
    error
        .into_iter()
        .chain(access)
        .map(|(name, own)| {
            let numbers = match shared.peers {
                None => own.numbers(),
                Some(_) => view.total.logs.get(name).copied().unwrap_or_default(),
            };
            let counts = LineCounts::of_numbers(numbers);
            (name, counts)
        })
        .collect()
}

/// `logs` as the log writer's views take them.
pub(super) fn log_refs<'a>(
    logs: &'a [(&'static str, LineCounts)],
) -> Vec<(&'static str, &'a LineCounts)> {
    logs.iter().map(|(name, c)| (*name, c)).collect()
}

//! The host's own endpoints under `/.well-known/stoa/`, answered before
//! any mount: health, readiness, status (JSON, `status`) and metrics
//! (Prometheus, `metrics`), both from one view of the workers (`View`).

mod metrics;
mod status;

use metrics::metrics_text;
use status::status_json;

use crate::apps::pool::Pool;
use crate::apps::registry::AppTable;
use crate::budget::Budget;
use crate::control::Control;
use crate::http::answer::HostAnswer;
use crate::ops::access_log::AccessLog;
use crate::ops::log_writer::LineCounts;
use crate::ops::netfilter::peer_ip;
use crate::ops::peers::{process_counts, Peer, Peers};
use crate::ops::watchdog::{not_ready, unhealthy, Board, StuckWorker};
use crate::settings::Settings;
use crate::stats::Stats;
use crate::stats::{Counts, HOST};
use stoa_app_api::Response;

/// The prefix of the host's endpoints.
pub const PREFIX: &str = "/.well-known/stoa/";

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

/// Answers a host endpoint, or `None` if `path` is not one.
pub fn answer(shared: &Sources<'_>, path: &str, peer: &str) -> Option<Response> {
    let name = path.strip_prefix(PREFIX)?;
    let response = match name {
        "health" => {
            let (stuck, workers) = stuck_workers(shared);
            match unhealthy(&stuck, workers, shared.board.unhealthy_after) {
                Some(why) => HostAnswer::Stuck(why).response(),
                None => Response::text(200, "ok\n"),
            }
        }
        "ready" if shared.control.draining() => HostAnswer::Draining.response(),
        "ready" if !shared.apps.load().starting.is_empty() => {
            HostAnswer::Starting(shared.apps.load().starting.clone()).response()
        }
        "ready" if shared.apps.load().mounts.apps().is_empty() => HostAnswer::NoApps.response(),
        "ready" => {
            let (stuck, workers) = stuck_workers(shared);
            match not_ready(&stuck, workers) {
                Some(why) => HostAnswer::Stuck(why).response(),
                None => Response::text(200, "ready\n"),
            }
        }
        "status" | "metrics"
            if !peer_ip(peer).is_some_and(|ip| shared.settings.status_allow.contains(ip)) =>
        {
            HostAnswer::StatusForbidden.response()
        }
        "status" => Response::json(200, status_json(shared).as_bytes()),
        "metrics" => Response::new(200)
            .with_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            .with_body(metrics_text(shared)),
        _ => HostAnswer::NoEndpoint.response(),
    };
    Some(response)
}

/// The host's stuck workers, and how many workers it has: this process's
/// loops in thread mode, every worker process in service in process mode.
fn stuck_workers(shared: &Sources<'_>) -> (Vec<StuckWorker>, usize) {
    match shared.peers {
        Some(peers) => peers.stuck(),
        None => (shared.board.stuck(shared.stats), shared.board.workers()),
    }
}

/// The name of every mounted app, and the host's own label, sorted.
fn names(shared: &Sources<'_>) -> Vec<String> {
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
struct WorkerView {
    worker: usize,
    counts: Counts,
    process: Option<(u32, u64)>,
}

/// The whole host's counters: each worker's (each loop's in thread mode,
/// each worker process's in process mode), and their total (with the
/// workers that have ended, in process mode).
struct View {
    workers: Vec<WorkerView>,
    total: Counts,
}

fn view(shared: &Sources<'_>) -> View {
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
fn logs(shared: &Sources<'_>, view: &View) -> Vec<(&'static str, LineCounts)> {
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
fn log_refs<'a>(logs: &'a [(&'static str, LineCounts)]) -> Vec<(&'static str, &'a LineCounts)> {
    logs.iter().map(|(name, c)| (*name, c)).collect()
}

/// A Prometheus label value: backslash, double quote and newline escaped
/// (an app's name is the plugin's to choose).
pub(crate) fn label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::label;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(label("plain"), "plain");
        assert_eq!(label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}

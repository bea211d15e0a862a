//! The host's own endpoints under `/.well-known/stoa/`, answered before
//! any mount: health, readiness, status (JSON) and metrics (Prometheus).

use crate::apps::pool::Pool;
use crate::apps::registry::mapped_bytes;
use crate::apps::registry::{AppState, AppTable};
use crate::budget::{Budget, Refusal};
use crate::control::Control;
use crate::http::answer::HostAnswer;
use crate::ops::access_log::AccessLog;
use crate::ops::log_writer::{self, LineCounts};
use crate::ops::netfilter::peer_ip;
use crate::ops::survival;
use crate::ops::watchdog::Board;
use crate::settings::Settings;
use crate::stats::Stats;
use crate::stats::{AppStats, WorkerStats, APP_SLOTS, LATENCY_BUCKETS};
use serde_json::{json, Value};
use std::fmt::Write;
use std::sync::atomic::Ordering::Relaxed;
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
    pub control: &'a Control,
    pub board: &'a Board,
    pub stats: &'a Stats,
    pub budget: &'a Budget,
}

/// Answers a host endpoint, or `None` if `path` is not one.
pub fn answer(shared: &Sources<'_>, path: &str, peer: &str) -> Option<Response> {
    let name = path.strip_prefix(PREFIX)?;
    let response = match name {
        "health" => match shared.board.unhealthy() {
            Some(why) => HostAnswer::Stuck(why).response(),
            None => Response::text(200, "ok\n"),
        },
        "ready" if shared.control.draining() => HostAnswer::Draining.response(),
        "ready" if !shared.apps.load().starting.is_empty() => {
            HostAnswer::Starting(shared.apps.load().starting.clone()).response()
        }
        "ready" if shared.apps.load().mounts.apps().is_empty() => HostAnswer::NoApps.response(),
        "ready" => match shared.board.not_ready() {
            Some(why) => HostAnswer::Stuck(why).response(),
            None => Response::text(200, "ready\n"),
        },
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

/// `(label, slot)` for every app slot in use, and the host's own slot.
fn slots(shared: &Sources<'_>) -> Vec<(String, Option<usize>)> {
    let mut v: Vec<(String, Option<usize>)> = shared
        .apps
        .load()
        .mounts
        .apps()
        .iter()
        .map(|a| (a.name.clone(), Some(a.slot)))
        .collect();
    v.sort();
    v.dedup();
    v.push(("(host)".to_string(), None));
    v
}

/// The logs that are on, with what became of their lines.
fn logs<'a>(shared: &Sources<'a>) -> Vec<(&'static str, &'a LineCounts)> {
    let error = crate::ops::error_log::counts().map(|c| ("error", c));
    let access = shared.access_log.map(|l| ("access", l.counts()));
    error.into_iter().chain(access).collect()
}

fn sum_app<F: Fn(&AppStats) -> u64>(shared: &Sources<'_>, slot: Option<usize>, f: F) -> u64 {
    shared.stats.workers().iter().map(|w| f(w.app(slot))).sum()
}

/// The status endpoint's document: one section per concern.
fn status_json(shared: &Sources<'_>) -> String {
    let state = shared.apps.load();
    let status = json!({
        "poller": shared.settings.poller,
        "workers": shared.stats.workers().len(),
        "draining": shared.control.draining(),
        "connections": connections_json(shared),
        "streams": {
            "open": shared.stats.workers().iter().map(|w| w.streams.load(Relaxed)).sum::<u64>(),
        },
        "buffered": buffered_json(shared.budget),
        "websockets": {
            "open": shared.stats.workers().iter().map(WorkerStats::websockets).sum::<u64>(),
            "opened": shared.stats.workers().iter().map(|w| w.ws_opened.load(Relaxed)).sum::<u64>(),
        },
        "per_worker": per_worker_json(shared.stats),
        "requests": requests_json(shared),
        "stuck_workers": survival::stuck_json(shared.board, shared.stats),
        "blocking_pool": shared.pool.map(survival::pool_json),
        "apps": apps_json(&state),
        "refused": refused_json(&state),
        "apps_scan_failures": state.scan_failures,
        "apps_scan_error": state.scan_error,
        "constructing": state.constructing.iter()
            .map(|c| json!({"app": c.app, "file": c.file.display().to_string()}))
            .collect::<Vec<_>>(),
        "starting": state.starting,
        "generations": generations_json(&state),
        "logs": log_writer::status_json(&logs(shared)),
    });
    status.to_string()
}

/// Connections summed over the workers, with the cap and what is done past it.
fn connections_json(shared: &Sources<'_>) -> Value {
    let workers = shared.stats.workers();
    json!({
        "open": workers.iter().map(|w| w.open()).sum::<u64>(),
        "accepted": workers.iter().map(|w| w.accepted.load(Relaxed)).sum::<u64>(),
        "closed": workers.iter().map(|w| w.closed.load(Relaxed)).sum::<u64>(),
        "max": shared.settings.max_connections,
        "overload": shared.settings.overload.name(),
        "shed": workers.iter().map(|w| w.shed.load(Relaxed)).sum::<u64>(),
        "accept_paused_seconds": workers.iter().map(WorkerStats::accept_paused_secs).sum::<f64>(),
    })
}

/// The budget of buffered bodies and messages: held, limit, refusals.
fn buffered_json(budget: &Budget) -> Value {
    json!({
        "bytes": budget.held(),
        "max": budget.limit(),
        "bodies_refused": budget.refused(Refusal::Body),
        "messages_refused": budget.refused(Refusal::Message),
    })
}

/// Each worker's connection counters and requests.
fn per_worker_json(stats: &Stats) -> Vec<Value> {
    stats
        .workers()
        .iter()
        .enumerate()
        .map(|(i, w)| {
            json!({
                "worker": i,
                "accepted": w.accepted.load(Relaxed),
                "closed": w.closed.load(Relaxed),
                "open": w.open(),
                "websockets": w.websockets(),
                "shed": w.shed.load(Relaxed),
                "accept_paused_seconds": w.accept_paused_secs(),
                "requests": w.requests(),
            })
        })
        .collect()
}

/// Requests by app (and the host's own): by status class, and their mean
/// latency.
fn requests_json(shared: &Sources<'_>) -> serde_json::Map<String, Value> {
    slots(shared)
        .into_iter()
        .map(|(name, slot)| {
            let class = |i: usize| sum_app(shared, slot, |a| a.by_class[i].load(Relaxed));
            let total = sum_app(shared, slot, AppStats::requests);
            let sum_us = sum_app(shared, slot, |a| a.latency_sum_us.load(Relaxed));
            let v = json!({
                "requests": total,
                "1xx": class(0), "2xx": class(1), "3xx": class(2), "4xx": class(3), "5xx": class(4),
                "mean_latency_ms": if total > 0 { sum_us as f64 / total as f64 / 1000.0 } else { 0.0 },
            });
            (name, v)
        })
        .collect()
}

/// The mounted apps.
fn apps_json(state: &AppState) -> Vec<Value> {
    state
        .mounts
        .apps()
        .iter()
        .map(|a| {
            json!({
                "name": a.name, "version": a.version,
                "mount": if a.mount.is_empty() { "/" } else { a.mount.as_str() },
                "file": a.file.display().to_string(),
            })
        })
        .collect()
}

/// The plugins refused, with why.
fn refused_json(state: &AppState) -> Vec<Value> {
    state
        .refused
        .iter()
        .map(|r| json!({"file": r.file.display().to_string(), "reason": r.reason.to_string()}))
        .collect()
}

/// Every library generation still mapped.
fn generations_json(state: &AppState) -> Vec<Value> {
    state
        .retained
        .iter()
        .map(|g| {
            json!({
                "app": g.app, "version": g.version, "file": g.file.display().to_string(),
                "generation": g.generation, "mapped_bytes": mapped_bytes(&g.mapping),
            })
        })
        .collect()
}

/// A Prometheus label value: backslash, double quote and newline escaped
/// (an app's name is the plugin's to choose).
fn label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The metrics endpoint's text, one family after another.
fn metrics_text(shared: &Sources<'_>) -> String {
    let mut out = String::new();
    info_metrics(shared, &mut out);
    connection_metrics(shared, &mut out);
    buffered_metrics(shared.budget, &mut out);
    let slots = slots(shared);
    request_metrics(shared, &slots, &mut out);
    latency_metrics(shared, &slots, &mut out);
    if let Some(pool) = shared.pool {
        let _ = writeln!(
            out,
            "# TYPE stoa_blocking_queue_depth gauge\nstoa_blocking_queue_depth {}",
            pool.queued()
        );
    }
    survival::metrics(shared.board, shared.stats, shared.pool, &slots, &mut out);
    app_table_metrics(&shared.apps.load(), &mut out);
    log_writer::metrics(&logs(shared), &mut out);
    debug_assert!(slots.len() <= APP_SLOTS + 1);
    out
}

/// The host's poller and worker count, and whether it is draining.
fn info_metrics(shared: &Sources<'_>, out: &mut String) {
    let _ = writeln!(out, "# TYPE stoa_info gauge");
    let _ = writeln!(
        out,
        "stoa_info{{poller=\"{}\",workers=\"{}\"}} 1",
        shared.settings.poller,
        shared.stats.workers().len()
    );
    let _ = writeln!(
        out,
        "# TYPE stoa_draining gauge\nstoa_draining {}",
        u8::from(shared.control.draining())
    );
}

/// Connections, streams and WebSockets per worker, what was shed past the
/// cap, the time accepting was paused, and the cap.
fn connection_metrics(shared: &Sources<'_>, out: &mut String) {
    type Field = fn(&WorkerStats) -> u64;
    let per_worker: [(&str, &str, Field); 6] = [
        ("stoa_connections_open", "gauge", WorkerStats::open),
        ("stoa_streams_open", "gauge", |w| w.streams.load(Relaxed)),
        ("stoa_websockets_open", "gauge", WorkerStats::websockets),
        ("stoa_connections_accepted_total", "counter", |w| {
            w.accepted.load(Relaxed)
        }),
        ("stoa_connections_closed_total", "counter", |w| {
            w.closed.load(Relaxed)
        }),
        ("stoa_connections_shed_total", "counter", |w| {
            w.shed.load(Relaxed)
        }),
    ];
    for (metric, kind, field) in per_worker {
        let _ = writeln!(out, "# TYPE {metric} {kind}");
        for (i, w) in shared.stats.workers().iter().enumerate() {
            let _ = writeln!(out, "{metric}{{worker=\"{i}\"}} {}", field(w));
        }
    }
    let _ = writeln!(out, "# TYPE stoa_accept_paused_seconds_total counter");
    for (i, w) in shared.stats.workers().iter().enumerate() {
        let secs = w.accept_paused_secs();
        let _ = writeln!(
            out,
            "stoa_accept_paused_seconds_total{{worker=\"{i}\"}} {secs}"
        );
    }
    let _ = writeln!(
        out,
        "# TYPE stoa_connections_max gauge\nstoa_connections_max {}",
        shared.settings.max_connections
    );
}

/// Requests by app and status class.
fn request_metrics(shared: &Sources<'_>, slots: &[(String, Option<usize>)], out: &mut String) {
    let _ = writeln!(out, "# TYPE stoa_requests_total counter");
    for (name, slot) in slots {
        for (i, class) in ["1xx", "2xx", "3xx", "4xx", "5xx"].iter().enumerate() {
            let v = sum_app(shared, *slot, |a| a.by_class[i].load(Relaxed));
            let _ = writeln!(
                out,
                "stoa_requests_total{{app=\"{}\",class=\"{class}\"}} {v}",
                label(name)
            );
        }
    }
}

/// The request duration histogram of each app.
fn latency_metrics(shared: &Sources<'_>, slots: &[(String, Option<usize>)], out: &mut String) {
    let _ = writeln!(out, "# TYPE stoa_request_duration_seconds histogram");
    for (name, slot) in slots {
        let mut cumulative = 0;
        for (i, le) in LATENCY_BUCKETS
            .iter()
            .map(|b| b.to_string())
            .chain(["+Inf".to_string()])
            .enumerate()
        {
            cumulative += sum_app(shared, *slot, |a| a.latency[i].load(Relaxed));
            let _ = writeln!(
                out,
                "stoa_request_duration_seconds_bucket{{app=\"{}\",le=\"{le}\"}} {cumulative}",
                label(name)
            );
        }
        let sum = sum_app(shared, *slot, |a| a.latency_sum_us.load(Relaxed)) as f64 / 1e6;
        let _ = writeln!(
            out,
            "stoa_request_duration_seconds_sum{{app=\"{}\"}} {sum}",
            label(name)
        );
        let _ = writeln!(
            out,
            "stoa_request_duration_seconds_count{{app=\"{}\"}} {cumulative}",
            label(name)
        );
    }
}

/// The apps mounted, the plugins refused and the failed scans.
fn app_table_metrics(state: &AppState, out: &mut String) {
    let _ = writeln!(
        out,
        "# TYPE stoa_apps_loaded gauge\nstoa_apps_loaded {}",
        state.mounts.apps().len()
    );
    let _ = writeln!(
        out,
        "# TYPE stoa_plugins_refused gauge\nstoa_plugins_refused {}",
        state.refused.len()
    );
    let _ = writeln!(
        out,
        "# TYPE stoa_apps_scan_failures_total counter\nstoa_apps_scan_failures_total {}",
        state.scan_failures
    );
}

/// The budget of buffered bodies and messages: held, limit, refusals.
fn buffered_metrics(budget: &Budget, out: &mut String) {
    let _ = writeln!(
        out,
        "# TYPE stoa_buffered_bytes gauge\nstoa_buffered_bytes {}\n\
         # TYPE stoa_buffered_max_bytes gauge\nstoa_buffered_max_bytes {}\n\
         # TYPE stoa_buffered_refused_total counter\n\
         stoa_buffered_refused_total{{kind=\"body\"}} {}\n\
         stoa_buffered_refused_total{{kind=\"message\"}} {}",
        budget.held(),
        budget.limit(),
        budget.refused(Refusal::Body),
        budget.refused(Refusal::Message)
    );
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

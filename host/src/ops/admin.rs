//! The host's own endpoints under `/.well-known/stoa/`, answered before
//! any mount: health, readiness, status (JSON) and metrics (Prometheus).

use crate::apps::plugin_copy::mapped_bytes;
use crate::apps::pool::Pool;
use crate::apps::registry::{AppState, AppTable};
use crate::budget::{Budget, Refusal};
use crate::control::Control;
use crate::http::answer::HostAnswer;
use crate::listen::tls::expiry::unix_now;
use crate::ops::access_log::AccessLog;
use crate::ops::certificates;
use crate::ops::log_writer::{self, LineCounts};
use crate::ops::netfilter::peer_ip;
use crate::ops::peers::{process_counts, Peer, Peers, SupervisorNotes};
use crate::ops::prometheus::label;
use crate::ops::stuck::{not_ready, unhealthy, StuckWorker};
use crate::ops::survival;
use crate::ops::watchdog::Board;
use crate::settings::Settings;
use crate::stats::Stats;
use crate::stats::{AppCounts, Counts, HandshakeFailure, APP_SLOTS, HOST, LATENCY_BUCKETS};
use serde_json::{json, Value};
use std::fmt::Write;
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

/// The status endpoint's document: one section per concern.
fn status_json(shared: &Sources<'_>) -> String {
    let state = shared.apps.load();
    let view = view(shared);
    let notes = shared.peers.map(Peers::supervisor).unwrap_or_default();
    let live = |f: fn(&Counts) -> u64| view.workers.iter().map(|w| f(&w.counts)).sum::<u64>();
    let status = json!({
        "poller": shared.settings.poller,
        "worker_mode": if shared.peers.is_some() { "process" } else { "thread" },
        "workers": if shared.peers.is_some() { view.workers.len() } else { shared.stats.workers().len() },
        "draining": shared.control.draining(),
        "connections": connections_json(shared, &view),
        "streams": {
            "open": live(|c| c.streams),
        },
        "buffered": buffered_json(shared.budget),
        "websockets": {
            "open": live(Counts::websockets),
            "opened": view.total.ws_opened,
        },
        "per_worker": per_worker_json(&view, &notes),
        "supervisor": shared.peers.map(|_| supervisor_json(&notes)),
        "requests": requests_json(shared, &view),
        "stuck_workers": survival::stuck_json(&stuck_workers(shared).0),
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
        "logs": log_writer::status_json(&log_refs(&logs(shared, &view))),
        "tls_certificates": certificates::status_json(shared.tls, unix_now()),
    });
    status.to_string()
}

/// Connections summed over the workers, with the cap and what is done past it.
fn connections_json(shared: &Sources<'_>, view: &View) -> Value {
    let total = &view.total;
    json!({
        "open": view.workers.iter().map(|w| w.counts.open()).sum::<u64>(),
        "accepted": total.accepted,
        "closed": total.closed,
        "max": shared.settings.max_connections,
        "overload": shared.settings.overload.name(),
        "shed": total.shed,
        "accept_paused_seconds": total.accept_paused_secs,
        "tls_handshake_failures": tls_failures_json(total),
    })
}

/// Failed TLS handshakes by kind, every kind named (0 for none).
fn tls_failures_json(total: &Counts) -> serde_json::Map<String, Value> {
    HandshakeFailure::ALL
        .iter()
        .map(|&k| (k.name().to_string(), json!(total.tls_failed(k))))
        .collect()
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

/// Each worker's connection counters and requests (and in process mode
/// its pid, resident memory and the crashes of its place).
fn per_worker_json(view: &View, notes: &SupervisorNotes) -> Vec<Value> {
    view.workers
        .iter()
        .map(|w| {
            let c = &w.counts;
            let mut v = json!({
                "worker": w.worker,
                "accepted": c.accepted,
                "closed": c.closed,
                "open": c.open(),
                "websockets": c.websockets(),
                "shed": c.shed,
                "accept_paused_seconds": c.accept_paused_secs,
                "requests": c.requests(),
                "tls_handshake_failures": c.tls_failures.values().sum::<u64>(),
            });
            if let (Some((pid, rss)), Some(map)) = (w.process, v.as_object_mut()) {
                let of = |v: &[u64]| v.get(w.worker).copied().unwrap_or(0);
                map.insert("pid".into(), json!(pid));
                map.insert("rss_bytes".into(), json!(rss));
                map.insert("generation".into(), json!(of(&notes.started_by_place)));
                map.insert("crashes".into(), json!(of(&notes.crashes_by_place)));
                map.insert("blocking_pool".into(), json!(c.pool));
                let logs: serde_json::Map<String, Value> = c
                    .logs
                    .iter()
                    .map(|(name, [written, dropped, errors])| {
                        let v =
                            json!({"written": written, "dropped": dropped, "write_errors": errors});
                        (name.clone(), v)
                    })
                    .collect();
                map.insert("logs".into(), logs.into());
            }
            v
        })
        .collect()
}

/// What the supervisor counted: crashes by app and by worker.
fn supervisor_json(notes: &SupervisorNotes) -> Value {
    json!({
        "pid": notes.pid,
        "workers_started": notes.started,
        "crashes": notes.crashes_by_place.iter().sum::<u64>(),
        "crashes_by_app": notes.crashes_by_app,
        "crashes_by_worker": notes.crashes_by_place,
        "quarantined": notes.quarantined.iter().map(|q| json!({
            "app": q.app, "digest": q.digest, "crashes": q.crashes,
            "window_seconds": q.window_secs, "why": q.why(),
        })).collect::<Vec<_>>(),
    })
}

/// Requests by app (and the host's own): by status class, and their mean
/// latency.
fn requests_json(shared: &Sources<'_>, view: &View) -> serde_json::Map<String, Value> {
    names(shared)
        .into_iter()
        .map(|name| {
            let a = view.total.app(&name);
            let total = a.requests();
            let c = a.by_class;
            let v = json!({
                "requests": total,
                "1xx": c[0], "2xx": c[1], "3xx": c[2], "4xx": c[3], "5xx": c[4],
                "mean_latency_ms": if total > 0 { a.latency_sum_us as f64 / total as f64 / 1000.0 } else { 0.0 },
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

/// The metrics endpoint's text, one family after another.
fn metrics_text(shared: &Sources<'_>) -> String {
    let mut out = String::new();
    let view = view(shared);
    info_metrics(shared, &view, &mut out);
    connection_metrics(shared, &view, &mut out);
    tls_metrics(&view.total, &mut out);
    buffered_metrics(shared.budget, &mut out);
    let names = names(shared);
    request_metrics(&view, &names, &mut out);
    byte_metrics(&view, &names, &mut out);
    latency_metrics(&view, &names, &mut out);
    if let Some(peers) = shared.peers {
        crash_metrics(&peers.supervisor(), &mut out);
    }
    if let Some(pool) = shared.pool {
        let _ = writeln!(
            out,
            "# TYPE stoa_blocking_queue_depth gauge\nstoa_blocking_queue_depth {}",
            pool.queued()
        );
    }
    let slots = slots_of(shared);
    let stuck = stuck_workers(shared).0;
    let workers: Vec<usize> = match shared.peers {
        Some(_) => view.workers.iter().map(|w| w.worker).collect(),
        None => (0..shared.stats.workers().len()).collect(),
    };
    survival::metrics(&stuck, &workers, shared.pool, &slots, &mut out);
    app_table_metrics(&shared.apps.load(), &mut out);
    log_writer::metrics(&log_refs(&logs(shared, &view)), &mut out);
    certificates::metrics(shared.tls, unix_now(), &mut out);
    debug_assert!(slots.len() <= APP_SLOTS + 1);
    out
}

/// `(label, slot)` of every mounted app and the host's own, for the
/// watchdog's and the pool's families (counted in this process).
fn slots_of(shared: &Sources<'_>) -> Vec<(String, Option<usize>)> {
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
    v.push((HOST.to_string(), None));
    v
}

/// Process mode: worker processes that died, by app and by worker.
fn crash_metrics(notes: &crate::ops::peers::SupervisorNotes, out: &mut String) {
    let _ = writeln!(out, "# TYPE stoa_worker_crashes_total counter");
    for (app, n) in &notes.crashes_by_app {
        let _ = writeln!(
            out,
            "stoa_worker_crashes_total{{app=\"{}\"}} {n}",
            label(app)
        );
    }
    let _ = writeln!(
        out,
        "# TYPE stoa_workers_started_total counter\nstoa_workers_started_total {}",
        notes.started
    );
    let _ = writeln!(out, "# TYPE stoa_quarantined gauge");
    for q in &notes.quarantined {
        let _ = writeln!(
            out,
            "stoa_quarantined{{app=\"{}\",digest=\"{}\"}} 1",
            label(&q.app),
            q.digest
        );
    }
}

/// The host's poller and worker count, and whether it is draining.
fn info_metrics(shared: &Sources<'_>, view: &View, out: &mut String) {
    let (mode, workers) = match shared.peers {
        Some(_) => ("process", view.workers.len()),
        None => ("thread", shared.stats.workers().len()),
    };
    let _ = writeln!(out, "# TYPE stoa_info gauge");
    let _ = writeln!(
        out,
        "stoa_info{{poller=\"{}\",workers=\"{workers}\",worker_mode=\"{mode}\"}} 1",
        shared.settings.poller,
    );
    let _ = writeln!(
        out,
        "# TYPE stoa_draining gauge\nstoa_draining {}",
        u8::from(shared.control.draining())
    );
}

/// Connections, streams and WebSockets per worker, what was shed past the
/// cap, the time accepting was paused, and the cap. (In process mode the
/// counters of workers that have ended are in no worker's series; the
/// requests families include them.)
fn connection_metrics(shared: &Sources<'_>, view: &View, out: &mut String) {
    type Field = fn(&Counts) -> u64;
    let per_worker: [(&str, &str, Field); 6] = [
        ("stoa_connections_open", "gauge", Counts::open),
        ("stoa_streams_open", "gauge", |c| c.streams),
        ("stoa_websockets_open", "gauge", Counts::websockets),
        ("stoa_connections_accepted_total", "counter", |c| c.accepted),
        ("stoa_connections_closed_total", "counter", |c| c.closed),
        ("stoa_connections_shed_total", "counter", |c| c.shed),
    ];
    for (metric, kind, field) in per_worker {
        let _ = writeln!(out, "# TYPE {metric} {kind}");
        for w in &view.workers {
            let _ = writeln!(out, "{metric}{{{}}} {}", worker_labels(w), field(&w.counts));
        }
    }
    let _ = writeln!(out, "# TYPE stoa_accept_paused_seconds_total counter");
    for w in &view.workers {
        let _ = writeln!(
            out,
            "stoa_accept_paused_seconds_total{{{}}} {}",
            worker_labels(w),
            w.counts.accept_paused_secs
        );
    }
    if shared.peers.is_some() {
        let _ = writeln!(out, "# TYPE stoa_worker_resident_bytes gauge");
        for w in &view.workers {
            if let Some((pid, rss)) = w.process {
                let _ = writeln!(
                    out,
                    "stoa_worker_resident_bytes{{worker=\"{}\",pid=\"{pid}\"}} {rss}",
                    w.worker
                );
            }
        }
    }
    let _ = writeln!(
        out,
        "# TYPE stoa_connections_max gauge\nstoa_connections_max {}",
        shared.settings.max_connections
    );
}

/// Failed TLS handshakes by kind, summed over the workers (in process
/// mode, the ones that have ended too).
fn tls_metrics(total: &Counts, out: &mut String) {
    let _ = writeln!(out, "# TYPE stoa_tls_handshake_failures_total counter");
    for kind in HandshakeFailure::ALL {
        let _ = writeln!(
            out,
            "stoa_tls_handshake_failures_total{{kind=\"{}\"}} {}",
            kind.name(),
            total.tls_failed(kind)
        );
    }
}

/// A worker's series labels: its index, and in process mode its pid (a
/// worker being replaced and its replacement share the index).
fn worker_labels(w: &WorkerView) -> String {
    match w.process {
        Some((pid, _)) => format!("worker=\"{}\",pid=\"{pid}\"", w.worker),
        None => format!("worker=\"{}\"", w.worker),
    }
}

/// Requests by app and status class.
fn request_metrics(view: &View, names: &[String], out: &mut String) {
    let _ = writeln!(out, "# TYPE stoa_requests_total counter");
    for name in names {
        let a = view.total.app(name);
        for (i, class) in ["1xx", "2xx", "3xx", "4xx", "5xx"].iter().enumerate() {
            let _ = writeln!(
                out,
                "stoa_requests_total{{app=\"{}\",class=\"{class}\"}} {}",
                label(name),
                a.by_class[i]
            );
        }
    }
}

/// Response body bytes by app: an answer's as queued, a streamed
/// answer's or a WebSocket's as sent, added when it ends.
fn byte_metrics(view: &View, names: &[String], out: &mut String) {
    let _ = writeln!(out, "# TYPE stoa_response_bytes_total counter");
    for name in names {
        let _ = writeln!(
            out,
            "stoa_response_bytes_total{{app=\"{}\"}} {}",
            label(name),
            view.total.app(name).bytes
        );
    }
}

/// The request duration histogram of each app.
fn latency_metrics(view: &View, names: &[String], out: &mut String) {
    let _ = writeln!(out, "# TYPE stoa_request_duration_seconds histogram");
    for name in names {
        let a: AppCounts = view.total.app(name);
        let mut cumulative = 0;
        for (le, n) in LATENCY_BUCKETS
            .iter()
            .map(|b| b.to_string())
            .chain(["+Inf".to_string()])
            .zip(a.buckets())
        {
            cumulative += n;
            let _ = writeln!(
                out,
                "stoa_request_duration_seconds_bucket{{app=\"{}\",le=\"{le}\"}} {cumulative}",
                label(name)
            );
        }
        let sum = a.latency_sum_us as f64 / 1e6;
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

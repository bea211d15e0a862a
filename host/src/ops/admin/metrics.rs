//! The metrics endpoint's text (Prometheus exposition format), one family
//! after another, from one view of the workers.

use crate::apps::registry::AppState;
use crate::budget::{Budget, Refusal};
use crate::http::h2::ErrorCode;
use crate::listen::tls::expiry::unix_now;
use crate::ops::certificates;
use crate::ops::log_writer;
use crate::ops::survival;
use crate::stats::{AppCounts, Counts, HandshakeFailure, APP_SLOTS, HOST, LATENCY_BUCKETS};
use std::fmt::Write;

use super::view::{log_refs, logs, names, stuck_workers, view, Sources, View, WorkerView};
use crate::ops::prometheus::label;

/// The metrics endpoint's text, one family after another.
pub(super) fn metrics_text(shared: &Sources<'_>) -> String {
    let mut out = String::new();
    let view = view(shared);
    info_metrics(shared, &view, &mut out);
    connection_metrics(shared, &view, &mut out);
    tls_metrics(&view.total, &mut out);
    h2_metrics(&view, &mut out);
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

/// HTTP/2 connections (open, and ever), streams, refusals, and the
/// RST_STREAM and GOAWAY frames each way by error code (every code named,
/// 0 for none).
fn h2_metrics(view: &View, out: &mut String) {
    let total = &view.total.h2;
    let open: u64 = view.workers.iter().map(|w| w.counts.h2.open()).sum();
    let _ = writeln!(
        out,
        "# TYPE stoa_h2_connections_open gauge\nstoa_h2_connections_open {open}"
    );
    for (name, n) in [
        ("stoa_h2_connections_total", total.opened),
        ("stoa_h2_streams_total", total.frames.streams),
        ("stoa_h2_streams_refused_total", total.frames.refused),
    ] {
        let _ = writeln!(out, "# TYPE {name} counter\n{name} {n}");
    }
    let families = [
        (
            "stoa_h2_resets_total",
            [
                ("sent", &total.frames.resets_sent),
                ("received", &total.frames.resets_received),
            ],
        ),
        (
            "stoa_h2_goaways_total",
            [
                ("sent", &total.frames.goaways_sent),
                ("received", &total.frames.goaways_received),
            ],
        ),
    ];
    for (name, ways) in families {
        let _ = writeln!(out, "# TYPE {name} counter");
        for (way, by_code) in ways {
            for (code, n) in ErrorCode::ALL.iter().zip(by_code) {
                let _ = writeln!(
                    out,
                    "{name}{{direction=\"{way}\",code=\"{}\"}} {n}",
                    code.name()
                );
            }
        }
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
         stoa_buffered_refused_total{{kind=\"message\"}} {}\n\
         stoa_buffered_refused_total{{kind=\"stream\"}} {}",
        budget.held(),
        budget.limit(),
        budget.refused(Refusal::Body),
        budget.refused(Refusal::Message),
        budget.refused(Refusal::Stream)
    );
}

//! The status endpoint's JSON: the host, its workers, apps, logs and
//! certificates, from one view of the workers.

use crate::apps::plugin_copy::mapped_bytes;
use crate::apps::registry::AppState;
use crate::budget::{Budget, Refusal};
use crate::http::h2::ErrorCode;
use crate::listen::tls::expiry::unix_now;
use crate::ops::certificates;
use crate::ops::log_writer;
use crate::ops::peers::{Peers, SupervisorNotes};
use crate::ops::survival;
use crate::stats::{ByCode, Counts, HandshakeFailure};
use serde_json::{json, Value};

use super::view::{log_refs, logs, names, stuck_workers, view, Sources, View};

/// The status endpoint's document: one section per concern.
pub(super) fn status_json(shared: &Sources<'_>) -> String {
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
        "http2": http2_json(&view),
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

/// HTTP/2 connections (open, and ever), streams and refusals, and the
/// RST_STREAM and GOAWAY frames each way by error code (a code none was
/// counted with is left out).
fn http2_json(view: &View) -> Value {
    let total = &view.total.h2.frames;
    json!({
        "connections_open": view.workers.iter().map(|w| w.counts.h2.open()).sum::<u64>(),
        "connections": view.total.h2.opened,
        "streams": total.streams,
        "streams_refused": total.refused,
        "resets_sent": by_code(&total.resets_sent),
        "resets_received": by_code(&total.resets_received),
        "goaways_sent": by_code(&total.goaways_sent),
        "goaways_received": by_code(&total.goaways_received),
    })
}

/// Counts by HTTP/2 error code name, the codes counted only.
fn by_code(counts: &ByCode) -> serde_json::Map<String, Value> {
    ErrorCode::ALL
        .iter()
        .zip(counts)
        .filter(|(_, n)| **n > 0)
        .map(|(code, n)| (code.name().to_string(), json!(n)))
        .collect()
}

/// The budget of buffered bodies and messages: held, limit, refusals.
fn buffered_json(budget: &Budget) -> Value {
    json!({
        "bytes": budget.held(),
        "max": budget.limit(),
        "bodies_refused": budget.refused(Refusal::Body),
        "messages_refused": budget.refused(Refusal::Message),
        "streams_refused": budget.refused(Refusal::Stream),
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

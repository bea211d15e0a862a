//! What status and metrics show of the host's survival machinery: stuck
//! workers (from the watchdog) and the blocking pool's use per app.

use crate::apps::pool::{Pool, Usage};
use crate::ops::prometheus::label;
use crate::ops::stuck::StuckWorker;
use serde_json::{json, Value};
use std::fmt::Write;

/// The workers the watchdog found stuck, with how long and where.
pub fn stuck_json(stuck: &[StuckWorker]) -> Value {
    stuck
        .iter()
        .map(|s| {
            let mut v = json!({
                "worker": s.worker,
                "stuck_seconds": s.stuck_for.as_secs_f64(),
                "in": s.place,
            });
            if let (Some(pid), Some(map)) = (s.pid, v.as_object_mut()) {
                map.insert("pid".into(), json!(pid));
            }
            v
        })
        .collect()
}

/// The pool's size, shares and per-app busy, stuck and waiting jobs.
pub fn pool_json(pool: &Pool) -> Value {
    let apps: serde_json::Map<String, Value> = pool
        .usage()
        .into_iter()
        .map(|u| {
            let v = json!({"busy": u.busy, "stuck": u.stuck, "queued": u.queued});
            (u.name, v)
        })
        .collect();
    json!({
        "threads": pool.threads(),
        "temporary_threads": pool.temporary_threads(),
        "queued": pool.queued(),
        "share_percent": pool.share_percent(),
        "threads_per_app": pool.group_threads(),
        "queue_per_app": pool.group_queue(),
        "apps": apps,
    })
}

/// Prometheus gauges: stuck workers, the pool's temporary threads, and its
/// busy, stuck and waiting jobs for every mounted app (zero when idle) and
/// any other user.
pub fn metrics(
    stuck: &[StuckWorker],
    workers: &[usize],
    pool: Option<&Pool>,
    slots: &[(String, Option<usize>)],
    out: &mut String,
) {
    let _ = writeln!(out, "# TYPE stoa_worker_stuck gauge");
    for &worker in workers {
        let v = u8::from(stuck.iter().any(|s| s.worker == worker));
        let _ = writeln!(out, "stoa_worker_stuck{{worker=\"{worker}\"}} {v}");
    }
    let Some(pool) = pool else {
        return;
    };
    let _ = writeln!(out, "# TYPE stoa_blocking_temporary_threads gauge");
    let _ = writeln!(
        out,
        "stoa_blocking_temporary_threads {}",
        pool.temporary_threads()
    );
    let mut usage = pool.usage();
    for (name, slot) in slots {
        if slot.is_some() && !usage.iter().any(|u| &u.name == name) {
            usage.push(Usage {
                name: name.clone(),
                busy: 0,
                stuck: 0,
                queued: 0,
            });
        }
    }
    let metrics = [
        "stoa_blocking_busy",
        "stoa_blocking_stuck",
        "stoa_blocking_waiting",
    ];
    for (i, metric) in metrics.iter().enumerate() {
        let _ = writeln!(out, "# TYPE {metric} gauge");
        for u in &usage {
            let v = [u.busy, u.stuck, u.queued][i];
            app_gauge(out, metric, &u.name, v);
        }
    }
}

/// One app's gauge line, its name escaped as a label value (an app's name
/// is the plugin's to choose).
fn app_gauge(out: &mut String, metric: &str, app: &str, value: impl std::fmt::Display) {
    let _ = writeln!(out, "{metric}{{app=\"{}\"}} {value}", label(app));
}

#[cfg(test)]
mod tests {
    use super::app_gauge;

    #[test]
    fn an_app_name_is_escaped_in_the_blocking_gauges() {
        let mut out = String::new();
        app_gauge(&mut out, "stoa_blocking_busy", "a\"b\\c", 2);
        assert_eq!(out, "stoa_blocking_busy{app=\"a\\\"b\\\\c\"} 2\n");
    }
}

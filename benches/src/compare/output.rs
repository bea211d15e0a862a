//! The comparison as text: markdown tables (the matrix, then the
//! idle-connections scenario) and one CSV with every figure per point.

use super::{Point, Run};
use crate::load::{ErrorKind, PERCENTILES};
use std::fmt::Write;

/// Markdown tables of all points; figures are the median run's unless the
/// column says "best".
pub fn markdown(points: &[Point]) -> String {
    let mut out = String::new();
    let sweep: Vec<&Point> = points.iter().filter(|p| p.idle.is_none()).collect();
    if !sweep.is_empty() {
        out.push_str(
            "| server | worker mode | path | mode | conc | requests | req/s median | req/s best | p50 ms | p99 ms | max ms | errors | complete | CPU us/req | peak RSS MiB |\n\
             |---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|\n",
        );
        for p in sweep {
            let m = p.median();
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                p.server,
                p.worker_mode_name(),
                p.path,
                p.mode.name(),
                p.concurrency,
                p.requests,
                rps(m.map(|r| r.report.req_per_sec())),
                rps(Some(p.best_rps()).filter(|_| m.is_some())),
                ms(m.map(|r| r.report.percentile_ms(50.0))),
                ms(m.map(|r| r.report.percentile_ms(99.0))),
                ms(m.map(|r| r.report.percentile_ms(100.0))),
                p.errors(),
                complete(p),
                opt(m.and_then(cpu_us_per_req), 2),
                opt(p.peak_rss_kib.map(|k| k as f64 / 1024.0), 1),
            );
        }
    }
    let idle: Vec<&Point> = points.iter().filter(|p| p.idle.is_some()).collect();
    if !idle.is_empty() {
        out.push_str(
            "\n| server | worker mode | path | idle conns | active | req/s median | req/s best | vs 0 idle | p99 ms | errors | complete | RSS with none KiB | RSS with idle KiB | bytes per idle conn |\n\
             |---|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|\n",
        );
        for p in &idle {
            let m = p.median();
            let base = idle
                .iter()
                .find(|q| {
                    q.server == p.server && q.worker_mode == p.worker_mode && q.idle == Some(0)
                })
                .and_then(|q| q.median())
                .map(|r| r.report.req_per_sec());
            let ratio = m
                .zip(base)
                .and_then(|(r, b)| (b > 0.0).then(|| r.report.req_per_sec() / b));
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                p.server,
                p.worker_mode_name(),
                p.path,
                p.idle.unwrap_or(0),
                p.concurrency,
                rps(m.map(|r| r.report.req_per_sec())),
                rps(Some(p.best_rps()).filter(|_| m.is_some())),
                opt(ratio, 2),
                ms(m.map(|r| r.report.percentile_ms(99.0))),
                p.errors(),
                complete(p),
                opt(p.rss_before_kib.map(|k| k as f64), 0),
                opt(p.rss_idle_kib.map(|k| k as f64), 0),
                opt(bytes_per_idle(p), 0),
            );
        }
    }
    let notes: Vec<String> = points
        .iter()
        .filter_map(|p| {
            let n = p.note.as_ref()?;
            let what = match p.idle {
                Some(idle) => format!("idle={idle} active={}", p.concurrency),
                None => format!("{} c={}", p.mode.name(), p.concurrency),
            };
            Some(format!("- {} {} {what}: {n}", p.label(), p.path))
        })
        .collect();
    if !notes.is_empty() {
        out.push('\n');
        out.push_str(&notes.join("\n"));
        out.push('\n');
    }
    out
}

/// One CSV row per point, every percentile and error kind in its own column.
pub fn csv(points: &[Point]) -> String {
    let mut out = String::from(
        "scenario,server,worker_mode,path,mode,concurrency,idle,requests,runs,rps_median,rps_best,bytes_per_sec",
    );
    for p in PERCENTILES {
        let _ = write!(out, ",p{p}_ms");
    }
    out.push_str(",errors");
    for kind in ErrorKind::ALL {
        let _ = write!(out, ",{}", kind.name());
    }
    out.push_str(",complete,server_cpu_ms,cpu_us_per_req,peak_rss_kib,rss_before_kib,rss_idle_kib,bytes_per_idle_conn,note\n");
    for p in points {
        let m = p.median();
        let _ = write!(
            out,
            "{},{},{},{},{},{},{},{},{},{},{},{}",
            if p.idle.is_some() { "idle" } else { "sweep" },
            field(&p.server),
            field(p.worker_mode.as_deref().unwrap_or("")),
            field(&p.path),
            p.mode.name(),
            p.concurrency,
            p.idle.map(|i| i.to_string()).unwrap_or_default(),
            p.requests,
            p.runs.len(),
            opt(m.map(|r| r.report.req_per_sec()), 1),
            opt(Some(p.best_rps()).filter(|_| m.is_some()), 1),
            opt(m.map(|r| r.report.bytes_per_sec()), 0),
        );
        for q in PERCENTILES {
            let _ = write!(out, ",{}", opt(m.map(|r| r.report.percentile_ms(q)), 3));
        }
        let _ = write!(out, ",{}", p.errors());
        for kind in ErrorKind::ALL {
            let n: u64 = p.runs.iter().map(|r| r.report.errors[kind as usize]).sum();
            let _ = write!(out, ",{n}");
        }
        let _ = writeln!(
            out,
            ",{},{},{},{},{},{},{},{}",
            complete(p),
            opt(m.and_then(|r| r.cpu).map(|c| c.as_secs_f64() * 1000.0), 3),
            opt(m.and_then(cpu_us_per_req), 3),
            p.peak_rss_kib.map(|k| k.to_string()).unwrap_or_default(),
            p.rss_before_kib.map(|k| k.to_string()).unwrap_or_default(),
            p.rss_idle_kib.map(|k| k.to_string()).unwrap_or_default(),
            opt(bytes_per_idle(p), 0),
            field(p.note.as_deref().unwrap_or("")),
        );
    }
    out
}

fn cpu_us_per_req(run: &Run) -> Option<f64> {
    let cpu = run.cpu?;
    (run.report.completed > 0).then(|| cpu.as_secs_f64() * 1e6 / run.report.completed as f64)
}

/// Server RSS added per idle connection, in bytes.
pub(super) fn bytes_per_idle(p: &Point) -> Option<f64> {
    let idle = p.idle.filter(|&i| i > 0)?;
    let (before, with) = (p.rss_before_kib?, p.rss_idle_kib?);
    Some(with.saturating_sub(before) as f64 * 1024.0 / idle as f64)
}

fn complete(p: &Point) -> &'static str {
    if p.skipped {
        "skipped"
    } else if p.complete() {
        "yes"
    } else {
        "no"
    }
}

fn rps(v: Option<f64>) -> String {
    opt(v, 0)
}

fn ms(v: Option<f64>) -> String {
    opt(v, 2)
}

fn opt(v: Option<f64>, decimals: usize) -> String {
    v.map(|v| format!("{v:.decimals$}"))
        .unwrap_or_else(|| "-".into())
}

/// A CSV field, quoted when it holds a comma, quote or newline.
fn field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_fields_quote() {
        assert_eq!(field("a,b"), "\"a,b\"");
        assert_eq!(field("x\"y"), "\"x\"\"y\"");
        assert_eq!(field("plain"), "plain");
    }
}

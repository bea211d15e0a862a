//! `stoa-bench compare`: runs `stoa` once per poller backend (and any
//! external peers) through the same matrix of paths, concurrency levels and
//! modes, plus the idle-connections scenario, and writes the results as a
//! markdown table, a CSV file and SVG plots.

mod model;
mod output;
mod plot;

use crate::idle::{wait_until_answers, IdleConns};
use crate::load::{self, Config, Mode};
use crate::procstat;
use crate::server::{prepare_apps, Server};
use crate::target::Target;
use indicatif::{ProgressBar, ProgressStyle};
use std::path::PathBuf;
use std::time::Duration;

pub use model::{Options, Outcome, Peer, Point, Run};
pub use output::{csv, markdown};

/// A server under test, as the sweep sees it.
struct Subject<'a> {
    label: String,
    worker_mode: Option<String>,
    target: Target,
    paths: Vec<String>,
    pid: Option<u32>,
    cap: Option<usize>,
    bar: &'a ProgressBar,
}

/// Runs the comparison.
pub fn run(opts: &Options) -> Result<Outcome, String> {
    if let Some((_, load_cpus)) = &opts.pin {
        crate::affinity::pin_current(&crate::affinity::cpu_set(load_cpus))
            .map_err(|e| format!("pinning the load generator: {e}"))?;
    }
    let apps = opts.work_dir.join("apps");
    prepare_apps(&opts.apps_from, &opts.extra_apps, &apps)?;
    let bar = ProgressBar::new(total_runs(opts));
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} runs {msg}")
            .expect("static progress template")
            .progress_chars("=> "),
    );
    let mut points = Vec::new();
    for backend in &opts.backends {
        for mode in &opts.worker_modes {
            points.extend(run_stoa(opts, &apps, backend, mode.as_deref(), &bar)?);
        }
    }
    for peer in &opts.peers {
        bar.set_message(format!("checking peer {}", peer.name));
        wait_until_answers(&peer.target, Duration::from_secs(10))?;
        let subject = Subject {
            label: peer.name.clone(),
            worker_mode: None,
            target: peer.target.clone(),
            paths: vec![peer.target.path.clone()],
            pid: peer.pid,
            cap: None,
            bar: &bar,
        };
        let idle = idle_scenario(opts, &subject);
        points.extend(sweep(opts, &subject));
        points.extend(idle);
    }
    bar.finish_and_clear();
    Ok(Outcome { points })
}

/// One stoa server (a backend in a worker mode) through the idle scenario
/// and the matrix.
fn run_stoa(
    opts: &Options,
    apps: &std::path::Path,
    backend: &str,
    mode: Option<&str>,
    bar: &ProgressBar,
) -> Result<Vec<Point>, String> {
    let what = match mode {
        Some(mode) => format!("{backend}-{mode}"),
        None => backend.to_string(),
    };
    bar.set_message(format!("starting stoa --poller {backend}"));
    let log = opts.work_dir.join(format!("stoa-{what}.log"));
    let server_cpus = opts.pin.as_ref().map(|(s, _)| &s[..]);
    let mut args = opts.stoa_args.clone();
    if let Some(mode) = mode {
        args.push(format!("--worker-mode={mode}"));
    }
    let server = Server::start(&opts.stoa, apps, backend, server_cpus, &args, log)?;
    let base = Target::parse(&format!("http://127.0.0.1:{}/", server.port))?;
    for path in &opts.paths {
        wait_until_answers(&base.with_path(&ready_path(path)), Duration::from_secs(10))?;
    }
    let subject = Subject {
        label: backend.to_string(),
        worker_mode: mode.map(str::to_string),
        target: base,
        paths: opts.paths.clone(),
        pid: Some(server.pid()),
        cap: server.connection_cap(),
        bar,
    };
    // Idle first, on a fresh server: memory freed by the matrix's
    // connections would otherwise hide what idle connections cost.
    let idle = idle_scenario(opts, &subject);
    let mut points = sweep(opts, &subject);
    points.extend(idle);
    server.stop();
    Ok(points)
}

/// The 1-second demo handler answers at once with `?seconds=0`; the
/// readiness check should not wait for its timer.
fn ready_path(path: &str) -> String {
    if is_slow(path) && !path.contains('?') {
        format!("{path}?seconds=0")
    } else {
        path.to_string()
    }
}

/// Paths whose handler takes a second by design (the seed's async sleep).
fn is_slow(path: &str) -> bool {
    path.contains("sleep-handler")
}

/// Requests per point: the base budget, more at the highest concurrency,
/// and for a 1-second handler five waves of the concurrency at most.
fn requests_for(opts: &Options, path: &str, concurrency: usize) -> u64 {
    let highest = opts
        .concurrency
        .iter()
        .copied()
        .max()
        .unwrap_or(concurrency);
    let base = if concurrency == highest && opts.concurrency.len() > 1 {
        opts.requests_at_max
    } else {
        opts.requests
    };
    if is_slow(path) {
        base.min(concurrency as u64 * 5)
    } else {
        base
    }
}

/// The (path, mode) pairs the matrix runs for `paths`: every pair, except
/// that pipelining skips the 1-second handler (a server answers one
/// connection's pipelined requests in turn, so a batch would take 16 s and
/// measure only the sleep).
fn pairs<'a>(paths: &'a [String], modes: &'a [Mode]) -> impl Iterator<Item = (&'a String, Mode)> {
    paths.iter().flat_map(move |path| {
        modes
            .iter()
            .filter(move |m| !(is_slow(path) && matches!(m, Mode::Pipelined(_))))
            .map(move |&m| (path, m))
    })
}

fn total_runs(opts: &Options) -> u64 {
    let servers = opts.backends.len() * opts.worker_modes.len();
    let rows = if opts.sweep {
        let stoa = servers * pairs(&opts.paths, &opts.modes).count();
        let peers: usize = opts
            .peers
            .iter()
            .map(|p| pairs(std::slice::from_ref(&p.target.path), &opts.modes).count())
            .sum();
        (stoa + peers) * opts.concurrency.len()
    } else {
        0
    };
    let idle = (servers + opts.peers.len()) * opts.idle.len();
    ((rows + idle) * opts.runs) as u64
}

fn sweep(opts: &Options, s: &Subject) -> Vec<Point> {
    let mut points = Vec::new();
    if !opts.sweep {
        return points;
    }
    for (path, mode) in pairs(&s.paths, &opts.modes) {
        for &concurrency in &opts.concurrency {
            let mut point = new_point(opts, s, path, mode, concurrency, None);
            s.bar.set_message(format!(
                "{} {} {path} {} c={concurrency}",
                s.label,
                s.worker_mode.as_deref().unwrap_or(""),
                mode.name()
            ));
            measure(opts, s, &mut point);
            points.push(point);
        }
    }
    points
}

fn idle_scenario(opts: &Options, s: &Subject) -> Vec<Point> {
    let path = s
        .paths
        .iter()
        .find(|p| p.starts_with("/hello"))
        .or(s.paths.first())
        .cloned()
        .unwrap_or_else(|| "/".into());
    let mut points = Vec::new();
    // RSS with no idle connection; each level's growth is measured from it
    // (the allocator reuses what a smaller level freed).
    let baseline = s.pid.and_then(procstat::tree_rss_kib);
    for &idle in &opts.idle {
        let mut point = new_point(
            opts,
            s,
            &path,
            Mode::KeepAlive,
            opts.idle_active,
            Some(idle),
        );
        point.requests = opts.requests;
        if let Some(cap) = s.cap.filter(|&cap| idle + opts.idle_active > cap) {
            point.note = Some(format!("beyond the server's connection cap ({cap})"));
            point.skipped = true;
            s.bar.inc(opts.runs as u64);
            points.push(point);
            continue;
        }
        s.bar.set_message(format!(
            "{} idle={idle} active={}",
            s.label, opts.idle_active
        ));
        point.rss_before_kib = baseline;
        let held = match IdleConns::open(&s.target.with_path(&path), idle, Duration::from_secs(5)) {
            Ok(held) => held,
            Err(e) => {
                point.note = Some(e);
                s.bar.inc(opts.runs as u64);
                points.push(point);
                continue;
            }
        };
        point.rss_idle_kib = s.pid.and_then(procstat::tree_rss_kib);
        measure(opts, s, &mut point);
        let open = held.still_open();
        if open < held.len() && point.note.is_none() {
            point.note = Some(format!(
                "the server closed {} of {} idle connections during the point (keep-alive timeout?)",
                held.len() - open,
                held.len()
            ));
        }
        drop(held);
        points.push(point);
    }
    points
}

fn new_point(
    opts: &Options,
    s: &Subject,
    path: &str,
    mode: Mode,
    concurrency: usize,
    idle: Option<usize>,
) -> Point {
    Point {
        server: s.label.clone(),
        worker_mode: s.worker_mode.clone(),
        path: path.to_string(),
        mode,
        concurrency,
        idle,
        requests: requests_for(opts, path, concurrency),
        runs_wanted: opts.runs,
        runs: Vec::new(),
        peak_rss_kib: None,
        rss_before_kib: None,
        rss_idle_kib: None,
        note: None,
        skipped: false,
    }
}

/// Runs one point `runs` times, with the server's CPU time per run and its
/// peak RSS over the point, each summed over the server's processes.
fn measure(opts: &Options, s: &Subject, point: &mut Point) {
    if let Some(pid) = s.pid {
        procstat::tree_reset_peak(pid);
    }
    let config = Config {
        target: s.target.with_path(&point.path),
        mode: point.mode,
        connections: point.concurrency,
        requests: point.requests,
        max_time: opts.max_time,
        threads: opts.threads,
        timeout: opts.timeout,
        tls: None,
    };
    for _ in 0..opts.runs {
        let cpu_before = s.pid.and_then(procstat::tree_cpu_time);
        match load::run(&config) {
            Ok(report) => {
                let cpu_after = s.pid.and_then(procstat::tree_cpu_time);
                let cpu = cpu_before.zip(cpu_after).map(|(a, b)| b.saturating_sub(a));
                point.runs.push(Run { report, cpu });
            }
            Err(e) => {
                point.note = Some(e);
                s.bar.inc(1);
                break;
            }
        }
        s.bar.inc(1);
        // Let the server finish closing the run's connections.
        std::thread::sleep(opts.settle);
    }
    point.peak_rss_kib = s.pid.and_then(procstat::tree_peak_rss_kib);
}

/// Writes the markdown, CSV and SVG files for `outcome` under `dir` as
/// `NAME.md`, `NAME.csv` and `NAME.svg`; returns the markdown.
pub fn write_outputs(
    outcome: &Outcome,
    dir: &std::path::Path,
    name: &str,
) -> Result<String, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let md = markdown(&outcome.points);
    let write = |file: PathBuf, text: &str| {
        std::fs::write(&file, text).map_err(|e| format!("{}: {e}", file.display()))
    };
    write(dir.join(format!("{name}.md")), &md)?;
    write(dir.join(format!("{name}.csv")), &csv(&outcome.points))?;
    plot::svg(&outcome.points, &dir.join(format!("{name}.svg")))?;
    Ok(md)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slow_paths_get_few_requests() {
        assert_eq!(
            ready_path("/demo/sleep-handler/"),
            "/demo/sleep-handler/?seconds=0"
        );
        assert_eq!(ready_path("/hello/"), "/hello/");
    }
}

//! The comparison's data: its options, the external peers, and the points
//! of the matrix with their runs and the summaries the tables print.

use crate::load::{Mode, Report};
use crate::target::Target;
use std::path::PathBuf;
use std::time::Duration;

/// An externally started server to compare with (`--peer NAME=URL[@PID]`).
#[derive(Clone, Debug)]
pub struct Peer {
    pub name: String,
    pub target: Target,
    /// Its process id, for CPU time and RSS from /proc (summed with its
    /// descendants': a master's workers).
    pub pid: Option<u32>,
}

impl Peer {
    /// Parses `NAME=URL` or `NAME=URL@PID`.
    pub fn parse(s: &str) -> Result<Peer, String> {
        let (name, rest) = s
            .split_once('=')
            .ok_or_else(|| format!("expected NAME=URL[@PID], got {s:?}"))?;
        let (url, pid) = match rest.rsplit_once('@') {
            Some((url, pid)) => (
                url,
                Some(pid.parse().map_err(|_| format!("bad PID in {s:?}"))?),
            ),
            None => (rest, None),
        };
        let target = Target::parse(url)?;
        target.plain_only("compare's --peer")?;
        Ok(Peer {
            name: name.to_string(),
            target,
            pid,
        })
    }
}

/// Everything `compare` needs to know.
#[derive(Clone, Debug)]
pub struct Options {
    pub stoa: PathBuf,
    pub apps_from: PathBuf,
    /// Plugin files served beside the sample apps (`--app`).
    pub extra_apps: Vec<PathBuf>,
    pub backends: Vec<String>,
    /// `--worker-mode` values each backend runs with (thread, process),
    /// or None: the binary has no such flag (one process, threads).
    pub worker_modes: Vec<Option<String>>,
    pub paths: Vec<String>,
    pub concurrency: Vec<usize>,
    pub modes: Vec<Mode>,
    pub requests: u64,
    /// Requests per point at the highest concurrency of the list.
    pub requests_at_max: u64,
    pub runs: usize,
    /// Run the matrix (false: only the idle scenario).
    pub sweep: bool,
    pub idle: Vec<usize>,
    pub idle_active: usize,
    pub peers: Vec<Peer>,
    pub timeout: Duration,
    pub max_time: Duration,
    /// (server CPUs, load CPUs), or None to leave scheduling alone.
    pub pin: Option<(Vec<usize>, Vec<usize>)>,
    pub threads: usize,
    pub stoa_args: Vec<String>,
    pub settle: Duration,
    pub work_dir: PathBuf,
}

/// One measured run.
#[derive(Clone, Debug)]
pub struct Run {
    pub report: Report,
    /// Server CPU time (user + system) during the run, over every process
    /// of the server (a supervisor and its workers).
    pub cpu: Option<Duration>,
}

/// One cell of the matrix: a server, path, mode and load, run `runs` times.
#[derive(Clone, Debug)]
pub struct Point {
    pub server: String,
    /// Stoa's `--worker-mode` (thread, process); None for a peer, or a
    /// stoa without the flag.
    pub worker_mode: Option<String>,
    pub path: String,
    pub mode: Mode,
    pub concurrency: usize,
    /// Idle keep-alive connections held open meanwhile (idle scenario).
    pub idle: Option<usize>,
    pub requests: u64,
    pub runs_wanted: usize,
    pub runs: Vec<Run>,
    /// Server peak RSS during the point, KiB.
    pub peak_rss_kib: Option<u64>,
    /// Idle scenario: server RSS with no idle connection (at the start of
    /// the scenario, on a fresh server), and with this point's ones open.
    pub rss_before_kib: Option<u64>,
    pub rss_idle_kib: Option<u64>,
    /// Why the point was skipped or cut short.
    pub note: Option<String>,
    /// True when the point was skipped by design (beyond a server's cap).
    pub skipped: bool,
}

impl Point {
    /// The server and its worker mode, e.g. `epoll (process)`, or a peer's name.
    pub fn label(&self) -> String {
        match &self.worker_mode {
            Some(mode) => format!("{} ({mode})", self.server),
            None => self.server.clone(),
        }
    }

    /// How the server ran, for the tables: the worker mode, or `-`.
    pub fn worker_mode_name(&self) -> &str {
        self.worker_mode.as_deref().unwrap_or("-")
    }

    /// The run with the median req/s (the lower middle for an even count).
    pub fn median(&self) -> Option<&Run> {
        let mut runs: Vec<&Run> = self.runs.iter().collect();
        runs.sort_by(|a, b| a.report.req_per_sec().total_cmp(&b.report.req_per_sec()));
        runs.get(runs.len().saturating_sub(1) / 2).copied()
    }

    /// The best req/s of the runs (the seed's "best of three").
    pub fn best_rps(&self) -> f64 {
        self.runs
            .iter()
            .map(|r| r.report.req_per_sec())
            .fold(0.0, f64::max)
    }

    /// Errors of every kind over all runs.
    pub fn errors(&self) -> u64 {
        self.runs.iter().map(|r| r.report.error_count()).sum()
    }

    /// All runs done, each finished its whole budget.
    pub fn complete(&self) -> bool {
        self.note.is_none()
            && self.runs.len() == self.runs_wanted
            && self.runs.iter().all(|r| r.report.is_complete())
    }

    /// Complete and error-free, or skipped by design.
    pub fn ok(&self) -> bool {
        self.skipped || (self.complete() && self.errors() == 0)
    }
}

/// What a whole comparison produced.
pub struct Outcome {
    pub points: Vec<Point>,
}

impl Outcome {
    /// True when every point is complete and error-free (or skipped by design).
    pub fn all_ok(&self) -> bool {
        self.points.iter().all(Point::ok)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peers_parse() {
        let p = Peer::parse("nginx=http://127.0.0.1:8080/@1234").unwrap();
        assert_eq!(p.name, "nginx");
        assert_eq!(p.target.path, "/");
        assert_eq!(p.pid, Some(1234));
        assert!(Peer::parse("x=http://10.1.2.3/").is_err());
        assert!(Peer::parse("nginx").is_err());
    }
}

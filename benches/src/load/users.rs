//! The think-time mode (`load --users N --think 500ms..2s`): N user sessions
//! at once, each one connection carrying a few keep-alive requests with a
//! random pause between them, then closed; the next user arrives at once.
//! The run lasts a fixed time. Errors are counted by the kind an operator
//! tells apart behind a balancer: refused, reset, timeout, 502, 504, other
//! non-2xx, other.

use super::users_worker::UserLoop;
use super::{new_histogram, raise_nofile, ErrorKind};
use crate::target::Target;
use hdrhistogram::Histogram;
use std::time::{Duration, Instant};

/// A think time drawn uniformly from `min..=max`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThinkRange {
    pub min: Duration,
    pub max: Duration,
}

impl ThinkRange {
    /// Parses `500ms..2s`, or one duration (`1s`) for a fixed pause.
    pub fn parse(s: &str) -> Result<ThinkRange, String> {
        let (min, max) = match s.split_once("..") {
            Some((a, b)) => (crate::parse_duration(a)?, crate::parse_duration(b)?),
            None => {
                let d = crate::parse_duration(s)?;
                (d, d)
            }
        };
        if min > max {
            return Err(format!("think range {s:?} ends before it starts"));
        }
        Ok(ThinkRange { min, max })
    }

    /// A pause for `r`, a uniform draw from 0.0..1.0.
    pub fn pick(self, r: f64) -> Duration {
        self.min + (self.max - self.min).mul_f64(r.clamp(0.0, 1.0))
    }
}

/// How a request ended without a 2xx answer; the discriminant indexes
/// [`UsersReport::failures`] and [`FAILURE_NAMES`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    Refused,
    Reset,
    Timeout,
    BadGateway,
    GatewayTimeout,
    OtherStatus,
    Other,
}

/// Number of [`Failure`] kinds.
pub const FAILURES: usize = 7;

/// Each [`Failure`]'s name in reports, in discriminant order.
pub const FAILURE_NAMES: [&str; FAILURES] = [
    "refused",
    "reset",
    "timeout",
    "502",
    "504",
    "other_non_2xx",
    "other",
];

impl Failure {
    /// The kind of a whole response with this status; `None` for 2xx.
    pub fn of_status(status: u16) -> Option<Failure> {
        match status {
            200..=299 => None,
            502 => Some(Failure::BadGateway),
            504 => Some(Failure::GatewayTimeout),
            _ => Some(Failure::OtherStatus),
        }
    }

    /// The kind of a transport error the connection reader reported.
    pub fn of_transport(kind: ErrorKind) -> Failure {
        match kind {
            ErrorKind::Refused => Failure::Refused,
            ErrorKind::Reset => Failure::Reset,
            ErrorKind::Timeout => Failure::Timeout,
            _ => Failure::Other,
        }
    }
}

/// One think-time run.
#[derive(Clone, Debug)]
pub struct UsersConfig {
    pub target: Target,
    /// Sessions open at once.
    pub users: usize,
    pub think: ThinkRange,
    /// Requests per session (per connection) before the user leaves.
    pub session_requests: u32,
    pub duration: Duration,
    pub threads: usize,
    /// A request unanswered this long fails as a timeout and ends its session.
    pub timeout: Duration,
}

/// The outcome of a think-time run.
#[derive(Clone, Debug)]
pub struct UsersReport {
    /// 2xx answers; every other request that ended is in `failures`.
    pub ok: u64,
    /// Sessions that made all their requests.
    pub sessions: u64,
    pub elapsed: Duration,
    /// Latency of each whole response (any status), in microseconds; a
    /// session's first request includes its connect.
    pub latency_us: Histogram<u64>,
    pub failures: [u64; FAILURES],
    pub first_other: Option<String>,
}

impl UsersReport {
    pub(crate) fn empty() -> UsersReport {
        UsersReport {
            ok: 0,
            sessions: 0,
            elapsed: Duration::ZERO,
            latency_us: new_histogram(),
            failures: [0; FAILURES],
            first_other: None,
        }
    }

    /// Requests that ended, answered or failed.
    pub fn requests(&self) -> u64 {
        self.ok + self.failures.iter().sum::<u64>()
    }

    /// 2xx answers per second.
    pub fn ok_per_sec(&self) -> f64 {
        super::per_sec(self.ok, self.elapsed)
    }

    /// A latency percentile in milliseconds (0 when nothing was recorded).
    pub fn percentile_ms(&self, p: f64) -> f64 {
        super::percentile_ms(&self.latency_us, p)
    }

    fn merge(&mut self, other: UsersReport) {
        self.ok += other.ok;
        self.sessions += other.sessions;
        self.elapsed = self.elapsed.max(other.elapsed);
        // Same bounds on both sides, so adding cannot fail.
        let _ = self.latency_us.add(&other.latency_us);
        for (a, b) in self.failures.iter_mut().zip(other.failures) {
            *a += b;
        }
        self.first_other = self.first_other.take().or(other.first_other);
    }
}

/// Runs the sessions for `duration` on `threads` event loops.
pub fn run_users(config: &UsersConfig) -> Result<UsersReport, String> {
    if config.users == 0 || config.threads == 0 || config.session_requests == 0 {
        return Err("users, threads and session requests must be at least 1".into());
    }
    config.target.plain_only("--users")?;
    raise_nofile(config.users as u64 + 64)?;
    let threads = config.threads.min(config.users);
    let request = config.target.request_bytes(true);
    let start = Instant::now();
    let deadline = start + config.duration;
    let results: Vec<Result<UsersReport, String>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|i| {
                let users = config.users / threads + usize::from(i < config.users % threads);
                let request = &request[..];
                s.spawn(move || {
                    let seed = (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)
                        ^ start.elapsed().as_nanos() as u64;
                    let mut l = UserLoop::new(config, request, users, deadline, seed)?;
                    l.run();
                    Ok(l.into_report(start))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("a load thread panicked".into()))
            })
            .collect()
    });
    let mut report = UsersReport::empty();
    for r in results {
        report.merge(r?);
    }
    Ok(report)
}

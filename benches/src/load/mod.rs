//! The load generator: `threads` event loops share a request budget and a
//! deadline, each driving its share of the connections; their statistics
//! are merged into one [`Report`].
//!
//! A run always stops at whichever comes first: `requests` answered (or
//! failed) or `max_time` passed. Every request taken from the budget ends
//! answered or failed exactly once, except those cut off by the time limit
//! and those a server announced it would not answer (a `Connection: close`
//! answer in the middle of a pipelined batch): those go back to the budget.

mod conn;
mod link;
#[cfg(test)]
mod tests;
mod tls;
#[cfg(test)]
mod tls_tests;
mod users;
#[cfg(test)]
mod users_tests;
mod users_worker;
mod worker;

pub use link::Negotiated;
pub use tls::TlsOptions;
pub use users::{
    run_users, Failure, ThinkRange, UsersConfig, UsersReport, FAILURES, FAILURE_NAMES,
};

use crate::target::Target;
use hdrhistogram::Histogram;
use link::Link;
use mio::net::TcpStream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Requests per write in the comparison's `pipelined` mode (hyper's
/// pipeline bench sends 16 too).
pub const PIPELINE_DEPTH: u32 = 16;

/// How responses and connections are paced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// HTTP/1.1, one request at a time per persistent connection (`wrk`, `ab -k`).
    KeepAlive,
    /// HTTP/1.1 persistent connections sending this many requests in one
    /// write, and the next batch once all of their answers are in.
    Pipelined(u32),
    /// HTTP/1.0: connect, send, read until the server closes (plain `ab`).
    Close,
}

impl Mode {
    /// The short name used in tables and CSV.
    pub fn name(self) -> &'static str {
        match self {
            Mode::KeepAlive => "keepalive",
            Mode::Pipelined(_) => "pipelined",
            Mode::Close => "close",
        }
    }

    /// True for the modes that reuse a connection (HTTP/1.1).
    pub fn keep_alive(self) -> bool {
        self != Mode::Close
    }

    /// Requests sent per write on one connection.
    pub fn depth(self) -> u32 {
        match self {
            Mode::Pipelined(n) => n.max(1),
            _ => 1,
        }
    }
}

/// One load run.
#[derive(Clone, Debug)]
pub struct Config {
    pub target: Target,
    pub mode: Mode,
    /// Connections open (or being opened) at once.
    pub connections: usize,
    /// Requests to finish, answered or failed.
    pub requests: u64,
    /// Hard limit on the run's length.
    pub max_time: Duration,
    /// Event-loop threads; connections are split between them.
    pub threads: usize,
    /// A request not answered in this time counts as a timeout and its
    /// connection is closed.
    pub timeout: Duration,
    /// How an `https://` target is spoken to (needed for one, refused for
    /// an `http://` one).
    pub tls: Option<TlsOptions>,
}

/// Error kinds, counted separately (indices into [`Report::errors`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// ECONNREFUSED while connecting.
    Refused = 0,
    /// ECONNRESET/EPIPE, or the server closed before a whole response.
    Reset = 1,
    /// No whole response within the timeout.
    Timeout = 2,
    /// A complete response whose status was not 2xx.
    Non2xx = 3,
    /// A 2xx body whose length differs from the first one seen (as `ab`
    /// counts "Length" failures) or from its own Content-Length.
    WrongLength = 4,
    /// Anything else: unparsable response, other socket errors.
    Other = 5,
}

/// Number of [`ErrorKind`]s.
pub const ERROR_KINDS: usize = 6;

impl ErrorKind {
    /// All kinds, in index order.
    pub const ALL: [ErrorKind; ERROR_KINDS] = [
        ErrorKind::Refused,
        ErrorKind::Reset,
        ErrorKind::Timeout,
        ErrorKind::Non2xx,
        ErrorKind::WrongLength,
        ErrorKind::Other,
    ];

    /// Name in reports and CSV headers.
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Refused => "refused",
            ErrorKind::Reset => "reset",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Non2xx => "non_2xx",
            ErrorKind::WrongLength => "wrong_length",
            ErrorKind::Other => "other",
        }
    }
}

/// The outcome of one run.
#[derive(Clone, Debug)]
pub struct Report {
    /// Requests that ended with a whole response (including non-2xx and
    /// wrong-length ones, as `ab` counts "complete requests").
    pub completed: u64,
    /// Requests that ended in a refused/reset/timeout/other error.
    pub failed: u64,
    /// The budget that was asked for.
    pub requested: u64,
    /// Response bytes read, heads and bodies.
    pub bytes: u64,
    /// Wall time from the first connect to the last answer.
    pub elapsed: Duration,
    /// Latency of each complete response, in microseconds.
    pub latency_us: Histogram<u64>,
    /// Counts by [`ErrorKind`] index.
    pub errors: [u64; ERROR_KINDS],
    /// The first "other" error's text, to say what went wrong.
    pub first_other: Option<String>,
    /// True when the time limit stopped the run before the budget was spent.
    pub timed_out: bool,
    /// TLS handshakes completed in full (a connection's first answer came).
    pub handshakes: u64,
    /// TLS handshakes that resumed a session.
    pub resumed: u64,
    /// What the first TLS handshake settled (None over plain HTTP).
    pub negotiated: Option<Negotiated>,
}

impl Report {
    pub(crate) fn empty(requested: u64) -> Report {
        Report {
            completed: 0,
            failed: 0,
            requested,
            bytes: 0,
            elapsed: Duration::ZERO,
            latency_us: new_histogram(),
            errors: [0; ERROR_KINDS],
            first_other: None,
            timed_out: false,
            handshakes: 0,
            resumed: 0,
            negotiated: None,
        }
    }

    /// Completed responses per second.
    pub fn req_per_sec(&self) -> f64 {
        per_sec(self.completed, self.elapsed)
    }

    /// Bytes read per second.
    pub fn bytes_per_sec(&self) -> f64 {
        per_sec(self.bytes, self.elapsed)
    }

    /// TLS handshakes (full and resumed) per second.
    pub fn handshakes_per_sec(&self) -> f64 {
        per_sec(self.handshakes + self.resumed, self.elapsed)
    }

    /// All errors, of every kind.
    pub fn error_count(&self) -> u64 {
        self.errors.iter().sum()
    }

    /// True when every request of the budget ended in a response.
    pub fn is_complete(&self) -> bool {
        self.completed + self.failed >= self.requested && !self.timed_out
    }

    /// A latency percentile in milliseconds (0 when nothing was recorded).
    pub fn percentile_ms(&self, p: f64) -> f64 {
        percentile_ms(&self.latency_us, p)
    }

    fn merge(&mut self, other: Report) {
        self.completed += other.completed;
        self.failed += other.failed;
        self.bytes += other.bytes;
        self.elapsed = self.elapsed.max(other.elapsed);
        // Both histograms have the same bounds, so adding cannot fail.
        let _ = self.latency_us.add(&other.latency_us);
        for (a, b) in self.errors.iter_mut().zip(other.errors) {
            *a += b;
        }
        self.first_other = self.first_other.take().or(other.first_other);
        self.timed_out |= other.timed_out;
        self.handshakes += other.handshakes;
        self.resumed += other.resumed;
        self.negotiated = self.negotiated.or(other.negotiated);
    }
}

/// The percentiles every report lists, as `ab` prints them.
pub const PERCENTILES: [f64; 9] = [50.0, 66.0, 75.0, 80.0, 90.0, 95.0, 98.0, 99.0, 100.0];

/// `n` per second of `elapsed` (0 for no time at all).
fn per_sec(n: u64, elapsed: Duration) -> f64 {
    let secs = elapsed.as_secs_f64();
    if secs > 0.0 {
        n as f64 / secs
    } else {
        0.0
    }
}

/// A latency percentile of a microsecond histogram, in milliseconds (0
/// when nothing was recorded).
fn percentile_ms(latency_us: &Histogram<u64>, p: f64) -> f64 {
    if latency_us.is_empty() {
        return 0.0;
    }
    latency_us.value_at_quantile(p / 100.0) as f64 / 1000.0
}

/// 1 us to 1 hour at 3 significant figures.
fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("static histogram bounds are valid")
}

/// State shared by the threads of one run.
pub(crate) struct Shared {
    /// Requests handed out so far; a connection takes one before each request.
    issued: AtomicU64,
    budget: u64,
    /// Body length of the first 2xx response (u64::MAX until one arrives).
    expected_len: AtomicU64,
    pub(crate) deadline: Instant,
}

impl Shared {
    /// Takes up to `n` requests from the budget; how many it got (0 once
    /// the budget is spent). The count never passes the budget, so what
    /// `give_back` returns can be taken again.
    pub(crate) fn claim(&self, n: u64) -> u64 {
        let budget = self.budget;
        match self
            .issued
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |i| {
                (i < budget).then(|| i.saturating_add(n).min(budget))
            }) {
            Ok(before) => before.saturating_add(n).min(budget) - before,
            Err(_) => 0,
        }
    }

    /// Returns requests that were taken but will not be sent or answered.
    pub(crate) fn give_back(&self, n: u64) {
        self.issued.fetch_sub(n, Ordering::Relaxed);
    }

    /// Checks a 2xx body length against the first one seen.
    pub(crate) fn length_ok(&self, len: u64) -> bool {
        match self.expected_len.compare_exchange(
            u64::MAX,
            len,
            Ordering::Relaxed,
            Ordering::Relaxed,
        ) {
            Ok(_) => true,
            Err(expected) => expected == len,
        }
    }
}

/// Runs the load and returns the merged report. Raises RLIMIT_NOFILE as
/// needed; errors only if the configuration cannot run at all.
pub fn run(config: &Config) -> Result<Report, String> {
    if config.connections == 0 || config.threads == 0 {
        return Err("connections and threads must be at least 1".into());
    }
    raise_nofile(config.connections as u64 + 64)?;
    // One batch: the request repeated as many times as the mode sends per write.
    let request = config
        .target
        .request_bytes(config.mode.keep_alive())
        .repeat(config.mode.depth() as usize);
    match (&config.tls, config.target.tls) {
        (None, false) => run_on::<TcpStream>(config, &(), &request),
        (Some(options), true) => {
            let client = tls::TlsClient::new(options, config.target.server_name())?;
            run_on::<tls::TlsLink>(config, &client, &request)
        }
        (None, true) => Err(format!(
            "{}: an https:// target needs the CA file its certificate is checked with (--ca FILE)",
            config.target.url()
        )),
        (Some(_), false) => Err(format!(
            "{}: TLS options (--ca, --tls-resume, --tls-suite) apply to https:// targets only",
            config.target.url()
        )),
    }
}

/// The run over connections of one kind, each opened with `opener`.
fn run_on<L: Link>(config: &Config, opener: &L::Opener, request: &[u8]) -> Result<Report, String> {
    let threads = config.threads.min(config.connections);
    let start = Instant::now();
    let shared = Shared {
        issued: AtomicU64::new(0),
        budget: config.requests,
        expected_len: AtomicU64::new(u64::MAX),
        deadline: start + config.max_time,
    };
    let mut report = Report::empty(config.requests);
    let results: Vec<Result<Report, String>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|i| {
                let conns =
                    config.connections / threads + usize::from(i < config.connections % threads);
                let shared = &shared;
                s.spawn(move || {
                    let mut w =
                        worker::Worker::<L>::new(config, shared, opener, request, conns, start)?;
                    w.run();
                    Ok(w.into_report(Report::empty(0)))
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
    for r in results {
        report.merge(r?);
    }
    report.requested = config.requests;
    Ok(report)
}

/// Makes sure this process may open `needed` descriptors.
pub fn raise_nofile(needed: u64) -> Result<(), String> {
    let got = rlimit::increase_nofile_limit(needed).map_err(|e| format!("RLIMIT_NOFILE: {e}"))?;
    if got < needed {
        return Err(format!(
            "need {needed} file descriptors but RLIMIT_NOFILE allows only {got}"
        ));
    }
    Ok(())
}

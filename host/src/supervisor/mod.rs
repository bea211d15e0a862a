//! Process mode (`--worker-mode process`): the supervisor. It is the
//! process the user starts (PID 1 in a container, systemd's main PID) and
//! never loads or runs app code. It binds the listening sockets once (or
//! adopts the service manager's), makes the shared area, and runs one
//! worker process per `--workers`: the `stoa` binary again with a hidden
//! subcommand (`handoff`), one event loop each, every app loaded, all
//! accepting on the same listening sockets: one socket per bind, one
//! backlog, so connections queued in the kernel while a worker is stuck
//! (not waiting, so not accepting) or dead are accepted by the others or
//! by its replacement.
//!
//! It replaces a worker that dies (at once if it had served, with a
//! growing pause if it died starting), one whose loop has not turned for
//! `--worker-timeout`, and, one at a time (start the new one, wait until
//! it serves, drain the old), one that asks for it (`--max-generations`
//! reached, `--worker-max-requests`) or passes `--worker-max-memory`.
//! The pid file, `READY=1`, `STATUS=` and `WATCHDOG=1` are its alone.
//! Signals: SIGTERM and SIGINT drain every worker (a second one kills
//! them), SIGHUP and SIGUSR1 go on to every worker (rescan the apps,
//! reopen the log files), SIGUSR2 replaces every worker, one at a time,
//! with the binary now at the path it was started from. As PID 1 it reaps
//! every child, adopted ones too.
//!
//! `Supervisor` below is the supervisor's state; each file of this folder
//! acts on it for one concern: `run` (start-up and the loop), `spawn`
//! (starting and adopting worker processes), `watch` (readiness, stuck
//! loops, replacements asked for, memory), `reap` (a worker that ended,
//! through `decide`), `signals`, `upgrade` (SIGUSR2).

mod binary;
mod death;
mod decide;
pub mod handoff;
mod procs;
mod quarantine;
mod reap;
mod resume;
mod run;
mod signals;
mod spawn;
mod store;
mod tally;
mod upgrade;
mod watch;

pub use run::run;

use crate::listen::tls::watch::Watch;
use crate::ops::access_log::AccessLog;
use crate::shm::Area;
use binary::Binary;
use procs::{Place, Rows};
use quarantine::Deaths;
use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};
use tally::Tally;

/// The supervisor's state, private to this folder's files.
struct Supervisor {
    /// What workers start from, and the binary SIGUSR2 is trying.
    binary: Binary,
    candidate: Option<Candidate>,
    args: Vec<OsString>,
    sockets: Vec<OwnedFd>,
    /// The sockets' names (`LISTEN_FDNAMES`: a TLS one's is `tls`), handed
    /// on with them.
    names: String,
    area: Area,
    rows: Rows,
    row_count: usize,
    places: Vec<Place>,
    worker_timeout: Duration,
    graceful: Duration,
    max_memory: u64,
    /// How long a worker (the first ones, an upgrade's) may take to serve.
    start_bound: Duration,
    /// Set once every first worker served and the host was announced.
    announced: bool,
    /// Where the host listens, as the start-up line shows it.
    shown: Vec<String>,
    draining: Option<Instant>,
    memory_checked: Instant,
    /// When the Unix socket files were last looked at.
    files_checked: Instant,
    /// `WATCHDOG=1` to the service manager: how often, and when last.
    keepalive: Option<(Duration, Instant)>,
    /// Crashes and the counters of ended workers, for status and metrics.
    tally: Tally,
    /// Deaths by plugin bytes, for the quarantine.
    deaths: Deaths,
    tls: Option<TlsWatch>,
    /// `--access-log`: the supervisor writes the lines of requests lost
    /// with a worker that died.
    access_log: Option<AccessLog>,
}

/// The supervisor's copy of the TLS sites, read again when their files
/// change (each worker reloads its own), so that its expiry warnings,
/// said once for the host, follow a renewal.
struct TlsWatch {
    watch: Watch,
    /// `--tls-watch-interval`.
    every: Duration,
    checked: Instant,
}

/// A binary SIGUSR2 is trying, and since when.
struct Candidate {
    binary: Binary,
    since: Instant,
}

//! What differs between the two ways a process serves: thread mode (this
//! process is the whole host: its loops are threads, it binds its
//! listeners, owns the pid file and talks to the service manager) and a
//! worker process of process mode (one loop on the supervisor's sockets,
//! its state in a row of the shared area, the host-wide counts shared with
//! the other workers, and everything host-wide left to the supervisor).
//!
//! `serve` assembles a process through this trait alone, so it reads as
//! one start-up and never asks which mode it runs.

use crate::apps::quarantine::Guard;
use crate::budget::Budget;
use crate::cli::Cli;
use crate::error::BootError;
use crate::listen;
use crate::listen::tls::watch::Part;
use crate::open_count::OpenCount;
use crate::ops::peers::Peers;
use crate::ops::worker_row::Row;
use crate::server::handles::Handles;
use crate::server::Server;
use crossbeam_channel::Receiver;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

/// The loops' threads, each ending with its loop's result.
pub(super) type Loops = Vec<std::thread::JoinHandle<std::io::Result<()>>>;

/// One way a process serves (`Threads`, `Worker`). A trait rather than an
/// enum: each mode's differences read in one file of their own, and the
/// compiler asks for every one of them when a mode is written.
pub(super) trait Mode {
    /// The listening sockets, spread over `workers` loops.
    fn listeners(
        &mut self,
        cli: &Cli,
        workers: usize,
        backlog: i32,
    ) -> Result<listen::Bound, BootError>;

    /// The keys TLS session tickets are sealed with when other processes
    /// must open them too; `None`: this process keeps its own.
    fn ticket_keys(&self) -> Option<&'static [AtomicU64]>;

    /// Claims the pid file (`--pid-file`) if it is this process's.
    fn claim_pid_file(&mut self, cli: &Cli) -> Result<(), BootError>;

    /// Where each of the `workers` loops' beats and counters go, for the
    /// watchdog's board.
    fn rows(&self, workers: usize) -> Vec<Row>;

    /// The host-wide budget of buffered bytes, `limit` in all.
    fn budget(&self, limit: usize) -> Budget;

    /// The host-wide count of open connections, `cap` in all.
    fn open_count(&self, cap: usize) -> OpenCount;

    /// The other worker processes (status and metrics for the whole
    /// host); `None` when this process is the whole host.
    fn peers(&self) -> Option<Arc<Peers>>;

    /// What the apps thread tells before running plugin code, and asks
    /// about quarantined bytes; `None` without a supervisor to count
    /// deaths.
    fn guard(&self) -> Option<Arc<dyn Guard>>;

    /// After how many requests this process asks to be replaced
    /// (`--worker-max-requests`); `None`: never.
    fn max_requests(&self, cli: &Cli) -> Option<u64>;

    /// How long the blocking pool may stay hung before this process asks
    /// to be replaced; `None`: never.
    fn pool_hung_bound(&self, cli: &Cli) -> Option<Duration>;

    /// What the TLS files' watch says of a reload and an expiry.
    fn tls_part(&self) -> Part;

    /// The row the control thread marks draining and asks a fresh process
    /// through; `None`: the control thread upgrades this process itself.
    fn row(&self) -> Option<Row>;

    /// Starts the loops' threads and says, once the start-up constructors
    /// returned (`started`), that the host (or this worker) serves.
    fn start(
        &mut self,
        servers: Vec<Server>,
        started: &Receiver<()>,
        handles: &Handles,
        shown: &[String],
    ) -> Result<Loops, BootError>;

    /// After the drain: what this process leaves behind for others.
    fn leave(&self, handles: &Handles);
}

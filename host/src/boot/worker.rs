//! A worker process of process mode: one loop on the listening sockets
//! the supervisor handed over, its state in a row of the shared area the
//! supervisor reads (phase, beats, counters, the plugin code it runs), the
//! host-wide counts and the TLS ticket keys shared with the other workers.
//! The pid file, the service manager and the upgrade are the supervisor's.

use super::mode::{Loops, Mode};
use super::{await_start_up, spawn_loops};
use crate::apps::quarantine::Guard;
use crate::budget::Budget;
use crate::cli::Cli;
use crate::error::BootError;
use crate::listen;
use crate::listen::tls::watch::Part;
use crate::open_count::OpenCount;
use crate::ops::peers::{process_counts, Peers, RowGuard, STORE_ENV};
use crate::ops::worker_row::{buffered_word, open_words, ticket_words, Phase, Row};
use crate::server::handles::Handles;
use crate::server::Server;
use crossbeam_channel::Receiver;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

/// What a worker process has from its supervisor.
pub struct WorkerRole {
    /// Its row of the shared area.
    pub row: Row,
    /// The whole area, its rows, and which one is this worker's.
    pub area: &'static [AtomicU64],
    pub rows: usize,
    pub row_index: usize,
    /// The listening sockets, shared with every other worker.
    pub sockets: Vec<listen::Passed>,
}

/// A worker process: its role, and the other workers' rows.
pub(super) struct Worker {
    role: WorkerRole,
    peers: Arc<Peers>,
}

impl Worker {
    pub(super) fn new(role: WorkerRole) -> Self {
        let peers = Arc::new(Peers::new(role.area, role.rows, role.row_index));
        Worker { role, peers }
    }
}

impl Mode for Worker {
    /// The supervisor's sockets, all on the one loop.
    fn listeners(
        &mut self,
        _cli: &Cli,
        _workers: usize,
        _backlog: i32,
    ) -> Result<listen::Bound, BootError> {
        listen::adopt_all(std::mem::take(&mut self.role.sockets), 1)
    }

    fn ticket_keys(&self) -> Option<&'static [AtomicU64]> {
        Some(ticket_words(self.role.area))
    }

    fn claim_pid_file(&mut self, _cli: &Cli) -> Result<(), BootError> {
        Ok(())
    }

    fn rows(&self, _workers: usize) -> Vec<Row> {
        vec![self.role.row]
    }

    fn budget(&self, limit: usize) -> Budget {
        Budget::shared(
            limit,
            buffered_word(self.role.area),
            self.role.row.buffered(),
        )
    }

    fn open_count(&self, cap: usize) -> OpenCount {
        let (open, waiting) = open_words(self.role.area);
        OpenCount::shared(open, waiting, self.role.row.held(), cap)
    }

    fn peers(&self) -> Option<Arc<Peers>> {
        Some(self.peers.clone())
    }

    fn guard(&self) -> Option<Arc<dyn Guard>> {
        Some(Arc::new(RowGuard {
            row: self.role.row,
            peers: self.peers.clone(),
            store: std::env::var_os(STORE_ENV).map(std::path::PathBuf::from),
            names: std::sync::Mutex::new(()),
        }))
    }

    fn max_requests(&self, cli: &Cli) -> Option<u64> {
        max_requests(cli)
    }

    fn pool_hung_bound(&self, cli: &Cli) -> Option<Duration> {
        Some(cli.worker_timeout)
    }

    fn tls_part(&self) -> Part {
        Part::Worker
    }

    fn row(&self) -> Option<Row> {
        Some(self.role.row)
    }

    /// Accepts only once the start-up constructors returned: until then
    /// the other workers serve. Its row then says it serves.
    fn start(
        &mut self,
        servers: Vec<Server>,
        started: &Receiver<()>,
        handles: &Handles,
        _shown: &[String],
    ) -> Result<Loops, BootError> {
        let ready = await_start_up(started, handles);
        let loops = spawn_loops(servers)?;
        if ready {
            log::info!("worker process serving");
            self.role.row.set_phase(Phase::Ready);
        }
        Ok(loops)
    }

    /// The last counters, for the supervisor to keep.
    fn leave(&self, handles: &Handles) {
        self.peers.publish(&process_counts(
            &handles.stats,
            handles.access_log.as_deref(),
            handles.pool.as_deref(),
        ));
    }
}

/// A worker process's `--worker-max-requests`, with its own share of the
/// jitter; `None` without a limit.
fn max_requests(cli: &Cli) -> Option<u64> {
    use std::hash::{BuildHasher, Hasher};
    if cli.worker_max_requests == 0 {
        return None;
    }
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    let jitter = h.finish() % cli.worker_max_requests_jitter.saturating_add(1);
    let limit = cli.worker_max_requests.saturating_add(jitter);
    log::info!("this worker is replaced after {limit} requests (--worker-max-requests)");
    Some(limit)
}

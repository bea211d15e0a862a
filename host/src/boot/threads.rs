//! Thread mode: this process is the whole host. Its loops are threads;
//! it binds its listeners (or adopts a service manager's, or those of the
//! stoa it upgrades), owns the pid file, says where it listens and tells
//! the service manager it is ready; its counts are its own.

use super::mode::{Loops, Mode};
use super::{announce, await_start_up, spawn_loops};
use crate::apps::quarantine::Guard;
use crate::budget::Budget;
use crate::checks;
use crate::cli::Cli;
use crate::error::BootError;
use crate::listen;
use crate::listen::tls::watch::Part;
use crate::open_count::OpenCount;
use crate::ops::notify;
use crate::ops::peers::Peers;
use crate::ops::pid_file::PidFile;
use crate::ops::worker_row::Row;
use crate::server::handles::Handles;
use crate::server::Server;
use crate::settings::Bind;
use crossbeam_channel::Receiver;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

/// Thread mode, and the pid file once claimed.
#[derive(Default)]
pub(super) struct Threads {
    pid_file: Option<PidFile>,
}

impl Mode for Threads {
    fn listeners(
        &mut self,
        cli: &Cli,
        workers: usize,
        backlog: i32,
    ) -> Result<listen::Bound, BootError> {
        listeners(cli, workers, backlog)
    }

    fn ticket_keys(&self) -> Option<&'static [AtomicU64]> {
        None
    }

    fn claim_pid_file(&mut self, cli: &Cli) -> Result<(), BootError> {
        self.pid_file = cli.pid_file.as_deref().map(PidFile::claim).transpose()?;
        Ok(())
    }

    fn rows(&self, workers: usize) -> Vec<Row> {
        (0..workers).map(|_| Row::private()).collect()
    }

    fn budget(&self, limit: usize) -> Budget {
        Budget::new(limit)
    }

    fn open_count(&self, cap: usize) -> OpenCount {
        OpenCount::new(cap)
    }

    fn peers(&self) -> Option<Arc<Peers>> {
        None
    }

    fn guard(&self) -> Option<Arc<dyn Guard>> {
        None
    }

    fn max_requests(&self, _cli: &Cli) -> Option<u64> {
        None
    }

    fn pool_hung_bound(&self, _cli: &Cli) -> Option<Duration> {
        None
    }

    fn tls_part(&self) -> Part {
        Part::Serves
    }

    fn row(&self) -> Option<Row> {
        None
    }

    /// Serves at once (the constructors start-up waits for may still
    /// run); `READY=1` and the service manager's watchdog once they
    /// returned.
    fn start(
        &mut self,
        servers: Vec<Server>,
        started: &Receiver<()>,
        handles: &Handles,
        shown: &[String],
    ) -> Result<Loops, BootError> {
        let loops = spawn_loops(servers)?;
        // Before READY=1: the stoa this one upgrades drains once it is told.
        if let Some(file) = &mut self.pid_file {
            file.serving()?;
        }
        announce(shown);
        if await_start_up(started, handles) {
            ready(shown, handles);
            notify::spawn_watchdog(handles.control.clone(), handles.board.clone())?;
        }
        Ok(loops)
    }

    fn leave(&self, _handles: &Handles) {}
}

/// Tells the service manager the host is ready.
fn ready(shown: &[String], handles: &Handles) {
    notify::ready(&format!(
        "serving {} app(s) on {}",
        handles.apps.load().mounts.apps().len(),
        shown.join(", ")
    ));
}

/// The listeners: the sockets a service manager passed (socket
/// activation), else every `--bind` address (each TCP one checked free
/// first unless `--reuse-port`).
fn listeners(cli: &Cli, workers: usize, backlog: i32) -> Result<listen::Bound, BootError> {
    if let Some(sockets) = listen::inherited()? {
        log::info!(
            "serving {} socket(s) passed by the service manager or the stoa this one \
             upgrades (LISTEN_FDS); --bind is not used",
            sockets.len()
        );
        return listen::adopt_all(sockets, workers);
    }
    if !cli.reuse_port {
        for b in cli.bind.iter().filter(|b| !matches!(b, Bind::Unix(_))) {
            checks::address_is_free(b)?;
        }
    }
    listen::bind_all(&cli.bind, workers, backlog, cli.unix_mode)
}

//! The control thread: the one place that acts on what steers the process
//! (`control::Request`). A thread of its own reads the signals and sends
//! them there as requests, beside the apps thread's (a replace past
//! `--max-generations` asks for the re-exec), so no part of the host
//! signals itself. SIGTERM and SIGINT drain the workers (a second one exits
//! at once, and the graceful timeout forces the rest closed; an upgrade's
//! new process that is not ready yet is stopped first); SIGHUP asks
//! the apps thread to rescan; SIGUSR1 reopens the log files; SIGUSR2
//! upgrades the host binary in place (see `ops::upgrade`) and then drains.

use crate::apps::plugin_copy;
use crate::apps::watcher::Event;
use crate::control::{Control, Request, Requests};
use crate::error::BootError;
use crate::listen;
use crate::ops::access_log::AccessLog;
use crate::ops::notify;
use crate::ops::upgrade::Upgrade;
use crate::ops::worker_row::{Phase, Recycle, Row};
use crossbeam_channel::{Receiver, Sender};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM, SIGUSR1, SIGUSR2};
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

/// What the control thread acts on.
pub struct Steered {
    pub control: Arc<Control>,
    pub access_log: Option<Arc<AccessLog>>,
    /// The apps thread (rescans).
    pub apps: Sender<Event>,
    pub upgrade: Arc<Upgrade>,
    /// `--graceful-timeout`.
    pub graceful: Duration,
    /// A worker process's row: an upgrade asks the supervisor for a fresh
    /// worker instead (`None` in thread mode).
    pub row: Option<Row>,
    /// The TLS binds' certificate and key, read again on SIGHUP.
    pub tls: Option<Arc<crate::listen::tls::TlsSites>>,
}

/// The channel of control requests: its sender goes to whoever may ask
/// (the signal thread, the apps thread), its receiver to `watch`.
pub fn channel() -> (Requests, Receiver<Request>) {
    crossbeam_channel::unbounded()
}

/// Starts the signal thread (sending into `requests`) and the control
/// thread (acting on what `incoming` brings).
pub fn watch(
    steered: Steered,
    requests: Requests,
    incoming: Receiver<Request>,
) -> Result<(), BootError> {
    let mut signals =
        signal_hook::iterator::Signals::new([SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2])
            .map_err(|e| BootError::system("install signal handlers", e))?;
    std::thread::Builder::new()
        .name("stoa-signals".into())
        .spawn(move || {
            for signal in signals.forever() {
                if requests.send(request_of(signal)).is_err() {
                    return;
                }
            }
        })
        .map_err(|e| BootError::thread("the signal thread", e))?;
    let steered = Arc::new(steered);
    let upgrading = Arc::new(AtomicBool::new(false));
    std::thread::Builder::new()
        .name("stoa-control".into())
        .spawn(move || {
            for request in incoming {
                act(&steered, &upgrading, request);
            }
        })
        .map_err(|e| BootError::thread("the control thread", e))?;
    Ok(())
}

/// What a signal asks for.
fn request_of(signal: i32) -> Request {
    match signal {
        SIGHUP => Request::Rescan,
        SIGUSR1 => Request::ReopenLogs,
        SIGUSR2 => Request::Upgrade {
            why: "SIGUSR2".to_string(),
        },
        _ => Request::Drain {
            why: format!("signal {signal}"),
        },
    }
}

fn act(steered: &Arc<Steered>, upgrading: &Arc<AtomicBool>, request: Request) {
    match request {
        Request::Rescan => {
            log::info!("SIGHUP: rescanning the apps directory");
            if steered.apps.send(Event::Rescan).is_err() {
                log::warn!("SIGHUP ignored: the apps thread has stopped (draining)");
            }
            if let Some(tls) = &steered.tls {
                crate::listen::tls::log_reload("SIGHUP", tls);
            }
        }
        Request::ReopenLogs => {
            crate::ops::error_log::reopen();
            match &steered.access_log {
                Some(log) => log.reopen(),
                None => log::info!("SIGUSR1: no access log file to reopen"),
            }
        }
        Request::Upgrade { why } => match steered.row {
            Some(_) if why == "SIGUSR2" => {
                log::warn!("SIGUSR2 ignored by a worker process: send it to the supervisor")
            }
            Some(row) => {
                log::info!("{why}: asking the supervisor for a fresh worker process");
                row.ask_recycle(Recycle::GenerationCap);
            }
            None if std::process::id() == 1 => refuse_as_pid_1(&why),
            None => {
                if why.starts_with("--on-generation-cap") {
                    log::warn!(
                        "re-executing the host in place to load it (--on-generation-cap reexec)"
                    );
                }
                start_upgrade(steered, upgrading, &why)
            }
        },
        Request::Drain { why } if steered.control.draining() => {
            log::warn!("second {why}: exiting now");
            plugin_copy::remove_private_dir();
            listen::remove_unix_sockets();
            crate::ops::error_log::flush(crate::ops::log_writer::EXIT_FLUSH);
            std::process::exit(1);
        }
        Request::Drain { why } => drain(steered, &why),
    }
}

/// Stops accepting and lets in-flight requests finish, up to the graceful
/// timeout.
fn drain(steered: &Arc<Steered>, why: &str) {
    let graceful = steered.graceful;
    log::info!("{why}: draining (graceful timeout {graceful:?})");
    if let Some(row) = steered.row {
        row.set_phase(Phase::Draining);
    }
    steered.upgrade.release();
    // Before the drain lets this process exit: an unfinished upgrade's
    // new process must not outlive it.
    steered.upgrade.abandon();
    steered.control.drain();
    notify::stopping(&format!("draining after {why}"));
    let control = steered.control.clone();
    let _ = std::thread::Builder::new()
        .name("stoa-graceful-timeout".into())
        .spawn(move || {
            std::thread::sleep(graceful);
            control.force();
        });
}

/// Thread mode as PID 1 (a container without an init): the new process
/// would serve, then this one would exit, and that exit ends the PID
/// namespace, the new process with it. Process mode's supervisor replaces
/// its workers and keeps PID 1 instead.
fn refuse_as_pid_1(why: &str) {
    log::error!(
        "{why} refused: this stoa is PID 1 in thread mode, where a re-exec ends the \
         container when the old process exits; run with --worker-mode process (the \
         default), whose supervisor keeps PID 1 while it replaces the workers, or \
         restart the container"
    );
}

/// Runs an upgrade on its own thread (the new process may take a while to
/// load its apps; requests are still read meanwhile); one at a time.
fn start_upgrade(steered: &Arc<Steered>, upgrading: &Arc<AtomicBool>, why: &str) {
    if steered.control.draining() {
        log::warn!("{why} ignored: this stoa is draining");
        return;
    }
    if upgrading.swap(true, SeqCst) {
        log::warn!("{why} ignored: an upgrade is already under way");
        return;
    }
    log::info!("{why}: starting a new stoa with this one's sockets");
    let (steered, upgrading) = (steered.clone(), upgrading.clone());
    let started = std::thread::Builder::new()
        .name("stoa-upgrade".into())
        .spawn(move || {
            // At most one old process drains at a time.
            crate::ops::upgrade::wait_for_predecessor(steered.graceful + Duration::from_secs(1));
            match steered.upgrade.run() {
                Ok(pid) => {
                    log::info!("upgrade: the new stoa (pid {pid}) is ready and serves");
                    notify::main_pid(pid);
                    listen::keep_unix_sockets();
                    drain(&steered, "upgrade");
                }
                Err(BootError::Draining) => {
                    log::warn!("upgrade abandoned: this stoa drains")
                }
                Err(e) => log::error!("upgrade failed: {e}; this stoa keeps serving"),
            }
            upgrading.store(false, SeqCst);
        });
    if let Err(e) = started {
        log::error!("upgrade failed: cannot start its thread: {e}; this stoa keeps serving");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_signal_asks_for_its_request() {
        assert_eq!(request_of(SIGHUP), Request::Rescan);
        assert_eq!(request_of(SIGUSR1), Request::ReopenLogs);
        assert_eq!(
            request_of(SIGUSR2),
            Request::Upgrade {
                why: "SIGUSR2".into()
            }
        );
        assert_eq!(
            request_of(SIGTERM),
            Request::Drain {
                why: format!("signal {SIGTERM}")
            }
        );
    }
}

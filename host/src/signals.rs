//! Signals, read by a thread that never blocks on app code: SIGTERM and
//! SIGINT drain the workers (a second one exits at once, and the graceful
//! timeout forces the rest closed); SIGHUP asks the apps thread to rescan;
//! SIGUSR1 reopens the access log; SIGUSR2 upgrades the host binary in
//! place (see `ops::upgrade`) and then drains.

use crate::apps::plugin_copy;
use crate::apps::watcher::Event;
use crate::listen;
use crate::ops::notify;
use crate::ops::upgrade::Upgrade;
use crate::shared::Shared;
use crossbeam_channel::Sender;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM, SIGUSR1, SIGUSR2};
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

/// Starts the signal thread.
pub fn watch(
    shared: Arc<Shared>,
    apps: Sender<Event>,
    graceful: Duration,
    upgrade: Arc<Upgrade>,
) -> Result<(), String> {
    let mut signals =
        signal_hook::iterator::Signals::new([SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2])
            .map_err(|e| format!("cannot install signal handlers: {e}"))?;
    let upgrading = Arc::new(AtomicBool::new(false));
    std::thread::Builder::new()
        .name("stoa-signals".into())
        .spawn(move || {
            for signal in signals.forever() {
                match signal {
                    SIGHUP => {
                        log::info!("SIGHUP: rescanning the apps directory");
                        if apps.send(Event::Rescan).is_err() {
                            log::warn!("SIGHUP ignored: the apps thread has stopped (draining)");
                        }
                    }
                    SIGUSR1 => match &shared.access_log {
                        Some(log) => log.reopen(),
                        None => log::info!("SIGUSR1: no access log file to reopen"),
                    },
                    SIGUSR2 => start_upgrade(&shared, &upgrade, &upgrading, graceful),
                    _ if shared.control.draining() => {
                        log::warn!("second signal {signal}: exiting now");
                        plugin_copy::remove_private_dir();
                        listen::remove_unix_sockets();
                        crate::ops::error_log::flush(crate::ops::log_writer::EXIT_FLUSH);
                        std::process::exit(1);
                    }
                    _ => drain(&shared, &upgrade, graceful, &format!("signal {signal}")),
                }
            }
        })
        .map_err(|e| format!("cannot start the signal thread: {e}"))?;
    Ok(())
}

/// Stops accepting and lets in-flight requests finish, up to `graceful`.
fn drain(shared: &Arc<Shared>, upgrade: &Upgrade, graceful: Duration, why: &str) {
    log::info!("{why}: draining (graceful timeout {graceful:?})");
    upgrade.release();
    shared.control.drain();
    notify::stopping(&format!("draining after {why}"));
    let shared = shared.clone();
    let _ = std::thread::Builder::new()
        .name("stoa-graceful-timeout".into())
        .spawn(move || {
            std::thread::sleep(graceful);
            shared.control.force();
        });
}

/// Runs an upgrade on its own thread (the new process may take a while to
/// load its apps; signals are still read meanwhile); one at a time.
fn start_upgrade(
    shared: &Arc<Shared>,
    upgrade: &Arc<Upgrade>,
    upgrading: &Arc<AtomicBool>,
    graceful: Duration,
) {
    if shared.control.draining() {
        log::warn!("SIGUSR2 ignored: this stoa is draining");
        return;
    }
    if upgrading.swap(true, SeqCst) {
        log::warn!("SIGUSR2 ignored: an upgrade is already under way");
        return;
    }
    log::info!("SIGUSR2: starting a new stoa with this one's sockets");
    let (shared, upgrade, upgrading) = (shared.clone(), upgrade.clone(), upgrading.clone());
    let started = std::thread::Builder::new()
        .name("stoa-upgrade".into())
        .spawn(move || {
            // At most one old process drains at a time.
            crate::ops::upgrade::wait_for_predecessor(graceful + Duration::from_secs(1));
            match upgrade.run() {
                Ok(pid) => {
                    log::info!("upgrade: the new stoa (pid {pid}) is ready and serves");
                    notify::main_pid(pid);
                    listen::keep_unix_sockets();
                    drain(&shared, &upgrade, graceful, "upgrade");
                }
                Err(e) => log::error!("upgrade failed: {e}; this stoa keeps serving"),
            }
            upgrading.store(false, SeqCst);
        });
    if let Err(e) = started {
        log::error!("upgrade failed: cannot start its thread: {e}; this stoa keeps serving");
    }
}

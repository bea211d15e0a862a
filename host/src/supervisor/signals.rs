//! The signals the supervisor acts on: SIGHUP and SIGUSR1 passed on to
//! every worker, SIGUSR2 (an upgrade), and SIGTERM or SIGINT, which drain
//! every worker (a second one kills them); and the drain's end.

use super::procs::Place;
use super::Supervisor;
use crate::error::BootError;
use crate::ops::notify;
use crossbeam_channel::Receiver;
use rustix::process::Signal;
use signal_hook::consts::{SIGCHLD, SIGHUP, SIGINT, SIGTERM, SIGUSR1, SIGUSR2};
use std::time::{Duration, Instant};

impl Supervisor {
    /// Acts on a signal; `Some` to end the supervisor with that result.
    pub(super) fn on_signal(&mut self, signal: i32) -> Option<Result<(), BootError>> {
        match signal {
            SIGCHLD => {}
            SIGHUP | SIGUSR1 => {
                let what = if signal == SIGHUP {
                    "SIGHUP: every worker rescans the apps directory"
                } else {
                    "SIGUSR1: every worker reopens its log files"
                };
                log::info!("{what}");
                if signal == SIGUSR1 {
                    crate::ops::error_log::reopen();
                    if let Some(log) = &self.access_log {
                        log.reopen();
                    }
                }
                let sig = if signal == SIGHUP {
                    Signal::HUP
                } else {
                    Signal::USR1
                };
                for p in self
                    .places
                    .iter()
                    .flat_map(|p| p.serving.iter().chain(&p.next))
                {
                    p.signal(sig);
                }
            }
            SIGUSR2 => self.replace_all("SIGUSR2"),
            _ if self.draining.is_some() => {
                log::warn!("second signal {signal}: killing the workers and exiting now");
                self.kill_all();
                return Some(Err(BootError::system(
                    "drain",
                    std::io::Error::other("stopped by a second signal"),
                )));
            }
            _ => {
                log::info!(
                    "signal {signal}: draining every worker (graceful timeout {:?})",
                    self.graceful
                );
                notify::stopping(&format!("draining after signal {signal}"));
                self.draining = Some(Instant::now());
                // New connections are refused once the workers close theirs.
                self.sockets.clear();
                for p in self.places.iter().flat_map(Place::all) {
                    p.signal(Signal::TERM);
                }
            }
        }
        None
    }

    /// While draining: done once every worker is gone; kills the rest
    /// past the graceful timeout.
    pub(super) fn drained(&mut self) -> Option<Result<(), BootError>> {
        let since = self.draining?;
        let past = since.elapsed() > self.graceful + Duration::from_secs(1);
        if self.places.iter().all(|p| p.all().next().is_none()) {
            if past {
                return Some(Err(BootError::system(
                    "drain",
                    std::io::Error::other("the graceful timeout passed: workers were killed"),
                )));
            }
            log::info!("every worker drained; exiting");
            return Some(Ok(()));
        }
        if past {
            log::warn!("graceful timeout passed; killing the workers still running");
            self.kill_all();
        }
        None
    }

    /// SIGKILL to every worker process: a second signal, the graceful
    /// timeout passed, or a start-up that failed.
    pub(super) fn kill_all(&mut self) {
        for p in self.places.iter().flat_map(Place::all) {
            p.signal(Signal::KILL);
        }
    }
}

/// The signals the supervisor acts on, from a thread of their own.
pub(super) fn signals() -> Result<Receiver<i32>, BootError> {
    let mut signals =
        signal_hook::iterator::Signals::new([SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2, SIGCHLD])
            .map_err(|e| BootError::system("install signal handlers", e))?;
    let (tx, rx) = crossbeam_channel::unbounded();
    std::thread::Builder::new()
        .name("stoa-signals".into())
        .spawn(move || {
            for signal in signals.forever() {
                if tx.send(signal).is_err() {
                    return;
                }
            }
        })
        .map_err(|e| BootError::thread("the signal thread", e))?;
    Ok(rx)
}

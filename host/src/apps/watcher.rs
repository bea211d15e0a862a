//! The apps thread: the one owner of the `Registry` once the host serves.
//! It rescans the directory every second (when watching), on SIGHUP (a
//! message from the signal thread, which never waits for it) and when a
//! young file a signal found may have settled; and it mounts each app when
//! its constructor, run on a thread of its own, reports back. No lock is
//! held while app code runs, so a slow or hung constructor delays only its
//! own app. The host is ready (READY=1, /ready) once the constructors
//! start-up began have returned or been refused at `--init-timeout`: the
//! apps thread says so once (`spawn`'s `started`).

use crate::apps::error::LoadError;
use crate::apps::registry::{AppTable, Registry, Scan};
use crate::control::Control;
use crate::error::BootError;
use crossbeam_channel::{RecvTimeoutError, Sender};
use std::path::PathBuf;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often the directory is scanned while watching.
const WATCH_EVERY: Duration = Duration::from_secs(1);

/// A constructor running longer than this is logged by app and file, and
/// start-up serves without its app (mounted when the constructor returns).
pub const CONSTRUCTOR_BOUND: Duration = Duration::from_secs(5);

/// What the apps thread is told.
pub enum Event {
    /// SIGHUP: scan now.
    Rescan,
    /// An app's constructor returned.
    Built(Built),
    /// The host has drained: stop, letting go of the mounted generations.
    Stop,
}

/// A constructor's outcome, for the plugin file it was loaded from.
pub struct Built {
    pub path: PathBuf,
    /// Which load of the file this was (a newer load supersedes it).
    pub ticket: u64,
    pub name: String,
    pub result: Result<(), LoadError>,
}

/// Start-up: waits up to `CONSTRUCTOR_BOUND` (or `--init-timeout`, if
/// shorter) for the constructors the first scan started, mounting each app
/// as its constructor returns; the host then serves without the apps still
/// constructing (and gets ready once they are done, see `spawn`).
pub fn await_constructors(registry: &mut Registry) {
    let deadline = Instant::now() + CONSTRUCTOR_BOUND.min(registry.init_timeout());
    while registry.constructing() > 0 {
        match registry.recv_until(deadline) {
            Ok(Event::Built(built)) => {
                registry.built(built);
            }
            // The signal thread does not exist yet.
            Ok(Event::Rescan | Event::Stop) => {}
            Err(_) => break,
        }
    }
    registry.refuse_past_init_timeout();
    registry.warn_slow_constructors();
    let left = registry.constructing();
    if left > 0 {
        log::warn!("serving while {left} app constructor(s) still run; each app is mounted when its constructor returns");
    }
}

/// Runs the apps thread until the host drains (and, told to `Stop`, drops
/// the registry: its mounted generations are then retired once nothing
/// else holds them). `started` is sent to once no start-up constructor is
/// left (the state saying so published first), or dropped if the host
/// drains before.
pub fn spawn(
    mut registry: Registry,
    table: AppTable,
    control: Arc<Control>,
    watching: bool,
    started: Sender<()>,
) -> Result<JoinHandle<()>, BootError> {
    let mut started = Some(started);
    std::thread::Builder::new()
        .name("stoa-apps".into())
        .spawn(move || {
            let mut tick = Instant::now() + WATCH_EVERY;
            loop {
                if started.is_some() && registry.starting().is_empty() {
                    if let Some(started) = started.take() {
                        let _ = started.send(());
                    }
                }
                let mut wake = registry.next_due();
                if registry.guarded() {
                    let soon = Instant::now() + Duration::from_secs(1);
                    wake = Some(wake.map_or(soon, |w| w.min(soon)));
                }
                if watching {
                    wake = Some(wake.map_or(tick, |w| w.min(tick)));
                }
                let deadline = wake.unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
                let mut changed = match registry.recv_until(deadline) {
                    Ok(Event::Rescan) => registry.scan(Scan::Signal),
                    Ok(Event::Built(built)) => registry.built(built),
                    Ok(Event::Stop) | Err(RecvTimeoutError::Disconnected) => return,
                    Err(RecvTimeoutError::Timeout) => false,
                };
                if control.draining() {
                    return;
                }
                let now = Instant::now();
                if watching && now >= tick {
                    tick = now + WATCH_EVERY;
                    changed |= registry.scan(Scan::Watch);
                }
                if registry.recheck_due() {
                    changed |= registry.scan(Scan::Recheck);
                }
                changed |= registry.refuse_past_init_timeout();
                changed |= registry.enforce_quarantine();
                registry.warn_slow_constructors();
                if changed {
                    table.publish(registry.state());
                }
            }
        })
        .map_err(|e| BootError::thread("the apps thread", e))
}

//! The service manager's notify protocol (`NOTIFY_SOCKET`, systemd's
//! `Type=notify`): `READY=1` once the apps are loaded and the listeners
//! serve, `STOPPING=1` when a drain starts, a `STATUS=` line with each, and
//! `WATCHDOG=1` keep-alives (when `WATCHDOG_USEC` asks for them) sent only
//! while no event loop is stuck, so the manager restarts a wedged process.
//! Without `NOTIFY_SOCKET` every call does nothing.

use crate::control::Control;
use crate::error::BootError;
use crate::ops::watchdog::Board;
use sd_notify::NotifyState;
use std::sync::Arc;
use std::time::Duration;

fn send(states: &[NotifyState<'_>]) {
    if let Err(e) = sd_notify::notify(false, states) {
        log::warn!("cannot notify the service manager (NOTIFY_SOCKET): {e}");
    }
}

/// The host serves: `READY=1`, our pid (a process started by an upgrade
/// becomes the service's main process), and a status line.
pub fn ready(status: &str) {
    send(&[
        NotifyState::Ready,
        NotifyState::MainPid(std::process::id()),
        NotifyState::Status(status),
    ]);
}

/// An upgrade's new process has taken over as the service's main process.
pub fn main_pid(pid: u32) {
    send(&[NotifyState::MainPid(pid)]);
}

/// A drain has started.
pub fn stopping(status: &str) {
    send(&[NotifyState::Stopping, NotifyState::Status(status)]);
}

/// The keep-alive period the manager asked for: `WATCHDOG_USEC`, for this
/// process unless `WATCHDOG_PID` names another (as `sd_watchdog_enabled`
/// reads them; a process started by an upgrade has no `WATCHDOG_PID`).
fn watchdog_usec() -> Option<u64> {
    let usec: u64 = std::env::var("WATCHDOG_USEC").ok()?.parse().ok()?;
    let ours = match std::env::var("WATCHDOG_PID") {
        Ok(pid) => pid.parse::<u32>().ok() == Some(std::process::id()),
        Err(_) => true,
    };
    (ours && usec > 0).then_some(usec)
}

/// Half the keep-alive period the manager asked for (`WATCHDOG_USEC`),
/// if it asked: how often to send `WATCHDOG=1`.
pub fn watchdog_every() -> Option<Duration> {
    watchdog_usec().map(|usec| Duration::from_micros(usec / 2).max(Duration::from_millis(10)))
}

/// One `WATCHDOG=1` keep-alive.
pub fn watchdog() {
    send(&[NotifyState::Watchdog]);
}

/// Starts the `WATCHDOG=1` keep-alive when the manager asked for it
/// (`WATCHDOG_USEC`, and `WATCHDOG_PID` naming us if set): every half
/// period, unless a worker is stuck.
pub fn spawn_watchdog(control: Arc<Control>, board: Arc<Board>) -> Result<(), BootError> {
    let Some(usec) = watchdog_usec() else {
        return Ok(());
    };
    let every = Duration::from_micros(usec / 2).max(Duration::from_millis(10));
    log::info!("service manager watchdog: WATCHDOG=1 every {every:?} while no worker is stuck");
    std::thread::Builder::new()
        .name("stoa-sd-watchdog".into())
        .spawn(move || loop {
            std::thread::sleep(every);
            if control.draining() {
                return;
            }
            match board.not_ready() {
                None => send(&[NotifyState::Watchdog]),
                Some(why) => log::debug!("WATCHDOG=1 withheld: {why}"),
            }
        })
        .map(|_| ())
        .map_err(|e| BootError::thread("the service manager watchdog", e))
}

//! The service manager's notify protocol (`NOTIFY_SOCKET`, systemd's
//! `Type=notify`): `READY=1` once the listeners serve and every start-up
//! constructor has returned or been refused at `--init-timeout`, `STOPPING=1` when a drain starts, a `STATUS=` line with each, and
//! `WATCHDOG=1` keep-alives (when `WATCHDOG_USEC` asks for them) sent only
//! while no event loop is stuck, so the manager restarts a wedged process.
//! Without `NOTIFY_SOCKET` every call does nothing.
//!
//! A process started by an upgrade has two sockets: `NOTIFY_SOCKET` is the
//! old process's private one, which takes only its `READY=1` (and is gone
//! once the old one has read it); everything after goes to the service
//! manager's own socket, which the old process passes in
//! `STOA_SERVICE_NOTIFY_SOCKET` (empty when there is none).

use crate::control::Control;
use crate::error::BootError;
use crate::ops::watchdog::Board;
use sd_notify::NotifyState;
use std::ffi::{OsStr, OsString};
use std::fmt::Write as _;
use std::os::unix::net::UnixDatagram;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// The service manager's socket, for a process started by an upgrade
/// (empty: no service manager).
pub const SERVICE_SOCKET_ENV: &str = "STOA_SERVICE_NOTIFY_SOCKET";

/// Where notifications go, read once.
struct Sockets {
    /// Where `READY=1` goes (`NOTIFY_SOCKET`).
    ready: Option<OsString>,
    /// Where the rest goes: the service manager's socket.
    service: Option<OsString>,
}

fn sockets() -> &'static Sockets {
    static SOCKETS: OnceLock<Sockets> = OnceLock::new();
    SOCKETS.get_or_init(|| {
        let notify = std::env::var_os("NOTIFY_SOCKET").filter(|s| !s.is_empty());
        match std::env::var_os(SERVICE_SOCKET_ENV) {
            Some(service) => Sockets {
                ready: notify,
                service: (!service.is_empty()).then_some(service),
            },
            None => Sockets {
                ready: notify.clone(),
                service: notify,
            },
        }
    })
}

/// The service manager's socket, for an upgrade to pass on.
pub fn service_socket() -> Option<&'static OsStr> {
    sockets().service.as_deref()
}

/// Sends `states` as one datagram to `socket` (a path, or `@name` for an
/// abstract socket, as sd_notify(3) takes it); nothing without a socket.
fn send_to(socket: Option<&OsStr>, states: &[NotifyState<'_>]) {
    let Some(socket) = socket else {
        return;
    };
    let mut msg = String::new();
    for s in states {
        let _ = writeln!(msg, "{s}");
    }
    let sent = UnixDatagram::unbound().and_then(|sock| {
        let bytes = socket.as_encoded_bytes();
        match bytes.strip_prefix(b"@") {
            Some(name) => {
                use std::os::linux::net::SocketAddrExt;
                let addr = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
                sock.send_to_addr(msg.as_bytes(), &addr)
            }
            None => sock.send_to(msg.as_bytes(), socket),
        }
    });
    if let Err(e) = sent {
        log::warn!(
            "cannot notify the service manager ({}): {e}",
            socket.to_string_lossy()
        );
    }
}

/// To the service manager.
fn send(states: &[NotifyState<'_>]) {
    send_to(sockets().service.as_deref(), states);
}

/// The host serves: `READY=1`, our pid (a process started by an upgrade
/// becomes the service's main process), and a status line. Started by an
/// upgrade, `READY=1` goes to the old process's private socket, and the
/// pid and status line to the service manager.
pub fn ready(status: &str) {
    let sockets = sockets();
    let states = [
        NotifyState::Ready,
        NotifyState::MainPid(std::process::id()),
        NotifyState::Status(status),
    ];
    if sockets.ready == sockets.service {
        send_to(sockets.ready.as_deref(), &states);
    } else {
        send_to(sockets.ready.as_deref(), &states[..1]);
        send_to(sockets.service.as_deref(), &states[1..]);
    }
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
/// reads them; a process started by an upgrade has no `WATCHDOG_PID`, and
/// is passed `WATCHDOG_USEC` only when the watchdog was this one's).
pub fn watchdog_usec() -> Option<u64> {
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

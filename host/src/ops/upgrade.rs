//! Zero-downtime upgrade of the host binary (SIGUSR2, as nginx and
//! gunicorn do): the running stoa starts the binary at its own path, as
//! recorded at start-up, with its own arguments, and passes it every
//! listening socket it has (each worker's, so no `SO_REUSEPORT` socket is
//! left behind to blackhole the connections the kernel hashes to it) by
//! the socket-activation convention (`LISTEN_FDS`, fds from 3, and
//! `LISTEN_FDNAMES` when the sockets have names), which the new process
//! adopts. It waits for the new process's `READY=1` on a
//! private notify socket, then drains and exits; under a service manager
//! it announces the new process with `MAINPID=`. A new process that exits
//! or does not get ready in time is stopped, logged, and the old one keeps
//! serving.

use crate::error::BootError;
use crate::listen::HandOver;
use crate::ops::notify;
use command_fds::{CommandFdExt, FdMapping};
use std::ffi::OsString;
use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Set in the new process's environment: the pid of the stoa it replaces
/// (it takes the passed sockets without `LISTEN_PID`, see `listen`).
const FROM_ENV: &str = crate::listen::UPGRADED_FROM_ENV;

/// How long the new process has to report ready (it loads and constructs
/// every app first).
const READY_BOUND: Duration = Duration::from_secs(60);

/// How long a new process that is not ready yet has to exit after SIGTERM
/// when this one drains, before SIGKILL.
pub const STOP_BOUND: Duration = Duration::from_secs(5);

/// Waits (bounded) until the stoa this one replaced has exited, so at
/// most one old process drains at a time.
pub fn wait_for_predecessor(bound: Duration) {
    let Some(pid) = upgrading_from().and_then(|p| rustix::process::Pid::from_raw(p as i32)) else {
        return;
    };
    let deadline = Instant::now() + bound;
    let mut told = false;
    let alive = || {
        // A zombie (exited, not reaped yet) has finished draining too.
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid.as_raw_nonzero()));
        let zombie = stat.is_ok_and(|s| {
            s.rsplit(')')
                .next()
                .is_some_and(|t| t.trim_start().starts_with('Z'))
        });
        rustix::process::test_kill_process(pid).is_ok() && !zombie
    };
    while alive() && Instant::now() < deadline {
        if !told {
            log::info!(
                "waiting for the previous stoa (pid {}) to finish draining first",
                pid.as_raw_nonzero()
            );
            told = true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The pid of the stoa this process is upgrading, if it was started so.
pub fn upgrading_from() -> Option<u32> {
    std::env::var(FROM_ENV).ok()?.parse().ok()
}

/// The binary this process was started from (a binary replaced by
/// rename reads as "PATH (deleted)": the new file at PATH is the one to
/// start).
pub fn own_binary() -> PathBuf {
    std::env::current_exe()
        .map(|p| {
            let text = p.to_string_lossy();
            match text.strip_suffix(" (deleted)") {
                Some(live) => PathBuf::from(live),
                None => p,
            }
        })
        .unwrap_or_else(|_| PathBuf::from("stoa"))
}

/// What an upgrade needs, taken at start-up.
pub struct Upgrade {
    exe: PathBuf,
    args: Vec<OsString>,
    /// Duplicates of every listening socket; dropped when this process
    /// drains, so a draining stoa refuses new connections.
    sockets: Mutex<Option<Vec<HandOver>>>,
    /// The new process while it is not ready yet.
    pending: Mutex<Pending>,
}

/// An upgrade's new process until it is ready, or that a drain stopped it.
#[derive(Default)]
struct Pending {
    child: Option<Child>,
    /// Set by a drain: no new process is started after it.
    abandoned: bool,
}

impl Upgrade {
    /// Records the binary's path (a binary replaced by rename reads as
    /// "PATH (deleted)": the new file at PATH is the one to start) and the
    /// arguments, and keeps `sockets`.
    pub fn new(sockets: Vec<HandOver>) -> Self {
        Upgrade {
            exe: own_binary(),
            args: std::env::args_os().skip(1).collect(),
            sockets: Mutex::new(Some(sockets)),
            pending: Mutex::new(Pending::default()),
        }
    }

    fn pending(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// This process drains: an upgrade's new process that is not ready
    /// yet is stopped (SIGTERM, SIGKILL after `STOP_BOUND`) and reaped, so
    /// it does not go on serving as an orphan; none is started after this.
    /// Returns once it is gone.
    pub fn abandon(&self) {
        let child = {
            let mut pending = self.pending();
            pending.abandoned = true;
            pending.child.take()
        };
        let Some(mut child) = child else {
            return;
        };
        let pid = child.id();
        log::warn!(
            "draining during an unfinished upgrade: stopping the new stoa (pid {pid}) (SIGTERM, \
             SIGKILL after {STOP_BOUND:?})"
        );
        if let Some(p) = i32::try_from(pid)
            .ok()
            .and_then(rustix::process::Pid::from_raw)
        {
            let _ = rustix::process::kill_process(p, rustix::process::Signal::TERM);
        }
        let deadline = Instant::now() + STOP_BOUND;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = child.try_wait() {
                log::info!("the unfinished new stoa (pid {pid}) stopped ({status})");
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        log::warn!(
            "the unfinished new stoa (pid {pid}) did not stop within {STOP_BOUND:?}: SIGKILL"
        );
        let _ = child.kill();
        let _ = child.wait();
    }

    /// Lets the sockets go (this process drains).
    pub fn release(&self) {
        self.sockets
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
    }

    /// Starts the new process and waits until it is ready; its pid, or why
    /// it did not take over (this process then keeps serving).
    pub fn run(&self) -> Result<u32, BootError> {
        let fds = {
            let sockets = self.sockets.lock().unwrap_or_else(|p| p.into_inner());
            let Some(sockets) = sockets.as_ref() else {
                return Err(BootError::Draining);
            };
            // A socket the watchdog shut down (its worker was stuck, and
            // listens on a new one since) is not handed over: accepting on
            // it fails.
            sockets
                .iter()
                .filter(|s| {
                    let dead = matches!(socket2::SockRef::from(&s.fd).is_listener(), Ok(false));
                    if dead {
                        log::info!("upgrade: a socket that no longer listens is not handed over");
                    }
                    !dead
                })
                .map(|s| {
                    Ok(HandOver {
                        fd: s.fd.try_clone()?,
                        name: s.name.clone(),
                        own: s.own,
                    })
                })
                .collect::<std::io::Result<Vec<_>>>()
                .map_err(|e| BootError::system("duplicate the listening sockets", e))?
        };
        let dir = tempfile::Builder::new()
            .prefix("stoa-upgrade-")
            .tempdir()
            .map_err(notify_socket)?;
        let notify_path = dir.path().join("notify");
        let notify = UnixDatagram::bind(&notify_path)
            .and_then(|s| {
                s.set_read_timeout(Some(Duration::from_millis(100)))
                    .map(|()| s)
            })
            .map_err(notify_socket)?;
        // Started under the lock a drain takes: the drain either finds
        // the new process to stop or comes first and none is started.
        let pid = {
            let mut pending = self.pending();
            if pending.abandoned {
                return Err(BootError::Draining);
            }
            let child = self.spawn(fds, &notify_path)?;
            let pid = child.id();
            pending.child = Some(child);
            pid
        };
        log::info!("upgrade: started the new stoa (pid {pid}); waiting for its READY=1");
        let ready = wait_ready(&notify, &self.pending);
        if ready.is_err() {
            if let Some(mut child) = self.pending().child.take() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        ready.map(|()| pid)
    }

    fn spawn(&self, fds: Vec<HandOver>, notify: &std::path::Path) -> Result<Child, BootError> {
        let count = fds.len();
        let names = crate::listen::fd_names(fds.iter().map(|s| s.name.as_deref()));
        // The ones a stoa bound (not a service manager's).
        let own = fds
            .iter()
            .enumerate()
            .filter(|(_, s)| s.own)
            .map(|(i, _)| i.to_string())
            .collect::<Vec<_>>()
            .join(",");
        let mappings = fds
            .into_iter()
            .enumerate()
            .map(|(i, s)| FdMapping {
                parent_fd: s.fd,
                child_fd: 3 + i as i32,
            })
            .collect();
        let mut cmd = Command::new(&self.exe);
        cmd.args(&self.args)
            .env("LISTEN_FDS", count.to_string())
            .env_remove("LISTEN_PID")
            .env_remove("LISTEN_FDNAMES")
            .env_remove("WATCHDOG_PID")
            .env_remove("WATCHDOG_USEC")
            // READY=1 to the private socket, the rest to the manager's.
            .env(
                notify::SERVICE_SOCKET_ENV,
                notify::service_socket().unwrap_or_default(),
            );
        if let Some(usec) = notify::watchdog_usec() {
            cmd.env("WATCHDOG_USEC", usec.to_string());
        }
        cmd.env(crate::listen::OWN_SOCKETS_ENV, own);
        if !names.is_empty() {
            cmd.env("LISTEN_FDNAMES", names);
        }
        cmd.env("NOTIFY_SOCKET", notify)
            .env(FROM_ENV, std::process::id().to_string());
        cmd.fd_mappings(mappings)?;
        spawn_retrying(&mut cmd).map_err(|e| BootError::file("start", &self.exe, e))
    }
}

/// The upgrade's private notify socket (or its directory) could not be made.
fn notify_socket(e: std::io::Error) -> BootError {
    BootError::system("create the upgrade's notify socket", e)
}

/// Spawns `cmd`, retrying briefly while the binary is "busy" (ETXTBSY: a
/// freshly written binary whose writer's descriptor another fork still
/// holds for a moment).
fn spawn_retrying(cmd: &mut Command) -> std::io::Result<Child> {
    let mut tries = 0;
    loop {
        match cmd.spawn() {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy && tries < 20 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(50));
            }
            other => return other,
        }
    }
}

/// Waits for `READY=1` from the new process (it is then no longer
/// pending), or its exit, or the bound, or a drain that took it.
fn wait_ready(notify: &UnixDatagram, pending: &Mutex<Pending>) -> Result<(), BootError> {
    let deadline = Instant::now() + READY_BOUND;
    let mut buf = [0u8; 4096];
    while Instant::now() < deadline {
        let said_ready = notify.recv(&mut buf).is_ok_and(|n| {
            let text = String::from_utf8_lossy(&buf[..n]);
            text.lines().any(|l| l == "READY=1")
        });
        let mut pending = pending.lock().unwrap_or_else(|p| p.into_inner());
        let Some(child) = pending.child.as_mut() else {
            // A drain stopped it.
            return Err(BootError::Draining);
        };
        if said_ready {
            pending.child = None;
            return Ok(());
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(BootError::ExitedBeforeReady { status });
        }
    }
    Err(BootError::NotReady {
        secs: READY_BOUND.as_secs(),
    })
}

//! What passes from the supervisor to a worker process: the hidden
//! subcommand that makes the `stoa` binary a worker, the listening sockets
//! (at descriptors 3.., by the socket-activation convention), the shared
//! area's memfd (right after them), and a few variables naming them. The
//! worker keeps the user's own arguments, so it reads the same flags and
//! configuration file.

use crate::boot::WorkerRole;
use crate::error::BootError;
use crate::listen;
use crate::ops::worker_row::{area_words, Row};
use crate::shm::Area;
use command_fds::{CommandFdExt, FdMapping};
use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

/// The first argument that makes `stoa` a worker process.
pub const SUBCOMMAND: &str = "__stoa-worker";

/// The supervisor's pid (a worker whose parent is another exits).
const OF: &str = "STOA_WORKER_OF";
/// `ROW:ROWS`: the worker's row, and the rows the area has.
const ROW: &str = "STOA_WORKER_ROW";
/// How many listening sockets start at descriptor 3.
const SOCKETS: &str = "STOA_WORKER_SOCKETS";

/// What the supervisor hands each worker.
pub struct Handoff<'a> {
    pub exe: std::path::PathBuf,
    pub args: &'a [OsString],
    pub sockets: &'a [OwnedFd],
    /// The sockets' `LISTEN_FDNAMES` (empty: none has a name).
    pub names: &'a str,
    pub area: &'a Area,
    pub rows: usize,
}

impl Handoff<'_> {
    /// The command that starts a worker on row `row`.
    pub fn command(&self, row: usize) -> Result<Command, BootError> {
        let dup = |fd: &OwnedFd| {
            fd.try_clone()
                .map_err(|e| BootError::system("duplicate a descriptor for a worker", e))
        };
        let mut mappings = Vec::with_capacity(self.sockets.len() + 1);
        for (i, socket) in self.sockets.iter().enumerate() {
            mappings.push(FdMapping {
                parent_fd: dup(socket)?,
                child_fd: 3 + i as i32,
            });
        }
        mappings.push(FdMapping {
            parent_fd: dup(&self.area.fd)?,
            child_fd: 3 + self.sockets.len() as i32,
        });
        let mut cmd = Command::new(&self.exe);
        // A group of its own: a terminal's Ctrl-C reaches the supervisor,
        // which tells the workers once.
        cmd.process_group(0);
        cmd.arg(SUBCOMMAND)
            .args(self.args)
            .env(OF, std::process::id().to_string())
            .env(ROW, format!("{row}:{}", self.rows))
            .env(SOCKETS, self.sockets.len().to_string())
            // What apps read to know they share no memory with the other
            // workers (the Python bridge's wsgi.multiprocess).
            .env("STOA_WORKER_PROCESS", "1")
            // The service manager talks to the supervisor alone.
            .env_remove("NOTIFY_SOCKET")
            .env_remove("WATCHDOG_USEC")
            .env_remove("WATCHDOG_PID")
            .env_remove("LISTEN_FDS")
            .env_remove("LISTEN_PID")
            .env_remove(listen::OWN_SOCKETS_ENV)
            .env_remove(listen::UPGRADED_FROM_ENV)
            .env_remove("STOA_SERVICE_NOTIFY_SOCKET");
        match self.names.is_empty() {
            true => cmd.env_remove("LISTEN_FDNAMES"),
            false => cmd.env("LISTEN_FDNAMES", self.names),
        };
        cmd.fd_mappings(mappings)?;
        Ok(cmd)
    }
}

/// In a worker process: dies with the supervisor, maps its row and adopts
/// the sockets.
pub fn take() -> Result<WorkerRole, BootError> {
    let bad = |what: &str| {
        BootError::system(
            format!("start as a worker process ({what})"),
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "started by hand?"),
        )
    };
    let of: u32 = var(OF)
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| bad(OF))?;
    rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))
        .map_err(|e| BootError::system("ask to die with the supervisor", e.into()))?;
    // The supervisor may have died before the line above.
    if rustix::process::getppid().map(|p| p.as_raw_nonzero().get()) != i32::try_from(of).ok() {
        return Err(bad("the supervisor is gone"));
    }
    let (row_index, rows) = var(ROW)
        .and_then(|v| {
            let (a, b) = v.split_once(':')?;
            Some((a.parse::<usize>().ok()?, b.parse::<usize>().ok()?))
        })
        .ok_or_else(|| bad(ROW))?;
    let count: usize = var(SOCKETS)
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| bad(SOCKETS))?;
    let area = inherited_area(count, area_words(rows))?.words;
    let row = Row::of(area, row_index).ok_or_else(|| bad(ROW))?;
    row.set_pid(std::process::id());
    crate::ops::error_log::name_writer(format!(
        "worker {} pid {}",
        row.place(),
        std::process::id()
    ));
    for name in [OF, ROW, SOCKETS] {
        std::env::remove_var(name);
    }
    std::env::set_var("LISTEN_FDS", count.to_string());
    std::env::set_var("LISTEN_PID", std::process::id().to_string());
    let sockets = listen::inherited()?.unwrap_or_default();
    if sockets.len() != count {
        return Err(bad("fewer sockets than announced"));
    }
    Ok(WorkerRole {
        row,
        area,
        rows,
        row_index,
        sockets,
    })
}

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// Maps the shared area of `words` words inherited right after `sockets`
/// listening sockets (a worker's, or a re-executed supervisor's), opened
/// anew through /proc, which needs no unsafe adoption of a raw descriptor.
pub(super) fn inherited_area(sockets: usize, words: usize) -> Result<Area, BootError> {
    let path = format!("/proc/self/fd/{}", 3 + sockets);
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .map_err(|e| BootError::file("open the shared area", Path::new(&path), e))?;
    Area::adopt(OwnedFd::from(file), words).map_err(|e| BootError::system("map the shared area", e))
}

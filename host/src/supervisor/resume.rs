//! The supervisor's re-execution in place (the last step of SIGUSR2): the
//! new binary is started in this same process (same pid: PID 1 in a
//! container, systemd's main PID), with the listening sockets at
//! descriptors 3.. (`LISTEN_FDS`, naming this pid), the shared area after
//! them, and the worker processes it adopts (they are still its children)
//! in one variable.

use crate::error::BootError;
use crate::shm::Area;
use command_fds::{CommandFdExt, FdMapping};
use serde::{Deserialize, Serialize};
use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

const RESUME: &str = "STOA_SUPERVISOR_RESUME";

/// What the re-executed supervisor takes over.
#[derive(Serialize, Deserialize, Debug, PartialEq)]
pub struct Resumed {
    pub sockets: usize,
    pub rows: usize,
    /// `(place, pid, row)` of each serving worker.
    pub workers: Vec<(usize, i32, usize)>,
    /// Crashes counted so far, by place.
    pub crashes: Vec<u64>,
    /// The Unix socket files the supervisor created, `(path, device,
    /// inode)`: still watched and removed at exit after the re-execution.
    #[serde(default)]
    pub unix_files: Vec<(std::path::PathBuf, u64, u64)>,
}

/// Replaces this process's image with `exe`; returns only on failure.
pub fn exec(
    exe: &Path,
    args: &[OsString],
    sockets: &[OwnedFd],
    names: &str,
    area: &Area,
    resumed: &Resumed,
) -> BootError {
    let text = match serde_json::to_string(resumed) {
        Ok(text) => text,
        Err(e) => return BootError::system("re-execute the supervisor", std::io::Error::other(e)),
    };
    let mut mappings = Vec::with_capacity(sockets.len() + 1);
    for (i, fd) in sockets.iter().chain([&area.fd]).enumerate() {
        match fd.try_clone() {
            Ok(parent_fd) => mappings.push(FdMapping {
                parent_fd,
                child_fd: 3 + i as i32,
            }),
            Err(e) => return BootError::system("re-execute the supervisor", e),
        }
    }
    let mut cmd = Command::new(exe);
    cmd.args(args)
        .env(RESUME, text)
        .env("LISTEN_FDS", sockets.len().to_string())
        .env("LISTEN_PID", std::process::id().to_string())
        .env_remove("LISTEN_FDNAMES");
    if !names.is_empty() {
        cmd.env("LISTEN_FDNAMES", names);
    }
    if let Err(e) = cmd.fd_mappings(mappings) {
        return e.into();
    }
    let e = cmd.exec();
    BootError::file("re-execute the supervisor from", exe, e)
}

/// In a re-executed supervisor: what it takes over, read once.
pub fn take() -> Option<Resumed> {
    let text = std::env::var(RESUME).ok()?;
    std::env::remove_var(RESUME);
    match serde_json::from_str(&text) {
        Ok(resumed) => Some(resumed),
        Err(e) => {
            log::error!("cannot read what the previous supervisor image handed over: {e}");
            None
        }
    }
}

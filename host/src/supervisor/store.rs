//! The store of plugin copies the workers keep for rollbacks (see
//! `apps::quarantine`): a 0700 directory the supervisor makes at start-up
//! (`stoa-generations-PID-XXXXXX` in the temp dir), names to its workers in
//! `ops::peers::STORE_ENV`, keeps across its re-execution, and removes when
//! it exits. A supervisor that could not remove its store (SIGKILL, the
//! OOM killer, a power cut) leaves it behind, with copies of every plugin
//! it vetted: the next supervisor to start removes each store whose pid is
//! gone, so a host killed again and again does not fill the disk.
//!
//! A pid alone cannot tell: a supervisor in another PID namespace sharing
//! the temp dir (a container as PID 1 beside others) has a pid this one
//! cannot see. So each supervisor also holds an exclusive `flock` on the
//! store's `owner.lock` while it lives (the kernel drops it when the
//! process dies, in any namespace), and a store is removed only when its
//! pid is gone and its lock can be taken. A store without the lock file
//! (an older release's, or one being made) is left: the safe mistake.

use crate::error::BootError;
use crate::ops::peers::STORE_ENV;
use rustix::fs::{flock, FlockOperation};
use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

const PREFIX: &str = "stoa-generations-";
/// The file whose lock says the store's supervisor lives.
const LOCK: &str = "owner.lock";

/// The store, and the lock on it held while this supervisor lives.
pub struct Store {
    path: PathBuf,
    _owner: File,
}

impl Store {
    /// A new store, or (`resumed`) the one the previous image made.
    pub fn open(resumed: bool) -> Result<Store, BootError> {
        if resumed {
            if let Some(path) = std::env::var_os(STORE_ENV) {
                let path = PathBuf::from(path);
                let owner = own(&path)?;
                return Ok(Store {
                    path,
                    _owner: owner,
                });
            }
        }
        sweep_orphans(&std::env::temp_dir());
        let dir = tempfile::Builder::new()
            .prefix(&format!("{PREFIX}{}-", std::process::id()))
            .tempdir()
            .map_err(|e| BootError::system("create the store of plugin copies", e))?;
        let path = dir.keep();
        let owner = own(&path)?;
        std::env::set_var(STORE_ENV, &path);
        Ok(Store {
            path,
            _owner: owner,
        })
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.path) {
            log::warn!("cannot remove {}: {e}", self.path.display());
        }
    }
}

/// Takes the lock of the store at `path` for this process's life.
fn own(path: &Path) -> Result<File, BootError> {
    let lock = path.join(LOCK);
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock)
        .map_err(|e| BootError::file("create", &lock, e))?;
    flock(&file, FlockOperation::NonBlockingLockExclusive)
        .map_err(|e| BootError::file("lock", &lock, e.into()))?;
    Ok(file)
}

/// The lock of the store at `path` if no live process holds it; `None` if
/// one does, or the store has no lock file.
fn orphaned(path: &Path) -> Option<File> {
    let file = File::options().write(true).open(path.join(LOCK)).ok()?;
    flock(&file, FlockOperation::NonBlockingLockExclusive).ok()?;
    Some(file)
}

/// Removes the stores in `dir` that this user owns, whose supervisor's pid
/// is no longer alive and whose lock no process holds. A store without a
/// pid in its name or without a lock file (an older release's) is left
/// alone, as is one whose pid lives (it may be reused by another process:
/// then the store stays, which is the safe mistake) or whose lock is held
/// (a supervisor in another PID namespace).
fn sweep_orphans(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let me = rustix::process::geteuid().as_raw();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = orphan_pid(&name.to_string_lossy()) else {
            continue;
        };
        let path = entry.path();
        let ours = std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir() && m.uid() == me);
        if !ours || alive(pid) {
            continue;
        }
        // Held while the store goes.
        let Some(_lock) = orphaned(&path) else {
            continue;
        };
        match std::fs::remove_dir_all(&path) {
            Ok(()) => log::info!(
                "removed {}: the store of plugin copies of a stoa (pid {pid}) that ended \
                 without removing it",
                path.display()
            ),
            Err(e) => log::warn!("cannot remove the stale store {}: {e}", path.display()),
        }
    }
}

/// The pid in a store's name `stoa-generations-PID-XXXXXX`.
fn orphan_pid(name: &str) -> Option<i32> {
    let rest = name.strip_prefix(PREFIX)?;
    let (pid, _) = rest.split_once('-')?;
    pid.parse().ok().filter(|&p| p > 0)
}

fn alive(pid: i32) -> bool {
    match rustix::process::Pid::from_raw(pid) {
        // EPERM: alive, another user's.
        Some(pid) => !matches!(
            rustix::process::test_kill_process(pid),
            Err(rustix::io::Errno::SRCH)
        ),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_s_name_gives_its_pid() {
        assert_eq!(orphan_pid("stoa-generations-4242-aB3xYz"), Some(4242));
        assert_eq!(orphan_pid("stoa-generations-aB3xYz"), None);
        assert_eq!(orphan_pid("stoa-generations-0-aB3xYz"), None);
        assert_eq!(orphan_pid("other-4242-x"), None);
    }

    #[test]
    fn only_stores_of_gone_pids_whose_lock_is_free_are_swept() {
        let dir = tempfile::tempdir().expect("a temp dir");
        // Pids that cannot be alive (past pid_max), ours, and a legacy name.
        let gone = dir.path().join(format!("{PREFIX}2147483000-abc"));
        let elsewhere = dir.path().join(format!("{PREFIX}2147483001-abc"));
        let live = dir
            .path()
            .join(format!("{PREFIX}{}-abc", std::process::id()));
        let legacy = dir.path().join(format!("{PREFIX}2147483002-abc"));
        for d in [&gone, &elsewhere, &live, &legacy] {
            std::fs::create_dir(d).expect("mkdir");
            std::fs::write(d.join("libx.so"), b"copy").expect("write");
        }
        for d in [&gone, &live] {
            std::fs::write(d.join(LOCK), b"").expect("a lock file");
        }
        // A supervisor in another PID namespace: its pid looks gone from
        // here, and it holds its lock.
        let _held = own(&elsewhere).expect("lock");
        sweep_orphans(dir.path());
        assert!(!gone.exists());
        assert!(elsewhere.exists(), "a held lock keeps the store");
        assert!(live.exists() && legacy.exists());
    }
}

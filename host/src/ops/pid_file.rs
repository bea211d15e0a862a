//! `--pid-file`: the process id, written once the listener is bound
//! (a temp file in the same directory, renamed over the path, so a reader
//! never sees half a number) and removed at a clean exit. A pid file that
//! names a live process refuses the start; a stale one is replaced. A stoa
//! started by an upgrade takes the file over only once it serves
//! (`serving`): until then it names the stoa it replaces, so an upgrade
//! that fails leaves the running server's file as it was.

use crate::error::BootError;
use rustix::io::Errno;
use rustix::process::{test_kill_process, Pid};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The claimed pid file; removed when dropped, if this process wrote it.
pub struct PidFile {
    path: PathBuf,
    pid: u32,
    written: bool,
}

impl PidFile {
    /// Claims `path` for this process: refuses when it names another live
    /// process, replaces it (with a log line) when that process is gone.
    pub fn claim(path: &Path) -> Result<PidFile, BootError> {
        let pid = std::process::id();
        // The stoa this one upgrades (SIGUSR2) hands its pid file over.
        let parent = crate::ops::upgrade::upgrading_from();
        if let Some(old) = read_pid(path)? {
            if old != pid && Some(old) != parent && alive(old) {
                return Err(BootError::PidFileInUse {
                    pid: old,
                    path: path.to_path_buf(),
                });
            }
            if old != pid {
                log::warn!(
                    "replacing the stale pid file {} (pid {old} is not running)",
                    path.display()
                );
            }
        }
        let mut file = PidFile {
            path: path.to_path_buf(),
            pid,
            written: false,
        };
        if parent.is_none() {
            file.write()?;
        }
        Ok(file)
    }

    /// This stoa serves: a stoa started by an upgrade writes its pid now
    /// (the one it replaces drains, and leaves the file alone).
    pub fn serving(&mut self) -> Result<(), BootError> {
        if self.written {
            return Ok(());
        }
        self.write()
    }

    fn write(&mut self) -> Result<(), BootError> {
        write_atomically(&self.path, self.pid)
            .map_err(|e| BootError::file("write the pid file", &self.path, e))?;
        self.written = true;
        log::info!("pid {} written to {}", self.pid, self.path.display());
        Ok(())
    }
}

impl Drop for PidFile {
    fn drop(&mut self) {
        // Only our own: another instance may have replaced it meanwhile,
        // and one started by an upgrade that never served never wrote it.
        if self.written && read_pid(&self.path).ok().flatten() == Some(self.pid) {
            if let Err(e) = std::fs::remove_file(&self.path) {
                log::warn!("cannot remove the pid file {}: {e}", self.path.display());
            }
        }
    }
}

/// The pid in an existing file; `None` when there is no file, or it holds
/// no pid (an empty or garbled file is stale).
fn read_pid(path: &Path) -> Result<Option<u32>, BootError> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(text.trim().parse().ok()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(BootError::file("read the pid file", path, e)),
    }
}

/// Whether a process with this id exists (`kill(pid, 0)`; one of another
/// user's answers EPERM, and is alive too).
fn alive(pid: u32) -> bool {
    let Some(pid) = i32::try_from(pid).ok().and_then(Pid::from_raw) else {
        return false;
    };
    match test_kill_process(pid) {
        Ok(()) => true,
        Err(e) => e == Errno::PERM,
    }
}

fn write_atomically(path: &Path, pid: u32) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::Builder::new()
        .prefix(".stoa-pid-")
        .tempfile_in(dir)?;
    // Readable by all, as pid files are (the temp file starts as 0600).
    let mode = std::os::unix::fs::PermissionsExt::from_mode(0o644);
    tmp.as_file().set_permissions(mode)?;
    writeln!(tmp, "{pid}")?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_replaces_stale_and_removes() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("stoa.pid");
        std::fs::write(&path, "not a pid\n").expect("write");
        let file = PidFile::claim(&path).expect("claim");
        let text = std::fs::read_to_string(&path).expect("read");
        assert_eq!(text, format!("{}\n", std::process::id()));
        drop(file);
        assert!(!path.exists());
    }

    #[test]
    fn a_dead_pid_is_stale() {
        assert!(alive(std::process::id()));
        assert!(!alive(0));
    }
}

//! The binary worker processes start from. The supervisor keeps the file
//! it runs open and starts workers through that descriptor
//! (`/proc/self/fd/N`), so a binary replaced on disk (a package upgrade,
//! a broken build copied over it) changes nothing until SIGUSR2 asks for
//! it: then the file now at the path is opened as a candidate, and it
//! becomes the binary only once a worker started from it serves.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

pub struct Binary {
    /// Where it was opened from.
    pub path: PathBuf,
    file: File,
}

impl Binary {
    /// Opens the file at `path`, at a descriptor of at least `above`
    /// (clear of the ones a worker's sockets are moved to).
    pub fn open(path: &Path, above: usize) -> std::io::Result<Binary> {
        let file = File::open(path)?;
        let high = rustix::io::fcntl_dupfd_cloexec(&file, i32::try_from(above).unwrap_or(1024))?;
        Ok(Binary {
            path: path.to_path_buf(),
            file: File::from(high),
        })
    }

    /// The path that starts exactly this file, in this process and in a
    /// child (which inherits the descriptor until its exec).
    pub fn exec_path(&self) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}", self.file.as_raw_fd()))
    }
}

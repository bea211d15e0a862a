//! Where a log's lines go: standard output or standard error, or a
//! regular file. Log files are opened non-blocking and must be regular: a
//! FIFO without a reader would block the `open` (of the signal thread
//! that reopens it), and a FIFO or device can stall every write.

use crate::error::BootError;
use std::fs::{File, Metadata, OpenOptions};
use std::io::{self, ErrorKind, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where a log's lines go.
pub enum Target {
    /// Standard output or standard error (a duplicate of the descriptor,
    /// written without the standard library's lock).
    Stream(File, &'static str),
    /// A regular file, opened for appending; reopened on SIGUSR1.
    File(File, PathBuf),
}

impl Target {
    /// `-` and `/dev/stdout` are standard output, `/dev/stderr` standard
    /// error; anything else must be a regular file (created if missing).
    pub fn parse(spec: &str) -> Result<Target, BootError> {
        match spec {
            "-" | "/dev/stdout" => Target::stream(io::stdout().as_fd(), "standard output"),
            "/dev/stderr" => Target::stream(io::stderr().as_fd(), "standard error"),
            _ => {
                let path = PathBuf::from(spec);
                Ok(Target::File(open_regular(&path)?, path))
            }
        }
    }

    pub fn stream(
        fd: std::os::fd::BorrowedFd<'_>,
        name: &'static str,
    ) -> Result<Target, BootError> {
        let fd = fd
            .try_clone_to_owned()
            .map_err(|e| BootError::system(format!("duplicate {name}"), e))?;
        Ok(Target::Stream(File::from(fd), name))
    }

    pub(crate) fn name(&self) -> String {
        match self {
            Target::Stream(_, name) => name.to_string(),
            Target::File(_, path) => path.display().to_string(),
        }
    }

    pub(crate) fn out(&mut self) -> &mut File {
        match self {
            Target::Stream(file, _) | Target::File(file, _) => file,
        }
    }
}

/// What `stoa check` can tell of a log target without creating it: a
/// path that is there must be a regular file, in a directory that is.
pub fn check(spec: &str) -> Result<(), BootError> {
    if matches!(spec, "-" | "/dev/stdout" | "/dev/stderr") {
        return Ok(());
    }
    let path = Path::new(spec);
    match std::fs::metadata(path) {
        Ok(meta) => not_regular(path, &meta),
        Err(_) => match path.parent().filter(|p| !p.as_os_str().is_empty()) {
            Some(dir) if !dir.is_dir() => Err(BootError::NoDirectory {
                path: path.to_path_buf(),
                dir: dir.to_path_buf(),
            }),
            _ => Ok(()),
        },
    }
}

/// Opens `path` for appending without blocking (a FIFO without a reader
/// would block `open`), refusing anything but a regular file.
pub fn open_regular(path: &Path) -> Result<File, BootError> {
    if let Ok(meta) = std::fs::metadata(path) {
        not_regular(path, &meta)?;
    }
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(
            |e| match path.parent().filter(|p| !p.as_os_str().is_empty()) {
                Some(dir) if e.kind() == ErrorKind::NotFound && !dir.is_dir() => {
                    BootError::NoDirectory {
                        path: path.to_path_buf(),
                        dir: dir.to_path_buf(),
                    }
                }
                _ => BootError::file("open", path, e),
            },
        )?;
    // It may have been replaced between the check and the open.
    let meta = file
        .metadata()
        .map_err(|e| BootError::file("stat", path, e))?;
    not_regular(path, &meta)?;
    Ok(file)
}

fn not_regular(path: &Path, meta: &Metadata) -> Result<(), BootError> {
    let t = meta.file_type();
    let kind = if t.is_file() {
        return Ok(());
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_dir() {
        "a directory"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() || t.is_block_device() {
        "a device"
    } else {
        "not a file"
    };
    Err(BootError::NotRegular {
        path: path.to_path_buf(),
        kind,
    })
}

/// `write_all` that waits out a descriptor someone made non-blocking
/// (the queue fills and drops meanwhile, never the logging thread).
pub(crate) fn write_all(out: &mut File, mut buf: &[u8]) -> io::Result<()> {
    while !buf.is_empty() {
        match out.write(buf) {
            Ok(0) => return Err(ErrorKind::WriteZero.into()),
            Ok(n) => buf = &buf[n..],
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_a_fifo_and_a_directory() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let err = open_regular(dir.path()).expect_err("a directory");
        assert!(
            matches!(
                err,
                BootError::NotRegular {
                    kind: "a directory",
                    ..
                }
            ),
            "{err}"
        );
        let text = err.to_string();
        assert!(
            text.contains("is a directory, not a regular file"),
            "{text}"
        );
        let fifo = dir.path().join("fifo");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .expect("mkfifo");
        let err = open_regular(&fifo).expect_err("a FIFO");
        assert!(err.to_string().contains("is a FIFO"), "{err}");
        assert!(open_regular(&dir.path().join("a.log")).is_ok());
    }
}

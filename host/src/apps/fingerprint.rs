//! What a plugin file's bytes are, apart from its name, inode and mtime: its
//! size and SHA-256. The registry keeps the fingerprint of each mounted
//! generation (taken while the private copy is made, in the same pass), so
//! a file that comes back with the same bytes (an apps directory rebuilt in
//! place, a `touch`) keeps its generation instead of loading another.

use sha2::{Digest, Sha256};
use std::fs::OpenOptions;
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// A file's size and content digest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fingerprint {
    pub size: u64,
    digest: [u8; 32],
}

impl Fingerprint {
    /// The digest's first 12 hex digits: enough to tell plugin files
    /// apart in logs and between processes.
    pub fn short_hex(&self) -> String {
        self.digest[..6]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }
}

/// A writer that fingerprints what passes through it.
pub struct Hashing<W> {
    inner: W,
    hasher: Sha256,
    size: u64,
}

impl<W: Write> Hashing<W> {
    pub fn new(inner: W) -> Self {
        Hashing {
            inner,
            hasher: Sha256::new(),
            size: 0,
        }
    }

    /// The fingerprint of everything written.
    pub fn fingerprint(self) -> Fingerprint {
        Fingerprint {
            size: self.size,
            digest: self.hasher.finalize().into(),
        }
    }
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.size += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// The fingerprint of the regular file at `path` (non-blocking open, so a
/// FIFO put there cannot stall it), reading at most `max` bytes (`None`
/// past that: it cannot match a copy within the bound).
pub fn of_file(path: &Path, max: u64) -> io::Result<Option<Fingerprint>> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Ok(None);
    }
    let mut hashing = Hashing::new(io::sink());
    io::copy(&mut Read::take(&file, max.saturating_add(1)), &mut hashing)?;
    let print = hashing.fingerprint();
    Ok((print.size <= max).then_some(print))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_bytes_same_print_whatever_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b, c) = (
            dir.path().join("a"),
            dir.path().join("b"),
            dir.path().join("c"),
        );
        std::fs::write(&a, b"plugin bytes").unwrap();
        std::fs::write(&b, b"plugin bytes").unwrap();
        std::fs::write(&c, b"plugin bytez").unwrap();
        let print = |p: &Path| of_file(p, 100).unwrap().unwrap();
        assert_eq!(print(&a), print(&b));
        assert_ne!(print(&a), print(&c));
        assert_eq!(print(&a).size, 12);
        assert_eq!(of_file(&a, 11).unwrap(), None, "past the bound");
        let mut hashing = Hashing::new(Vec::new());
        hashing.write_all(b"plugin ").unwrap();
        hashing.write_all(b"bytes").unwrap();
        assert_eq!(hashing.fingerprint(), print(&a));
    }
}

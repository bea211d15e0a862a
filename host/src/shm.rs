//! The one shared-memory area of process mode: a memfd of atomic words,
//! made by the supervisor before it starts any worker, inherited by each
//! worker at a descriptor the supervisor names, and mapped shared in every
//! process. What the words mean is the business of the modules that lay
//! them out (`ops::worker_row`); this module only maps them. The mapping is
//! never unmapped: it lives as long as the process.
//!
//! The only `unsafe` outside the poller backends, fenced here.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::AtomicU64;

/// A shared area of `words` atomic words, and the memfd behind it (to
/// hand to a child process).
pub struct Area {
    pub fd: OwnedFd,
    pub words: &'static [AtomicU64],
}

impl Area {
    /// A new zeroed area of `words` words.
    pub fn create(words: usize) -> io::Result<Area> {
        let fd = rustix::fs::memfd_create("stoa-shared", rustix::fs::MemfdFlags::CLOEXEC)?;
        rustix::fs::ftruncate(&fd, byte_len(words)? as u64)?;
        let words = map(&fd, words)?;
        Ok(Area { fd, words })
    }

    /// Maps the area `fd` holds (made by `create` in the supervisor, of
    /// `words` words); refused if the file is smaller.
    pub fn adopt(fd: OwnedFd, words: usize) -> io::Result<Area> {
        let size = rustix::fs::fstat(&fd)?.st_size;
        if u64::try_from(size).unwrap_or(0) < byte_len(words)? as u64 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("the shared area holds {size} bytes, fewer than {words} words"),
            ));
        }
        let words = map(&fd, words)?;
        Ok(Area { fd, words })
    }
}

fn byte_len(words: usize) -> io::Result<usize> {
    words
        .checked_mul(std::mem::size_of::<AtomicU64>())
        .filter(|&n| n > 0)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "shared area size"))
}

/// Maps `words` words of `fd` shared, for the rest of the process's life.
#[allow(unsafe_code)]
fn map(fd: &impl AsFd, words: usize) -> io::Result<&'static [AtomicU64]> {
    let len = byte_len(words)?;
    use rustix::mm::{mmap, MapFlags, ProtFlags};
    // SAFETY: a fresh shared mapping (no address given, so nothing of ours
    // is replaced) of a memfd at least `len` bytes long (checked by the
    // callers); page-aligned, so aligned for AtomicU64.
    let ptr = unsafe {
        mmap(
            std::ptr::null_mut(),
            len,
            ProtFlags::READ | ProtFlags::WRITE,
            MapFlags::SHARED,
            fd,
            0,
        )?
    };
    // SAFETY: `ptr` is valid for `len` bytes for the rest of the process
    // (never unmapped), zero-initialised by the kernel or written only
    // through atomics by every process that maps it, so a slice of
    // AtomicU64 over it is sound to share ('static, Sync).
    Ok(unsafe { std::slice::from_raw_parts(ptr.cast::<AtomicU64>(), words) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering::Relaxed;

    #[test]
    fn an_adopted_area_sees_the_words_written_through_the_first() {
        let area = Area::create(64).expect("create");
        area.words[5].store(42, Relaxed);
        let again = Area::adopt(area.fd.try_clone().expect("dup"), 64).expect("adopt");
        assert_eq!(again.words[5].load(Relaxed), 42);
        again.words[63].store(7, Relaxed);
        assert_eq!(area.words[63].load(Relaxed), 7);
    }

    #[test]
    fn a_short_file_is_refused() {
        let area = Area::create(8).expect("create");
        let err = Area::adopt(area.fd.try_clone().expect("dup"), 1024)
            .err()
            .expect("refused");
        assert!(err.to_string().contains("fewer than 1024 words"), "{err}");
    }
}

//! Small libc helpers shared by the poll(2) and select(2) backends: turning
//! `-1` returns into `io::Error`s, and the self-pipe waker (a non-blocking,
//! close-on-exec pipe whose read end the backend watches).

use super::Wake;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// Calls a libc function and turns a `-1` result into
/// `io::Error::last_os_error()` (as mio's `syscall!` does). The caller writes
/// the `unsafe` block, with its `// SAFETY:` comment, at the call site:
/// `syscall!(unsafe { libc::close(fd) })`.
macro_rules! syscall {
    ($call:expr) => {{
        let res = $call;
        if res == -1 {
            Err(::std::io::Error::last_os_error())
        } else {
            Ok(res)
        }
    }};
}
pub(crate) use syscall;

/// The self-pipe behind the poll and select wakers. Both ends live here, so
/// the read end stays open for as long as any waker handle does and `wake`
/// can never hit `EPIPE`/`SIGPIPE`; both are closed when the last `Arc` to
/// this is dropped.
#[derive(Debug)]
pub(crate) struct PipeWaker {
    read: OwnedFd,
    write: OwnedFd,
}

impl PipeWaker {
    /// Creates the pipe with both ends `O_NONBLOCK | O_CLOEXEC`.
    pub(crate) fn new() -> io::Result<Self> {
        let mut fds = [-1 as libc::c_int; 2];
        // SAFETY: `fds` is a valid, writable array of two c_ints, as pipe2
        // requires; the flags are valid pipe2 flags.
        syscall!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) })?;
        // SAFETY: pipe2 succeeded, so both fds are freshly opened and owned by
        // nothing else; each is wrapped exactly once.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        Ok(PipeWaker { read, write })
    }

    /// The read end, which the backend watches for readability.
    pub(crate) fn read_fd(&self) -> RawFd {
        self.read.as_raw_fd()
    }

    /// Empties the pipe, so the next `wait` blocks again until the next
    /// `wake`.
    pub(crate) fn drain(&self) {
        let mut buf = [0u8; 64];
        loop {
            // SAFETY: `buf` is valid for writes of `buf.len()` bytes and the
            // read end is an open fd owned by `self`.
            let n = unsafe { libc::read(self.read_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if n > 0 {
                continue;
            }
            if n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            // 0 (cannot happen while we hold the write end) or an error such
            // as EAGAIN: the pipe is empty.
            return;
        }
    }
}

impl Wake for PipeWaker {
    fn wake(&self) -> io::Result<()> {
        let byte = 1u8;
        loop {
            // SAFETY: `byte` is valid for a read of one byte and the write
            // end is an open fd owned by `self`.
            match syscall!(unsafe {
                libc::write(self.write.as_raw_fd(), (&byte as *const u8).cast(), 1)
            }) {
                Ok(_) => return Ok(()),
                // A full pipe already holds a wakeup the poller has not seen.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }
}

/// Converts a `wait` timeout to poll(2) milliseconds: `None` is `-1`
/// (forever); anything else is rounded *up* to whole milliseconds, so a
/// sub-millisecond timeout sleeps 1 ms instead of spinning at 0, while
/// `Some(ZERO)` stays `0`. Saturates at `c_int::MAX`.
pub(crate) fn timeout_ms(timeout: Option<Duration>) -> libc::c_int {
    let Some(t) = timeout else { return -1 };
    let mut ms = t.as_millis();
    if t.subsec_nanos() % 1_000_000 != 0 {
        ms += 1;
    }
    ms.min(libc::c_int::MAX as u128) as libc::c_int
}

/// Returns an error of kind `InvalidInput` for a negative fd.
pub(crate) fn check_fd(fd: RawFd) -> io::Result<()> {
    if fd < 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("invalid fd {fd}"),
        ));
    }
    Ok(())
}

/// The error for `register` of an fd that is already registered.
pub(crate) fn already_registered(fd: RawFd) -> io::Error {
    io::Error::new(
        io::ErrorKind::AlreadyExists,
        format!("fd {fd} is already registered"),
    )
}

/// The error for `reregister`/`deregister` of an fd that is not registered.
pub(crate) fn not_registered(fd: RawFd) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("fd {fd} is not registered"),
    )
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A connected, non-blocking socket pair.
    pub(crate) fn pair() -> (
        std::os::unix::net::UnixStream,
        std::os::unix::net::UnixStream,
    ) {
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        b.set_nonblocking(true).unwrap();
        (a, b)
    }

    /// The events ready now, without waiting.
    pub(crate) fn wait_now(p: &mut dyn crate::poller::Poller) -> Vec<crate::poller::Event> {
        let mut events = Vec::new();
        p.wait(&mut events, Some(Duration::ZERO)).unwrap();
        events
    }

    #[test]
    fn timeout_rounds_up_to_milliseconds() {
        assert_eq!(timeout_ms(None), -1);
        assert_eq!(timeout_ms(Some(Duration::ZERO)), 0);
        assert_eq!(timeout_ms(Some(Duration::from_nanos(1))), 1);
        assert_eq!(timeout_ms(Some(Duration::from_micros(500))), 1);
        assert_eq!(timeout_ms(Some(Duration::from_millis(1))), 1);
        assert_eq!(timeout_ms(Some(Duration::from_nanos(1_000_001))), 2);
        assert_eq!(timeout_ms(Some(Duration::from_millis(50))), 50);
        assert_eq!(
            timeout_ms(Some(Duration::from_secs(u64::MAX))),
            libc::c_int::MAX
        );
    }

    #[test]
    fn pipe_waker_wakes_drains_and_tolerates_a_full_pipe() {
        let w = PipeWaker::new().unwrap();
        // Fill the pipe well past its capacity: EAGAIN must read as success.
        for _ in 0..100_000 {
            w.wake().unwrap();
        }
        let mut pfd = libc::pollfd {
            fd: w.read_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: `pfd` is one valid pollfd.
        assert_eq!(unsafe { libc::poll(&mut pfd, 1, 0) }, 1);
        w.drain();
        pfd.revents = 0;
        // SAFETY: as above.
        assert_eq!(unsafe { libc::poll(&mut pfd, 1, 0) }, 0);
    }

    #[test]
    fn pipe_ends_are_nonblocking_and_cloexec() {
        let w = PipeWaker::new().unwrap();
        for fd in [w.read_fd(), w.write.as_raw_fd()] {
            // SAFETY: fcntl F_GETFL/F_GETFD on an open fd we own.
            let fl = syscall!(unsafe { libc::fcntl(fd, libc::F_GETFL) }).unwrap();
            assert_ne!(fl & libc::O_NONBLOCK, 0);
            // SAFETY: as above.
            let fdfl = syscall!(unsafe { libc::fcntl(fd, libc::F_GETFD) }).unwrap();
            assert_ne!(fdfl & libc::FD_CLOEXEC, 0);
        }
    }

    /// A duplicate of `src` numbered `min` or above (closed on drop),
    /// raising the RLIMIT_NOFILE soft limit if needed; `None` if the hard
    /// limit does not allow one.
    pub(crate) fn high_fd(src: &impl AsRawFd, min: libc::c_int) -> Option<OwnedFd> {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: `lim` is a valid, writable rlimit.
        if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
            return None;
        }
        let want = min as libc::rlim_t + 1024;
        if lim.rlim_cur < want {
            if lim.rlim_max < want {
                return None;
            }
            lim.rlim_cur = want;
            // SAFETY: `lim` is a valid rlimit with cur <= max.
            if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) } != 0 {
                return None;
            }
        }
        // SAFETY: F_DUPFD_CLOEXEC on an open fd only creates a new fd.
        let fd = unsafe { libc::fcntl(src.as_raw_fd(), libc::F_DUPFD_CLOEXEC, min) };
        if fd < 0 {
            return None;
        }
        assert!(fd >= min);
        // SAFETY: `fd` was just created by fcntl and nothing else owns it.
        Some(unsafe { OwnedFd::from_raw_fd(fd) })
    }
}

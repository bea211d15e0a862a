//! select(2) over libc. Level-triggered. Owns the master read and write
//! `fd_set`s (kept up to date with `FD_SET`/`FD_CLR` on every registration
//! change and copied before each `select`), an fd-indexed table of tokens
//! and interests, the highest watched fd, and the self-pipe waker whose read
//! end is always in the read set.
//!
//! select cannot watch an fd at or above `FD_SETSIZE` (1024); passing one to
//! `FD_SET` is undefined behaviour in C (libc's Rust port panics), so
//! `register`/`reregister` refuse such fds with an `InvalidInput` error
//! instead, and `features().fd_limit` reports the limit. select also has no hangup bit:
//! a closed or failed peer shows up as readable (the read returns 0 or the
//! error), with `hup` always false.

use super::sys::{self, syscall, PipeWaker};
use super::{Event, Features, Interest, Poller, Token, Wake, WAKER};
use std::io;
use std::os::fd::RawFd;
use std::ptr;
use std::sync::Arc;
use std::time::Duration;

/// The longest timeout passed to select, in seconds. Some systems (macOS)
/// reject more than 10^8 s with EINVAL; a longer wait just returns early.
const MAX_TIMEOUT_SECS: u64 = 100_000_000;

/// The select backend.
pub struct SelectPoller {
    /// Master read set: fds with readable interest, plus the waker.
    read_set: libc::fd_set,
    /// Master write set: fds with writable interest.
    write_set: libc::fd_set,
    /// `entries[fd]` is the registration of `fd`; the vector ends at the
    /// highest registered fd (trailing `None`s are trimmed).
    entries: Vec<Option<(Token, Interest)>>,
    /// The highest fd in either master set (at least the waker's).
    max_fd: RawFd,
    waker: Arc<PipeWaker>,
}

/// Errors unless `fd` fits an `fd_set` (`0 <= fd < FD_SETSIZE`).
fn check_select_fd(fd: RawFd) -> io::Result<()> {
    sys::check_fd(fd)?;
    if fd as usize >= libc::FD_SETSIZE {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "fd {fd} >= FD_SETSIZE ({}); the select poller cannot watch it",
                libc::FD_SETSIZE
            ),
        ));
    }
    Ok(())
}

/// An empty `fd_set`.
fn empty_set() -> libc::fd_set {
    // SAFETY: fd_set is a plain array of integers, and all-zeroes is a valid
    // value for it: the empty set (what FD_ZERO produces).
    unsafe { std::mem::zeroed() }
}

/// Adds `fd` to `set`. The caller has checked `fd` with `check_select_fd`.
fn fd_set_add(set: &mut libc::fd_set, fd: RawFd) {
    debug_assert!(check_select_fd(fd).is_ok());
    // SAFETY: `set` is a valid, exclusively borrowed fd_set and
    // 0 <= fd < FD_SETSIZE (checked by every caller), so FD_SET stays in
    // bounds.
    unsafe { libc::FD_SET(fd, set) }
}

/// Removes `fd` from `set`. The caller has checked `fd` with
/// `check_select_fd`.
fn fd_set_remove(set: &mut libc::fd_set, fd: RawFd) {
    debug_assert!(check_select_fd(fd).is_ok());
    // SAFETY: as in `fd_set_add`.
    unsafe { libc::FD_CLR(fd, set) }
}

/// Whether `fd` is in `set`. The caller has checked `fd` with
/// `check_select_fd`.
fn fd_set_has(set: &libc::fd_set, fd: RawFd) -> bool {
    debug_assert!(check_select_fd(fd).is_ok());
    // SAFETY: `set` is a valid fd_set and 0 <= fd < FD_SETSIZE (every fd we
    // test is at most `max_fd`, which only ever holds checked fds).
    unsafe { libc::FD_ISSET(fd, set) }
}

/// Converts a timeout to a `timeval`, rounding up to whole microseconds (so
/// a tiny timeout never becomes a busy 0) and capping it at
/// `MAX_TIMEOUT_SECS`.
fn to_timeval(timeout: Duration) -> libc::timeval {
    let mut secs = timeout.as_secs();
    let mut usecs = u64::from(timeout.subsec_nanos()).div_ceil(1000);
    if usecs == 1_000_000 {
        secs += 1;
        usecs = 0;
    }
    if secs >= MAX_TIMEOUT_SECS {
        secs = MAX_TIMEOUT_SECS;
        usecs = 0;
    }
    libc::timeval {
        tv_sec: secs as libc::time_t,
        tv_usec: usecs as libc::suseconds_t,
    }
}

impl SelectPoller {
    /// Creates a poller watching only its waker.
    pub fn new() -> io::Result<Self> {
        let waker = Arc::new(PipeWaker::new()?);
        let wfd = waker.read_fd();
        check_select_fd(wfd)?;
        let mut read_set = empty_set();
        fd_set_add(&mut read_set, wfd);
        Ok(SelectPoller {
            read_set,
            write_set: empty_set(),
            entries: Vec::new(),
            max_fd: wfd,
            waker,
        })
    }

    /// Sets `fd`'s bits in the master sets to match `interest`.
    fn set_interest(&mut self, fd: RawFd, interest: Interest) {
        if interest.is_readable() {
            fd_set_add(&mut self.read_set, fd);
        } else {
            fd_set_remove(&mut self.read_set, fd);
        }
        if interest.is_writable() {
            fd_set_add(&mut self.write_set, fd);
        } else {
            fd_set_remove(&mut self.write_set, fd);
        }
    }

    /// The registration of `fd`, if it has one.
    fn entry_mut(&mut self, fd: RawFd) -> Option<&mut (Token, Interest)> {
        let i = usize::try_from(fd).ok()?;
        self.entries.get_mut(i)?.as_mut()
    }
}

impl Poller for SelectPoller {
    fn name(&self) -> &'static str {
        "select"
    }

    fn features(&self) -> Features {
        Features {
            hup_flag: false,
            edge_triggered: false,
            // A source without interest is in neither set.
            hup_without_interest: false,
            fd_limit: Some(libc::FD_SETSIZE),
        }
    }

    fn register(&mut self, fd: RawFd, token: Token, interest: Interest) -> io::Result<()> {
        check_select_fd(fd)?;
        if fd == self.waker.read_fd() || self.entry_mut(fd).is_some() {
            return Err(sys::already_registered(fd));
        }
        let i = fd as usize;
        if self.entries.len() <= i {
            self.entries.resize(i + 1, None);
        }
        self.entries[i] = Some((token, interest));
        self.set_interest(fd, interest);
        self.max_fd = self.max_fd.max(fd);
        Ok(())
    }

    fn reregister(&mut self, fd: RawFd, token: Token, interest: Interest) -> io::Result<()> {
        check_select_fd(fd)?;
        let entry = self.entry_mut(fd).ok_or_else(|| sys::not_registered(fd))?;
        *entry = (token, interest);
        self.set_interest(fd, interest);
        Ok(())
    }

    fn deregister(&mut self, fd: RawFd) -> io::Result<()> {
        let slot = usize::try_from(fd)
            .ok()
            .and_then(|i| self.entries.get_mut(i))
            .filter(|slot| slot.is_some())
            .ok_or_else(|| sys::not_registered(fd))?;
        *slot = None;
        // Only fds that passed `check_select_fd` ever get an entry.
        fd_set_remove(&mut self.read_set, fd);
        fd_set_remove(&mut self.write_set, fd);
        while let Some(None) = self.entries.last() {
            self.entries.pop();
        }
        let highest = self.entries.len() as RawFd - 1;
        self.max_fd = highest.max(self.waker.read_fd());
        Ok(())
    }

    fn wait(&mut self, events: &mut Vec<Event>, timeout: Option<Duration>) -> io::Result<()> {
        events.clear();
        let mut read = self.read_set;
        let mut write = self.write_set;
        let mut tv = timeout.map(to_timeval);
        let tv_ptr = tv
            .as_mut()
            .map_or(ptr::null_mut(), |tv| tv as *mut libc::timeval);
        // SAFETY: `read` and `write` are valid local fd_sets holding only fds
        // below FD_SETSIZE, `nfds` (max_fd + 1) is at most FD_SETSIZE, the
        // except set may be null, and `tv_ptr` is null or points at the live
        // local `tv`. select only writes into these locals.
        let ready = match syscall!(unsafe {
            libc::select(
                self.max_fd + 1,
                &mut read,
                &mut write,
                ptr::null_mut(),
                tv_ptr,
            )
        }) {
            Ok(n) => n as usize,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok(()),
            Err(e) => return Err(e),
        };
        // `ready` counts set bits over both sets.
        let mut found = 0;
        let waker_fd = self.waker.read_fd();
        for fd in 0..=self.max_fd {
            if found >= ready {
                break;
            }
            let readable = fd_set_has(&read, fd);
            let writable = fd_set_has(&write, fd);
            if !readable && !writable {
                continue;
            }
            found += usize::from(readable) + usize::from(writable);
            if fd == waker_fd {
                self.waker.drain();
                events.push(Event {
                    token: WAKER,
                    readable: true,
                    writable: false,
                    hup: false,
                });
            } else if let Some(Some((token, _))) = self.entries.get(fd as usize) {
                events.push(Event {
                    token: *token,
                    readable,
                    writable,
                    hup: false,
                });
            }
        }
        Ok(())
    }

    fn waker(&self) -> Arc<dyn Wake> {
        self.waker.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::super::sys::tests::high_fd;
    use super::super::sys::tests::{pair, wait_now};
    use super::*;
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;

    #[test]
    fn refuses_fds_at_or_above_fd_setsize() {
        let mut p = SelectPoller::new().unwrap();
        assert_eq!(p.features().fd_limit, Some(1024));
        let limit = libc::FD_SETSIZE as RawFd;
        for fd in [limit, limit + 476, RawFd::MAX] {
            let err = p.register(fd, Token(1), Interest::READABLE).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
            assert!(err.to_string().contains("FD_SETSIZE (1024)"), "{err}");
            let err = p.reregister(fd, Token(1), Interest::BOTH).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
            assert_eq!(
                p.deregister(fd).unwrap_err().kind(),
                io::ErrorKind::NotFound
            );
        }
        let err = p.register(-1, Token(1), Interest::READABLE).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        assert_eq!(
            p.deregister(-1).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        assert!(p.entries.is_empty());
        assert!(wait_now(&mut p).is_empty());
    }

    #[test]
    fn refuses_a_real_open_fd_above_fd_setsize() {
        let (a, mut b) = pair();
        let Some(high) = high_fd(&a) else {
            eprintln!("skipped: RLIMIT_NOFILE hard limit too low for an fd >= 1024");
            return;
        };
        let fd = high.as_raw_fd();
        assert!(fd >= 1024);
        let mut p = SelectPoller::new().unwrap();
        let err = p.register(fd, Token(1), Interest::READABLE).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        assert!(
            err.to_string()
                .contains(&format!("fd {fd} >= FD_SETSIZE (1024)")),
            "{err}"
        );
        // The poller still works for the fds it can hold.
        p.register(a.as_raw_fd(), Token(2), Interest::READABLE)
            .unwrap();
        b.write_all(b"x").unwrap();
        assert_eq!(
            wait_now(&mut p),
            vec![Event {
                token: Token(2),
                readable: true,
                writable: false,
                hup: false
            }]
        );
        p.deregister(a.as_raw_fd()).unwrap();
    }

    #[test]
    fn max_fd_and_entries_track_registrations() {
        let mut p = SelectPoller::new().unwrap();
        let wfd = p.waker.read_fd();
        assert_eq!(p.max_fd, wfd);
        let pairs: Vec<_> = (0..3).map(|_| pair()).collect();
        let mut fds: Vec<RawFd> = pairs.iter().map(|(a, _)| a.as_raw_fd()).collect();
        fds.sort();
        for (i, &fd) in fds.iter().enumerate() {
            p.register(fd, Token(i), Interest::READABLE).unwrap();
        }
        assert_eq!(p.max_fd, fds[2].max(wfd));
        assert_eq!(p.entries.len(), fds[2] as usize + 1);
        p.deregister(fds[2]).unwrap();
        assert_eq!(p.max_fd, fds[1].max(wfd));
        assert_eq!(p.entries.len(), fds[1] as usize + 1);
        p.deregister(fds[0]).unwrap();
        assert_eq!(p.max_fd, fds[1].max(wfd));
        p.deregister(fds[1]).unwrap();
        assert_eq!(p.max_fd, wfd);
        assert!(p.entries.is_empty());
        assert_eq!(
            p.register(wfd, Token(0), Interest::READABLE)
                .unwrap_err()
                .kind(),
            io::ErrorKind::AlreadyExists
        );
        p.register(fds[0], Token(0), Interest::READABLE).unwrap();
        assert_eq!(
            p.register(fds[0], Token(0), Interest::READABLE)
                .unwrap_err()
                .kind(),
            io::ErrorKind::AlreadyExists
        );
        assert_eq!(
            p.deregister(fds[1]).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
    }

    #[test]
    fn level_triggered_and_reports_both_directions() {
        let mut p = SelectPoller::new().unwrap();
        let (mut a, mut b) = pair();
        p.register(a.as_raw_fd(), Token(4), Interest::BOTH).unwrap();
        b.write_all(b"abc").unwrap();
        for _ in 0..3 {
            assert_eq!(
                wait_now(&mut p),
                vec![Event {
                    token: Token(4),
                    readable: true,
                    writable: true,
                    hup: false
                }]
            );
        }
        let mut buf = [0u8; 8];
        assert_eq!(a.read(&mut buf).unwrap(), 3);
        assert_eq!(
            wait_now(&mut p),
            vec![Event {
                token: Token(4),
                readable: false,
                writable: true,
                hup: false
            }]
        );
        p.deregister(a.as_raw_fd()).unwrap();
    }

    #[test]
    fn timeval_rounds_up_and_caps() {
        let tv = |d| {
            let t = to_timeval(d);
            (t.tv_sec, t.tv_usec)
        };
        assert_eq!(tv(Duration::ZERO), (0, 0));
        assert_eq!(tv(Duration::from_nanos(1)), (0, 1));
        assert_eq!(tv(Duration::from_micros(500)), (0, 500));
        assert_eq!(tv(Duration::from_millis(1500)), (1, 500_000));
        assert_eq!(tv(Duration::new(1, 999_999_001)), (2, 0));
        assert_eq!(
            tv(Duration::from_secs(u64::MAX)),
            (MAX_TIMEOUT_SECS as libc::time_t, 0)
        );
    }
}

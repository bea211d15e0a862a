//! select(2) over libc. Level-triggered. Owns its own read and write bit
//! arrays instead of glibc's fixed `fd_set` (whose `FD_SET` stops at
//! FD_SETSIZE, 1024): each is a vector of words laid out as the kernel reads
//! an `fd_set` (bit `fd % BITS` of word `fd / BITS`), grown in whole words
//! to the highest registered fd, never shorter than an `fd_set`, and shrunk
//! lazily once the highest fd has fallen far below its length. Before each
//! `select` the words up to the highest fd are copied into scratch arrays
//! of the same layout, and `nfds` is that fd plus one: the kernel reads and
//! writes exactly the words `nfds` needs, so any fd the process may open can
//! be watched (the cost stays O(highest fd) per wait). An fd-indexed table
//! holds each registration's token; the self-pipe waker's read end is always
//! in the read set.
//!
//! On Linux the kernel takes any `nfds`; elsewhere select(2) may refuse one
//! above FD_SETSIZE, so there the backend still refuses such fds and
//! reports the limit in `features().fd_limit`. select has no hangup bit: a
//! closed or failed peer shows up as readable (the read returns 0 or the
//! error), with `hup` always false.

use super::sys::{self, syscall, PipeWaker};
use super::{Event, Features, Interest, Poller, Token, Wake};
use std::io;
use std::os::fd::RawFd;
use std::ptr;
use std::sync::Arc;
use std::time::Duration;

/// The longest timeout passed to select, in seconds. Some systems (macOS)
/// reject more than 10^8 s with EINVAL; a longer wait just returns early.
const MAX_TIMEOUT_SECS: u64 = 100_000_000;

/// One word of a bit array, as the kernel's `fd_set` is made of.
type Word = libc::c_ulong;
/// Bits per word.
const BITS: usize = Word::BITS as usize;
/// The shortest a bit array gets: one `fd_set` (FD_SETSIZE bits).
const MIN_WORDS: usize = libc::FD_SETSIZE / BITS;

/// The highest fd this backend can watch, if the system limits it.
#[cfg(any(target_os = "linux", target_os = "android"))]
const FD_LIMIT: Option<usize> = None;
#[cfg(not(any(target_os = "linux", target_os = "android")))]
const FD_LIMIT: Option<usize> = Some(libc::FD_SETSIZE);

/// A growable set of fds in the kernel's `fd_set` layout.
#[derive(Clone, Debug)]
struct FdBits {
    /// At least `MIN_WORDS` long, so a pointer to it is always as long as
    /// an `fd_set`.
    words: Vec<Word>,
}

impl FdBits {
    fn new() -> Self {
        FdBits {
            words: vec![0; MIN_WORDS],
        }
    }

    /// Grows (in whole words) so that `fd` fits.
    fn fit(&mut self, fd: usize) {
        let need = fd / BITS + 1;
        if self.words.len() < need {
            self.words.resize(need, 0);
        }
    }

    /// Adds `fd`, growing the array if needed.
    fn insert(&mut self, fd: usize) {
        self.fit(fd);
        self.words[fd / BITS] |= 1 << (fd % BITS);
    }

    /// Removes `fd` (nothing to do past the end).
    fn remove(&mut self, fd: usize) {
        if let Some(w) = self.words.get_mut(fd / BITS) {
            *w &= !(1 << (fd % BITS));
        }
    }

    /// Shrinks to fit fds up to `max_fd` once the array is more than four
    /// times longer than that needs (never below one `fd_set`).
    fn shrink(&mut self, max_fd: usize) {
        let need = (max_fd / BITS + 1).max(MIN_WORDS);
        if self.words.len() > 4 * need {
            self.words.truncate(need);
            self.words.shrink_to_fit();
        }
    }

    /// Copies the first `n` words of `from` (a caller has fitted both).
    fn copy_prefix(&mut self, from: &FdBits, n: usize) {
        if self.words.len() < from.words.len() {
            self.words.resize(from.words.len(), 0);
        }
        self.words[..n].copy_from_slice(&from.words[..n]);
    }

    /// The array as select(2) takes it.
    fn as_fd_set(&mut self) -> *mut libc::fd_set {
        self.words.as_mut_ptr().cast()
    }

    #[cfg(test)]
    fn contains(&self, fd: usize) -> bool {
        self.words
            .get(fd / BITS)
            .is_some_and(|w| w & (1 << (fd % BITS)) != 0)
    }
}

/// The select backend.
pub struct SelectPoller {
    /// Master read set: fds with readable interest, plus the waker.
    read_set: FdBits,
    /// Master write set: fds with writable interest.
    write_set: FdBits,
    /// What one `select` call reads and writes: copies of the masters.
    ready_read: FdBits,
    ready_write: FdBits,
    /// `entries[fd]` is the registration of `fd`; the vector ends at the
    /// highest registered fd (trailing `None`s are trimmed).
    entries: Vec<Option<(Token, Interest)>>,
    /// The highest fd in either master set (at least the waker's).
    max_fd: RawFd,
    waker: Arc<PipeWaker>,
}

/// Errors unless `fd` is one this backend can watch: not negative, and
/// under FD_SETSIZE where the system's select(2) needs that.
fn check_select_fd(fd: RawFd) -> io::Result<usize> {
    sys::check_fd(fd)?;
    let i = fd as usize;
    match FD_LIMIT {
        Some(limit) if i >= limit => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("fd {fd} >= FD_SETSIZE ({limit}); the select poller cannot watch it"),
        )),
        _ => Ok(i),
    }
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
        let mut read_set = FdBits::new();
        read_set.insert(check_select_fd(wfd)?);
        Ok(SelectPoller {
            ready_read: read_set.clone(),
            read_set,
            write_set: FdBits::new(),
            ready_write: FdBits::new(),
            entries: Vec::new(),
            max_fd: wfd,
            waker,
        })
    }

    /// Sets `fd`'s bits in the master sets to match `interest`.
    fn set_interest(&mut self, fd: usize, interest: Interest) {
        if interest.is_readable() {
            self.read_set.insert(fd);
        } else {
            self.read_set.remove(fd);
        }
        if interest.is_writable() {
            self.write_set.insert(fd);
        } else {
            self.write_set.remove(fd);
        }
    }

    /// The registration of `fd`, if it has one.
    fn entry_mut(&mut self, fd: RawFd) -> Option<&mut (Token, Interest)> {
        let i = usize::try_from(fd).ok()?;
        self.entries.get_mut(i)?.as_mut()
    }

    /// The event for `fd` found ready, if it is the waker or registered.
    fn event(&self, fd: usize, readable: bool, writable: bool) -> Option<Event> {
        if fd as RawFd == self.waker.read_fd() {
            self.waker.drain();
            return Some(Event::woken());
        }
        let (token, _) = self.entries.get(fd)?.as_ref()?;
        Some(Event {
            token: *token,
            readable,
            writable,
            hup: false,
        })
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
            fd_limit: FD_LIMIT,
        }
    }

    fn register(&mut self, fd: RawFd, token: Token, interest: Interest) -> io::Result<()> {
        let i = check_select_fd(fd)?;
        if fd == self.waker.read_fd() || self.entry_mut(fd).is_some() {
            return Err(sys::already_registered(fd));
        }
        if self.entries.len() <= i {
            self.entries.resize(i + 1, None);
        }
        self.entries[i] = Some((token, interest));
        // Both masters span the highest fd, so `wait` copies the same
        // number of words from each.
        self.read_set.fit(i);
        self.write_set.fit(i);
        self.set_interest(i, interest);
        self.max_fd = self.max_fd.max(fd);
        Ok(())
    }

    fn reregister(&mut self, fd: RawFd, token: Token, interest: Interest) -> io::Result<()> {
        let i = check_select_fd(fd)?;
        let entry = self.entry_mut(fd).ok_or_else(|| sys::not_registered(fd))?;
        *entry = (token, interest);
        self.set_interest(i, interest);
        Ok(())
    }

    fn deregister(&mut self, fd: RawFd) -> io::Result<()> {
        let i = usize::try_from(fd).map_err(|_| sys::not_registered(fd))?;
        let slot = self
            .entries
            .get_mut(i)
            .filter(|slot| slot.is_some())
            .ok_or_else(|| sys::not_registered(fd))?;
        *slot = None;
        self.read_set.remove(i);
        self.write_set.remove(i);
        while let Some(None) = self.entries.last() {
            self.entries.pop();
        }
        let highest = self.entries.len() as RawFd - 1;
        self.max_fd = highest.max(self.waker.read_fd());
        let max = self.max_fd as usize;
        for set in [
            &mut self.read_set,
            &mut self.write_set,
            &mut self.ready_read,
            &mut self.ready_write,
        ] {
            set.shrink(max);
        }
        Ok(())
    }

    fn wait(&mut self, events: &mut Vec<Event>, timeout: Option<Duration>) -> io::Result<()> {
        events.clear();
        let words = self.max_fd as usize / BITS + 1;
        self.ready_read.copy_prefix(&self.read_set, words);
        self.ready_write.copy_prefix(&self.write_set, words);
        let mut tv = timeout.map(to_timeval);
        let tv_ptr = tv
            .as_mut()
            .map_or(ptr::null_mut(), |tv| tv as *mut libc::timeval);
        // SAFETY: both sets point at live, exclusively borrowed arrays of
        // at least `words` words (and never shorter than an fd_set), in
        // the kernel's fd_set layout; with nfds = max_fd + 1 select reads
        // and writes only the first `words` of them. The except set may be
        // null, and `tv_ptr` is null or points at the live local `tv`.
        let ready = match syscall!(unsafe {
            libc::select(
                self.max_fd + 1,
                self.ready_read.as_fd_set(),
                self.ready_write.as_fd_set(),
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
        for w in 0..words {
            if found >= ready {
                break;
            }
            let (r, wr) = (self.ready_read.words[w], self.ready_write.words[w]);
            let mut any = r | wr;
            while any != 0 {
                let bit = any.trailing_zeros() as usize;
                any &= any - 1;
                let (readable, writable) = (r >> bit & 1 != 0, wr >> bit & 1 != 0);
                found += usize::from(readable) + usize::from(writable);
                events.extend(self.event(w * BITS + bit, readable, writable));
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
    fn refuses_negative_fds() {
        let mut p = SelectPoller::new().unwrap();
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
    fn bit_arrays_grow_in_words_and_shrink_lazily() {
        let mut s = FdBits::new();
        assert_eq!(s.words.len(), MIN_WORDS);
        s.insert(3);
        assert!(s.contains(3) && !s.contains(4));
        s.insert(5000);
        assert_eq!(s.words.len(), 5000 / BITS + 1);
        assert!(s.contains(5000) && !s.contains(4999));
        s.remove(5000);
        s.remove(70_000);
        assert!(!s.contains(5000));
        // Still needed up to fd 2000: kept (less than four times longer).
        s.shrink(2000);
        assert_eq!(s.words.len(), 5000 / BITS + 1);
        s.shrink(10);
        assert_eq!(s.words.len(), MIN_WORDS);
        assert!(s.contains(3));
    }

    /// Fds above 1024 and above 4096, watched at once with a low one, are
    /// each reported with their own readiness.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    #[test]
    fn watches_fds_above_1024_and_4096() {
        let (a, mut a_peer) = pair();
        let (b, mut b_peer) = pair();
        let (low, _low_peer) = pair();
        let (Some(high), Some(higher)) = (high_fd(&a, 1024), high_fd(&b, 4100)) else {
            eprintln!("skipped: RLIMIT_NOFILE hard limit too low for an fd >= 4100");
            return;
        };
        let mut p = SelectPoller::new().unwrap();
        assert_eq!(p.features().fd_limit, None);
        let (fd1, fd2) = (high.as_raw_fd(), higher.as_raw_fd());
        assert!(fd1 >= 1024 && fd2 >= 4100);
        p.register(low.as_raw_fd(), Token(1), Interest::READABLE)
            .unwrap();
        p.register(fd1, Token(2), Interest::READABLE).unwrap();
        p.register(fd2, Token(3), Interest::READABLE).unwrap();
        assert_eq!(p.max_fd, fd2);
        assert!(wait_now(&mut p).is_empty());
        let ev = |token, readable, writable| Event {
            token: Token(token),
            readable,
            writable,
            hup: false,
        };
        b_peer.write_all(b"x").unwrap();
        assert_eq!(wait_now(&mut p), vec![ev(3, true, false)]);
        a_peer.write_all(b"y").unwrap();
        assert_eq!(
            wait_now(&mut p),
            vec![ev(2, true, false), ev(3, true, false)]
        );
        let mut buf = [0u8; 4];
        assert_eq!((&b).read(&mut buf).unwrap(), 1);
        p.reregister(fd2, Token(4), Interest::WRITABLE).unwrap();
        assert_eq!(
            wait_now(&mut p),
            vec![ev(2, true, false), ev(4, false, true)]
        );
        p.deregister(fd2).unwrap();
        assert_eq!(p.max_fd, fd1);
        assert_eq!(wait_now(&mut p), vec![ev(2, true, false)]);
        p.deregister(fd1).unwrap();
        p.deregister(low.as_raw_fd()).unwrap();
        assert!(p.read_set.words.len() <= MIN_WORDS.max(fd1 as usize / BITS + 1));
        assert!(wait_now(&mut p).is_empty());
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

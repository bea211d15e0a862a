//! poll(2) over libc. Level-triggered. Owns the `pollfd` array handed to
//! the kernel, kept up to date incrementally (register pushes, reregister
//! edits in place, deregister `swap_remove`s), a parallel array of tokens,
//! an fd -> slot map, and the self-pipe waker whose read end sits at slot 0.

use super::sys::{self, syscall, PipeWaker};
use super::{Event, Features, Interest, Poller, Token, Wake, WAKER};
use std::collections::HashMap;
use std::io;
use std::os::fd::RawFd;
use std::sync::Arc;
use std::time::Duration;

/// Extra events asked for on readable sources: on Linux, `POLLRDHUP` makes
/// a peer's half-close (TCP FIN) show up as `hup`, as it does under epoll.
#[cfg(any(target_os = "linux", target_os = "android"))]
const RDHUP: libc::c_short = libc::POLLRDHUP;
#[cfg(not(any(target_os = "linux", target_os = "android")))]
const RDHUP: libc::c_short = 0;

/// The poll backend.
pub struct PollPoller {
    /// What poll(2) watches; slot 0 is the waker's read end.
    fds: Vec<libc::pollfd>,
    /// `tokens[i]` is the token of `fds[i]` (`tokens[0]` is `WAKER`).
    tokens: Vec<Token>,
    /// Registered fd -> its slot in `fds`/`tokens` (never the waker's fd).
    slots: HashMap<RawFd, usize>,
    waker: Arc<PipeWaker>,
}

impl PollPoller {
    /// Creates a poller watching only its waker.
    pub fn new() -> io::Result<Self> {
        let waker = Arc::new(PipeWaker::new()?);
        Ok(PollPoller {
            fds: vec![libc::pollfd {
                fd: waker.read_fd(),
                events: libc::POLLIN,
                revents: 0,
            }],
            tokens: vec![WAKER],
            slots: HashMap::new(),
            waker,
        })
    }
}

/// The `pollfd.events` bits for `interest`.
fn poll_events(interest: Interest) -> libc::c_short {
    let mut events = 0;
    if interest.is_readable() {
        events |= libc::POLLIN | RDHUP;
    }
    if interest.is_writable() {
        events |= libc::POLLOUT;
    }
    events
}

/// The `Event` for a slot whose `revents` is non-zero.
fn to_event(token: Token, revents: libc::c_short) -> Event {
    // Errors, hangups and a closed fd are reported as readable too, so the
    // connection's read sees the EOF or the error and tears it down.
    let hup = revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL | RDHUP) != 0;
    Event {
        token,
        readable: revents & libc::POLLIN != 0 || hup,
        writable: revents & libc::POLLOUT != 0,
        hup,
    }
}

impl Poller for PollPoller {
    fn name(&self) -> &'static str {
        "poll"
    }

    fn features(&self) -> Features {
        Features {
            hup_flag: true,
            edge_triggered: false,
            // POLLHUP and POLLERR are reported whatever `events` asks.
            hup_without_interest: true,
            fd_limit: None,
        }
    }

    fn register(&mut self, fd: RawFd, token: Token, interest: Interest) -> io::Result<()> {
        sys::check_fd(fd)?;
        if fd == self.waker.read_fd() || self.slots.contains_key(&fd) {
            return Err(sys::already_registered(fd));
        }
        self.slots.insert(fd, self.fds.len());
        self.fds.push(libc::pollfd {
            fd,
            events: poll_events(interest),
            revents: 0,
        });
        self.tokens.push(token);
        Ok(())
    }

    fn reregister(&mut self, fd: RawFd, token: Token, interest: Interest) -> io::Result<()> {
        let &slot = self.slots.get(&fd).ok_or_else(|| sys::not_registered(fd))?;
        self.fds[slot].events = poll_events(interest);
        self.tokens[slot] = token;
        Ok(())
    }

    fn deregister(&mut self, fd: RawFd) -> io::Result<()> {
        let slot = self
            .slots
            .remove(&fd)
            .ok_or_else(|| sys::not_registered(fd))?;
        self.fds.swap_remove(slot);
        self.tokens.swap_remove(slot);
        // The former last entry now lives at `slot` (unless it was `fd`).
        if let Some(moved) = self.fds.get(slot) {
            self.slots.insert(moved.fd, slot);
        }
        Ok(())
    }

    fn wait(&mut self, events: &mut Vec<Event>, timeout: Option<Duration>) -> io::Result<()> {
        events.clear();
        let nfds = self.fds.len() as libc::nfds_t;
        // SAFETY: `self.fds` is a live, exclusively borrowed array of exactly
        // `nfds` initialised pollfds; poll only writes their `revents`.
        let ready = match syscall!(unsafe {
            libc::poll(self.fds.as_mut_ptr(), nfds, sys::timeout_ms(timeout))
        }) {
            Ok(n) => n as usize,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok(()),
            Err(e) => return Err(e),
        };
        let mut found = 0;
        for (pfd, &token) in self.fds.iter().zip(&self.tokens) {
            if found == ready {
                break;
            }
            if pfd.revents == 0 {
                continue;
            }
            found += 1;
            if token == WAKER && pfd.fd == self.waker.read_fd() {
                self.waker.drain();
                events.push(Event::woken());
            } else {
                events.push(to_event(token, pfd.revents));
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
    use super::super::sys::tests::{pair, wait_now};
    use super::*;
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;

    /// Checks the internal tables agree with each other.
    fn check_tables(p: &PollPoller) {
        assert_eq!(p.fds.len(), p.tokens.len());
        assert_eq!(p.fds.len(), p.slots.len() + 1);
        assert_eq!(p.fds[0].fd, p.waker.read_fd());
        assert_eq!(p.tokens[0], WAKER);
        for (&fd, &slot) in &p.slots {
            assert_eq!(p.fds[slot].fd, fd);
        }
    }

    #[test]
    fn deregister_swap_remove_keeps_moved_entry_reachable() {
        let mut p = PollPoller::new().unwrap();
        let pairs: Vec<_> = (0..4).map(|_| pair()).collect();
        for (i, (a, _)) in pairs.iter().enumerate() {
            p.register(a.as_raw_fd(), Token(i), Interest::READABLE)
                .unwrap();
        }
        check_tables(&p);
        // Removing slot 1 moves the last entry (token 3) into it.
        p.deregister(pairs[0].0.as_raw_fd()).unwrap();
        check_tables(&p);
        // The moved entry can still be reregistered and reports its token.
        p.reregister(pairs[3].0.as_raw_fd(), Token(33), Interest::READABLE)
            .unwrap();
        (&pairs[3].1).write_all(b"x").unwrap();
        assert_eq!(
            wait_now(&mut p),
            vec![Event {
                token: Token(33),
                readable: true,
                writable: false,
                hup: false
            }]
        );
        // Removing the last slot needs no fix-up.
        p.deregister(pairs[2].0.as_raw_fd()).unwrap();
        check_tables(&p);
        p.deregister(pairs[3].0.as_raw_fd()).unwrap();
        p.deregister(pairs[1].0.as_raw_fd()).unwrap();
        check_tables(&p);
        assert_eq!(p.fds.len(), 1);
        assert!(wait_now(&mut p).is_empty());
    }

    #[test]
    fn register_errors() {
        let mut p = PollPoller::new().unwrap();
        let (a, _b) = pair();
        let fd = a.as_raw_fd();
        assert_eq!(
            p.register(-1, Token(0), Interest::READABLE)
                .unwrap_err()
                .kind(),
            io::ErrorKind::InvalidInput
        );
        p.register(fd, Token(0), Interest::READABLE).unwrap();
        assert_eq!(
            p.register(fd, Token(1), Interest::READABLE)
                .unwrap_err()
                .kind(),
            io::ErrorKind::AlreadyExists
        );
        let wfd = p.waker.read_fd();
        assert_eq!(
            p.register(wfd, Token(1), Interest::READABLE)
                .unwrap_err()
                .kind(),
            io::ErrorKind::AlreadyExists
        );
        p.deregister(fd).unwrap();
        assert_eq!(
            p.deregister(fd).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        assert_eq!(
            p.reregister(fd, Token(0), Interest::BOTH)
                .unwrap_err()
                .kind(),
            io::ErrorKind::NotFound
        );
        check_tables(&p);
    }

    #[test]
    fn level_triggered_until_drained() {
        let mut p = PollPoller::new().unwrap();
        let (mut a, mut b) = pair();
        p.register(a.as_raw_fd(), Token(1), Interest::READABLE)
            .unwrap();
        b.write_all(b"hello").unwrap();
        for _ in 0..3 {
            let ev = wait_now(&mut p);
            assert_eq!(ev.len(), 1);
            assert!(ev[0].readable);
        }
        let mut buf = [0u8; 16];
        assert_eq!(a.read(&mut buf).unwrap(), 5);
        assert!(wait_now(&mut p).is_empty());
    }

    #[test]
    fn tcp_half_close_reports_hup() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        server.set_nonblocking(true).unwrap();
        let mut p = PollPoller::new().unwrap();
        p.register(server.as_raw_fd(), Token(5), Interest::READABLE)
            .unwrap();
        assert!(wait_now(&mut p).is_empty());
        client.shutdown(std::net::Shutdown::Write).unwrap();
        let mut events = Vec::new();
        p.wait(&mut events, Some(Duration::from_secs(5))).unwrap();
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].token, Token(5));
        assert!(events[0].readable);
        assert!(events[0].hup);
        p.deregister(server.as_raw_fd()).unwrap();
    }

    #[test]
    fn closed_fd_reports_hup_via_pollnval() {
        let mut p = PollPoller::new().unwrap();
        let (a, _b) = pair();
        p.register(a.as_raw_fd(), Token(9), Interest::READABLE)
            .unwrap();
        // Swap in a pollfd for an fd that cannot be open (bigger than any
        // limit), so the test cannot race with other tests reusing a
        // closed fd number.
        let bogus = libc::c_int::MAX;
        p.fds[1].fd = bogus;
        let ev = wait_now(&mut p);
        assert_eq!(
            ev,
            vec![Event {
                token: Token(9),
                readable: true,
                writable: false,
                hup: true
            }]
        );
        p.fds[1].fd = a.as_raw_fd();
        p.deregister(a.as_raw_fd()).unwrap();
    }

    #[test]
    fn to_event_maps_bits() {
        let t = Token(1);
        assert_eq!(
            to_event(t, libc::POLLIN),
            Event {
                token: t,
                readable: true,
                writable: false,
                hup: false
            }
        );
        assert_eq!(
            to_event(t, libc::POLLOUT),
            Event {
                token: t,
                readable: false,
                writable: true,
                hup: false
            }
        );
        assert_eq!(
            to_event(t, libc::POLLHUP),
            Event {
                token: t,
                readable: true,
                writable: false,
                hup: true
            }
        );
        assert_eq!(
            to_event(t, libc::POLLERR | libc::POLLOUT),
            Event {
                token: t,
                readable: true,
                writable: true,
                hup: true
            }
        );
        assert_eq!(
            to_event(t, libc::POLLNVAL),
            Event {
                token: t,
                readable: true,
                writable: false,
                hup: true
            }
        );
        assert_eq!(poll_events(Interest::READABLE) & libc::POLLIN, libc::POLLIN);
        assert_eq!(poll_events(Interest::READABLE) & libc::POLLOUT, 0);
        assert_eq!(poll_events(Interest::WRITABLE), libc::POLLOUT);
        assert_eq!(
            poll_events(Interest::BOTH) & (libc::POLLIN | libc::POLLOUT),
            libc::POLLIN | libc::POLLOUT
        );
    }

    #[test]
    fn waker_outlives_poller_and_many_wakes_coalesce() {
        let mut p = PollPoller::new().unwrap();
        let w = p.waker();
        for _ in 0..10 {
            w.wake().unwrap();
        }
        let ev = wait_now(&mut p);
        assert_eq!(
            ev,
            vec![Event {
                token: WAKER,
                readable: true,
                writable: false,
                hup: false
            }]
        );
        assert!(wait_now(&mut p).is_empty());
        drop(p);
        // The pipe stays open while a waker handle exists: no EPIPE.
        w.wake().unwrap();
    }
}

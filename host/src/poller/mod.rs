//! The poller: one small trait over the OS readiness APIs, and one backend
//! per file (`select.rs`, `poll.rs`, `epoll.rs`, `uring.rs`; `sys.rs` holds
//! the libc helpers and self-pipe waker the poll and select backends share).
//!
//! Connection code is written for edge-triggered semantics: on an event it
//! reads and writes until `WouldBlock`, and asks for write interest only
//! while output is pending. Level-triggered backends (select, poll) work
//! unchanged under that rule; edge-triggered epoll may skip re-arming.

use crate::error::BootError;
use std::io;
use std::os::fd::RawFd;
use std::sync::Arc;
use std::time::Duration;

pub mod completion;
pub mod epoll;
pub mod poll;
pub mod select;
mod sys;
pub mod uring;

pub use completion::Link;

/// Identifies a registered source in events (a slab key, or a reserved value).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Token(pub usize);

/// The token the poller's waker reports with.
pub const WAKER: Token = Token(usize::MAX);

/// Which readiness a source is interested in (a bitset).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Interest(u8);

impl Interest {
    pub const READABLE: Interest = Interest(1);
    pub const WRITABLE: Interest = Interest(2);
    pub const BOTH: Interest = Interest(3);
    /// Nothing (a connection waiting for its app). Backends whose
    /// `Features::hup_without_interest` is set still report hang-ups and
    /// errors; on the others a gone peer is noticed at the next write.
    pub const NONE: Interest = Interest(0);

    pub fn is_readable(self) -> bool {
        self.0 & 1 != 0
    }

    pub fn is_writable(self) -> bool {
        self.0 & 2 != 0
    }
}

/// One readiness report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    pub token: Token,
    pub readable: bool,
    pub writable: bool,
    /// The peer hung up or the socket has an error; reading will tell which.
    pub hup: bool,
}

impl Event {
    /// The event a poller's waker reports with.
    pub fn woken() -> Event {
        Event {
            token: WAKER,
            readable: true,
            writable: false,
            hup: false,
        }
    }
}

/// Wakes a poller blocked in `wait` from any thread.
pub trait Wake: Send + Sync {
    /// Makes the poller's current or next `wait` return with a `WAKER` event.
    fn wake(&self) -> io::Result<()>;
}

/// What a backend does differently, declared once (as libevent's
/// `event_method_feature` does) so no caller tests a backend's name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Features {
    /// Readiness is reported once per change (so the caller must read and
    /// write until `WouldBlock`), not for as long as it lasts.
    pub edge_triggered: bool,
    /// Events carry `hup` when the peer hangs up; without it, a hang-up
    /// shows as readable (the read returns 0 or the error).
    pub hup_flag: bool,
    /// A hang-up or error is reported for a source registered with
    /// `Interest::NONE`; without it, a peer that goes away while nothing is
    /// wanted is noticed at the next read or write.
    pub hup_without_interest: bool,
    /// The most file descriptors the backend can watch, if it has a hard
    /// limit (none on Linux: select grows its own fd sets; FD_SETSIZE for
    /// select on systems whose select(2) refuses more).
    pub fd_limit: Option<usize>,
}

/// A readiness poller. One per event-loop thread.
pub trait Poller: Send {
    /// The backend's name, as accepted by `--poller`.
    fn name(&self) -> &'static str;

    /// How this backend differs from the others.
    fn features(&self) -> Features;

    /// Starts watching `fd` for `interest`, reporting it as `token`.
    fn register(&mut self, fd: RawFd, token: Token, interest: Interest) -> io::Result<()>;

    /// Starts watching listening socket `fd` for new connections. A socket
    /// other loops (or worker processes) also watch wakes every one of
    /// them that is waiting; the first to accept takes the connection and
    /// the others find nothing and wait again. (`EPOLLEXCLUSIVE` would
    /// wake one only, but always the first registered while it is idle:
    /// a worker whose loop waits while its pool threads run Python would
    /// take every connection.)
    fn register_listener(&mut self, fd: RawFd, token: Token) -> io::Result<()> {
        self.register(fd, token, Interest::READABLE)
    }

    /// Starts watching a new connection's `fd` as `token`. A completion
    /// backend does the connection's reads and writes itself, and gives
    /// back the `Link` they go through (the caller reads and writes the
    /// connection through it from now on, never the fd); a readiness
    /// backend watches `fd` for reading and gives back none.
    fn attach(&mut self, fd: RawFd, token: Token) -> io::Result<Option<Link>> {
        self.register(fd, token, Interest::READABLE).map(|()| None)
    }

    /// Changes the interest (or token) of a watched `fd`.
    fn reregister(&mut self, fd: RawFd, token: Token, interest: Interest) -> io::Result<()>;

    /// Stops watching `fd`. Call before closing it.
    fn deregister(&mut self, fd: RawFd) -> io::Result<()>;

    /// Waits until a source is ready or `timeout` passes (`None`: forever),
    /// replacing `events` with what is ready. EINTR returns with no events.
    fn wait(&mut self, events: &mut Vec<Event>, timeout: Option<Duration>) -> io::Result<()>;

    /// A handle other threads use to interrupt `wait`.
    fn waker(&self) -> Arc<dyn Wake>;
}

/// The backends `--poller` accepts besides `auto`.
pub const BACKENDS: &[&str] = &["epoll", "poll", "select", "io_uring", "io_uring-completion"];

/// The backends `auto` tries, in order. io_uring is not among them: in
/// readiness mode it does not beat epoll (see benches/RESULTS.md, "io_uring (readiness mode)").
pub const AUTO: &[&str] = &["epoll", "poll", "select"];

/// Creates the backend `--poller` names: `auto` takes the first of `AUTO`
/// that starts; a named backend that cannot start is an error, never a
/// silent fallback.
pub fn create_by_flag(flag: &str) -> Result<Box<dyn Poller>, BootError> {
    if flag != "auto" {
        return create(flag).map_err(|source| BootError::Poller {
            name: flag.to_string(),
            source,
        });
    }
    let mut tried = Vec::new();
    for name in AUTO {
        match create(name) {
            Ok(p) => return Ok(p),
            Err(e) => tried.push(format!("{name}: {e}")),
        }
    }
    Err(BootError::NoPoller { tried })
}

/// Creates the named backend.
pub fn create(name: &str) -> io::Result<Box<dyn Poller>> {
    match name {
        "epoll" => Ok(Box::new(epoll::EpollPoller::new()?)),
        "poll" => Ok(Box::new(poll::PollPoller::new()?)),
        "select" => Ok(Box::new(select::SelectPoller::new()?)),
        "io_uring" => Ok(Box::new(uring::UringPoller::new()?)),
        "io_uring-completion" => completion_or_readiness(completion::CompletionPoller::new()),
        other => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "unknown poller {other:?}; valid: auto, {}",
                BACKENDS.join(", ")
            ),
        )),
    }
}

/// The completion backend, or (on a kernel without a feature it needs)
/// the readiness `io_uring` backend, said in one log line.
fn completion_or_readiness(
    started: Result<completion::CompletionPoller, completion::StartError>,
) -> io::Result<Box<dyn Poller>> {
    match started {
        Ok(p) => Ok(Box::new(p)),
        Err(completion::StartError::Ring(e)) => Err(e),
        Err(completion::StartError::Missing(what)) => {
            log::warn!(
                "--poller io_uring-completion: the kernel lacks {what}; using io_uring in \
                 readiness mode"
            );
            Ok(Box::new(uring::UringPoller::new()?))
        }
    }
}

/// Checks shared by every backend, run through `create` for each name in
/// `BACKENDS`.
#[cfg(test)]
pub(crate) mod tests {
    use super::sys::tests::high_fd;
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;
    use std::time::Instant;

    /// How long a test waits for an event that should come.
    const PATIENCE: Duration = Duration::from_secs(5);

    fn unix_pair() -> (UnixStream, UnixStream) {
        let (a, b) = UnixStream::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        b.set_nonblocking(true).unwrap();
        (a, b)
    }

    fn tcp_pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        client.set_nonblocking(true).unwrap();
        server.set_nonblocking(true).unwrap();
        (client, server)
    }

    /// Waits (up to `PATIENCE`) for an event for `token` that passes `pred`.
    fn wait_for(p: &mut dyn Poller, token: Token, pred: impl Fn(&Event) -> bool) -> Event {
        let deadline = Instant::now() + PATIENCE;
        let mut events = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "{}: no matching event for {token:?}",
                p.name()
            );
            p.wait(&mut events, Some(left)).unwrap();
            if let Some(ev) = events.iter().find(|e| e.token == token && pred(e)) {
                return *ev;
            }
        }
    }

    /// Events for `token` from one wait of `timeout`.
    fn events_for(p: &mut dyn Poller, token: Token, timeout: Duration) -> Vec<Event> {
        let mut events = Vec::new();
        p.wait(&mut events, Some(timeout)).unwrap();
        events.retain(|e| e.token == token);
        events
    }

    /// True (and said on stderr, past the test harness's capture) when
    /// `STOA_TEST_SKIP_IO_URING=1` opts out of the io_uring checks on a
    /// kernel that refuses io_uring; without it such a kernel fails them.
    pub(crate) fn skip_io_uring(err: &io::Error) -> bool {
        if std::env::var_os("STOA_TEST_SKIP_IO_URING").is_some_and(|v| v == "1") {
            let _ = writeln!(
                std::io::stderr(),
                "io_uring SKIPPED (STOA_TEST_SKIP_IO_URING=1): {err}"
            );
            return true;
        }
        false
    }

    /// Every backend, plus io_uring forced into its one-shot mode (what a
    /// kernel without multishot poll gets).
    fn backends() -> impl Iterator<Item = Box<dyn Poller>> {
        let named = BACKENDS.iter().filter_map(|&name| match create(name) {
            Ok(p) => {
                assert_eq!(p.name(), name);
                Some(p)
            }
            Err(e) if name == "io_uring" && skip_io_uring(&e) => None,
            Err(e) => panic!("cannot start {name}: {e}"),
        });
        let one_shot = match uring::UringPoller::start(false) {
            Ok(p) => Some(Box::new(p) as Box<dyn Poller>),
            Err(e) if skip_io_uring(&e) => None,
            Err(e) => panic!("cannot start io_uring (one-shot): {e}"),
        };
        named.chain(one_shot)
    }

    #[test]
    fn unknown_name_is_refused() {
        let err = create("kqueue").err().unwrap();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        assert_eq!(
            err.to_string(),
            "unknown poller \"kqueue\"; valid: auto, epoll, poll, select, io_uring, io_uring-completion"
        );
    }

    #[test]
    fn hang_up_without_interest_is_as_declared() {
        for mut p in backends() {
            let p = &mut *p;
            let (a, b) = unix_pair();
            p.register(a.as_raw_fd(), Token(5), Interest::NONE).unwrap();
            drop(b);
            let seen = events_for(p, Token(5), Duration::from_millis(50));
            assert_eq!(
                !seen.is_empty(),
                p.features().hup_without_interest,
                "{}: {seen:?}",
                p.name()
            );
            p.deregister(a.as_raw_fd()).unwrap();
        }
    }

    #[test]
    fn readable_with_the_right_token() {
        for mut p in backends() {
            let p = &mut *p;
            let (ua, mut ub) = unix_pair();
            let (mut ta, tb) = tcp_pair();
            p.register(ua.as_raw_fd(), Token(7), Interest::READABLE)
                .unwrap();
            p.register(tb.as_raw_fd(), Token(8), Interest::READABLE)
                .unwrap();
            assert!(
                events_for(p, Token(7), Duration::ZERO)
                    .iter()
                    .all(|e| !e.readable),
                "{}",
                p.name()
            );
            ub.write_all(b"ping").unwrap();
            let ev = wait_for(p, Token(7), |e| e.readable);
            assert!(!ev.hup, "{}", p.name());
            ta.write_all(b"pong").unwrap();
            let ev = wait_for(p, Token(8), |e| e.readable);
            assert!(!ev.hup, "{}", p.name());
            let mut buf = [0u8; 8];
            assert_eq!((&ua).read(&mut buf).unwrap(), 4);
            assert_eq!((&tb).read(&mut buf).unwrap(), 4);
            p.deregister(ua.as_raw_fd()).unwrap();
            p.deregister(tb.as_raw_fd()).unwrap();
        }
    }

    #[test]
    fn writable() {
        for mut p in backends() {
            let p = &mut *p;
            let (ta, _tb) = tcp_pair();
            p.register(ta.as_raw_fd(), Token(3), Interest::WRITABLE)
                .unwrap();
            let ev = wait_for(p, Token(3), |e| e.writable);
            assert!(!ev.readable && !ev.hup, "{}: {ev:?}", p.name());
            p.deregister(ta.as_raw_fd()).unwrap();
        }
    }

    #[test]
    fn reregister_changes_interest_and_token() {
        for mut p in backends() {
            let p = &mut *p;
            let (a, _b) = unix_pair();
            let fd = a.as_raw_fd();
            p.register(fd, Token(1), Interest::READABLE).unwrap();
            if p.features().edge_triggered {
                // epoll arms both directions once and ignores reregister.
                p.reregister(fd, Token(1), Interest::BOTH).unwrap();
                p.deregister(fd).unwrap();
                continue;
            }
            let quiet = Duration::from_millis(10);
            assert!(events_for(p, Token(1), quiet).is_empty(), "{}", p.name());
            p.reregister(fd, Token(1), Interest::BOTH).unwrap();
            // Level-triggered: reported on every wait while it lasts.
            for _ in 0..2 {
                let ev = events_for(p, Token(1), Duration::ZERO);
                assert_eq!(
                    ev,
                    vec![Event {
                        token: Token(1),
                        readable: false,
                        writable: true,
                        hup: false
                    }],
                    "{}",
                    p.name()
                );
            }
            p.reregister(fd, Token(1), Interest::READABLE).unwrap();
            assert!(events_for(p, Token(1), quiet).is_empty(), "{}", p.name());
            p.reregister(fd, Token(2), Interest::WRITABLE).unwrap();
            let mut events = Vec::new();
            p.wait(&mut events, Some(Duration::ZERO)).unwrap();
            assert_eq!(
                events,
                vec![Event {
                    token: Token(2),
                    readable: false,
                    writable: true,
                    hup: false
                }],
                "{}",
                p.name()
            );
            p.deregister(fd).unwrap();
        }
    }

    #[test]
    fn deregister_stops_events() {
        for mut p in backends() {
            let p = &mut *p;
            let (a, mut b) = unix_pair();
            p.register(a.as_raw_fd(), Token(5), Interest::BOTH).unwrap();
            b.write_all(b"data").unwrap();
            wait_for(p, Token(5), |e| e.readable);
            p.deregister(a.as_raw_fd()).unwrap();
            b.write_all(b"more").unwrap();
            assert!(
                events_for(p, Token(5), Duration::from_millis(50)).is_empty(),
                "{}",
                p.name()
            );
            assert!(p.deregister(a.as_raw_fd()).is_err(), "{}", p.name());
        }
    }

    #[test]
    fn a_close_after_deregister_reaches_the_peer_at_once() {
        for mut p in backends() {
            let p = &mut *p;
            let (client, server) = tcp_pair();
            p.register(server.as_raw_fd(), Token(4), Interest::BOTH)
                .unwrap();
            wait_for(p, Token(4), |e| e.writable);
            p.deregister(server.as_raw_fd()).unwrap();
            drop(server);
            // No wait in between: the FIN must not wait for the next turn.
            client.set_nonblocking(false).unwrap();
            client
                .set_read_timeout(Some(Duration::from_millis(500)))
                .unwrap();
            let mut buf = [0u8; 4];
            assert_eq!((&client).read(&mut buf).unwrap(), 0, "{}", p.name());
        }
    }

    #[test]
    fn many_registrations_in_one_turn_are_all_reported() {
        // 64 registrations (queued in one turn on io_uring), one wait each.
        for mut p in backends() {
            let p = &mut *p;
            let pairs: Vec<_> = (0..64).map(|_| unix_pair()).collect();
            for (i, (a, _)) in pairs.iter().enumerate() {
                p.register(a.as_raw_fd(), Token(100 + i), Interest::WRITABLE)
                    .unwrap();
            }
            let mut seen = std::collections::HashSet::new();
            let deadline = Instant::now() + PATIENCE;
            let mut events = Vec::new();
            while seen.len() < pairs.len() && Instant::now() < deadline {
                p.wait(&mut events, Some(Duration::from_millis(10)))
                    .unwrap();
                seen.extend(events.iter().filter(|e| e.writable).map(|e| e.token));
            }
            assert_eq!(seen.len(), pairs.len(), "{}", p.name());
            for (a, _) in &pairs {
                p.deregister(a.as_raw_fd()).unwrap();
            }
        }
    }

    #[test]
    fn waker_from_another_thread_ends_an_endless_wait() {
        for mut p in backends() {
            let waker = p.waker();
            let start = Instant::now();
            let t = std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(50));
                waker.wake().unwrap();
            });
            let mut events = Vec::new();
            // Loop only over spurious empty returns (EINTR).
            while events.is_empty() {
                p.wait(&mut events, None).unwrap();
            }
            assert_eq!(events.len(), 1, "{}", p.name());
            assert_eq!(events[0].token, WAKER, "{}", p.name());
            assert!(start.elapsed() >= Duration::from_millis(40), "{}", p.name());
            t.join().unwrap();
            // The wakeup was consumed: the next wait times out.
            p.wait(&mut events, Some(Duration::from_millis(10)))
                .unwrap();
            assert!(events.is_empty(), "{}: {events:?}", p.name());
            // A wake before the wait is not lost.
            p.waker().wake().unwrap();
            p.wait(&mut events, Some(PATIENCE)).unwrap();
            assert_eq!(events.len(), 1, "{}", p.name());
            assert_eq!(events[0].token, WAKER, "{}", p.name());
        }
    }

    #[test]
    fn timeout_is_honoured() {
        for mut p in backends() {
            let (a, _b) = unix_pair();
            p.register(a.as_raw_fd(), Token(1), Interest::READABLE)
                .unwrap();
            // Let epoll report its initial writable edge (it arms both).
            events_for(&mut *p, Token(1), Duration::ZERO);
            let mut events = vec![Event {
                token: Token(9),
                readable: true,
                writable: true,
                hup: true,
            }];
            let start = Instant::now();
            p.wait(&mut events, Some(Duration::from_millis(50)))
                .unwrap();
            let took = start.elapsed();
            assert!(events.is_empty(), "{}: {events:?}", p.name());
            assert!(took >= Duration::from_millis(40), "{}: {took:?}", p.name());
            assert!(took < Duration::from_secs(5), "{}: {took:?}", p.name());
            // A sub-millisecond timeout still sleeps rather than spinning.
            let start = Instant::now();
            p.wait(&mut events, Some(Duration::from_micros(500)))
                .unwrap();
            assert!(events.is_empty(), "{}", p.name());
            assert!(
                start.elapsed() >= Duration::from_micros(400),
                "{}",
                p.name()
            );
            p.deregister(a.as_raw_fd()).unwrap();
        }
    }

    #[test]
    fn peer_close_is_reported() {
        for mut p in backends() {
            let p = &mut *p;
            // Without a hangup flag, the EOF is reported as readable only.
            let sees_hup = p.features().hup_flag;
            let (ua, ub) = unix_pair();
            let (ta, tb) = tcp_pair();
            p.register(ua.as_raw_fd(), Token(1), Interest::READABLE)
                .unwrap();
            p.register(tb.as_raw_fd(), Token(2), Interest::READABLE)
                .unwrap();
            // One at a time: epoll reports an edge only once, so a wait
            // for one token must not swallow the other's event.
            let mut buf = [0u8; 8];
            drop(ub);
            let ev = wait_for(p, Token(1), |e| e.readable);
            assert_eq!(ev.hup, sees_hup, "{} unix: {ev:?}", p.name());
            assert_eq!((&ua).read(&mut buf).unwrap(), 0, "{}", p.name());
            drop(ta);
            let ev = wait_for(p, Token(2), |e| e.readable);
            assert_eq!(ev.hup, sees_hup, "{} tcp: {ev:?}", p.name());
            assert_eq!((&tb).read(&mut buf).unwrap(), 0, "{}", p.name());
            p.deregister(ua.as_raw_fd()).unwrap();
            p.deregister(tb.as_raw_fd()).unwrap();
        }
    }

    #[test]
    fn fds_above_fd_setsize() {
        for min in [1024, 4100] {
            let (a, mut b) = unix_pair();
            let Some(high) = high_fd(&a, min) else {
                eprintln!("skipped: RLIMIT_NOFILE hard limit too low for an fd >= {min}");
                return;
            };
            let fd = high.as_raw_fd();
            for mut p in backends() {
                let p = &mut *p;
                assert_eq!(p.features().fd_limit, None, "{}", p.name());
                p.register(fd, Token(11), Interest::READABLE).unwrap();
                b.write_all(b"!").unwrap();
                wait_for(p, Token(11), |e| e.readable);
                let mut buf = [0u8; 4];
                assert_eq!((&a).read(&mut buf).unwrap(), 1);
                p.deregister(fd).unwrap();
            }
        }
    }
}

//! epoll(7) through mio. Edge-triggered: every source is registered once
//! for both readable and writable, so the connection code never re-arms it
//! (one `epoll_ctl` per connection, not one per request).

use super::{Event, Features, Interest, Poller, Token, Wake, WAKER};
use mio::unix::SourceFd;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::time::Duration;

/// The epoll backend.
pub struct EpollPoller {
    poll: mio::Poll,
    events: mio::Events,
    waker: Arc<MioWaker>,
}

struct MioWaker(mio::Waker);

impl Wake for MioWaker {
    fn wake(&self) -> io::Result<()> {
        self.0.wake()
    }
}

impl EpollPoller {
    pub fn new() -> io::Result<Self> {
        let poll = mio::Poll::new()?;
        let waker = mio::Waker::new(poll.registry(), mio::Token(WAKER.0))?;
        Ok(EpollPoller {
            poll,
            events: mio::Events::with_capacity(1024),
            waker: Arc::new(MioWaker(waker)),
        })
    }
}

fn mio_interest(interest: Interest) -> mio::Interest {
    match (interest.is_readable(), interest.is_writable()) {
        (false, true) => mio::Interest::WRITABLE,
        (true, true) => mio::Interest::READABLE | mio::Interest::WRITABLE,
        _ => mio::Interest::READABLE,
    }
}

impl Poller for EpollPoller {
    fn name(&self) -> &'static str {
        "epoll"
    }

    fn features(&self) -> Features {
        Features {
            hup_flag: true,
            edge_triggered: true,
            // Registered once for both directions: hang-ups always show.
            hup_without_interest: true,
            fd_limit: None,
        }
    }

    fn register(&mut self, fd: RawFd, token: Token, interest: Interest) -> io::Result<()> {
        // Edge-triggered: ask for both now, so interest changes need no syscall.
        let _ = interest;
        self.poll.registry().register(
            &mut SourceFd(&fd),
            mio::Token(token.0),
            mio_interest(Interest::BOTH),
        )
    }

    fn register_listener(&mut self, fd: RawFd, token: Token) -> io::Result<()> {
        // Level-triggered and exclusive: one waiting loop is woken per new
        // connection, and a loop that is busy (not in epoll_wait) takes no
        // wake-up from the others; what one leaves in the backlog is
        // reported again on its next wait.
        let mut event = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLEXCLUSIVE) as u32,
            u64: token.0 as u64,
        };
        // SAFETY: `self.poll`'s descriptor is a live epoll instance (mio
        // owns it for our lifetime), `fd` is the caller's open socket, and
        // `event` is a valid epoll_event for the duration of the call. mio
        // reads the token back from the same `u64` field it writes.
        let rc =
            unsafe { libc::epoll_ctl(self.poll.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut event) };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    fn reregister(&mut self, _fd: RawFd, _token: Token, _interest: Interest) -> io::Result<()> {
        // Already armed for both directions at register; edges keep coming.
        Ok(())
    }

    fn deregister(&mut self, fd: RawFd) -> io::Result<()> {
        self.poll.registry().deregister(&mut SourceFd(&fd))
    }

    fn wait(&mut self, events: &mut Vec<Event>, timeout: Option<Duration>) -> io::Result<()> {
        events.clear();
        match self.poll.poll(&mut self.events, timeout) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok(()),
            Err(e) => return Err(e),
        }
        for ev in self.events.iter() {
            events.push(Event {
                token: Token(ev.token().0),
                readable: ev.is_readable() || ev.is_read_closed(),
                writable: ev.is_writable(),
                hup: ev.is_read_closed() || ev.is_write_closed() || ev.is_error(),
            });
        }
        Ok(())
    }

    fn waker(&self) -> Arc<dyn Wake> {
        self.waker.clone()
    }
}

//! A loop's listeners and whether they are watched: accepts are paused at
//! the connection cap (or on EMFILE) and resumed when a connection closes;
//! a drain closes them. A worker the watchdog found stuck lost its TCP
//! listeners (shut down, so the kernel hands new clients to the other
//! workers): when its loop turns again, `rejoin` binds new `SO_REUSEPORT`
//! listeners on the same addresses. A Unix socket is one listener shared
//! by every worker, so it is never shut down: a stuck worker just does not
//! accept from it.

use crate::listen::{self, Accepted, Listener};
use crate::ops::watchdog::Beat;
use crate::poller::{Poller, Token};
use socket2::{SockRef, Socket};
use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::Arc;

/// Listener `i`'s token is `Token(LISTENERS - i)`: the top half of the
/// token space is the listeners' (a loop takes any number: an upgrade may
/// pass it every old worker's socket), the bottom half the connections'.
const LISTENERS: usize = usize::MAX - 1;
/// The lowest listener token.
const LOWEST_LISTENER: usize = usize::MAX / 2;
/// The listener index a token stands for, if it is a listener's.
pub fn listener_of(token: Token) -> Option<usize> {
    (LOWEST_LISTENER..=LISTENERS)
        .contains(&token.0)
        .then(|| LISTENERS - token.0)
}

fn token(i: usize) -> Token {
    Token(LISTENERS - i)
}

struct Slot {
    /// `None` once a drain has closed it.
    listener: Option<Listener>,
    watched: bool,
}

pub struct Acceptor {
    slots: Vec<Slot>,
}

impl Acceptor {
    /// Registers every listener with `poller`.
    pub fn new(listeners: Vec<Listener>, poller: &mut dyn Poller) -> io::Result<Self> {
        let mut slots = Vec::with_capacity(listeners.len());
        for (i, listener) in listeners.into_iter().enumerate() {
            poller.register_listener(listener.as_raw_fd(), token(i))?;
            slots.push(Slot {
                listener: Some(listener),
                watched: true,
            });
        }
        Ok(Acceptor { slots })
    }

    /// True while every open listener is watched.
    pub fn is_accepting(&self) -> bool {
        self.slots.iter().any(|s| s.listener.is_some())
            && self.slots.iter().all(|s| s.watched || s.listener.is_none())
    }

    /// Accepts one connection from listener `i` (`WouldBlock` when none
    /// waits; `None` when it is not accepting).
    pub fn accept(&self, i: usize) -> Option<io::Result<(Accepted, Arc<str>)>> {
        let slot = self.slots.get(i)?;
        slot.listener
            .as_ref()
            .filter(|_| slot.watched)
            .map(Listener::accept)
    }

    /// The listeners that are watched, to accept from after a resume.
    pub fn watched(&self) -> Vec<usize> {
        (0..self.slots.len())
            .filter(|&i| self.slots[i].watched && self.slots[i].listener.is_some())
            .collect()
    }

    /// Stops watching the listeners (the kernel's backlog holds new
    /// clients meanwhile).
    pub fn pause(&mut self, poller: &mut dyn Poller) {
        for slot in &mut self.slots {
            if let (Some(listener), true) = (&slot.listener, slot.watched) {
                slot.watched = false;
                if let Err(e) = poller.deregister(listener.as_raw_fd()) {
                    log::warn!("cannot pause a listener: {e}");
                }
            }
        }
    }

    /// Watches the listeners again; true if any now is.
    pub fn resume(&mut self, poller: &mut dyn Poller) -> bool {
        let mut any = false;
        for (i, slot) in self.slots.iter_mut().enumerate() {
            let Some(listener) = &slot.listener else {
                continue;
            };
            if !slot.watched {
                match poller.register_listener(listener.as_raw_fd(), token(i)) {
                    Ok(()) => slot.watched = true,
                    Err(e) => log::warn!("cannot resume a listener: {e}"),
                }
            }
            any |= slot.watched;
        }
        any
    }

    /// Closes the listeners for good (a drain); true the first time.
    pub fn close(&mut self, poller: &mut dyn Poller) -> bool {
        self.pause(poller);
        let mut closed = false;
        for slot in &mut self.slots {
            closed |= slot.listener.take().is_some();
        }
        closed
    }

    /// Duplicates of this worker's own TCP listeners (`addrs[i]` is set
    /// for those), for the watchdog to shut down; shared sockets (Unix, or
    /// passed by a service manager) are left alone.
    pub fn tcp_duplicates(&self, addrs: &[Option<SocketAddr>]) -> io::Result<Vec<Socket>> {
        self.slots
            .iter()
            .zip(addrs)
            .filter_map(|(s, addr)| match (&s.listener, addr) {
                (Some(Listener::Tcp(l)), Some(_)) => Some(SockRef::from(l).try_clone()),
                _ => None,
            })
            .collect()
    }

    /// Replaces the TCP listeners the watchdog shut down with new ones on
    /// the same addresses (`addrs[i]` for listener `i`; `None` for a Unix
    /// one) and hands the watchdog their duplicates; true if the worker
    /// accepts again. A listener that cannot be re-created is kept dead,
    /// so a drain still finds it.
    pub fn rejoin(
        &mut self,
        poller: &mut dyn Poller,
        addrs: &[Option<SocketAddr>],
        backlog: i32,
        beat: &Beat,
        worker: usize,
    ) -> bool {
        let mut ok = true;
        for (i, slot) in self.slots.iter_mut().enumerate() {
            let (Some(Listener::Tcp(old)), Some(Some(addr))) = (&slot.listener, addrs.get(i))
            else {
                continue;
            };
            if slot.watched {
                let _ = poller.deregister(old.as_raw_fd());
            }
            slot.watched = false;
            let fresh = listen::bind(*addr, backlog).and_then(|l| {
                poller.register_listener(l.as_raw_fd(), token(i))?;
                Ok(l)
            });
            match fresh {
                Ok(listener) => {
                    slot.listener = Some(Listener::Tcp(listener));
                    slot.watched = true;
                }
                Err(e) => {
                    ok = false;
                    log::error!(
                        "worker {worker} cannot re-create its listener on {addr}: {e}; it \
                         serves only the connections it has"
                    );
                }
            }
        }
        match self.tcp_duplicates(addrs) {
            Ok(dups) => beat.set_listeners(dups),
            Err(e) => log::warn!("worker {worker}: cannot duplicate its listeners: {e}"),
        }
        if ok {
            log::warn!("worker {worker} turns again: rejoined the accept group with new listeners");
        }
        ok
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::poller::WAKER;

    #[test]
    fn listener_tokens_do_not_meet_connections_or_the_waker() {
        assert_eq!(listener_of(token(0)), Some(0));
        // More than the 64 distinct --bind values: an upgrade passes
        // every old worker's socket.
        assert_eq!(listener_of(token(65)), Some(65));
        assert_eq!(listener_of(token(100_000)), Some(100_000));
        assert_eq!(listener_of(WAKER), None);
        assert_eq!(listener_of(Token(0)), None);
        assert_eq!(listener_of(Token(1_000_000)), None);
    }
}

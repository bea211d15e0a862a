//! A loop's listener and whether it is being watched: accepts are paused
//! at the connection cap (or on EMFILE) and resumed when a connection
//! closes; a drain closes the listener. A worker the watchdog found stuck
//! lost its listener (shut down, so the kernel hands new clients to the
//! other workers): when its loop turns again, `rejoin` binds a new
//! `SO_REUSEPORT` listener on the same address.

use crate::listen;
use crate::ops::watchdog::Beat;
use crate::poller::{Interest, Poller, Token};
use mio::net::{TcpListener, TcpStream};
use socket2::SockRef;
use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;

/// The listener's token.
pub const LISTENER: Token = Token(usize::MAX - 1);

pub struct Acceptor {
    /// `None` once a drain has closed it.
    listener: Option<TcpListener>,
    /// Whether the listener is registered with the poller.
    watched: bool,
}

impl Acceptor {
    /// Registers `listener` with `poller`.
    pub fn new(listener: TcpListener, poller: &mut dyn Poller) -> io::Result<Self> {
        poller.register(listener.as_raw_fd(), LISTENER, Interest::READABLE)?;
        Ok(Acceptor {
            listener: Some(listener),
            watched: true,
        })
    }

    /// True while accepting (watched and not closed).
    pub fn is_accepting(&self) -> bool {
        self.watched && self.listener.is_some()
    }

    /// Accepts one connection (`WouldBlock` when none waits; `None` when
    /// not accepting).
    pub fn accept(&self) -> Option<io::Result<(TcpStream, SocketAddr)>> {
        self.listener
            .as_ref()
            .filter(|_| self.watched)
            .map(TcpListener::accept)
    }

    /// Stops watching the listener (the kernel's backlog holds new
    /// clients meanwhile).
    pub fn pause(&mut self, poller: &mut dyn Poller) {
        if let (Some(listener), true) = (&self.listener, self.watched) {
            self.watched = false;
            if let Err(e) = poller.deregister(listener.as_raw_fd()) {
                log::warn!("cannot pause the listener: {e}");
            }
        }
    }

    /// Watches the listener again; true if it now is.
    pub fn resume(&mut self, poller: &mut dyn Poller) -> bool {
        let Some(listener) = &self.listener else {
            return false;
        };
        if !self.watched {
            match poller.register(listener.as_raw_fd(), LISTENER, Interest::READABLE) {
                Ok(()) => self.watched = true,
                Err(e) => log::warn!("cannot resume the listener: {e}"),
            }
        }
        self.watched
    }

    /// Closes the listener for good (a drain); true the first time.
    pub fn close(&mut self, poller: &mut dyn Poller) -> bool {
        self.pause(poller);
        self.listener.take().is_some()
    }

    /// Replaces a listener the watchdog shut down with a new one on `addr`
    /// and hands the watchdog its duplicate; true if the worker accepts
    /// again. On failure the dead listener is kept, so a drain still finds
    /// it.
    pub fn rejoin(
        &mut self,
        poller: &mut dyn Poller,
        (addr, backlog): (SocketAddr, i32),
        beat: &Beat,
        worker: usize,
    ) -> bool {
        let Some(old) = self.listener.take() else {
            return false;
        };
        if self.watched {
            let _ = poller.deregister(old.as_raw_fd());
        }
        self.watched = false;
        let fresh = listen::bind(addr, backlog).and_then(|l| {
            let dup = SockRef::from(&l).try_clone()?;
            poller.register(l.as_raw_fd(), LISTENER, Interest::READABLE)?;
            Ok((l, dup))
        });
        match fresh {
            Ok((listener, dup)) => {
                beat.set_listener(dup);
                self.listener = Some(listener);
                self.watched = true;
                log::warn!(
                    "worker {worker} turns again: rejoined the accept group with a new listener"
                );
                true
            }
            Err(e) => {
                self.listener = Some(old);
                log::error!(
                    "worker {worker} cannot re-create its listener on {addr}: {e}; it serves \
                     only the connections it has"
                );
                false
            }
        }
    }
}

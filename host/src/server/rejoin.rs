//! A worker the watchdog found stuck lost its listener (shut down so the
//! kernel hands new clients to the other workers). When its loop turns
//! again it binds a new `SO_REUSEPORT` listener on the same address and
//! rejoins the accept group.

use super::{Server, LISTENER};
use crate::listen;
use crate::poller::Interest;
use socket2::SockRef;
use std::os::fd::AsRawFd;

impl Server {
    /// Replaces the shut-down listener with a new one (not while draining:
    /// the drain closes it anyway).
    pub(super) fn rejoin(&mut self) {
        if self.shared.control.draining() {
            return;
        }
        let Some(old) = self.listener.take() else {
            return;
        };
        if self.accepting {
            let _ = self.poller.deregister(old.as_raw_fd());
        }
        self.accepting = false;
        let (addr, backlog) = (self.shared.watch.addr, self.shared.watch.backlog);
        let fresh = listen::bind(addr, backlog).and_then(|l| {
            let dup = SockRef::from(&l).try_clone()?;
            self.poller
                .register(l.as_raw_fd(), LISTENER, Interest::READABLE)?;
            Ok((l, dup))
        });
        match fresh {
            Ok((listener, dup)) => {
                self.beat().set_listener(dup);
                self.listener = Some(listener);
                self.accepting = true;
                log::warn!(
                    "worker {} turns again: rejoined the accept group with a new listener",
                    self.worker
                );
                self.accept();
            }
            Err(e) => {
                // Keeps the dead listener so the drain still finds it.
                self.listener = Some(old);
                log::error!(
                    "worker {} cannot re-create its listener on {addr}: {e}; it serves only \
                     the connections it has",
                    self.worker
                );
            }
        }
    }
}

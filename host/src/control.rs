//! Process-wide run state shared by the workers: draining on SIGTERM, the
//! forced stop after the graceful timeout, and the wakers that make every
//! loop notice a change at once; and the requests that steer the process
//! (`Request`), which signals and the apps thread send to the one thread
//! that acts on them (`signals`), so no part of the host signals itself.

use crate::poller::Wake;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// What the control thread is asked to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// Rescan the apps directory (SIGHUP).
    Rescan,
    /// Reopen the access log (SIGUSR1, after a rotation).
    ReopenLogs,
    /// Start a new host with this one's sockets, then drain (SIGUSR2, or a
    /// replace past `--max-generations` with `--on-generation-cap reexec`);
    /// `why` is said in the log.
    Upgrade { why: String },
    /// Stop accepting and drain (SIGTERM, SIGINT); a second one exits.
    Drain { why: String },
}

/// Where requests for the control thread are sent.
pub type Requests = crossbeam_channel::Sender<Request>;

#[derive(Default)]
pub struct Control {
    draining: AtomicBool,
    forced: AtomicBool,
    wakers: Mutex<Vec<Arc<dyn Wake>>>,
}

impl Control {
    /// Adds a worker's waker.
    pub fn add_waker(&self, waker: Arc<dyn Wake>) {
        self.wakers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(waker);
    }

    /// Wakes the workers `wants` picks (by index, in the order their wakers
    /// were added), except `except`, the caller's own.
    pub fn wake_some(&self, wants: impl Fn(usize) -> bool, except: usize) {
        let wakers = self.wakers.lock().unwrap_or_else(|p| p.into_inner());
        for (i, w) in wakers.iter().enumerate() {
            if i != except && wants(i) {
                if let Err(e) = w.wake() {
                    log::warn!("cannot wake worker {i}: {e}");
                }
            }
        }
    }

    fn wake_all(&self) {
        for w in self.wakers.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            if let Err(e) = w.wake() {
                log::warn!("cannot wake a worker: {e}");
            }
        }
    }

    /// Stop accepting and finish in-flight requests.
    pub fn drain(&self) {
        self.draining.store(true, Ordering::SeqCst);
        self.wake_all();
    }

    /// Close everything now (graceful timeout passed).
    pub fn force(&self) {
        self.draining.store(true, Ordering::SeqCst);
        self.forced.store(true, Ordering::SeqCst);
        self.wake_all();
    }

    pub fn draining(&self) -> bool {
        self.draining.load(Ordering::Relaxed)
    }

    pub fn forced(&self) -> bool {
        self.forced.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    struct Counted(AtomicUsize);

    impl Wake for Counted {
        fn wake(&self) -> std::io::Result<()> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
    }

    #[test]
    fn a_drain_and_a_forced_stop_wake_every_loop() {
        let control = Control::default();
        let waker = Arc::new(Counted(AtomicUsize::new(0)));
        control.add_waker(waker.clone());
        assert!(!control.draining());
        control.drain();
        assert!(control.draining() && !control.forced());
        control.force();
        assert!(control.forced());
        assert_eq!(waker.0.load(Ordering::SeqCst), 2);
    }
}

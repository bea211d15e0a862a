//! Process-wide run state shared by the workers: draining on SIGTERM, the
//! forced stop after the graceful timeout, and the wakers that make every
//! loop notice a change at once.

use crate::poller::Wake;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

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

//! The host's services as a plugin sees them: timers on the event loop and
//! the blocking pool. Closures are wrapped so a panic inside them is caught
//! on the plugin's side of the ABI (and logged by the plugin's panic hook).

use crate::abi::{HostRef, Task, TaskBox, Task_TO};
use abi_stable::sabi_trait::TD_Opaque;
use std::sync::OnceLock;
use std::time::Duration;

static HOST: OnceLock<HostRef> = OnceLock::new();

/// Called by `export_app!`'s init.
pub(crate) fn install(host: HostRef) {
    let _ = HOST.set(host);
}

/// The host services available to this plugin; `None` before init (only
/// in unit tests that call an app directly).
pub fn host() -> Option<Host> {
    HOST.get().map(|&inner| Host { inner })
}

/// The blocking pool's queue was full; the job was not run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolFull;

impl std::fmt::Display for PoolFull {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the host's blocking pool is full")
    }
}

impl std::error::Error for PoolFull {}

/// Handle to the host's timers and blocking pool.
#[derive(Clone, Copy)]
pub struct Host {
    inner: HostRef,
}

struct Guarded<F>(F);

impl<F: FnOnce() + Send + 'static> Task for Guarded<F> {
    fn run(self) {
        // A panic is logged by the plugin's hook; whatever the closure owned
        // (a responder, say) is dropped while unwinding.
        let _ = crate::export::guard(self.0);
    }
}

pub(crate) fn task(f: impl FnOnce() + Send + 'static) -> TaskBox {
    Task_TO::from_value(Guarded(f), TD_Opaque)
}

impl Host {
    /// Runs `f` after `delay` on the event loop (of the current request's
    /// worker when called from a handler). `f` must not block.
    pub fn call_later(&self, delay: Duration, f: impl FnOnce() + Send + 'static) {
        let ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
        (self.inner.call_later())(ms, task(f));
    }

    /// Runs `f` on the host's blocking pool.
    pub fn spawn_blocking(&self, f: impl FnOnce() + Send + 'static) -> Result<(), PoolFull> {
        if (self.inner.spawn_blocking())(task(f)) {
            Ok(())
        } else {
            Err(PoolFull)
        }
    }
}

//! The lifespan scope: startup before an ASGI application serves (its
//! failure refuses the application), shutdown when the host retires it.

use super::runner::{Job, Runner};
use crate::settings::Lifespan;
use pyo3::prelude::*;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};
use stoa_app_api::log;

/// How long startup may take before the application is refused.
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(60);
/// How long shutdown may take at the host's drain.
pub const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(10);

/// What a lifespan step came to: 0 complete, 1 failed (with the
/// application's message), 2 raised or returned (the traceback, or
/// nothing when the application returned).
pub struct Outcome {
    result: Mutex<Option<(u8, String)>>,
    done: Condvar,
}

impl Outcome {
    fn new() -> Arc<Outcome> {
        Arc::new(Outcome {
            result: Mutex::new(None),
            done: Condvar::new(),
        })
    }

    /// The outcome as the driver sets it.
    pub fn object(self: &Arc<Self>, py: Python<'_>) -> PyResult<PyObject> {
        Ok(Py::new(py, OutcomeHandle(self.clone()))?.into_any())
    }

    fn wait(&self, timeout: Duration) -> Option<(u8, String)> {
        let deadline = Instant::now() + timeout;
        let mut result = self.result.lock().unwrap_or_else(|p| p.into_inner());
        while result.is_none() {
            let left = deadline.checked_duration_since(Instant::now())?;
            result = self
                .done
                .wait_timeout(result, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        result.take()
    }
}

/// The driver's handle on an [`Outcome`].
#[pyclass(module = "stoa_asgi_bridge", name = "Outcome")]
pub struct OutcomeHandle(Arc<Outcome>);

#[pymethods]
impl OutcomeHandle {
    fn set(&self, code: u8, message: String) {
        *self.0.result.lock().unwrap_or_else(|p| p.into_inner()) = Some((code, message));
        self.0.done.notify_all();
    }
}

/// Runs application `index`'s startup (`target` names it) as `mode`
/// says; the error refuses the application. Called without the
/// interpreter's lock.
pub fn startup(runner: &Runner, index: usize, target: &str, mode: Lifespan) -> Result<(), String> {
    if mode == Lifespan::Off {
        return Ok(());
    }
    let outcome = Outcome::new();
    runner.submit(Job::Startup(index, outcome.clone()));
    match outcome.wait(STARTUP_TIMEOUT) {
        Some((0, _)) => {
            log::info!("ASGI application {target}: lifespan startup complete");
            Ok(())
        }
        Some((1, message)) => Err(format!(
            "the ASGI application {target}'s lifespan startup failed: {message}"
        )),
        Some((_, trace)) => {
            let last = trace
                .trim_end()
                .lines()
                .last()
                .unwrap_or("it returned")
                .to_string();
            if mode == Lifespan::Auto {
                log::info!(
                    "ASGI application {target}: the lifespan protocol appears unsupported \
                     ({last}); serving without it (lifespan = \"on\" makes this an error)"
                );
                log::debug!("ASGI application {target}'s lifespan:\n{trace}");
                return Ok(());
            }
            if !trace.is_empty() {
                log::error!("ASGI application {target}'s lifespan startup raised:\n{trace}");
            }
            Err(format!(
                "the ASGI application {target}'s lifespan startup did not complete: {last}"
            ))
        }
        None => Err(format!(
            "the ASGI application {target}'s lifespan startup did not complete within {} s",
            STARTUP_TIMEOUT.as_secs()
        )),
    }
}

/// Runs application `index`'s shutdown, bounded.
pub fn shutdown(runner: &Runner, index: usize, target: &str, mode: Lifespan) {
    if mode == Lifespan::Off {
        return;
    }
    let outcome = Outcome::new();
    runner.submit(Job::Shutdown(index, outcome.clone()));
    match outcome.wait(SHUTDOWN_TIMEOUT) {
        Some((0, _)) => log::info!("ASGI application {target}: lifespan shutdown complete"),
        // It had none running (unsupported, or it ended).
        Some((3, _)) => {}
        Some((1, message)) => {
            log::error!("ASGI application {target}: lifespan shutdown failed: {message}")
        }
        Some((_, trace)) => {
            log::error!("ASGI application {target}: lifespan shutdown raised:\n{trace}")
        }
        None => log::warn!(
            "ASGI application {target}: lifespan shutdown did not complete within {} s",
            SHUTDOWN_TIMEOUT.as_secs()
        ),
    }
}

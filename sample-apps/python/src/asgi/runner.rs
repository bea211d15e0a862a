//! The process's ASGI event loop: one thread running an asyncio loop
//! (uvloop when it is installed), started by the first ASGI application
//! and shared by all of them.
//!
//! The host's threads never take the interpreter's lock to hand it work:
//! they queue jobs (a new request, a lifespan step) and the futures to
//! resolve (a body piece came, the stream has room, the client went) in a
//! locked inbox, and write one byte to a socket the loop reads
//! (`loop.add_reader`) when the inbox was empty. The loop's reader takes
//! the whole inbox at once (`take`), so a burst costs one wake-up.
//!
//! A watchdog thread checks that the loop turns: the loop beats every
//! 100 ms; a beat late by [`LAG`] is a coroutine holding the loop (a
//! blocking call), reported once per stall with the request it runs.

use pyo3::prelude::*;
use pyo3::types::PyModule;
use std::ffi::CString;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};
use stoa_app_api::log;

use super::exchange::{HttpCore, HttpExchange};
use super::lifespan::Outcome;
use super::ws::{WsCore, WsExchange};

/// A loop that has not turned for this long is blocked.
pub const LAG: Duration = Duration::from_millis(250);

/// Work for the loop.
pub enum Job {
    Http(usize, Arc<HttpCore>),
    Ws(usize, Arc<WsCore>),
    Startup(usize, Arc<Outcome>),
    Shutdown(usize, Arc<Outcome>),
}

#[derive(Default)]
struct Inbox {
    jobs: Vec<Job>,
    futures: Vec<Py<PyAny>>,
    /// Tasks whose client went, to cancel after a grace.
    gone: Vec<Py<PyAny>>,
    /// A byte is on its way to the loop.
    signalled: bool,
}

/// The loop thread's inbox, its wake-up socket and its driver.
pub struct Runner {
    inbox: Mutex<Inbox>,
    /// Written by the host's threads.
    bell: UnixStream,
    /// Read by the loop.
    ear: UnixStream,
    driver: Py<PyModule>,
    /// Milliseconds since `epoch` at the loop's last beat.
    beat: AtomicU64,
    epoch: Instant,
}

static RUNNER: OnceLock<Result<Arc<Runner>, String>> = OnceLock::new();

/// The runner, started on first use (with the interpreter's lock held by
/// the caller: the driver module is made from source here).
pub fn runner(py: Python<'_>) -> Result<Arc<Runner>, String> {
    RUNNER.get_or_init(|| start(py)).clone()
}

/// The runner if it was started (for the loop's own calls).
fn started() -> Option<&'static Arc<Runner>> {
    RUNNER.get().and_then(|r| r.as_ref().ok())
}

fn start(py: Python<'_>) -> Result<Arc<Runner>, String> {
    let (bell, ear) =
        UnixStream::pair().map_err(|e| format!("cannot make the loop's socket: {e}"))?;
    for s in [&bell, &ear] {
        s.set_nonblocking(true)
            .map_err(|e| format!("cannot make the loop's socket non-blocking: {e}"))?;
    }
    let driver = driver_module(py).map_err(|e| crate::python::traceback(py, &e))?;
    let runner = Arc::new(Runner {
        inbox: Mutex::new(Inbox::default()),
        bell,
        ear,
        driver: driver.unbind(),
        beat: AtomicU64::new(0),
        epoch: Instant::now(),
    });
    let fd = runner.ear.as_raw_fd();
    let driver = runner.driver.clone_ref(py);
    std::thread::Builder::new()
        .name("asgi-loop".into())
        .spawn(move || {
            Python::with_gil(|py| {
                let ran =
                    bridge_module(py).and_then(|rs| driver.bind(py).call_method1("run", (rs, fd)));
                if let Err(e) = ran {
                    let trace = crate::python::traceback(py, &e);
                    log::error!("the ASGI event loop stopped:\n{trace}");
                }
            })
        })
        .map_err(|e| format!("cannot start the ASGI loop thread: {e}"))?;
    let watched = runner.clone();
    std::thread::Builder::new()
        .name("asgi-watchdog".into())
        .spawn(move || watched.watch())
        .map_err(|e| format!("cannot start the ASGI watchdog thread: {e}"))?;
    Ok(runner)
}

/// The driver (`driver.py`), made a module. Its name is this library
/// copy's own: `from_code` enters it in `sys.modules`, and a second
/// generation of the plugin (a hot replace) running the source under the
/// first one's name would run it in the first one's module, whose loop
/// still serves the first generation's requests.
fn driver_module(py: Python<'_>) -> PyResult<Bound<'_, PyModule>> {
    let bad = |e: std::ffi::NulError| {
        pyo3::exceptions::PyValueError::new_err(format!("the ASGI driver's source: {e}"))
    };
    let code = CString::new(include_str!("driver.py")).map_err(bad)?;
    let copy = std::ptr::addr_of!(RUNNER) as usize;
    let name = CString::new(format!("stoa_asgi_driver_{copy:x}")).map_err(bad)?;
    let file = CString::new(format!("stoa_asgi_driver_{copy:x}.py")).map_err(bad)?;
    PyModule::from_code(py, &code, &file, &name)
}

/// The functions and classes the driver calls.
fn bridge_module(py: Python<'_>) -> PyResult<Bound<'_, PyModule>> {
    let m = PyModule::new(py, "stoa_asgi_bridge")?;
    m.add_function(pyo3::wrap_pyfunction!(take, &m)?)?;
    m.add_function(pyo3::wrap_pyfunction!(beat, &m)?)?;
    m.add_function(pyo3::wrap_pyfunction!(info, &m)?)?;
    m.add_function(pyo3::wrap_pyfunction!(super::exchange::flush, &m)?)?;
    m.add_class::<HttpExchange>()?;
    m.add_class::<WsExchange>()?;
    m.add_class::<super::lifespan::OutcomeHandle>()?;
    Ok(m)
}

impl Runner {
    fn lock(&self) -> MutexGuard<'_, Inbox> {
        self.inbox.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The driver module.
    pub fn driver<'py>(&self, py: Python<'py>) -> &Bound<'py, PyModule> {
        self.driver.bind(py)
    }

    /// Queues `job` for the loop.
    pub fn submit(&self, job: Job) {
        let mut inbox = self.lock();
        inbox.jobs.push(job);
        self.ring(inbox);
    }

    /// Resolves `future` on the loop (an awaited event came).
    pub fn resolve(&self, future: Py<PyAny>) {
        let mut inbox = self.lock();
        inbox.futures.push(future);
        self.ring(inbox);
    }

    /// Tells the loop an exchange's client is gone: its `task` (if it
    /// runs) is cancelled after a grace, its `receive` woken.
    pub fn gone(&self, task: Option<Py<PyAny>>, future: Option<Py<PyAny>>) {
        if task.is_none() && future.is_none() {
            return;
        }
        let mut inbox = self.lock();
        inbox.gone.extend(task);
        inbox.futures.extend(future);
        self.ring(inbox);
    }

    fn ring(&self, mut inbox: MutexGuard<'_, Inbox>) {
        if !inbox.signalled {
            inbox.signalled = true;
            drop(inbox);
            // A full socket already holds a byte the loop will read.
            let _ = (&self.bell).write(&[1]);
        }
    }

    /// Reports a loop that stopped turning, once per stall.
    fn watch(&self) {
        let mut reported = 0;
        loop {
            std::thread::sleep(Duration::from_millis(50));
            let last = self.beat.load(Ordering::Relaxed);
            if last == 0 || last == reported {
                continue;
            }
            let now = self.epoch.elapsed().as_millis() as u64;
            let late = now.saturating_sub(last);
            if late < LAG.as_millis() as u64 + 100 {
                continue;
            }
            reported = last;
            let what = Python::with_gil(|py| {
                self.driver(py)
                    .call_method0("blocked_by")
                    .and_then(|w| w.extract::<Option<String>>())
                    .ok()
                    .flatten()
            });
            let what = what.unwrap_or_else(|| "code outside any request".to_string());
            log::warn!(
                "the ASGI event loop was blocked for {late} ms (and counting) by {what}: a \
                 coroutine made a blocking call; run it in a thread \
                 (asyncio.to_thread or run_in_executor)"
            );
        }
    }
}

/// What `take` gives the loop.
type Taken = (Vec<(u8, usize, PyObject)>, Vec<Py<PyAny>>, Vec<Py<PyAny>>);

/// The loop takes its inbox: (jobs as `(kind, index, exchange)`, futures
/// to resolve, tasks whose client went).
#[pyfunction]
fn take(py: Python<'_>) -> PyResult<Taken> {
    let Some(runner) = started() else {
        return Ok((Vec::new(), Vec::new(), Vec::new()));
    };
    let mut buf = [0u8; 256];
    while let Ok(n) = (&runner.ear).read(&mut buf) {
        if n < buf.len() {
            break;
        }
    }
    let inbox = {
        let mut inbox = runner.lock();
        inbox.signalled = false;
        std::mem::take(&mut *inbox)
    };
    let mut jobs = Vec::with_capacity(inbox.jobs.len());
    for job in inbox.jobs {
        jobs.push(match job {
            Job::Http(i, core) => (0, i, Py::new(py, HttpExchange::new(core))?.into_any()),
            Job::Ws(i, core) => (1, i, Py::new(py, WsExchange::new(core))?.into_any()),
            Job::Startup(i, outcome) => (2, i, outcome.object(py)?),
            Job::Shutdown(i, outcome) => (3, i, outcome.object(py)?),
        });
    }
    Ok((jobs, inbox.futures, inbox.gone))
}

/// The loop turned.
#[pyfunction]
fn beat() {
    if let Some(runner) = started() {
        let ms = runner.epoch.elapsed().as_millis() as u64;
        runner.beat.store(ms.max(1), Ordering::Relaxed);
    }
}

/// A line for the host's log.
#[pyfunction]
fn info(py: Python<'_>, line: &str) {
    py.allow_threads(|| log::info!("{line}"));
}

//! The services plugins reach through the ABI's host module
//! (`host_module`, handed to each app's constructor): the host's log,
//! timers on the event loop (`call_later`) and the bounded blocking pool
//! (`spawn_blocking`, in `pool.rs`), which also runs handlers that declare
//! they block.

use crate::apps::pool::{Job, Pool};
use crate::inbox::Inbox;
use abi_stable::prefix_type::PrefixTypeTrait;
use abi_stable::std_types::RStr;
use std::cell::Cell;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};
use stoa_app_api::abi::{HostModule, HostRef, LogLevel, TaskBox};

thread_local! {
    /// The app whose code this loop thread is running, so the timers it
    /// sets are known as its own.
    static CURRENT_APP: Cell<Option<usize>> = const { Cell::new(None) };
}

/// The app (counters slot) whose code runs on this thread, if any.
pub fn current_app() -> Option<usize> {
    CURRENT_APP.try_with(Cell::get).ok().flatten()
}

/// The loop enters app `slot`'s code (`None`: back in host code).
pub fn set_current_app(slot: Option<usize>) {
    let _ = CURRENT_APP.try_with(|c| c.set(slot));
}

static POOL: OnceLock<Arc<Pool>> = OnceLock::new();
static DEFAULT_INBOX: OnceLock<Arc<Inbox>> = OnceLock::new();

/// Installs the process's blocking pool and the inbox that timers set from
/// threads without a loop of their own go to. Call before loading apps.
pub fn install(pool: Arc<Pool>, default_inbox: Arc<Inbox>) {
    let _ = POOL.set(pool);
    let _ = DEFAULT_INBOX.set(default_inbox);
}

/// `HostModule::call_later`: queue the task on this thread's loop, or on the
/// default loop from any other thread.
extern "C" fn call_later(delay_ms: u64, task: TaskBox) {
    let at = Instant::now() + Duration::from_millis(delay_ms.min(u64::from(u32::MAX)));
    match Inbox::current().or_else(|| DEFAULT_INBOX.get().cloned()) {
        Some(inbox) => inbox.push_timer(at, current_app(), task),
        None => log::error!("call_later before the event loop exists; the task is dropped"),
    }
}

/// `HostModule::spawn_blocking`.
extern "C" fn spawn_blocking(task: TaskBox) -> bool {
    match POOL.get() {
        Some(pool) => pool.submit(Job::task(Box::new(move || task.run()))).is_ok(),
        None => false,
    }
}

/// The host services handed to each plugin at init
/// (`LoadedApp::init`).
pub fn host_module() -> HostRef {
    HostModule {
        log_max_level: log::max_level() as LogLevel,
        log: host_log,
        call_later,
        spawn_blocking,
    }
    .leak_into_prefix()
}

/// Receives a plugin's log record; must not unwind (it is called from C ABI).
extern "C" fn host_log(level: LogLevel, target: RStr<'_>, message: RStr<'_>) {
    let level = match level {
        1 => log::Level::Error,
        2 => log::Level::Warn,
        3 => log::Level::Info,
        4 => log::Level::Debug,
        _ => log::Level::Trace,
    };
    log::log!(target: target.as_str(), level, "{}", message.as_str());
}

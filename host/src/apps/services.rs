//! The services plugins reach through the ABI's host module: timers on the
//! event loop (`call_later`) and the bounded blocking pool
//! (`spawn_blocking`), which also runs handlers that declare they block.

use crate::responder::Inbox;
use crossbeam_channel::{bounded, Receiver, Sender, TrySendError};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};
use stoa_app_api::abi::TaskBox;

/// A job for the blocking pool.
pub type Job = Box<dyn FnOnce() + Send>;

/// A fixed set of threads fed by a bounded queue: when the queue is full a
/// job is refused at once (the request gets 503), never waited for.
pub struct Pool {
    tx: Sender<Job>,
    threads: usize,
}

impl Pool {
    pub fn new(threads: usize, queue: usize) -> std::io::Result<Arc<Pool>> {
        let (tx, rx): (Sender<Job>, Receiver<Job>) = bounded(queue);
        for i in 0..threads.max(1) {
            let rx = rx.clone();
            std::thread::Builder::new()
                .name(format!("stoa-blocking-{i}"))
                .spawn(move || {
                    while let Ok(job) = rx.recv() {
                        job();
                    }
                })?;
        }
        Ok(Arc::new(Pool {
            tx,
            threads: threads.max(1),
        }))
    }

    /// Queues `job`, or gives it back when the queue is full.
    pub fn try_submit(&self, job: Job) -> Result<(), Job> {
        self.tx.try_send(job).map_err(|e| match e {
            TrySendError::Full(job) | TrySendError::Disconnected(job) => job,
        })
    }
}

impl Pool {
    /// Jobs waiting for a thread.
    pub fn queued(&self) -> usize {
        self.tx.len()
    }

    pub fn threads(&self) -> usize {
        self.threads
    }
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
pub extern "C" fn call_later(delay_ms: u64, task: TaskBox) {
    let at = Instant::now() + Duration::from_millis(delay_ms.min(u64::from(u32::MAX)));
    match Inbox::current().or_else(|| DEFAULT_INBOX.get().cloned()) {
        Some(inbox) => inbox.push_timer(at, task),
        None => log::error!("call_later before the event loop exists; the task is dropped"),
    }
}

/// `HostModule::spawn_blocking`.
pub extern "C" fn spawn_blocking(task: TaskBox) -> bool {
    match POOL.get() {
        Some(pool) => pool.try_submit(Box::new(move || task.run())).is_ok(),
        None => false,
    }
}

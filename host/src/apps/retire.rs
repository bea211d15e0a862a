//! Retiring app generations (`App::retire`). A generation is retired once,
//! when nothing holds it any more: the registry has replaced or removed it
//! (or the host is shutting down), no published routing state lists it,
//! and no request is in flight on it. Requests hold it through their
//! `Arc<LoadedApp>` (the responder handed to the app, and the pool's job
//! for a blocking handler), so the last of those to go is the one that
//! starts the retire: `LoadedApp`'s `Drop` calls `start`.
//!
//! That drop may happen on an event loop, so the hook itself runs on a
//! short-lived thread of its own; one running past `RETIRE_BOUND` is logged
//! by app and generation. At shutdown the host waits for the retires (and
//! the requests still in flight) at most `RETIRE_BOUND` (`wait_all`).

use std::sync::mpsc;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};
use stoa_app_api::abi::AppModuleRef;

/// A retire hook running longer than this is logged, and shutdown waits no
/// longer than this for the generations not yet retired.
pub const RETIRE_BOUND: Duration = Duration::from_secs(5);

/// Where a constructed generation is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    /// Held by the registry, a routing state or a request.
    Held,
    /// Its retire hook runs.
    Retiring,
}

/// The generations constructed and not yet retired: (app, generation, stage).
struct Book {
    open: Mutex<Vec<(String, u32, Stage)>>,
    changed: Condvar,
}

static BOOK: Book = Book {
    open: Mutex::new(Vec::new()),
    changed: Condvar::new(),
};

fn with_open<T>(f: impl FnOnce(&mut Vec<(String, u32, Stage)>) -> T) -> T {
    let mut open = BOOK.open.lock().unwrap_or_else(|p| p.into_inner());
    let out = f(&mut open);
    BOOK.changed.notify_all();
    out
}

/// Records that generation `generation` of `app` was constructed (it will
/// be retired).
pub fn opened(app: &str, generation: u32) {
    with_open(|open| open.push((app.to_string(), generation, Stage::Held)));
}

fn closed(app: &str, generation: u32) {
    with_open(|open| open.retain(|(a, g, _)| !(a == app && *g == generation)));
}

/// Runs the generation's retire hook on a thread of its own; never blocks
/// the caller (which may be an event loop) on app code.
pub fn start(app: &str, generation: u32, module: AppModuleRef) {
    with_open(|open| {
        if let Some(entry) = open
            .iter_mut()
            .find(|(a, g, _)| a == app && *g == generation)
        {
            entry.2 = Stage::Retiring;
        }
    });
    let name = app.to_string();
    let spawned = std::thread::Builder::new()
        .name("stoa-app-retire".into())
        .spawn(move || {
            run_bounded(&name, generation, module);
            closed(&name, generation);
        });
    if let Err(e) = spawned {
        log::error!(
            "cannot start a thread to retire app {app} generation {generation}: {e}; not retired"
        );
        closed(app, generation);
    }
}

/// Calls the hook on one more thread and logs it if it runs past
/// `RETIRE_BOUND` (and when it then returns).
fn run_bounded(app: &str, generation: u32, module: AppModuleRef) {
    let started = Instant::now();
    let (done, finished) = mpsc::channel::<()>();
    let hook = std::thread::Builder::new()
        .name("stoa-app-retire".into())
        .spawn(move || {
            module.call_retire();
            let _ = done.send(());
        });
    if let Err(e) = hook {
        log::error!("cannot start app {app} generation {generation}'s retire hook: {e}");
        return;
    }
    if finished.recv_timeout(RETIRE_BOUND).is_err() {
        log::warn!(
            "app {app} generation {generation}: retire still running after {} s",
            RETIRE_BOUND.as_secs()
        );
        let _ = finished.recv();
        log::info!(
            "app {app} generation {generation}: retire returned after {:.1} s",
            started.elapsed().as_secs_f64()
        );
        return;
    }
    log::info!(
        "retired app {app} generation {generation} ({} ms)",
        started.elapsed().as_millis()
    );
}

/// Waits until every constructed generation has been retired, at most
/// `bound`; logs those left (still held by a request, or still retiring).
/// For shutdown, once nothing routes to the apps any more.
pub fn wait_all(bound: Duration) {
    let deadline = Instant::now() + bound;
    let mut open = BOOK.open.lock().unwrap_or_else(|p| p.into_inner());
    while !open.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        open = BOOK
            .changed
            .wait_timeout(open, left)
            .unwrap_or_else(|p| p.into_inner())
            .0;
    }
    for (app, generation, stage) in open.iter() {
        match stage {
            Stage::Held => log::warn!(
                "app {app} generation {generation} not retired: a request still holds it at exit"
            ),
            Stage::Retiring => {
                log::warn!("app {app} generation {generation}: retire still running at exit")
            }
        }
    }
}

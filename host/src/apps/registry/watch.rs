//! The registry's work over time, beside its scans: each app's constructor
//! on a thread of its own (mounted by `built` when it returns, logged once
//! past `CONSTRUCTOR_BOUND`), the re-check of young files a signal found,
//! and the apps thread's mailbox.

use super::{Live, Registry, SETTLE};
use crate::apps::dir::{Health, Stamp};
use crate::apps::error::{Distrust, LoadError};
use crate::apps::loader::{mount_free, LoadedApp};
use crate::apps::watcher::{Built, Event, CONSTRUCTOR_BOUND};
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

/// An app whose constructor is running.
pub(super) struct Pending {
    pub(super) app: Arc<LoadedApp>,
    pub(super) stamp: Stamp,
    untrusted: Option<Distrust>,
    ticket: u64,
    started: Instant,
    /// Whether its run past `CONSTRUCTOR_BOUND` was logged.
    warned: bool,
}

/// The registry's state about the directory over time: scan health,
/// signals waiting for young files, running constructors.
pub(super) struct Watch {
    pub(super) health: Health,
    pub(super) insecure: bool,
    /// Files a signal asked to load that had not settled yet.
    pub(super) requested: HashMap<PathBuf, Stamp>,
    pub(super) pending: BTreeMap<PathBuf, Pending>,
    pub(super) tickets: u64,
    /// The apps thread's messages (constructors and signals send).
    pub(super) events: (Sender<Event>, Receiver<Event>),
}

impl Default for Watch {
    fn default() -> Self {
        Watch {
            health: Health::default(),
            insecure: false,
            requested: HashMap::new(),
            pending: BTreeMap::new(),
            tickets: 0,
            events: crossbeam_channel::unbounded(),
        }
    }
}

/// Asks `old` for the state to hand to `new`'s constructor, and logs it.
fn handover(old: &LoadedApp, new: &LoadedApp) -> Option<Vec<u8>> {
    let state = old.handover()?;
    log::info!(
        "app {} generation {} hands {} byte(s) over to generation {}",
        old.name,
        old.generation,
        state.len(),
        new.generation
    );
    Some(state)
}

impl Registry {
    /// Runs the app's constructor on a thread of its own, which reports to
    /// the apps thread; the app is mounted by `built`. True (the state
    /// lists it as constructing, or refused).
    pub(super) fn construct(
        &mut self,
        path: PathBuf,
        stamp: Stamp,
        app: LoadedApp,
        untrusted: Option<Distrust>,
    ) -> bool {
        self.watch.tickets += 1;
        let ticket = self.watch.tickets;
        let app = Arc::new(app);
        let (events, constructing, file) = (self.watch.events.0.clone(), app.clone(), path.clone());
        // The generation this one replaces hands its state over (the same
        // app from the same file); asked on the constructor's thread.
        let previous = self
            .live
            .get(&path)
            .filter(|live| live.app.name == app.name)
            .map(|live| live.app.clone());
        let spawned = std::thread::Builder::new()
            .name("stoa-app-init".into())
            .spawn(move || {
                let state = previous.and_then(|old| handover(&old, &constructing));
                let result = constructing.init(state.as_deref());
                let _ = events.send(Event::Built(Built {
                    path: file,
                    ticket,
                    name: constructing.name.clone(),
                    result,
                }));
            });
        if let Err(e) = spawned {
            return self.refuse(path, stamp, LoadError::ConstructorThread(e), untrusted);
        }
        let started = Instant::now();
        let pending = Pending {
            app,
            stamp,
            untrusted,
            ticket,
            started,
            warned: false,
        };
        self.watch.pending.insert(path, pending);
        true
    }

    /// Mounts (or refuses) the app whose constructor returned; true if the
    /// published state changed.
    pub fn built(&mut self, built: Built) -> bool {
        let Built {
            path,
            ticket,
            name,
            result,
        } = built;
        let current = self
            .watch
            .pending
            .get(&path)
            .is_some_and(|p| p.ticket == ticket);
        let Some(pending) = current.then(|| self.watch.pending.remove(&path)).flatten() else {
            log::info!(
                "the constructor of app {name} from {} returned after the file was replaced \
                 or removed; not mounted",
                path.display()
            );
            return false;
        };
        let app = pending.app;
        if pending.warned {
            log::info!(
                "app {name} constructor returned after {:.1} s ({})",
                pending.started.elapsed().as_secs_f64(),
                path.display()
            );
        }
        let others: Vec<Arc<LoadedApp>> = self
            .live
            .iter()
            .filter(|(p, _)| **p != path)
            .map(|(_, l)| l.app.clone())
            .collect();
        let checked = result.and_then(|()| mount_free(&name, &app.mount, &app.mount, &others));
        if let Err(reason) = checked {
            return self.refuse(path, pending.stamp, reason, pending.untrusted);
        }
        self.mount(path, app, pending.stamp);
        true
    }

    /// Mounts a constructed app, replacing the file's running version.
    fn mount(&mut self, path: PathBuf, app: Arc<LoadedApp>, stamp: Stamp) {
        let mount = if app.mount.is_empty() {
            "/"
        } else {
            &app.mount
        };
        match self.live.get(&path) {
            Some(old) => log::info!(
                "replaced app {} {} with {} {} at {} from {} (generation {})",
                old.app.name,
                old.app.version,
                app.name,
                app.version,
                mount,
                path.display(),
                self.generations.get(&app.name).copied().unwrap_or(1)
            ),
            None => log::info!(
                "loaded app {} {} at {} from {}",
                app.name,
                app.version,
                mount,
                path.display()
            ),
        }
        self.refused.remove(&path);
        self.live.insert(path, Live { app, stamp });
    }

    /// Apps whose constructor has not returned yet.
    pub fn constructing(&self) -> usize {
        self.watch.pending.len()
    }

    /// Logs, once each, the constructors running past `CONSTRUCTOR_BOUND`.
    pub fn warn_slow_constructors(&mut self) {
        for (path, pending) in &mut self.watch.pending {
            if !pending.warned && pending.started.elapsed() >= CONSTRUCTOR_BOUND {
                pending.warned = true;
                log::warn!(
                    "app {} constructor still running after {} s ({}); it is mounted when it returns",
                    pending.app.name,
                    CONSTRUCTOR_BOUND.as_secs(),
                    path.display()
                );
            }
        }
    }

    /// When a file a signal found too young may have settled (a re-check
    /// that finds it still young stores its new stamp, so this moves on).
    fn recheck_at(&self) -> Option<Instant> {
        let now = Instant::now();
        let wait = |stamp: &Stamp| SETTLE.saturating_sub(stamp.age());
        self.watch.requested.values().map(|s| now + wait(s)).min()
    }

    /// Whether a re-check of the files a signal found too young is due.
    pub fn recheck_due(&self) -> bool {
        self.recheck_at().is_some_and(|at| at <= Instant::now())
    }

    /// The next time the apps thread has work without a message: a
    /// re-check, or a constructor reaching `CONSTRUCTOR_BOUND`.
    pub fn next_due(&self) -> Option<Instant> {
        let warn = self
            .watch
            .pending
            .values()
            .filter(|p| !p.warned)
            .map(|p| p.started + CONSTRUCTOR_BOUND)
            .min();
        [self.recheck_at(), warn].into_iter().flatten().min()
    }

    /// A sender of messages to the apps thread (for the signal thread).
    pub fn events(&self) -> Sender<Event> {
        self.watch.events.0.clone()
    }

    /// The next message for the apps thread, waiting until `deadline`.
    pub fn recv_until(&self, deadline: Instant) -> Result<Event, RecvTimeoutError> {
        self.watch.events.1.recv_deadline(deadline)
    }
}

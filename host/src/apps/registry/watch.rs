//! The registry's work over time, beside its scans: each app's constructor
//! on a thread of its own (mounted by `built` when it returns, logged once
//! past `CONSTRUCTOR_BOUND`; those the host's start-up waits for, logged
//! again every `START_UP_NOTE_EVERY` and refused at `--init-timeout`), the
//! re-check of young files a signal found,
//! removals that wait for `SETTLE` as additions do (an apps directory
//! rebuilt in place keeps serving), a file back with its mounted bytes
//! keeping its generation, and the apps thread's mailbox.

use super::{Live, Registry, SETTLE};
use crate::apps::dir::{Health, Stamp};
use crate::apps::error::{Distrust, LoadError};
use crate::apps::fingerprint::{self, Fingerprint};
use crate::apps::loader::{mount_free, LoadedApp};
use crate::apps::services;
use crate::apps::watcher::{Built, Event, CONSTRUCTOR_BOUND};
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often start-up logs the app constructors it still waits for.
pub const START_UP_NOTE_EVERY: Duration = Duration::from_secs(5);

/// An app whose constructor is running.
pub(super) struct Pending {
    pub(super) app: Arc<LoadedApp>,
    pub(super) stamp: Stamp,
    fingerprint: Option<Fingerprint>,
    untrusted: Option<Distrust>,
    ticket: u64,
    started: Instant,
    /// Whether its run past `CONSTRUCTOR_BOUND` was logged.
    warned: bool,
    /// Started at start-up for an app that is not optional: the host is
    /// ready (READY=1, /ready) only once it has returned or is refused at
    /// `--init-timeout`.
    start_up: bool,
    /// When start-up next logs that it still waits for it.
    next_note: Option<Instant>,
}

/// The registry's state about the directory over time: scan health,
/// signals waiting for young files, running constructors.
pub(super) struct Watch {
    pub(super) health: Health,
    pub(super) insecure: bool,
    /// Files a signal asked to load that had not settled yet.
    pub(super) requested: HashMap<PathBuf, Stamp>,
    /// Mounted apps' files a scan no longer listed, since when.
    pub(super) missing: HashMap<PathBuf, Instant>,
    /// When the last scan failed (none since one succeeded): re-checks
    /// wait `SETTLE` after it.
    pub(super) failed_at: Option<Instant>,
    pub(super) pending: BTreeMap<PathBuf, Pending>,
    pub(super) tickets: u64,
    /// The apps thread's messages (constructors and signals send).
    pub(super) events: (Sender<Event>, Receiver<Event>),
    /// `--init-timeout`: how long start-up waits for a constructor.
    pub(super) init_timeout: Duration,
}

impl Default for Watch {
    fn default() -> Self {
        Watch {
            health: Health::default(),
            insecure: false,
            requested: HashMap::new(),
            missing: HashMap::new(),
            failed_at: None,
            pending: BTreeMap::new(),
            tickets: 0,
            events: crossbeam_channel::unbounded(),
            init_timeout: Duration::from_secs(60),
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
        fingerprint: Option<Fingerprint>,
        app: LoadedApp,
        untrusted: Option<Distrust>,
    ) -> bool {
        self.watch.tickets += 1;
        let ticket = self.watch.tickets;
        let app = Arc::new(app);
        let (events, constructing, file) = (self.watch.events.0.clone(), app.clone(), path.clone());
        let guard = self.guard.clone();
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
                if let (Some(guard), Some(digest)) = (&guard, &constructing.digest) {
                    guard.entering(&constructing.name, digest);
                }
                let result = constructing.init(services::host_module(), state.as_deref());
                if let Some(guard) = &guard {
                    guard.left();
                }
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
            fingerprint,
            untrusted,
            ticket,
            started,
            warned: false,
            start_up: false,
            next_note: None,
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
                 or removed, or after --init-timeout; not mounted",
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
        self.mount(path, app, pending.stamp, pending.fingerprint);
        true
    }

    /// Mounts a constructed app, replacing the file's running version.
    fn mount(
        &mut self,
        path: PathBuf,
        app: Arc<LoadedApp>,
        stamp: Stamp,
        fingerprint: Option<Fingerprint>,
    ) {
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
        let others = self.live.iter().filter(|(p, _)| **p != path);
        for line in crate::apps::overlap::nested(&app, others.map(|(_, l)| &l.app)) {
            log::warn!("{line}");
        }
        if let (Some(guard), Some(new), Some(old)) = (
            &self.guard,
            app.digest.as_deref(),
            self.live.get(&path).and_then(|l| l.app.digest.clone()),
        ) {
            if *new != *old {
                guard.replaced(new, &old);
            }
        }
        self.refused.remove(&path);
        self.missing_back(&path);
        let live = Live {
            app,
            stamp,
            fingerprint,
        };
        self.live.insert(path, live);
        self.publish_names();
    }

    /// Unmounts the apps whose file successful scans have not listed for
    /// `SETTLE` (the first such scan starts the wait, and a re-check is
    /// due when it ends); a file listed again is no longer awaited. True
    /// if the published state changed.
    pub(super) fn unmount_gone(&mut self, present: &HashSet<&PathBuf>) -> bool {
        let now = Instant::now();
        let back: Vec<PathBuf> = (self.watch.missing.keys())
            .filter(|p| present.contains(p) || !self.live.contains_key(*p))
            .cloned()
            .collect();
        for path in back {
            self.missing_back(&path);
        }
        let mut changed = false;
        let gone: Vec<PathBuf> = (self.live.keys())
            .filter(|p| !present.contains(p))
            .cloned()
            .collect();
        for path in gone {
            let Some(&since) = self.watch.missing.get(&path) else {
                self.watch.missing.insert(path.clone(), now);
                if let Some(live) = self.live.get(&path) {
                    log::info!(
                        "{} is gone; app {} keeps serving, and is unmounted if it is still gone in {} s",
                        path.display(),
                        live.app.name,
                        SETTLE.as_secs_f64()
                    );
                }
                continue;
            };
            if now.duration_since(since) < SETTLE {
                continue;
            }
            self.watch.missing.remove(&path);
            if let Some(live) = self.live.remove(&path) {
                log::info!(
                    "unmounted app {} ({} removed)",
                    live.app.name,
                    path.display()
                );
                changed = true;
            }
        }
        changed
    }

    /// Stops awaiting the removal of `path` (listed again, or replaced).
    fn missing_back(&mut self, path: &Path) {
        if self.watch.missing.remove(path).is_some() {
            if let Some(live) = self.live.get(path) {
                log::info!(
                    "{} is back; app {} was not unmounted",
                    path.display(),
                    live.app.name
                );
            }
        }
    }

    /// A new or changed file holding the very bytes of the generation
    /// mounted from it (a directory rebuilt in place, a `touch`): that
    /// generation keeps serving under the file's new stamp, and nothing is
    /// loaded. `Some(changed)` when so; `None` to load the file.
    pub(super) fn keep_same_bytes(&mut self, path: &Path, stamp: Stamp) -> Option<bool> {
        let live = self.live.get(path)?;
        let mounted = live.fingerprint.filter(|f| f.size == stamp.size)?;
        let now = fingerprint::of_file(path, self.private.max_size()).ok()??;
        if now != mounted {
            return None;
        }
        log::info!(
            "{} holds the same bytes as app {} {} (generation {}): kept, not loaded again",
            path.display(),
            live.app.name,
            live.app.version,
            live.app.generation
        );
        if let Some(live) = self.live.get_mut(path) {
            live.stamp = stamp;
        }
        // A pending constructor or a refusal of other bytes is superseded.
        self.watch.pending.remove(path);
        Some(self.refused.remove(path).is_some())
    }

    /// Apps whose constructor has not returned yet.
    pub fn constructing(&self) -> usize {
        self.watch.pending.len()
    }

    /// `--init-timeout`: how long start-up waits for a constructor.
    pub fn set_init_timeout(&mut self, timeout: Duration) {
        self.watch.init_timeout = timeout;
    }

    /// `--init-timeout`.
    pub fn init_timeout(&self) -> Duration {
        self.watch.init_timeout
    }

    /// Marks the constructors running now (the start-up scan's) as the
    /// ones the host's readiness waits for, but those of `optional` apps.
    pub fn hold_start_up(&mut self, optional: impl Fn(&str) -> bool) {
        for pending in self.watch.pending.values_mut() {
            pending.start_up = !optional(&pending.app.configured_as);
        }
    }

    /// The apps whose start-up constructor readiness still waits for.
    pub fn starting(&self) -> Vec<String> {
        let pending = self.watch.pending.values();
        let mut names: Vec<String> = (pending.filter(|p| p.start_up))
            .map(|p| p.app.name.clone())
            .collect();
        names.sort_unstable();
        names.dedup();
        names
    }

    /// Refuses the apps whose start-up constructor has run for
    /// `--init-timeout` (the constructor's thread is left to itself: what
    /// it returns is not mounted); true if any was.
    pub fn refuse_past_init_timeout(&mut self) -> bool {
        let timeout = self.watch.init_timeout;
        let late: Vec<PathBuf> = (self.watch.pending.iter())
            .filter(|(_, p)| p.start_up && p.started.elapsed() >= timeout)
            .map(|(path, _)| path.clone())
            .collect();
        for path in &late {
            if let Some(pending) = self.watch.pending.remove(path) {
                let app = pending.app.name.clone();
                let reason = LoadError::InitTimeout { app, timeout };
                self.refuse(path.clone(), pending.stamp, reason, pending.untrusted);
            }
        }
        !late.is_empty()
    }

    /// Logs, once each, the constructors running past `CONSTRUCTOR_BOUND`,
    /// and every `START_UP_NOTE_EVERY` after it those start-up waits for.
    pub fn warn_slow_constructors(&mut self) {
        let now = Instant::now();
        let timeout = humantime::format_duration(self.watch.init_timeout);
        for (path, pending) in &mut self.watch.pending {
            let running = now.saturating_duration_since(pending.started);
            if !pending.warned && running >= CONSTRUCTOR_BOUND {
                pending.warned = true;
                let waits = match pending.start_up {
                    true => {
                        format!("; READY=1 and /ready wait for it up to --init-timeout {timeout}")
                    }
                    false => String::new(),
                };
                log::warn!(
                    "app {} constructor still running after {} s ({}); it is mounted when it \
                     returns{waits}",
                    pending.app.name,
                    CONSTRUCTOR_BOUND.as_secs(),
                    path.display()
                );
                pending.next_note = pending.start_up.then(|| now + START_UP_NOTE_EVERY);
            } else if pending.next_note.is_some_and(|at| at <= now) {
                pending.next_note = Some(now + START_UP_NOTE_EVERY);
                log::warn!(
                    "start-up still waits for app {}: its constructor has run {} s ({}); \
                     refused at --init-timeout {timeout}",
                    pending.app.name,
                    running.as_secs(),
                    path.display()
                );
            }
        }
    }

    /// When a file a signal found too young may have settled (a re-check
    /// that finds it still young stores its new stamp, so this moves on).
    /// So does the wait of a removed file. After a failed scan, not before
    /// `SETTLE` has passed (the scan is not retried in a loop).
    fn recheck_at(&self) -> Option<Instant> {
        let now = Instant::now();
        let wait = |stamp: &Stamp| SETTLE.saturating_sub(stamp.age());
        let young = self.watch.requested.values().map(|s| now + wait(s));
        let gone = self.watch.missing.values().map(|since| *since + SETTLE);
        let at = young.chain(gone).min()?;
        Some(match self.watch.failed_at {
            Some(failed) => at.max(failed + SETTLE),
            None => at,
        })
    }

    /// Whether a re-check of the files a signal found too young is due.
    pub fn recheck_due(&self) -> bool {
        self.recheck_at().is_some_and(|at| at <= Instant::now())
    }

    /// The next time the apps thread has work without a message: a
    /// re-check, a constructor reaching `CONSTRUCTOR_BOUND`, a note about
    /// one start-up waits for, or its `--init-timeout`.
    pub fn next_due(&self) -> Option<Instant> {
        let pending = self.watch.pending.values();
        let warn = pending
            .clone()
            .filter(|p| !p.warned)
            .map(|p| p.started + CONSTRUCTOR_BOUND);
        let note = pending.clone().filter_map(|p| p.next_note);
        let timeout = (pending.filter(|p| p.start_up)).map(|p| p.started + self.watch.init_timeout);
        let work = warn.chain(note).chain(timeout).min();
        [self.recheck_at(), work].into_iter().flatten().min()
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

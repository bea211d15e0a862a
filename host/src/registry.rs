//! The apps directory over time: the first scan at start-up, then rescans
//! (every second while watching, or on SIGHUP) that mount new plugins,
//! replace changed ones with a new generation, and unmount removed ones. A
//! scan that fails changes nothing; only a successful scan that no longer
//! lists a file unmounts it. An app is mounted when its constructor, run
//! on a thread of its own, returns (see `apps_loop`).
//!
//! Every plugin is loaded from a private copy, never from the apps
//! directory itself: `dlopen` of a path already loaded returns the old
//! handle, and overwriting a mapped library in place would corrupt the
//! running code. Libraries are never unloaded (abi_stable leaks them by
//! design), so the number of generations per app is capped.

use crate::apps_dir::{self, Entry, Health, Stamp};
use crate::apps_loop::{Built, Event, CONSTRUCTOR_BOUND};
use crate::loader::{load_file, mount_free, LoadedApp, MountTable, Refusal};
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A file must be unchanged for this long before it is loaded by a watch
/// scan or a signal (a copy in progress is half-written for a while).
const SETTLE: Duration = Duration::from_secs(1);

/// What asked for a scan; it decides when a new or changed file is loaded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scan {
    /// Start-up: every file at once.
    Startup,
    /// SIGHUP: a file unchanged for `SETTLE` at once, a younger one once
    /// it has settled (re-checked without another signal).
    Signal,
    /// The once-a-second watch: a file two scans saw unchanged and settled.
    Watch,
    /// The re-check of the files a signal found too young (only those).
    Recheck,
}

/// What the workers route with, swapped whole on every change.
pub struct AppState {
    pub mounts: MountTable,
    pub refused: Vec<Refusal>,
    /// Every library loaded so far (they stay mapped until exit).
    pub retained: Vec<Retained>,
    /// Failed scans of the apps directory since start-up.
    pub scan_failures: u64,
    /// The error of the current streak of failed scans, if failing.
    pub scan_error: Option<String>,
}

/// One loaded library generation.
#[derive(Clone, Debug)]
pub struct Retained {
    pub app: String,
    pub version: String,
    pub file: PathBuf,
    pub generation: u32,
    /// The private copy it was loaded from (unlinked after loading).
    pub copy: PathBuf,
}

struct Live {
    app: Arc<LoadedApp>,
    stamp: Stamp,
}

/// A file not loaded, and why; `untrusted` is the trust verdict it was
/// refused under (a change of trust is a reason to look again).
struct Refused {
    stamp: Stamp,
    reason: String,
    untrusted: Option<String>,
}

/// An app whose constructor is running.
struct Pending {
    app: Arc<LoadedApp>,
    stamp: Stamp,
    untrusted: Option<String>,
    ticket: u64,
    started: Instant,
    /// Whether its run past `CONSTRUCTOR_BOUND` was logged.
    warned: bool,
}

/// The registry's state about the directory over time: scan health,
/// signals waiting for young files, running constructors.
struct Watch {
    health: Health,
    insecure: bool,
    /// Files a signal asked to load that had not settled yet.
    requested: HashMap<PathBuf, Stamp>,
    pending: BTreeMap<PathBuf, Pending>,
    tickets: u64,
    /// The apps thread's messages (constructors and signals send).
    events: (Sender<Event>, Receiver<Event>),
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

/// The plugin directory's loader state.
pub struct Registry {
    dir: PathBuf,
    private: PathBuf,
    mounts: HashMap<String, String>,
    max_generations: u32,
    live: BTreeMap<PathBuf, Live>,
    refused: BTreeMap<PathBuf, Refused>,
    /// Stamps seen by the previous scan for files not yet acted on.
    seen: HashMap<PathBuf, Stamp>,
    retained: Vec<Retained>,
    generations: HashMap<String, u32>,
    /// The app name each file last held, kept after the file is removed.
    names: HashMap<PathBuf, String>,
    copies: u64,
    watch: Watch,
}

impl Registry {
    pub fn new(
        dir: &Path,
        mounts: HashMap<String, String>,
        max_generations: u32,
    ) -> std::io::Result<Self> {
        std::fs::read_dir(dir)?;
        let private = std::env::temp_dir().join(format!("stoa-{}-plugins", std::process::id()));
        std::fs::create_dir_all(&private)?;
        Ok(Registry {
            dir: dir.to_path_buf(),
            private,
            mounts,
            max_generations: max_generations.max(1),
            live: BTreeMap::new(),
            refused: BTreeMap::new(),
            seen: HashMap::new(),
            retained: Vec::new(),
            generations: HashMap::new(),
            names: HashMap::new(),
            copies: 0,
            watch: Watch::default(),
        })
    }

    /// Makes `--insecure-apps-dir` turn trust refusals into warnings.
    pub fn set_insecure(&mut self, insecure: bool) {
        self.watch.insecure = insecure;
    }

    /// Brings the mounts in line with the directory (see `Scan` for when a
    /// changed file is loaded); a failed scan changes nothing. Returns true
    /// if the published state changed.
    pub fn scan(&mut self, how: Scan) -> bool {
        let listing = match apps_dir::list(&self.dir) {
            Ok(listing) => listing,
            Err(e) => {
                self.watch.health.failed(&self.dir, &e);
                return true;
            }
        };
        let mut changed = self.watch.health.succeeded(&self.dir);
        let insecure = self.watch.insecure;
        self.watch
            .health
            .dir_trust(&self.dir, &listing.dir_untrusted, insecure);
        if how != Scan::Recheck {
            changed |= self.forget_missing(&listing.entries);
        }
        for entry in listing.entries {
            if how == Scan::Recheck && !self.watch.requested.contains_key(&entry.path) {
                continue;
            }
            if self.known(&entry) {
                self.watch.requested.remove(&entry.path);
                continue;
            }
            if !self.ready(how, &entry) {
                continue;
            }
            self.seen.remove(&entry.path);
            self.watch.requested.remove(&entry.path);
            changed |= self.act(entry);
        }
        changed
    }

    /// Unmounts (or forgets) what a successful scan no longer lists.
    fn forget_missing(&mut self, entries: &[Entry]) -> bool {
        let present: HashSet<&PathBuf> = entries.iter().map(|e| &e.path).collect();
        let mut changed = false;
        let gone: Vec<PathBuf> = self
            .live
            .keys()
            .filter(|p| !present.contains(p))
            .cloned()
            .collect();
        for path in gone {
            if let Some(live) = self.live.remove(&path) {
                log::info!(
                    "unmounted app {} ({} removed)",
                    live.app.name,
                    path.display()
                );
                changed = true;
            }
        }
        let before = self.refused.len();
        self.refused.retain(|p, _| present.contains(&p));
        changed |= before != self.refused.len();
        self.seen.retain(|p, _| present.contains(&p));
        self.watch.requested.retain(|p, _| present.contains(&p));
        self.watch.pending.retain(|p, pending| {
            let keep = present.contains(p);
            if !keep {
                log::info!(
                    "app {} will not be mounted: {} was removed while its constructor ran",
                    pending.app.name,
                    p.display()
                );
            }
            keep
        });
        changed
    }

    /// Whether `entry` is the version already mounted, being constructed or
    /// refused (for the same reason of trust).
    fn known(&self, entry: &Entry) -> bool {
        let path = &entry.path;
        self.live.get(path).is_some_and(|l| l.stamp == entry.stamp)
            || self
                .watch
                .pending
                .get(path)
                .is_some_and(|p| p.stamp == entry.stamp)
            || self
                .refused
                .get(path)
                .is_some_and(|r| r.stamp == entry.stamp && r.untrusted == entry.untrusted)
    }

    /// Whether a new or changed file is loaded now. Start-up loads at
    /// once; a signal (or its re-check) loads a file unchanged for `SETTLE`
    /// and has a younger one re-checked once it may have settled; a watch
    /// scan also wants the previous scan to have seen the same stamp.
    fn ready(&mut self, how: Scan, entry: &Entry) -> bool {
        let path = &entry.path;
        let settled = entry.stamp.age() >= SETTLE;
        let ready = match how {
            Scan::Startup => true,
            Scan::Signal | Scan::Recheck => settled,
            Scan::Watch => {
                settled
                    && (self.seen.get(path) == Some(&entry.stamp)
                        || self.watch.requested.contains_key(path))
            }
        };
        if !ready {
            self.seen.insert(path.clone(), entry.stamp);
            if how != Scan::Watch {
                self.watch.requested.insert(path.clone(), entry.stamp);
            }
        }
        ready
    }

    /// Loads a new or changed file and starts its app's constructor; a
    /// refusal leaves the running version (if any) serving. True if the
    /// published state changed.
    fn act(&mut self, entry: Entry) -> bool {
        let Entry {
            path,
            stamp,
            untrusted,
        } = entry;
        if let Some(reason) = &untrusted {
            if !self.watch.insecure {
                return self.refuse(path, stamp, reason.clone(), untrusted);
            }
            log::warn!(
                "INSECURE: loading plugin {} although {reason} (--insecure-apps-dir)",
                path.display()
            );
        }
        match self.load(&path) {
            Ok(app) => self.construct(path, stamp, app, untrusted),
            Err(reason) => self.refuse(path, stamp, reason, untrusted),
        }
    }

    /// Records a refusal of `path` with one log line; true.
    fn refuse(
        &mut self,
        path: PathBuf,
        stamp: Stamp,
        reason: String,
        untrusted: Option<String>,
    ) -> bool {
        let keeps = match self.live.get(&path) {
            Some(old) => format!(" (app {} {} keeps serving)", old.app.name, old.app.version),
            None => String::new(),
        };
        log::error!("refused plugin {}: {reason}{keeps}", path.display());
        self.refused.insert(
            path,
            Refused {
                stamp,
                reason,
                untrusted,
            },
        );
        true
    }

    /// Runs the app's constructor on a thread of its own, which reports to
    /// the apps thread; the app is mounted by `built`. True if refused.
    fn construct(
        &mut self,
        path: PathBuf,
        stamp: Stamp,
        app: LoadedApp,
        untrusted: Option<String>,
    ) -> bool {
        self.watch.tickets += 1;
        let ticket = self.watch.tickets;
        let app = Arc::new(app);
        let (events, constructing, file) = (self.watch.events.0.clone(), app.clone(), path.clone());
        let spawned = std::thread::Builder::new()
            .name("stoa-app-init".into())
            .spawn(move || {
                let result = constructing.init();
                let _ = events.send(Event::Built(Built {
                    path: file,
                    ticket,
                    name: constructing.name.clone(),
                    result,
                }));
            });
        if let Err(e) = spawned {
            let reason = format!("cannot start a thread for the app's constructor: {e}");
            return self.refuse(path, stamp, reason, untrusted);
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
        false
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

    /// When a file a signal found too young may have settled.
    fn recheck_at(&self) -> Option<Instant> {
        let now = Instant::now();
        self.watch
            .requested
            .values()
            .map(|stamp| {
                now + SETTLE
                    .saturating_sub(stamp.age())
                    .max(Duration::from_millis(20))
            })
            .min()
    }

    /// Whether a re-check of the files a signal found too young is due.
    pub fn recheck_due(&self) -> bool {
        self.recheck_at()
            .is_some_and(|at| at <= Instant::now() + Duration::from_millis(20))
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

    fn load(&mut self, path: &Path) -> Result<LoadedApp, String> {
        // The app this file held before (still mounted, or removed and now
        // back): its generations count whatever the file's history.
        let known = self
            .live
            .get(path)
            .map(|l| l.app.name.clone())
            .or_else(|| self.names.get(path).cloned());
        if let Some(name) = &known {
            self.check_cap(name)?;
        }
        self.copies += 1;
        let file_name = path
            .file_name()
            .map_or_else(|| "plugin.so".into(), |n| n.to_string_lossy().into_owned());
        let copy = self.private.join(format!("{}-{file_name}", self.copies));
        std::fs::copy(path, &copy)
            .map_err(|e| format!("cannot copy the plugin for loading: {e}"))?;
        let taken = self.taken_by_others(path);
        // Messages name the operator's file, not the private copy.
        let result = load_file(&copy, path, &self.mounts, &taken)
            .map_err(|e| e.replace(&*copy.to_string_lossy(), &path.to_string_lossy()));
        // The mapping outlives the name; nothing else needs the copy.
        let _ = std::fs::remove_file(&copy);
        let app = result?;
        // A new file with the name of an app already at the cap: it is
        // mapped now (and counted), but not mounted.
        let over_cap = self.check_cap(&app.name);
        self.names.insert(path.to_path_buf(), app.name.clone());
        let generation = self.generations.entry(app.name.clone()).or_insert(0);
        *generation += 1;
        self.retained.push(Retained {
            app: app.name.clone(),
            version: app.version.clone(),
            file: path.to_path_buf(),
            generation: *generation,
            copy,
        });
        over_cap.map(|()| app)
    }

    /// The apps mounted or being constructed from files other than `path`
    /// (their mounts are taken).
    fn taken_by_others(&self, path: &Path) -> Vec<Arc<LoadedApp>> {
        let live = self.live.iter().map(|(p, l)| (p, &l.app));
        let pending = self.watch.pending.iter().map(|(p, q)| (p, &q.app));
        live.chain(pending)
            .filter(|(p, _)| p.as_path() != path)
            .map(|(_, app)| app.clone())
            .collect()
    }

    /// Refuses a load of `name` once it has `max_generations` in memory.
    fn check_cap(&self, name: &str) -> Result<(), String> {
        let count = self.generations.get(name).copied().unwrap_or(0);
        if count >= self.max_generations {
            return Err(format!(
                "replace refused: app {name} already has {count} generations in memory \
                 (--max-generations {}); restart stoa to load a new version",
                self.max_generations
            ));
        }
        Ok(())
    }

    /// The routing state to publish to the workers.
    pub fn state(&self) -> AppState {
        AppState {
            mounts: MountTable::new(self.live.values().map(|l| l.app.clone()).collect()),
            refused: self
                .refused
                .iter()
                .map(|(file, r)| Refusal {
                    file: file.clone(),
                    reason: r.reason.clone(),
                })
                .collect(),
            retained: self.retained.clone(),
            scan_failures: self.watch.health.failures,
            scan_error: self.watch.health.failing.clone(),
        }
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.private);
    }
}

/// Bytes of this process's address space mapped from `copy` (the library's
/// segments), read from /proc/self/maps.
pub fn mapped_bytes(copy: &Path) -> u64 {
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
        return 0;
    };
    let needle = copy.to_string_lossy();
    maps.lines()
        .filter(|l| l.contains(needle.as_ref()))
        .filter_map(|l| {
            let (range, _) = l.split_once(' ')?;
            let (a, b) = range.split_once('-')?;
            Some(u64::from_str_radix(b, 16).ok()? - u64::from_str_radix(a, 16).ok()?)
        })
        .sum()
}

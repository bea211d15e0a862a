//! The apps directory over time: the first scan at start-up, then rescans
//! (every second while watching, or on SIGHUP) that mount new plugins,
//! replace changed ones with a new generation, and unmount removed ones. A
//! scan that fails changes nothing; only successful scans that no longer
//! list a file for `SETTLE` unmount it (a directory rebuilt in place keeps
//! serving), and a file back with the bytes of its mounted generation keeps
//! that generation. An app is mounted when its constructor, run on a thread
//! of its own, returns (see `watcher`).
//!
//! Every plugin is loaded from a private copy, never from the apps
//! directory itself: `dlopen` of a path already loaded returns the old
//! handle, and overwriting a mapped library in place would corrupt the
//! running code. The copy is vetted (size, ELF structure, a load probe in
//! a child process) before it is loaded here (`plugin_copy.rs`). Libraries
//! are never unloaded (abi_stable leaks them by design), so the number of
//! generations per app is capped.

use crate::apps::dir::{self, Entry, Stamp};
use crate::apps::error::{Distrust, LoadError};
use crate::apps::fingerprint::Fingerprint;
use crate::apps::loader::{LoadedApp, Refusal};
use crate::apps::mounts::MountTable;
use crate::apps::plugin_copy::PluginCopies;
use crate::apps::quarantine::Guard;
use crate::control::{Request, Requests};
use crate::settings::AppLimits;
use crate::stats::Stats;
use arc_swap::ArcSwap;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

mod load;
mod vet;
mod watch;
use watch::Watch;

/// A file must be unchanged for this long before it is loaded by a watch
/// scan or a signal (a copy in progress is half-written for a while), and
/// gone for this long before its app is unmounted.
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

/// The app table every worker routes with: the apps thread publishes a
/// new `AppState` whole on each change; a request keeps the state it began
/// with.
#[derive(Clone, Default)]
pub struct AppTable(Arc<ArcSwap<AppState>>);

impl AppTable {
    pub fn new(state: AppState) -> Self {
        AppTable(Arc::new(ArcSwap::from_pointee(state)))
    }

    /// The state now (cheap: no reference count is taken).
    pub fn load(&self) -> arc_swap::Guard<Arc<AppState>> {
        self.0.load()
    }

    /// Replaces the state for every worker.
    pub fn publish(&self, state: AppState) {
        self.0.store(Arc::new(state));
    }
}

/// What the workers route with, swapped whole on every change (empty once
/// the host has drained).
#[derive(Default)]
pub struct AppState {
    pub mounts: MountTable,
    pub refused: Vec<Refusal>,
    /// Every library loaded so far (they stay mapped until exit).
    pub retained: Vec<Retained>,
    /// Failed scans of the apps directory since start-up.
    pub scan_failures: u64,
    /// The error of the current streak of failed scans, if failing.
    pub scan_error: Option<String>,
    /// Apps whose constructor has not returned yet.
    pub constructing: Vec<Constructing>,
    /// The apps whose start-up constructor the host's readiness (READY=1,
    /// /ready) still waits for.
    pub starting: Vec<String>,
}

/// An app being constructed (mounted when its constructor returns).
#[derive(Clone, Debug)]
pub struct Constructing {
    pub app: String,
    /// The app's former names (`LoadedApp::formerly`).
    pub formerly: Vec<String>,
    pub file: PathBuf,
}

/// One loaded library generation.
#[derive(Clone, Debug)]
pub struct Retained {
    pub app: String,
    pub version: String,
    pub file: PathBuf,
    pub generation: u32,
    /// The name of its mapping in /proc/self/maps (its memfd's, or its
    /// private copy's path).
    pub mapping: String,
}

struct Live {
    app: Arc<LoadedApp>,
    stamp: Stamp,
    /// The bytes it was loaded from.
    fingerprint: Option<Fingerprint>,
}

/// A file not loaded, and why; `untrusted` is the trust verdict it was
/// refused under (a change of trust is a reason to look again).
struct Refused {
    stamp: Stamp,
    reason: Arc<LoadError>,
    untrusted: Option<Distrust>,
    /// Quarantined bytes with nothing to roll back to: the mount their
    /// app had, which answers 503 with the reason meanwhile.
    held: Option<String>,
}

/// The plugin directory's loader state.
pub struct Registry {
    dir: PathBuf,
    private: PluginCopies,
    mounts: HashMap<String, String>,
    /// Each app's `[apps.NAME] settings` as JSON text and its own limits,
    /// by app name.
    settings: HashMap<String, (Arc<str>, AppLimits)>,
    /// With `--on-generation-cap reexec`: where a replace past the cap
    /// asks for the host's re-exec (once).
    reexec_at_cap: Option<Requests>,
    reexec_asked: bool,
    /// The counters every app's requests are counted in (and the names
    /// of their slots).
    stats: Arc<Stats>,
    /// Process mode: the supervisor's side (what runs, what is
    /// quarantined).
    guard: Option<Arc<dyn Guard>>,
    max_generations: u32,
    live: BTreeMap<PathBuf, Live>,
    refused: BTreeMap<PathBuf, Refused>,
    /// Stamps seen by the previous scan for files not yet acted on.
    seen: HashMap<PathBuf, Stamp>,
    retained: Vec<Retained>,
    generations: HashMap<String, u32>,
    /// The app name each file last held, kept after the file is removed.
    names: HashMap<PathBuf, String>,
    watch: Watch,
}

impl Registry {
    pub fn new(
        dir: &Path,
        mounts: HashMap<String, String>,
        max_generations: u32,
        private: PluginCopies,
    ) -> std::io::Result<Self> {
        std::fs::read_dir(dir)?;
        Ok(Registry {
            dir: dir.to_path_buf(),
            private,
            mounts,
            settings: HashMap::new(),
            guard: None,
            reexec_at_cap: None,
            reexec_asked: false,
            stats: Arc::new(Stats::new(1)),
            max_generations: max_generations.max(1),
            live: BTreeMap::new(),
            refused: BTreeMap::new(),
            seen: HashMap::new(),
            retained: Vec::new(),
            generations: HashMap::new(),
            names: HashMap::new(),
            watch: Watch::default(),
        })
    }

    /// The apps' settings (JSON text by app name), handed to their
    /// constructors.
    pub fn set_settings(&mut self, settings: HashMap<String, (Arc<str>, AppLimits)>) {
        self.settings = settings;
    }

    /// Makes a replace past `--max-generations` ask for a re-exec of the
    /// host (`--on-generation-cap reexec`) besides refusing it here.
    pub fn set_reexec_at_cap(&mut self, requests: Requests) {
        self.reexec_at_cap = Some(requests);
    }

    /// Counts the apps' requests in `stats` (the host's counters).
    pub fn count_in(&mut self, stats: Arc<Stats>) {
        self.stats = stats;
    }

    /// Past the cap with `--on-generation-cap reexec`: asks the control
    /// thread for the re-exec that loads the new version (once).
    fn ask_reexec(&mut self, cap: &LoadError) {
        let Some(requests) = &self.reexec_at_cap else {
            return;
        };
        if std::mem::replace(&mut self.reexec_asked, true) {
            return;
        }
        log::warn!("{cap}; a fresh process will load it (--on-generation-cap reexec)");
        let why = format!("--on-generation-cap reexec ({})", cap);
        if requests.send(Request::Upgrade { why }).is_err() {
            log::error!("cannot ask for the re-exec: the control thread has stopped");
        }
    }

    /// Process mode: tells the supervisor what plugin code runs, and
    /// refuses quarantined bytes.
    pub fn set_guard(&mut self, guard: Arc<dyn Guard>) {
        self.guard = Some(guard);
    }

    /// Tells the guard the counters slots' apps and the bytes mounted for
    /// each (at once, before a request can reach a new generation).
    pub(crate) fn publish_names(&self) {
        let Some(guard) = &self.guard else { return };
        let mut text = String::new();
        for name in self.stats.app_names() {
            let digest = self
                .live
                .values()
                .find(|l| *l.app.name == *name)
                .and_then(|l| l.app.digest.clone());
            text.push_str(&name);
            text.push('\t');
            text.push_str(digest.as_deref().unwrap_or("-"));
            text.push('\n');
        }
        guard.names(&text);
    }

    /// True when a supervisor's guard is set (the apps thread then looks
    /// at the quarantine once a second).
    pub fn guarded(&self) -> bool {
        self.guard.is_some()
    }

    /// Takes every mounted app whose bytes were quarantined meanwhile out
    /// of service (it stays refused until its file changes); true if any.
    pub fn enforce_quarantine(&mut self) -> bool {
        let Some(guard) = self.guard.clone() else {
            return false;
        };
        let hit: Vec<(PathBuf, (String, String))> = self
            .live
            .iter()
            .filter_map(|(path, live)| {
                let q = guard.quarantined(live.app.digest.as_deref()?)?;
                Some((path.clone(), q))
            })
            .collect();
        for (path, (app, why)) in &hit {
            if let Some(live) = self.live.remove(path) {
                let digest = live.app.digest.as_deref().unwrap_or_default().to_string();
                log::error!(
                    "app {} {} taken out of service: quarantined: {why}",
                    live.app.name,
                    live.app.version
                );
                self.refused.insert(
                    path.clone(),
                    Refused {
                        stamp: live.stamp,
                        reason: Arc::new(LoadError::Quarantined {
                            app: app.clone(),
                            digest: digest.clone(),
                            why: why.clone(),
                        }),
                        untrusted: None,
                        held: Some(live.app.mount.clone()),
                    },
                );
                if self.roll_back(path, live.stamp, app, &digest) {
                    self.refused.remove(path);
                }
            }
        }
        if !hit.is_empty() {
            self.publish_names();
        }
        !hit.is_empty()
    }

    /// Makes `--insecure-apps-dir` turn trust refusals into warnings.
    pub fn set_insecure(&mut self, insecure: bool) {
        self.watch.insecure = insecure;
    }

    /// Brings the mounts in line with the directory (see `Scan` for when a
    /// changed file is loaded); a failed scan changes nothing. Returns true
    /// if the published state changed.
    pub fn scan(&mut self, how: Scan) -> bool {
        let listing = match dir::list(&self.dir) {
            Ok(listing) => listing,
            Err(e) => {
                self.watch.health.failed(&self.dir, &e);
                self.watch.failed_at = Some(std::time::Instant::now());
                return true;
            }
        };
        self.watch.failed_at = None;
        let mut changed = self.watch.health.succeeded(&self.dir);
        let insecure = self.watch.insecure;
        self.watch
            .health
            .dir_trust(&self.dir, &listing.dir_untrusted, insecure);
        changed |= self.forget_missing(&listing.entries);
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

    /// Unmounts (once gone for `SETTLE`) or forgets what a successful scan
    /// no longer lists.
    fn forget_missing(&mut self, entries: &[Entry]) -> bool {
        let present: HashSet<&PathBuf> = entries.iter().map(|e| &e.path).collect();
        let mut changed = self.unmount_gone(&present);
        let before = self.refused.len();
        self.refused.retain(|p, _| present.contains(&p));
        changed |= before != self.refused.len();
        self.seen.retain(|p, _| present.contains(&p));
        self.watch.requested.retain(|p, _| present.contains(&p));
        self.watch.pending.retain(|p, pending| {
            let keep = present.contains(p);
            if !keep {
                changed = true;
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
                return self.refuse(path, stamp, reason.clone().into(), untrusted);
            }
            log::warn!(
                "INSECURE: loading plugin {} although {reason} (--insecure-apps-dir)",
                path.display()
            );
        }
        if let Some(changed) = self.keep_same_bytes(&path, stamp) {
            return changed;
        }
        match self.load(&path, stamp) {
            Ok((app, fingerprint)) => self.construct(path, stamp, fingerprint, app, untrusted),
            Err(LoadError::Quarantined { app, digest, why }) => {
                if self.roll_back(&path, stamp, &app, &digest) {
                    return true;
                }
                let held = self.guard.as_ref().and_then(|g| g.mount_of(&digest));
                let reason = LoadError::Quarantined { app, digest, why };
                let changed = self.refuse(path.clone(), stamp, reason, untrusted);
                if let Some(refused) = self.refused.get_mut(&path) {
                    refused.held = held;
                }
                changed
            }
            Err(reason) => self.refuse(path, stamp, reason, untrusted),
        }
    }

    /// Quarantined bytes `digest` at `path`: loads the kept copy of the
    /// bytes they replaced there instead, if there is one; true if its
    /// constructor runs.
    fn roll_back(&mut self, path: &Path, stamp: Stamp, app: &str, digest: &str) -> bool {
        let Some(source) = self.guard.as_ref().and_then(|g| g.rollback(digest)) else {
            return false;
        };
        log::warn!(
            "app {app}: its plugin bytes {digest} at {} are quarantined; rolling back to the \
             bytes they replaced ({})",
            path.display(),
            source.display()
        );
        match self.load_from(path, &source, None) {
            Ok((loaded, fingerprint)) => {
                self.construct(path.to_path_buf(), stamp, fingerprint, loaded, None)
            }
            Err(e) => {
                log::error!("app {app}: the rollback failed: {e}");
                false
            }
        }
    }

    /// The routing state to publish to the workers.
    pub fn state(&self) -> AppState {
        AppState {
            mounts: MountTable::with_held(
                self.live.values().map(|l| l.app.clone()).collect(),
                self.refused
                    .values()
                    .filter_map(|r| Some((r.held.clone()?, Arc::from(r.reason.to_string()))))
                    .collect(),
            ),
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
            constructing: self
                .watch
                .pending
                .iter()
                .map(|(file, p)| Constructing {
                    app: p.app.name.clone(),
                    formerly: p.app.formerly.clone(),
                    file: file.clone(),
                })
                .collect(),
            starting: self.starting(),
        }
    }
}

//! The apps directory over time: the first scan at start-up, then rescans
//! (every second while watching, or on SIGHUP) that mount new plugins,
//! replace changed ones with a new generation, and unmount removed ones.
//!
//! Every plugin is loaded from a private copy, never from the apps
//! directory itself: `dlopen` of a path already loaded returns the old
//! handle, and overwriting a mapped library in place would corrupt the
//! running code. The copy is vetted (size, ELF structure, a load probe in
//! a child process) before it is loaded here (`plugin_copy.rs`). Libraries
//! are never unloaded (abi_stable leaks them by design), so the number of
//! generations per app is capped.

use crate::loader::{load_file, LoadedApp, MountTable, Refusal};
use crate::plugin_copy::PluginCopies;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// A file must be unchanged for this long before it is loaded by a watch
/// scan (a copy in progress is half-written for a while).
const SETTLE: Duration = Duration::from_secs(1);

/// What the workers route with, swapped whole on every change.
pub struct AppState {
    pub mounts: MountTable,
    pub refused: Vec<Refusal>,
    /// Every library loaded so far (they stay mapped until exit).
    pub retained: Vec<Retained>,
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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stamp {
    size: u64,
    mtime: SystemTime,
}

struct Live {
    app: Arc<LoadedApp>,
    stamp: Stamp,
}

/// The plugin directory's loader state.
pub struct Registry {
    dir: PathBuf,
    private: PluginCopies,
    mounts: HashMap<String, String>,
    max_generations: u32,
    live: BTreeMap<PathBuf, Live>,
    refused: BTreeMap<PathBuf, (Stamp, String)>,
    /// Stamps seen by the previous scan for files not yet acted on.
    seen: HashMap<PathBuf, Stamp>,
    retained: Vec<Retained>,
    generations: HashMap<String, u32>,
    /// The app name each file last held, kept after the file is removed.
    names: HashMap<PathBuf, String>,
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
            max_generations: max_generations.max(1),
            live: BTreeMap::new(),
            refused: BTreeMap::new(),
            seen: HashMap::new(),
            retained: Vec::new(),
            generations: HashMap::new(),
            names: HashMap::new(),
        })
    }

    /// The plugin files now in the directory (dotfiles are ignored: write a
    /// plugin as `.name.so` and rename it into place to swap atomically).
    fn listing(&self) -> Vec<(PathBuf, Stamp)> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            log::warn!("cannot read the apps directory {}", self.dir.display());
            return Vec::new();
        };
        let mut files: Vec<(PathBuf, Stamp)> = entries
            .filter_map(Result::ok)
            .filter(|e| {
                let name = e.file_name();
                let name = name.to_string_lossy();
                name.ends_with(".so") && !name.starts_with('.')
            })
            .filter_map(|e| {
                let meta = e.metadata().ok().filter(|m| m.is_file())?;
                let mtime = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
                Some((
                    e.path(),
                    Stamp {
                        size: meta.len(),
                        mtime,
                    },
                ))
            })
            .collect();
        files.sort_by(|a, b| a.0.cmp(&b.0));
        files
    }

    /// Brings the mounts in line with the directory. `immediate` acts on
    /// every change now (start-up, SIGHUP); otherwise a file is loaded once
    /// it has stopped changing. Returns true if anything changed.
    pub fn scan(&mut self, immediate: bool) -> bool {
        let listing = self.listing();
        let present: Vec<&PathBuf> = listing.iter().map(|(p, _)| p).collect();
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

        for (path, stamp) in listing {
            let known = self.live.get(&path).map(|l| l.stamp) == Some(stamp)
                || self.refused.get(&path).map(|r| r.0) == Some(stamp);
            if known {
                continue;
            }
            if !immediate {
                let settled = stamp.mtime.elapsed().is_ok_and(|age| age >= SETTLE);
                if self.seen.get(&path) != Some(&stamp) || !settled {
                    self.seen.insert(path, stamp);
                    continue;
                }
            }
            self.seen.remove(&path);
            changed = true;
            self.act(path, stamp);
        }
        changed
    }

    /// Loads a new or changed file; on failure the running version (if any)
    /// keeps serving.
    fn act(&mut self, path: PathBuf, stamp: Stamp) {
        match self.load(&path) {
            Ok(app) => {
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
                self.live.insert(
                    path,
                    Live {
                        app: Arc::new(app),
                        stamp,
                    },
                );
            }
            Err(reason) => {
                let keeps = match self.live.get(&path) {
                    Some(old) => {
                        format!(" (app {} {} keeps serving)", old.app.name, old.app.version)
                    }
                    None => String::new(),
                };
                log::error!("refused plugin {}: {reason}{keeps}", path.display());
                self.refused.insert(path, (stamp, reason));
            }
        }
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
        let copy = self.private.prepare(path)?;
        let taken: Vec<Arc<LoadedApp>> = self
            .live
            .iter()
            .filter(|(p, _)| p.as_path() != path)
            .map(|(_, l)| l.app.clone())
            .collect();
        // Messages name the operator's file, not the private copy.
        let opened = copy.load_path().to_string_lossy().into_owned();
        let result = load_file(copy.load_path(), path, &self.mounts, &taken)
            .map_err(|e| e.replace(&opened, &path.to_string_lossy()));
        let mapping = copy.finish(result.is_ok());
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
            mapping,
        });
        over_cap.map(|()| app)
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
                .map(|(file, (_, reason))| Refusal {
                    file: file.clone(),
                    reason: reason.clone(),
                })
                .collect(),
            retained: self.retained.clone(),
        }
    }
}

/// Bytes of this process's address space mapped from the file named
/// `mapping` in /proc/self/maps (a library's segments; an unlinked copy or
/// a memfd shows with ` (deleted)` after its name).
pub fn mapped_bytes(mapping: &str) -> u64 {
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
        return 0;
    };
    let deleted = format!("{mapping} (deleted)");
    maps.lines()
        .filter(|l| l.ends_with(mapping) || l.ends_with(&deleted))
        .filter_map(|l| {
            let (range, _) = l.split_once(' ')?;
            let (a, b) = range.split_once('-')?;
            Some(u64::from_str_radix(b, 16).ok()? - u64::from_str_radix(a, 16).ok()?)
        })
        .sum()
}

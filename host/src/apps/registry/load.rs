//! Loading one plugin file: the load (the generation cap first, then the
//! vetted private copy, the mount checks against the apps other files
//! hold), and the refusal that records a file that did not load, with one
//! log line naming it and the reason.

use super::{Refused, Registry, Retained};
use crate::apps::dir::Stamp;
use crate::apps::error::{Distrust, LoadError};
use crate::apps::fingerprint::Fingerprint;
use crate::apps::loader::{load_file, LoadedApp};
use std::path::{Path, PathBuf};
use std::sync::Arc;

impl Registry {
    /// Records a refusal of `path` with one log line; true.
    pub(super) fn refuse(
        &mut self,
        path: PathBuf,
        stamp: Stamp,
        reason: LoadError,
        untrusted: Option<Distrust>,
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
                reason: Arc::new(reason),
                untrusted,
                held: None,
            },
        );
        true
    }

    /// Loads `path`, seen with `stamp` (its app and the fingerprint of the
    /// bytes loaded).
    pub(super) fn load(
        &mut self,
        path: &Path,
        stamp: Stamp,
    ) -> Result<(LoadedApp, Option<Fingerprint>), LoadError> {
        self.load_from(path, path, Some(stamp))
    }

    /// Loads the plugin at `source` as the one of file `path` (`source` is
    /// `path` but for a rollback, which loads a kept copy).
    pub(super) fn load_from(
        &mut self,
        path: &Path,
        source: &Path,
        stamp: Option<Stamp>,
    ) -> Result<(LoadedApp, Option<Fingerprint>), LoadError> {
        // The app this file held before (still mounted, or removed and now
        // back): its generations count whatever the file's history.
        let known = self
            .live
            .get(path)
            .map(|l| l.app.name.clone())
            .or_else(|| self.names.get(path).cloned());
        if let Some(name) = &known {
            if let Err(cap) = self.check_cap(name) {
                self.ask_reexec(&cap);
                return Err(cap);
            }
        }
        let copy = self.vetted_copy(path, source, stamp)?;
        let digest = copy.fingerprint().map(|f| f.short_hex());
        if let (Some(guard), Some(digest)) = (&self.guard, &digest) {
            if let Some((app, why)) = guard.quarantined(digest) {
                return Err(LoadError::Quarantined {
                    app,
                    digest: digest.clone(),
                    why,
                });
            }
        }
        let taken = self.taken_by_others(path);
        let file = path.display().to_string();
        if let (Some(guard), Some(digest)) = (&self.guard, &digest) {
            guard.entering(&file, digest);
        }
        let configured =
            |name: &str| self.mounts.contains_key(name) || self.settings.contains_key(name);
        let result = load_file(copy.load_path(), path, &self.mounts, configured, &taken);
        if let Some(guard) = &self.guard {
            guard.left();
        }
        let fingerprint = copy.fingerprint();
        let mapping = copy.finish(result.is_ok());
        let mut app = result?;
        if let (Some(guard), Some(digest)) = (&self.guard, &digest) {
            guard.mounted(digest, &app.mount);
        }
        app.digest = digest.map(Arc::from);
        app.slot = self.stats.slot(&app.name);
        if let Some((settings, limits)) = self.settings.get(&app.configured_as) {
            app.settings = settings.clone();
            app.limits = *limits;
        }
        // A new file with the name of an app already at the cap: it is
        // mapped now (and counted), but not mounted.
        let over_cap = self.check_cap(&app.name);
        self.names.insert(path.to_path_buf(), app.name.clone());
        let generation = self.generations.entry(app.name.clone()).or_insert(0);
        *generation += 1;
        app.generation = *generation;
        self.retained.push(Retained {
            app: app.name.clone(),
            version: app.version.clone(),
            file: path.to_path_buf(),
            generation: *generation,
            mapping,
        });
        over_cap.map(|()| (app, fingerprint))
    }

    /// The apps mounted or being constructed from files other than `path`
    /// (their mounts are taken).
    pub(super) fn taken_by_others(&self, path: &Path) -> Vec<Arc<LoadedApp>> {
        let live = self.live.iter().map(|(p, l)| (p, &l.app));
        let pending = self.watch.pending.iter().map(|(p, q)| (p, &q.app));
        live.chain(pending)
            .filter(|(p, _)| p.as_path() != path)
            .map(|(_, app)| app.clone())
            .collect()
    }

    /// Refuses a load of `name` once it has `max_generations` in memory.
    pub(super) fn check_cap(&self, name: &str) -> Result<(), LoadError> {
        let count = self.generations.get(name).copied().unwrap_or(0);
        if count >= self.max_generations {
            return Err(LoadError::GenerationCap {
                app: name.to_string(),
                count,
                max: self.max_generations,
            });
        }
        Ok(())
    }
}

//! Vetting a plugin's bytes once for the whole host. In process mode one
//! worker at a time takes its turn (a lock in the supervisor's store); the
//! first to load a file at a stamp copies and probes it (ELF check, load
//! probe) and keeps a copy in the store; the others copy that same kept
//! copy (the bytes the first one vetted, whatever the file holds by then)
//! and skip the probe. Thread mode vets every load.

use super::Registry;
use crate::apps::dir::Stamp;
use crate::apps::error::LoadError;
use crate::apps::fingerprint::Fingerprint;
use crate::apps::plugin_copy::PluginCopy;
use std::path::Path;

impl Registry {
    /// The private copy of `source` (the bytes of file `path`), vetted.
    pub(super) fn vetted_copy(
        &mut self,
        path: &Path,
        source: &Path,
        stamp: Option<Stamp>,
    ) -> Result<PluginCopy, LoadError> {
        let Some(guard) = self.guard.clone() else {
            return self.private.prepare(source, &|_| false);
        };
        let _turn = guard.vetting();
        let key = stamp.filter(|_| source == path).map(|s| {
            let mtime = s
                .mtime
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            format!(
                "{}:{}:{}:{}",
                s.inode.0,
                s.inode.1,
                s.size,
                mtime.as_nanos()
            )
        });
        let sealed = key.as_deref().and_then(|k| guard.sealed(path, k));
        let vetted = |f: &Fingerprint| guard.vetted(&f.short_hex());
        let copy = match &sealed {
            Some((kept, digest)) => match self.private.prepare(kept, &vetted) {
                Ok(copy) if copy.fingerprint().map(|f| f.short_hex()).as_ref() == Some(digest) => {
                    log::debug!(
                        "plugin {}: loading the copy another worker vetted ({})",
                        path.display(),
                        kept.display()
                    );
                    copy
                }
                _ => self.private.prepare(source, &vetted)?,
            },
            None => self.private.prepare(source, &vetted)?,
        };
        if let Some(digest) = copy.fingerprint().map(|f| f.short_hex()) {
            guard.keep(&digest, copy.load_path());
            guard.vet(&digest);
            if let (Some(key), None) = (&key, &sealed) {
                guard.seal(path, key, &digest);
            }
        }
        Ok(copy)
    }
}

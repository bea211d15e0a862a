//! The store of plugin copies the workers keep for rollbacks (see
//! `apps::quarantine`): a 0700 directory the supervisor makes at start-up,
//! names to its workers in `ops::peers::STORE_ENV`, keeps across its
//! re-execution, and removes when it exits.

use crate::error::BootError;
use crate::ops::peers::STORE_ENV;
use std::path::PathBuf;

pub struct Store(PathBuf);

impl Store {
    /// A new store, or (`resumed`) the one the previous image made.
    pub fn open(resumed: bool) -> Result<Store, BootError> {
        if resumed {
            if let Some(path) = std::env::var_os(STORE_ENV) {
                return Ok(Store(PathBuf::from(path)));
            }
        }
        let dir = tempfile::Builder::new()
            .prefix("stoa-generations-")
            .tempdir()
            .map_err(|e| BootError::system("create the store of plugin copies", e))?;
        let path = dir.keep();
        std::env::set_var(STORE_ENV, &path);
        Ok(Store(path))
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.0) {
            log::warn!("cannot remove {}: {e}", self.0.display());
        }
    }
}

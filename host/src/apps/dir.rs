//! One look at the apps directory: the plugin files it lists (symlinks
//! followed to their targets), a stamp of each, and whether each may be
//! trusted. Like OpenSSH's StrictModes, a plugin file or an apps directory
//! that any user can write (group-writable is allowed), or that belongs to
//! a user other than the server's effective user or root, is untrusted; the
//! directory's ancestors are not checked.
//!
//! Also the scan's health over time: a failed scan is logged once per
//! streak of failures and once when scans succeed again, and counted.

use crate::apps::error::Distrust;
use std::fs::Metadata;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// What identifies one version of a plugin file: a change of any part is a
/// new version (a file renamed into place or a relinked release has a new
/// inode even when its size and mtime are the same).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamp {
    pub size: u64,
    pub mtime: SystemTime,
    /// (device, inode) of the file (a symlink's target).
    pub inode: (u64, u64),
}

impl Stamp {
    fn of(meta: &Metadata) -> Self {
        Stamp {
            size: meta.len(),
            mtime: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
            inode: (meta.dev(), meta.ino()),
        }
    }

    /// How long ago the file last changed (zero if its mtime is ahead).
    pub fn age(&self) -> Duration {
        self.mtime.elapsed().unwrap_or(Duration::ZERO)
    }
}

/// One plugin file as listed.
#[derive(Clone, Debug)]
pub struct Entry {
    /// Its path in the apps directory (a symlink's own path).
    pub path: PathBuf,
    pub stamp: Stamp,
    /// Why it may not be trusted (the file's or the directory's reason).
    pub untrusted: Option<Distrust>,
}

/// One successful scan.
pub struct Listing {
    /// Why the directory itself may not be trusted.
    pub dir_untrusted: Option<Distrust>,
    /// Plugin files by path.
    pub entries: Vec<Entry>,
}

/// Why a file or directory with `meta` may not be trusted; `what` names it
/// in the reason ("the file", "the apps directory", ...).
fn distrust(what: &'static str, meta: &Metadata) -> Option<Distrust> {
    let mode = meta.mode() & 0o7777;
    if mode & 0o002 != 0 {
        return Some(Distrust::WorldWritable { what, mode });
    }
    let (uid, euid) = (meta.uid(), rustix::process::geteuid().as_raw());
    if uid != euid && uid != 0 {
        return Some(Distrust::ForeignOwner { what, uid, euid });
    }
    None
}

/// Lists the plugin files in `dir` (dotfiles are ignored: write a plugin as
/// `.name.so` and rename it into place to swap atomically). Any error but a
/// file vanishing between the listing and its stat fails the whole scan,
/// so a partial listing never passes for removed files.
pub fn list(dir: &Path) -> io::Result<Listing> {
    let dir_untrusted = distrust("the apps directory", &std::fs::metadata(dir)?);
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if !name.ends_with(".so") || name.starts_with('.') {
            continue;
        }
        let path = entry.path();
        let own = match entry.metadata() {
            Ok(meta) => meta,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        let (meta, what) = if own.file_type().is_symlink() {
            match std::fs::metadata(&path) {
                Ok(meta) => (meta, "the link's target"),
                // A dangling link is a refusal, not a silent skip.
                Err(e) => {
                    entries.push(Entry {
                        path,
                        stamp: Stamp::of(&own),
                        untrusted: Some(Distrust::DanglingLink(e.to_string())),
                    });
                    continue;
                }
            }
        } else {
            (own, "the file")
        };
        if !meta.is_file() {
            continue;
        }
        let untrusted = distrust(what, &meta).or_else(|| dir_untrusted.clone());
        entries.push(Entry {
            path,
            stamp: Stamp::of(&meta),
            untrusted,
        });
    }
    entries.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(Listing {
        dir_untrusted,
        entries,
    })
}

/// The scans' health over time, and the directory's trust.
#[derive(Default, Debug)]
pub struct Health {
    /// Failed scans since start-up.
    pub failures: u64,
    /// The error of the current streak of failures.
    pub failing: Option<String>,
    /// Failed scans in the current streak.
    streak: u64,
    /// The directory's last reported distrust.
    dir_untrusted: Option<Distrust>,
}

impl Health {
    /// Counts a failed scan; logs the first of a streak only.
    pub fn failed(&mut self, dir: &Path, e: &io::Error) {
        self.failures += 1;
        self.streak += 1;
        if self.streak == 1 {
            log::error!(
                "cannot read the apps directory {}: {e}; the mounted apps stay as they are \
                 until a scan succeeds",
                dir.display()
            );
        } else {
            log::debug!("apps directory scan failed again: {e}");
        }
        self.failing = Some(e.to_string());
    }

    /// Ends a failure streak (logged once); true if there was one.
    pub fn succeeded(&mut self, dir: &Path) -> bool {
        if self.streak == 0 {
            return false;
        }
        log::info!(
            "the apps directory {} can be read again (after {} failed scan(s))",
            dir.display(),
            self.streak
        );
        self.streak = 0;
        self.failing = None;
        true
    }

    /// Logs a change of the directory's trust, once per change.
    pub fn dir_trust(&mut self, dir: &Path, untrusted: &Option<Distrust>, insecure: bool) {
        if *untrusted == self.dir_untrusted {
            return;
        }
        match (untrusted, insecure) {
            (Some(reason), false) => log::error!(
                "untrusted apps directory {}: {reason}; new and changed plugins in it are \
                 refused, mounted apps keep serving (--insecure-apps-dir loads them anyway)",
                dir.display()
            ),
            (Some(reason), true) => log::warn!(
                "INSECURE: loading plugins from {} although {reason} (--insecure-apps-dir)",
                dir.display()
            ),
            (None, _) => log::info!("the apps directory {} is trusted again", dir.display()),
        }
        self.dir_untrusted = untrusted.clone();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn links_are_followed_and_world_writable_is_untrusted() {
        let dir = std::env::temp_dir().join(format!("stoa-apps-dir-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mode = |p: &Path, m| std::fs::set_permissions(p, std::fs::Permissions::from_mode(m));
        std::fs::write(dir.join("real.bin"), "x").unwrap();
        std::os::unix::fs::symlink(dir.join("real.bin"), dir.join("a.so")).unwrap();
        std::os::unix::fs::symlink(dir.join("gone"), dir.join("b.so")).unwrap();
        std::fs::write(dir.join(".c.so"), "hidden").unwrap();
        let listing = list(&dir).unwrap();
        let names: Vec<_> = listing.entries.iter().map(|e| e.path.clone()).collect();
        assert_eq!(names, [dir.join("a.so"), dir.join("b.so")]);
        assert_eq!(listing.entries[0].untrusted, None);
        assert_eq!(listing.entries[0].stamp.size, 1, "the target's stamp");
        let why = |e: &Entry| e.untrusted.as_ref().map(Distrust::to_string);
        let dangling = why(&listing.entries[1]).unwrap_or_default();
        assert!(dangling.contains("cannot follow the symlink"), "{dangling}");
        mode(&dir.join("real.bin"), 0o646).unwrap();
        let reason = why(&list(&dir).unwrap().entries[0]).unwrap_or_default();
        assert!(
            reason.contains("the link's target is writable by any user (mode 0646)"),
            "{reason}"
        );
        mode(&dir.join("real.bin"), 0o664).unwrap();
        mode(&dir, 0o777).unwrap();
        let listing = list(&dir).unwrap();
        assert!(listing
            .dir_untrusted
            .is_some_and(|r| r.to_string().contains("mode 0777")));
        assert!(why(&listing.entries[0]).is_some_and(|r| r.contains("apps directory")));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

//! The private copy of a plugin that the host maps: the bytes are taken
//! once from the apps directory into a place no other user can reach, then
//! checked (size, ELF structure, a load probe in a child) before the host
//! loads them in-process. The size and the ELF headers are checked on the
//! file in place first, so a file that is no shared library costs no copy.
//!
//! Preferred: an anonymous memory file (`memfd_create`), sealed against any
//! change, loaded through `/proc/self/fd/N`; it has no name in any file
//! system. The dynamic loader matches a library by its path, so a memfd
//! that was loaded stays open for the process's life (a reused descriptor
//! number would hand back the old library): one descriptor per generation.
//! Its mapping shows in `/proc/self/maps` as `/memfd:stoa:N:FILE (deleted)`.
//!
//! Fallback, where memfds or executable mappings of them are refused (or
//! `/proc` is missing): a private directory made atomically with a random
//! name and mode 0700 (tempfile), checked to be a real directory owned by
//! this user; each copy is created exclusively, unlinked once loaded, and
//! the directory is removed at exit (`remove_private_dir`). The hidden
//! environment switch `STOA_PLUGIN_COPIES=dir` forces it (tests).

use crate::apps::elf_check;
use crate::apps::error::LoadError;
use crate::apps::fingerprint::{Fingerprint, Hashing};
use crate::apps::probe::{self, ProbeTarget};
use crate::error::BootError;
use rustix::fs::{MemfdFlags, SealFlags};
use std::fs::{File, OpenOptions, Permissions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::{IntoRawFd, OwnedFd};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The environment switch that forces the directory fallback.
pub const MODE_ENV: &str = "STOA_PLUGIN_COPIES";

/// The private directory of the fallback, made on first use.
static PRIVATE_DIR: Mutex<Option<tempfile::TempDir>> = Mutex::new(None);

/// Where copies go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Memfd,
    Dir,
}

/// Makes and vets the private copies of plugins.
pub struct PluginCopies {
    mode: Mode,
    max_size: u64,
    next: u64,
}

/// One plugin's private copy, open.
pub struct PluginCopy {
    file: File,
    len: u64,
    /// The bytes copied (once filled).
    fingerprint: Option<Fingerprint>,
    /// The path the loaders open: `/proc/self/fd/N` or the copy's path.
    load_path: PathBuf,
    /// How the library's mapping is named in /proc/self/maps.
    mapping: String,
    /// The copy's path in the private directory (fallback mode), unlinked
    /// when the copy is dropped.
    on_disk: Option<Unlink>,
}

/// A private file, removed on drop.
struct Unlink(PathBuf);

impl Drop for Unlink {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

impl PluginCopies {
    /// Copies bounded by `max_size` bytes, in the mode `STOA_PLUGIN_COPIES`
    /// asks for (`memfd`, the default, or `dir`).
    pub fn from_env(max_size: u64) -> Result<Self, BootError> {
        let asked = std::env::var(MODE_ENV).unwrap_or_default();
        let mode = match asked.as_str() {
            "" | "memfd" => Mode::Memfd,
            "dir" => Mode::Dir,
            other => {
                return Err(BootError::Env {
                    var: MODE_ENV,
                    given: other.to_string(),
                    expected: "memfd or dir",
                })
            }
        };
        let mut copies = PluginCopies {
            mode,
            max_size,
            next: 0,
        };
        if mode == Mode::Memfd && !Path::new("/proc/self/fd").is_dir() {
            copies.fall_back("/proc is not mounted");
        }
        if mode == Mode::Dir {
            log::info!("plugin copies: in a private directory ({MODE_ENV}=dir)");
        }
        Ok(copies)
    }

    /// The size bound (`--max-plugin-size`).
    pub fn max_size(&self) -> u64 {
        self.max_size
    }

    /// Copies `path` and vets the copy: size bound, ELF structure, then the
    /// load probe, unless `vetted` says these bytes passed it already (in
    /// process mode, in another worker).
    pub fn prepare(
        &mut self,
        path: &Path,
        vetted: &dyn Fn(&Fingerprint) -> bool,
    ) -> Result<PluginCopy, LoadError> {
        let copy = self.copy(path)?;
        if copy.fingerprint.as_ref().is_some_and(vetted) {
            log::debug!(
                "plugin {}: these bytes passed the load probe already",
                path.display()
            );
            return Ok(copy);
        }
        match probe::probe(copy.probe_target()?, path) {
            Ok(()) => Ok(copy),
            Err(LoadError::Library(refusal))
                if copy.is_memfd() && mapping_refused(&refusal.to_string()) =>
            {
                self.fall_back(&refusal.to_string());
                let copy = self.copy(path)?;
                probe::probe(copy.probe_target()?, path)?;
                Ok(copy)
            }
            Err(e) => Err(e),
        }
    }

    /// Switches to the directory fallback for this and later copies.
    fn fall_back(&mut self, why: &str) {
        if self.mode == Mode::Memfd {
            log::warn!(
                "plugin copies: memory files cannot be used ({why}); using a private directory"
            );
        }
        self.mode = Mode::Dir;
    }

    /// The bytes of `path`, copied into a new memfd or private file,
    /// sealed, and checked to be a whole ELF shared object.
    fn copy(&mut self, path: &Path) -> Result<PluginCopy, LoadError> {
        // Non-blocking, so a FIFO in the directory cannot stall the open.
        let source = OpenOptions::new()
            .read(true)
            .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
            .open(path)
            .map_err(LoadError::io("open the plugin"))?;
        let meta = source
            .metadata()
            .map_err(LoadError::io("read the plugin's size"))?;
        if !meta.is_file() {
            return Err(LoadError::NotRegularFile);
        }
        if meta.len() > self.max_size {
            return Err(LoadError::TooLarge {
                size: meta.len(),
                max: self.max_size,
            });
        }
        // The header and program headers, read in place: a file that is no
        // shared library is refused before a byte of it is copied. The copy
        // is checked again below (the file may change in between).
        elf_check::check(&source, meta.len())?;
        self.next += 1;
        let file_name = path
            .file_name()
            .map_or_else(|| "plugin.so".into(), |n| n.to_string_lossy().into_owned());
        let name = sanitise(&format!("stoa:{}:{file_name}", self.next));
        let mut copy = match self.mode {
            Mode::Memfd => match memfd(&name) {
                Ok(fd) => PluginCopy::memfd(File::from(fd), &name),
                Err(e) => {
                    self.fall_back(&format!("memfd_create: {e}"));
                    self.private_file(&file_name)?
                }
            },
            Mode::Dir => self.private_file(&file_name)?,
        };
        self.fill(&mut copy, &source)?;
        if let Err(e) = copy.seal() {
            if !copy.is_memfd() || !e.is_busy() {
                return Err(e);
            }
            // The kernel still saw references to the memfd's pages after
            // every retry (seen on a loaded machine): this one plugin goes
            // through the private directory instead, copied from the same
            // open file.
            log::warn!(
                "plugin copies: cannot seal the memory file for {} ({e}); using a private file for it",
                path.display()
            );
            copy = self.private_file(&file_name)?;
            self.fill(&mut copy, &source)?;
            copy.seal()?;
        }
        elf_check::check(&copy.file, copy.len)?;
        Ok(copy)
    }

    /// Copies `source` from its start into `copy` (fingerprinting the
    /// bytes on the way), refusing more than the size bound.
    fn fill(&self, copy: &mut PluginCopy, mut source: &File) -> Result<(), LoadError> {
        source
            .seek(SeekFrom::Start(0))
            .map_err(LoadError::io("read the plugin"))?;
        let mut hashing = Hashing::new(&mut copy.file);
        std::io::copy(
            &mut source.take(self.max_size.saturating_add(1)),
            &mut hashing,
        )
        .map_err(LoadError::io("copy the plugin for loading"))?;
        let print = hashing.fingerprint();
        if print.size > self.max_size {
            return Err(LoadError::GrewTooLarge { max: self.max_size });
        }
        copy.len = print.size;
        copy.fingerprint = Some(print);
        Ok(())
    }

    /// A new file in the private directory, created exclusively.
    fn private_file(&self, file_name: &str) -> Result<PluginCopy, LoadError> {
        let mut guard = PRIVATE_DIR.lock().unwrap_or_else(|p| p.into_inner());
        let dir = match guard.as_ref() {
            Some(dir) => dir.path().to_path_buf(),
            None => guard.insert(make_private_dir()?).path().to_path_buf(),
        };
        let path = dir.join(format!("{}-{file_name}", self.next));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o700)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(&path)
            .map_err(LoadError::io(format!(
                "create the private copy {}",
                path.display()
            )))?;
        Ok(PluginCopy {
            file,
            len: 0,
            fingerprint: None,
            load_path: path.clone(),
            mapping: path.to_string_lossy().into_owned(),
            on_disk: Some(Unlink(path)),
        })
    }
}

impl PluginCopy {
    fn memfd(file: File, name: &str) -> Self {
        let fd = std::os::fd::AsRawFd::as_raw_fd(&file);
        PluginCopy {
            file,
            len: 0,
            fingerprint: None,
            load_path: PathBuf::from(format!("/proc/self/fd/{fd}")),
            mapping: format!("/memfd:{name}"),
            on_disk: None,
        }
    }

    fn is_memfd(&self) -> bool {
        self.on_disk.is_none()
    }

    /// The size and digest of the bytes copied.
    pub fn fingerprint(&self) -> Option<Fingerprint> {
        self.fingerprint
    }

    /// The path the host's loader opens.
    pub fn load_path(&self) -> &Path {
        &self.load_path
    }

    /// Seals a memfd against writes, growing, shrinking and more seals; a
    /// file in the private directory is flushed and made read-only.
    fn seal(&mut self) -> Result<(), LoadError> {
        self.file
            .flush()
            .map_err(LoadError::io("write the private copy"))?;
        if self.is_memfd() {
            let seals = SealFlags::SEAL | SealFlags::SHRINK | SealFlags::GROW | SealFlags::WRITE;
            retry_busy(SEAL_ATTEMPTS, SEAL_PAUSE, || {
                rustix::fs::fcntl_add_seals(&self.file, seals)
            })
            .map_err(|e| LoadError::io("seal the private copy")(e.into()))
        } else {
            self.file
                .set_permissions(Permissions::from_mode(0o500))
                .map_err(LoadError::io("protect the private copy"))
        }
    }

    /// What the probe child opens: the same memfd, handed over as its
    /// stdin (so no other process needs access to ours), or the copy's path.
    fn probe_target(&self) -> Result<ProbeTarget, LoadError> {
        if self.is_memfd() {
            let fd: OwnedFd = self
                .file
                .try_clone()
                .map_err(LoadError::io("share the private copy with the load probe"))?
                .into();
            return Ok(ProbeTarget {
                path: PathBuf::from("/proc/self/fd/0"),
                stdin: Some(fd),
            });
        }
        Ok(ProbeTarget {
            path: self.load_path.clone(),
            stdin: None,
        })
    }

    /// After the host's own load attempt (`loaded` if it succeeded): a
    /// memfd whose library is mapped stays open for the process's life (its
    /// number must never be reused for another library); a private file is
    /// unlinked. Returns the mapping's name for `mapped_bytes`.
    pub fn finish(self, loaded: bool) -> String {
        if self.is_memfd() && (loaded || mapped_bytes(&self.mapping) > 0) {
            // Deliberately never closed: see the module's notes.
            let _ = self.file.into_raw_fd();
        }
        self.mapping
    }
}

/// How often sealing a memfd is tried while the kernel answers EBUSY (it
/// waits up to ~150 ms itself for transient page references to go), and
/// the pause between tries.
const SEAL_ATTEMPTS: u32 = 5;
const SEAL_PAUSE: std::time::Duration = std::time::Duration::from_millis(20);

/// Runs `op` up to `attempts` times while it fails with EBUSY, pausing
/// between tries; returns its last answer.
fn retry_busy<T>(
    attempts: u32,
    pause: std::time::Duration,
    mut op: impl FnMut() -> rustix::io::Result<T>,
) -> rustix::io::Result<T> {
    let mut tries = 1;
    loop {
        match op() {
            Err(rustix::io::Errno::BUSY) if tries < attempts => {
                tries += 1;
                std::thread::sleep(pause);
            }
            other => return other,
        }
    }
}

/// A new sealable, close-on-exec memfd (executable where the kernel asks
/// for that to be said: Linux 6.3 and later; older kernels reject the
/// flag and need no say).
fn memfd(name: &str) -> rustix::io::Result<OwnedFd> {
    let flags = MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING;
    match rustix::fs::memfd_create(name, flags | MemfdFlags::EXEC) {
        Err(rustix::io::Errno::INVAL) => rustix::fs::memfd_create(name, flags),
        other => other,
    }
}

/// The fallback directory: made with a random name and mode 0700 (mkdir
/// fails if the name exists, so nothing pre-planted is used), then checked
/// to be a real directory owned by this user with no access for others.
fn make_private_dir() -> Result<tempfile::TempDir, LoadError> {
    let dir = tempfile::Builder::new()
        .prefix("stoa-plugins-")
        .permissions(Permissions::from_mode(0o700))
        .tempdir()
        .map_err(LoadError::io(
            "create a private directory for plugin copies",
        ))?;
    let meta = std::fs::symlink_metadata(dir.path())
        .map_err(LoadError::io(format!("check {}", dir.path().display())))?;
    let me = rustix::process::geteuid().as_raw();
    if !meta.is_dir() || meta.uid() != me || meta.mode() & 0o077 != 0 {
        return Err(LoadError::UnsafePrivateDir {
            dir: dir.path().to_path_buf(),
            uid: me,
        });
    }
    log::info!(
        "plugin copies go to {} (removed at exit)",
        dir.path().display()
    );
    Ok(dir)
}

/// Removes the fallback directory (called on every exit path: libraries
/// stay mapped, their copies are already unlinked).
pub fn remove_private_dir() {
    let mut guard = PRIVATE_DIR.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(dir) = guard.take() {
        let _ = dir.close();
    }
}

/// How many plugin files (`*.so`, not dotfiles) `dir` holds now: each may
/// keep up to `--max-generations` memfds open.
pub fn plugin_files(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |entries| {
        entries
            .filter_map(Result::ok)
            .filter(|e| {
                let name = e.file_name();
                let name = name.to_string_lossy();
                name.ends_with(".so") && !name.starts_with('.')
            })
            .count()
    })
}

/// Whether a loader's reason says the kernel refused to map the copy (as
/// `vm.memfd_noexec` or a security module do), not that the file is bad.
fn mapping_refused(reason: &str) -> bool {
    [
        "failed to map segment",
        "Operation not permitted",
        "Permission denied",
    ]
    .iter()
    .any(|m| reason.contains(m))
}

/// A memfd name: printable, no spaces (it appears in /proc/self/maps), at
/// most 249 bytes.
fn sanitise(name: &str) -> String {
    let mut out: String = name
        .chars()
        .map(|c| if c.is_ascii_graphic() { c } else { '_' })
        .collect();
    out.truncate(240);
    out
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealing_is_retried_while_busy_then_gives_up() {
        let pause = std::time::Duration::ZERO;
        let mut calls = 0;
        let r = retry_busy(5, pause, || {
            calls += 1;
            if calls < 3 {
                Err(rustix::io::Errno::BUSY)
            } else {
                Ok(calls)
            }
        });
        assert_eq!(r, Ok(3));
        let mut calls = 0;
        let r: rustix::io::Result<()> = retry_busy(5, pause, || {
            calls += 1;
            Err(rustix::io::Errno::BUSY)
        });
        assert_eq!((r, calls), (Err(rustix::io::Errno::BUSY), 5));
        let mut calls = 0;
        let r: rustix::io::Result<()> = retry_busy(5, pause, || {
            calls += 1;
            Err(rustix::io::Errno::PERM)
        });
        assert_eq!((r, calls), (Err(rustix::io::Errno::PERM), 1));
    }

    #[test]
    fn memfd_names_are_printable() {
        assert_eq!(sanitise("stoa:1:a b\n.so"), "stoa:1:a_b_.so");
    }
}

//! Why a plugin file is refused: `LoadError`, one variant per reason. Its
//! `Display` is the one-line reason the host logs (`refused plugin FILE:
//! REASON`) and status lists under `refused[].reason`.
//!
//! `LibraryRefusal` is the part that comes from abi_stable's checks (the
//! library does not open, is not a Stoa app, has another ABI). The load
//! probe's child finds it in its own process and hands it to the host as
//! one line of JSON (`probe.rs`), so it is serialisable.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Why a plugin file was not loaded (or not mounted).
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file, its symlink's target or the apps directory may not be
    /// trusted (and `--insecure-apps-dir` is not given).
    #[error(transparent)]
    Untrusted(#[from] Distrust),

    /// A directory entry that is not a regular file (a FIFO, a device...).
    #[error("not a regular file")]
    NotRegularFile,
    /// Over `--max-plugin-size` before copying.
    #[error("too large: {size} bytes, over --max-plugin-size {max} bytes (not copied)")]
    TooLarge { size: u64, max: u64 },
    /// Grew over `--max-plugin-size` while it was being copied.
    #[error("too large: grew past --max-plugin-size {max} bytes while being copied")]
    GrewTooLarge { max: u64 },
    /// A file operation on the plugin or its private copy failed; `doing`
    /// says which ("open the plugin", "seal the private copy", ...).
    #[error("cannot {doing}: {source}")]
    Io {
        doing: String,
        source: std::io::Error,
    },
    /// The file's bytes killed worker processes too often (process mode).
    #[error("quarantined: {why}")]
    Quarantined {
        app: String,
        digest: String,
        why: String,
    },
    /// The fallback directory for private copies is not safe to use.
    #[error("the private directory {} is not a 0700 directory owned by uid {uid}", dir.display())]
    UnsafePrivateDir { dir: PathBuf, uid: u32 },

    /// Shorter than an ELF file header.
    #[error(
        "not a loadable shared library (an ELF header needs {need} bytes, the file has {len})"
    )]
    ElfTooShort { need: usize, len: u64 },
    /// No ELF magic.
    #[error("not a loadable shared library (not an ELF file)")]
    NotElf,
    /// Not 64-bit little-endian.
    #[error(
        "not a loadable shared library (ELF class {class} byte order {order}: this host loads 64-bit little-endian)"
    )]
    ElfClass { class: u8, order: u8 },
    /// An executable or object file, not a shared object.
    #[error("not a loadable shared library (ELF type {kind}, not a shared object)")]
    NotSharedObject { kind: u16 },
    /// Built for another machine.
    #[error(
        "not a loadable shared library (built for ELF machine {machine}, this host is {arch} ({ours}))"
    )]
    WrongMachine {
        machine: u16,
        arch: &'static str,
        ours: u16,
    },
    /// Program headers this check does not read.
    #[error(
        "not a loadable shared library (unsupported program headers: {count} of {size} bytes)"
    )]
    ProgramHeaders { count: u16, size: u16 },
    /// The program header table ends past the end of the file.
    #[error("truncated: the program headers end past byte {end} but the file has {len} bytes")]
    HeadersTruncated { end: u64, len: u64 },
    /// A segment (`LOAD`, `DYNAMIC`, `type 0x..`) ends past the end of the file.
    #[error("truncated: {segment} segment ends at byte {end} but the file has {len} bytes")]
    SegmentTruncated { segment: String, end: u64, len: u64 },

    /// abi_stable refused the library (in the probe or in the host).
    #[error(transparent)]
    Library(#[from] LibraryRefusal),
    /// The load probe was killed by a signal while mapping the library.
    #[error("crashed while loading: signal {signal} ({name})")]
    Crashed { signal: i32, name: &'static str },
    /// The load probe exited with a status other than its answers.
    #[error("crashed while loading: the load probe exited with status {status}")]
    ProbeExited { status: String },
    /// The load probe gave no answer in time and was killed.
    #[error("hung while loading: no answer within {secs} s (probe killed)")]
    ProbeTimeout { secs: u64 },
    /// The load probe could not be started.
    #[error("cannot start the load probe {}: {source}", exe.display())]
    ProbeFailed {
        exe: PathBuf,
        source: std::io::Error,
    },

    /// The app's mount prefix (its own or `--mount`'s) is not a path.
    #[error("invalid mount prefix {wanted:?} for app {app}")]
    InvalidMount { app: String, wanted: String },
    /// Another app holds the mount prefix.
    #[error("app {app} wants mount prefix {wanted:?}, already taken by app {other} from {}", other_file.display())]
    MountTaken {
        app: String,
        wanted: String,
        other: String,
        other_file: PathBuf,
    },
    /// The app's constructor returned an error.
    #[error("app {app} failed to initialise: {message}")]
    ConstructorFailed { app: String, message: String },
    /// The app's constructor, started at start-up, was still running at
    /// `--init-timeout`.
    #[error(
        "app {app} constructor still running after --init-timeout {}: not mounted, and the \
         host got ready without it (replace the file or restart stoa to try again)",
        humantime::format_duration(*timeout)
    )]
    InitTimeout {
        app: String,
        timeout: std::time::Duration,
    },
    /// No thread could be started for the app's constructor.
    #[error("cannot start a thread for the app's constructor: {0}")]
    ConstructorThread(std::io::Error),
    /// The app already has `--max-generations` libraries in memory.
    #[error(
        "replace refused: app {app} already has {count} generations in memory \
         (--max-generations {max}); restart stoa to load it (and start counting again), \
         or raise --max-generations for a long development session"
    )]
    GenerationCap { app: String, count: u32, max: u32 },
}

impl LoadError {
    /// A failed file operation; `doing` completes "cannot ...".
    pub fn io(doing: impl Into<String>) -> impl FnOnce(std::io::Error) -> LoadError {
        let doing = doing.into();
        move |source| LoadError::Io { doing, source }
    }

    /// Whether this is an I/O error the kernel answered with EBUSY.
    pub fn is_busy(&self) -> bool {
        matches!(self, LoadError::Io { source, .. }
            if source.raw_os_error() == Some(rustix::io::Errno::BUSY.raw_os_error()))
    }
}

/// What abi_stable's checks refuse.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum LibraryRefusal {
    /// The dynamic loader could not open it (its words).
    #[error("not a loadable shared library ({0})")]
    NotLoadable(String),
    /// A library without abi_stable's root module.
    #[error("not a Stoa app (no abi_stable root module)")]
    NotStoaApp,
    /// Built against another (semver-incompatible) stoa-app-api.
    #[error(
        "built against an incompatible app ABI version (plugin {plugin}, host expects {host})"
    )]
    AbiVersion { plugin: String, host: String },
    /// The same stoa-app-api version, but the type layouts differ; the first
    /// difference, where abi_stable's report names one.
    #[error("{}", abi_layout_line(first.as_ref(), api))]
    AbiLayout {
        first: Option<AbiMismatch>,
        api: String,
    },
    /// Built with an abi_stable whose header is incompatible.
    #[error("built with an incompatible abi_stable ({0})")]
    AbiHeader(String),
    /// Any other abi_stable error (its first line).
    #[error("{0}")]
    Other(String),
}

impl LibraryRefusal {
    /// The same refusal with the path `opened` (a private copy) written as
    /// `shown` (the operator's file) in the loader's words.
    pub fn naming(self, opened: &Path, shown: &Path) -> Self {
        let rename =
            |text: String| text.replace(&*opened.to_string_lossy(), &shown.to_string_lossy());
        match self {
            LibraryRefusal::NotLoadable(text) => LibraryRefusal::NotLoadable(rename(text)),
            LibraryRefusal::Other(text) => LibraryRefusal::Other(rename(text)),
            other => other,
        }
    }
}

/// The first difference in an ABI layout report.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AbiMismatch {
    /// The type (as stoa-app-api declares it) that holds the difference.
    pub ty: String,
    /// The field of `ty` whose layout differs, if the difference is in one.
    pub field: Option<String>,
    /// What differs, e.g. `mismatched type: expected AppModule, found X`.
    pub what: String,
}

/// The refusal line of a layout mismatch: the first difference where
/// known, and where the whole report is.
fn abi_layout_line(first: Option<&AbiMismatch>, api: &str) -> String {
    let report = "layout report at --log-level debug";
    match first {
        None => {
            format!("incompatible app ABI: type layouts differ from stoa-app-api {api} ({report})")
        }
        Some(m) => {
            let field = m
                .field
                .as_ref()
                .map(|f| format!(" field `{f}`"))
                .unwrap_or_default();
            format!(
                "incompatible app ABI: type {}{field} differs from stoa-app-api {api} ({}; {report})",
                m.ty, m.what
            )
        }
    }
}

/// Why a plugin file or the apps directory may not be trusted; `what`
/// names it ("the file", "the link's target", "the apps directory").
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Distrust {
    #[error("{what} is writable by any user (mode {mode:04o})")]
    WorldWritable { what: &'static str, mode: u32 },
    #[error("{what} is owned by uid {uid}, neither the server's user (uid {euid}) nor root")]
    ForeignOwner {
        what: &'static str,
        uid: u32,
        euid: u32,
    },
    /// A symlink whose target cannot be reached (the error's text).
    #[error("cannot follow the symlink: {0}")]
    DanglingLink(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The texts the e2e suite and operators match on stay as they were.
    #[test]
    fn refusal_lines_keep_their_words() {
        let abi = LibraryRefusal::AbiLayout {
            first: None,
            api: "0.1.0".into(),
        };
        assert_eq!(
            abi.to_string(),
            "incompatible app ABI: type layouts differ from stoa-app-api 0.1.0 \
             (layout report at --log-level debug)"
        );
        let cap = LoadError::GenerationCap {
            app: "hot".into(),
            count: 2,
            max: 2,
        };
        assert_eq!(
            cap.to_string(),
            "replace refused: app hot already has 2 generations in memory \
             (--max-generations 2); restart stoa to load it (and start counting again), \
             or raise --max-generations for a long development session"
        );
        let crash = LoadError::Crashed {
            signal: 6,
            name: "SIGABRT",
        };
        assert_eq!(
            crash.to_string(),
            "crashed while loading: signal 6 (SIGABRT)"
        );
        let owner = LoadError::from(Distrust::ForeignOwner {
            what: "the file",
            uid: 65534,
            euid: 0,
        });
        assert_eq!(
            owner.to_string(),
            "the file is owned by uid 65534, neither the server's user (uid 0) nor root"
        );
    }

    #[test]
    fn the_first_difference_is_named_on_the_abi_line() {
        let abi = LibraryRefusal::AbiLayout {
            first: Some(AbiMismatch {
                ty: "Request".into(),
                field: Some("path".into()),
                what: "incompatible type size: expected 16, found 24".into(),
            }),
            api: "0.1.0".into(),
        };
        assert_eq!(
            abi.to_string(),
            "incompatible app ABI: type Request field `path` differs from stoa-app-api 0.1.0 \
             (incompatible type size: expected 16, found 24; layout report at --log-level debug)"
        );
    }

    #[test]
    fn the_loaders_words_name_the_operators_file() {
        let opened = Path::new("/proc/self/fd/0");
        let refusal = LibraryRefusal::NotLoadable("/proc/self/fd/0: invalid ELF header".into());
        assert_eq!(
            refusal.naming(opened, Path::new("/apps/x.so")).to_string(),
            "not a loadable shared library (/apps/x.so: invalid ELF header)"
        );
    }
}

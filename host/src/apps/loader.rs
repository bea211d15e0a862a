//! One plugin file: loads it and checks its ABI (`load_file`), runs the
//! app's constructor as a separate step (`LoadedApp::init`, which may take
//! long and so runs off the registry's thread), and builds the mount table.
//! A bad file is one log line and a refusal, never a crash of the host.

use crate::apps::abi_report;
use crate::apps::error::{AbiMismatch, LibraryRefusal, LoadError};
use crate::apps::retire;
use crate::settings::AppLimits;
use abi_stable::library::{lib_header_from_path, LibraryError, RootModule};
use abi_stable::sabi_types::VersionNumber;
use abi_stable::std_types::{RResult, RSlice, RStr};
use abi_stable::StableAbi;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use stoa_app_api::abi::{AppModuleRef, HostRef, InitContext, Request, ResponderBox};

/// One loaded app (its constructor is run by `init`). Once constructed,
/// dropping the last `Arc` of it retires it (`retire.rs`): the registry,
/// the routing states and every request in flight on it hold one.
pub struct LoadedApp {
    pub name: String,
    /// The names the app had before (`export_app!`'s `formerly`).
    pub formerly: Vec<String>,
    /// The name the configuration gives the app (`[apps.NAME]`,
    /// `--mount NAME=`): its name, or a former one a configuration still
    /// says.
    pub configured_as: String,
    pub version: String,
    /// Normalised mount prefix: `""` for the root, else `/x` without a trailing slash.
    pub mount: String,
    pub file: PathBuf,
    /// Index of this app's counters (shared by every version of the app).
    pub slot: usize,
    /// The library generation the registry assigned (1 for the first load
    /// of the app's name, counting up with each replace).
    pub generation: u32,
    /// The app's `[apps.NAME] settings` as JSON text (`{}` when none).
    pub settings: Arc<str>,
    /// Its own limits from `[apps.NAME]` (none: the server-wide ones).
    pub limits: AppLimits,
    /// The plugin file's bytes, as `Fingerprint::short_hex` (none for
    /// an app built into the host).
    pub digest: Option<Arc<str>>,
    module: AppModuleRef,
    /// Whether its constructor succeeded (it is then retired on drop).
    constructed: AtomicBool,
}

impl LoadedApp {
    /// Runs the app's constructor (the plugin's `init`) with the host's
    /// services (`services::host_module`) and the state its previous
    /// generation handed over; it may take long, so the registry calls it
    /// on a thread of its own.
    pub fn init(&self, host: HostRef, previous_state: Option<&[u8]>) -> Result<(), LoadError> {
        let context = InitContext {
            host,
            settings_json: RStr::from(&*self.settings),
            previous_state: previous_state.map(RSlice::from_slice).into(),
        };
        match self.module.construct(context) {
            RResult::ROk(()) => {
                retire::opened(&self.name, self.generation);
                self.constructed.store(true, Ordering::Release);
                Ok(())
            }
            RResult::RErr(e) => Err(LoadError::ConstructorFailed {
                app: self.name.clone(),
                message: e.to_string(),
            }),
        }
    }

    /// Calls the plugin's handler (which contains the app's panics).
    pub fn handle(&self, request: &Request<'_>, responder: ResponderBox) {
        (self.module.handle())(request, responder)
    }

    /// True if the plugin can say it reads bodies as they arrive.
    pub fn may_read_bodies(&self) -> bool {
        self.module.reads_body().is_some()
    }

    /// Whether the app reads this request's body as it arrives.
    pub fn reads_body(&self, request: &Request<'_>) -> bool {
        self.module.call_reads_body(request)
    }

    /// Whether the app says handling this request blocks its thread.
    pub fn blocks(&self, request: &Request<'_>) -> bool {
        (self.module.blocks())(request)
    }

    /// The state this generation hands to its successor (`App::handover`),
    /// called on the constructor's thread right before the successor's
    /// constructor runs.
    pub fn handover(&self) -> Option<Vec<u8>> {
        self.module.call_handover().map(|bytes| bytes.into_vec())
    }
}

impl Drop for LoadedApp {
    fn drop(&mut self) {
        if *self.constructed.get_mut() {
            retire::start(&self.name, self.generation, self.module);
        }
    }
}

/// A plugin file that was not loaded, and why (its `Display` is the
/// one-line reason).
#[derive(Clone, Debug)]
pub struct Refusal {
    pub file: PathBuf,
    pub reason: Arc<LoadError>,
}

/// Loads one plugin and checks its ABI and mount (its constructor is run
/// later by `LoadedApp::init`). `copy` is the file opened, `file` the one
/// the operator sees (both in messages and in status); `taken` are the apps
/// already mounted or being constructed.
/// `configured` says whether the configuration names an app (`[apps.NAME]`
/// or `--mount NAME=`): the app is configured by its name, else by the
/// first of its former names the configuration still says.
pub fn load_file(
    copy: &Path,
    file: &Path,
    mounts: &HashMap<String, String>,
    configured: impl Fn(&str) -> bool,
    taken: &[Arc<LoadedApp>],
) -> Result<LoadedApp, LoadError> {
    let module = open_module(copy).map_err(|e| describe(file, &e).naming(copy, file))?;
    let name = module.name().to_string();
    let formerly: Vec<String> = module.formerly().into_iter().map(String::from).collect();
    let configured_as = std::iter::once(&name)
        .chain(&formerly)
        .find(|n| configured(n))
        .unwrap_or(&name)
        .clone();
    if configured_as != name {
        log::warn!(
            "app {name} ({}): the configuration names it {configured_as:?}, its former name; \
             its name is now {name:?} ([apps.{name}], --mount {name}=...)",
            file.display()
        );
    }
    let wanted = mounts
        .get(&configured_as)
        .map(String::as_str)
        .unwrap_or(module.default_mount().as_str());
    let mount = normalise_mount(wanted).ok_or_else(|| LoadError::InvalidMount {
        app: name.clone(),
        wanted: wanted.to_string(),
    })?;
    mount_free(&name, wanted, &mount, taken)?;
    Ok(LoadedApp {
        // The registry gives it its counters slot.
        slot: 0,
        generation: 0,
        name,
        formerly,
        configured_as,
        version: module.version().to_string(),
        mount,
        file: file.to_path_buf(),
        settings: Arc::from("{}"),
        limits: AppLimits::default(),
        digest: None,
        module,
        constructed: AtomicBool::new(false),
    })
}

/// An app whose module lives in this binary (no library file), for the
/// host's own tests: mounted at `mount` (normalised), counted in slot 0,
/// never constructed (so never retired).
#[cfg(test)]
pub fn in_process(module: AppModuleRef, mount: &str, limits: AppLimits) -> LoadedApp {
    LoadedApp {
        slot: 0,
        generation: 1,
        name: module.name().to_string(),
        formerly: Vec::new(),
        configured_as: module.name().to_string(),
        version: module.version().to_string(),
        mount: normalise_mount(mount).unwrap_or_default(),
        file: PathBuf::new(),
        settings: Arc::from("{}"),
        limits,
        digest: None,
        module,
        constructed: AtomicBool::new(false),
    }
}

/// Why abi_stable refused a library, with the first layout difference
/// when its layout is not the host's.
#[derive(Debug)]
pub struct OpenError {
    pub error: LibraryError,
    first: Option<Box<AbiMismatch>>,
}

/// Maps the library at `path` and checks its ABI without calling the
/// app's constructor: what the host does before `init`, and all the load
/// probe (`probe.rs`) does. First the app-api version the plugin was built
/// against (`compatible`), then abi_stable's layout check of the root
/// module and everything it reaches.
pub fn open_module(path: &Path) -> Result<AppModuleRef, OpenError> {
    let header = lib_header_from_path(path).map_err(|error| OpenError { error, first: None })?;
    let version = |strings| {
        VersionNumber::new(strings).map_err(|e| OpenError {
            error: LibraryError::ParseVersionError(e),
            first: None,
        })
    };
    let host = version(AppModuleRef::VERSION_STRINGS)?;
    let plugin = version(header.version_strings())?;
    if !compatible(host, plugin) {
        return Err(OpenError {
            error: LibraryError::IncompatibleVersionNumber {
                library_name: AppModuleRef::NAME,
                expected_version: host,
                actual_version: plugin,
            },
            first: None,
        });
    }
    // The version is checked above (a stricter rule than abi_stable's own,
    // which `init_root_module` would apply): only the layouts remain, where
    // an earlier app-api's shorter prefix types are accepted.
    stoa_app_api::check::root_module(header).map_err(|error| {
        let first = match &error {
            LibraryError::AbiInstability(_) => header.layout().and_then(|found| {
                abi_report::first_mismatch(<AppModuleRef as StableAbi>::LAYOUT, found).map(Box::new)
            }),
            _ => None,
        };
        OpenError { error, first }
    })
}

/// Whether a host on app-api `host` loads a plugin built against app-api
/// `plugin` (app-api's COMPATIBILITY.md): the same line (`0.y` before 1.0,
/// the major after) and a plugin no newer than the host, whose prefix
/// types then hold every field the plugin may read.
pub fn compatible(host: VersionNumber, plugin: VersionNumber) -> bool {
    let same_line = if host.major == 0 {
        plugin.major == 0 && plugin.minor == host.minor
    } else {
        plugin.major == host.major
    };
    let key = |v: VersionNumber| (v.major, v.minor, v.patch);
    same_line && key(plugin) <= key(host)
}

/// Refuses `mount` (the normalised `wanted`) for app `name` if one of
/// `taken` holds it.
pub fn mount_free(
    name: &str,
    wanted: &str,
    mount: &str,
    taken: &[Arc<LoadedApp>],
) -> Result<(), LoadError> {
    match taken.iter().find(|a| a.mount == mount) {
        Some(other) => Err(LoadError::MountTaken {
            app: name.to_string(),
            wanted: wanted.to_string(),
            other: other.name.clone(),
            other_file: other.file.clone(),
        }),
        None => Ok(()),
    }
}

/// What an abi_stable error refuses; the full layout report (many lines)
/// goes to the debug log.
pub fn describe(file: &Path, e: &OpenError) -> LibraryRefusal {
    match &e.error {
        LibraryError::OpenError { err, .. } => LibraryRefusal::NotLoadable(err.to_string()),
        LibraryError::GetSymbolError { .. } => LibraryRefusal::NotStoaApp,
        LibraryError::IncompatibleVersionNumber {
            expected_version,
            actual_version,
            ..
        } => LibraryRefusal::AbiVersion {
            plugin: actual_version.to_string(),
            host: expected_version.to_string(),
        },
        LibraryError::AbiInstability(report) => {
            log::debug!("layout report for {}:\n{report}", file.display());
            LibraryRefusal::AbiLayout {
                first: e.first.as_deref().cloned(),
                api: AppModuleRef::VERSION_STRINGS.version.to_string(),
            }
        }
        LibraryError::InvalidAbiHeader(h) => LibraryRefusal::AbiHeader(format!("{h:?}")),
        other => {
            let text = other.to_string();
            log::debug!("load error for {}:\n{text}", file.display());
            let first = text.lines().next().unwrap_or("unknown load error");
            LibraryRefusal::Other(first.to_string())
        }
    }
}

/// `/x/` -> `/x`, `/` -> `` ; `None` if it does not start with `/`.
pub fn normalise_mount(prefix: &str) -> Option<String> {
    if !prefix.starts_with('/') || prefix.contains(['?', '#', ' ']) {
        return None;
    }
    Some(prefix.trim_end_matches('/').to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mounts_normalise() {
        assert_eq!(normalise_mount("/").as_deref(), Some(""));
        assert_eq!(normalise_mount("/a/").as_deref(), Some("/a"));
        assert_eq!(normalise_mount("a"), None);
    }

    #[test]
    fn versions_are_compatible_on_one_line_up_to_the_hosts() {
        let v = |major, minor, patch| VersionNumber {
            major,
            minor,
            patch,
        };
        assert!(compatible(v(0, 2, 1), v(0, 2, 0)));
        assert!(compatible(v(0, 2, 1), v(0, 2, 1)));
        assert!(!compatible(v(0, 2, 1), v(0, 2, 2)), "a newer plugin");
        assert!(!compatible(v(0, 2, 1), v(0, 1, 0)), "another 0.minor");
        assert!(!compatible(v(0, 2, 1), v(0, 3, 0)));
        assert!(compatible(v(1, 3, 0), v(1, 0, 7)));
        assert!(!compatible(v(1, 3, 0), v(2, 0, 0)));
        assert!(!compatible(v(1, 3, 0), v(0, 3, 0)));
    }

    #[test]
    fn a_text_file_is_refused_with_its_name() {
        let dir = std::env::temp_dir().join(format!("stoa-loader-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("x.so");
        std::fs::write(&file, "not a library").unwrap();
        let err = load_file(
            &file,
            Path::new("shown.so"),
            &HashMap::new(),
            |_| false,
            &[],
        )
        .err()
        .unwrap()
        .to_string();
        assert!(err.contains("not a loadable shared library"), "{err}");
        assert!(err.contains("shown.so") && !err.contains("/x.so"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

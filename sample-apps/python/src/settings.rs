//! The app's `[apps.python.settings]`: which Python applications to serve,
//! through which interface, at which mount, and where Python finds them.
//! (Which peers may set the scheme and the client address through
//! `X-Forwarded-Proto`/`-For` is the host's `--trusted-proxy`: the
//! request arrives with both resolved.)
//!
//! One application: `module`, `interface`, `lifespan` and `python_path`
//! at the top. Several, side by side in the one interpreter: an array of
//! tables `[[apps.python.settings.apps]]`, each with its `mount` under the
//! bridge's own and the same keys; a top-level `python_path` is shared.

use stoa_app_api::{Settings, SettingsError};

/// The interface a Python application speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interface {
    /// PEP 3333: `application(environ, start_response)`.
    Wsgi,
    /// ASGI 3.0: `async def application(scope, receive, send)`.
    Asgi,
}

/// Whether an ASGI application's lifespan protocol runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lifespan {
    /// Runs it; an application that raises before completing startup is
    /// taken as not supporting it (logged), as uvicorn's `auto` does.
    Auto,
    /// Runs it; any failure refuses the application.
    On,
    /// Never sends the lifespan scope.
    Off,
}

/// One Python application.
#[derive(Debug, Clone, PartialEq)]
pub struct AppEntry {
    /// Where it is mounted under the bridge's own mount: `""` for all of
    /// it, else `/segment[/segment...]` (no trailing slash).
    pub mount: String,
    /// The module to import (`mysite.wsgi`).
    pub module: String,
    /// The callable's name in it (`application`, the default).
    pub callable: String,
    pub interface: Interface,
    pub lifespan: Lifespan,
    /// Its own directories, put in front of `sys.path` after the shared ones.
    pub python_path: Vec<String>,
}

impl AppEntry {
    /// `module:callable`, as the messages name the application.
    pub fn target(&self) -> String {
        format!("{}:{}", self.module, self.callable)
    }
}

/// The settings, read and checked by the constructor.
#[derive(Debug, Clone, PartialEq)]
pub struct BridgeSettings {
    /// Directories put in front of `sys.path`, in this order.
    pub python_path: Vec<String>,
    /// The applications, longest mount first.
    pub apps: Vec<AppEntry>,
}

/// The keys of the top level when it names one application.
const KNOWN: &[&str] = &["module", "interface", "lifespan", "python_path", "apps"];
/// The keys of one `[[apps.python.settings.apps]]` entry.
const ENTRY_KNOWN: &[&str] = &["mount", "module", "interface", "lifespan", "python_path"];

impl BridgeSettings {
    /// Reads the settings; an error names the setting.
    pub fn read(settings: &Settings) -> Result<BridgeSettings, SettingsError> {
        unknown_keys(settings, KNOWN, "")?;
        let python_path = settings.get_str_list("python_path")?.unwrap_or_default();
        let mut apps = match entries(settings)? {
            Some(list) => {
                if settings.get_str("module")?.is_some() {
                    return Err(SettingsError(
                        "settings `module` and `apps` exclude each other: one application at \
                         the top, or several in [[apps.python.settings.apps]]"
                            .to_string(),
                    ));
                }
                let mut apps = Vec::new();
                for (i, entry) in list.iter().enumerate() {
                    let at = format!("apps[{i}].");
                    let table = Settings::from_json(&entry.to_string())
                        .map_err(|e| SettingsError(format!("setting `apps[{i}]`: {e}")))?;
                    unknown_keys(&table, ENTRY_KNOWN, &at)?;
                    let mount = table.get_str("mount").map_err(|e| prefixed(&at, e))?;
                    let mount = mount.ok_or_else(|| {
                        SettingsError(format!(
                            "setting `{at}mount` is required: where the application is mounted \
                             under the bridge's mount (\"/api\", or \"/\" for the rest)"
                        ))
                    })?;
                    let mount = normalise_mount(mount).map_err(|why| {
                        SettingsError(format!("setting `{at}mount`: {why}, got {mount:?}"))
                    })?;
                    apps.push(entry_of(&table, mount, &at)?);
                }
                apps
            }
            None => vec![entry_of(settings, String::new(), "")?],
        };
        for (i, app) in apps.iter().enumerate() {
            if apps[..i].iter().any(|a| a.mount == app.mount) {
                return Err(SettingsError(format!(
                    "setting `apps`: two applications are mounted at {:?} ({} and {})",
                    display_mount(&app.mount),
                    apps[..i]
                        .iter()
                        .find(|a| a.mount == app.mount)
                        .map(AppEntry::target)
                        .unwrap_or_default(),
                    app.target()
                )));
            }
        }
        apps.sort_by_key(|a| std::cmp::Reverse(a.mount.len()));
        Ok(BridgeSettings { python_path, apps })
    }
}

/// The `apps` array, if given.
fn entries(settings: &Settings) -> Result<Option<Vec<serde_json::Value>>, SettingsError> {
    let table: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(settings.raw_json()).unwrap_or_default();
    match table.get("apps") {
        None => Ok(None),
        Some(serde_json::Value::Array(list)) if !list.is_empty() => {
            if let Some(i) = list.iter().position(|e| !e.is_object()) {
                return Err(SettingsError(format!(
                    "setting `apps[{i}]` must be a table ([[apps.python.settings.apps]])"
                )));
            }
            Ok(Some(list.clone()))
        }
        Some(_) => Err(SettingsError(
            "setting `apps` must be a non-empty array of tables ([[apps.python.settings.apps]])"
                .to_string(),
        )),
    }
}

/// One application's keys from `table` (the top level or an entry).
fn entry_of(table: &Settings, mount: String, at: &str) -> Result<AppEntry, SettingsError> {
    let target = table.get_str("module").map_err(|e| prefixed(at, e))?;
    let target = target.ok_or_else(|| {
        SettingsError(format!(
            "setting `{at}module` is required: the application as \"package.module:callable\" \
             (e.g. \"mysite.wsgi:application\")"
        ))
    })?;
    let (module, callable) = match target.split_once(':') {
        Some((m, c)) => (m.trim(), c.trim()),
        None => (target.trim(), "application"),
    };
    if module.is_empty() || callable.is_empty() {
        return Err(SettingsError(format!(
            "setting `{at}module`: expected \"package.module:callable\", got {target:?}"
        )));
    }
    let interface = match table.get_str("interface").map_err(|e| prefixed(at, e))? {
        None | Some("wsgi") => Interface::Wsgi,
        Some("asgi") => Interface::Asgi,
        Some(other) => {
            return Err(SettingsError(format!(
                "setting `{at}interface`: expected \"wsgi\" or \"asgi\", got {other:?}"
            )))
        }
    };
    let lifespan = match table.get_str("lifespan").map_err(|e| prefixed(at, e))? {
        None | Some("auto") => Lifespan::Auto,
        Some("on") => Lifespan::On,
        Some("off") => Lifespan::Off,
        Some(other) => {
            return Err(SettingsError(format!(
                "setting `{at}lifespan`: expected \"auto\", \"on\" or \"off\", got {other:?}"
            )))
        }
    };
    if interface == Interface::Wsgi && table.get_str("lifespan")?.is_some() {
        return Err(SettingsError(format!(
            "setting `{at}lifespan` applies to ASGI applications only (set `{at}interface = \
             \"asgi\"`, or remove it)"
        )));
    }
    let python_path = match at {
        "" => Vec::new(),
        _ => table
            .get_str_list("python_path")
            .map_err(|e| prefixed(at, e))?
            .unwrap_or_default(),
    };
    Ok(AppEntry {
        mount,
        module: module.to_string(),
        callable: callable.to_string(),
        interface,
        lifespan,
        python_path,
    })
}

/// `/api/` and `/api` are `/api`; `/` and `` are the whole mount.
fn normalise_mount(mount: &str) -> Result<String, &'static str> {
    let trimmed = mount.trim_end_matches('/');
    if trimmed.is_empty() {
        return Ok(String::new());
    }
    if !trimmed.starts_with('/') {
        return Err("a mount starts with `/`");
    }
    if trimmed.contains("//") || trimmed.contains(['?', '#', '%']) {
        return Err("a mount is plain path segments");
    }
    Ok(trimmed.to_string())
}

/// A mount as the messages write it.
pub fn display_mount(mount: &str) -> &str {
    if mount.is_empty() {
        "/"
    } else {
        mount
    }
}

fn prefixed(at: &str, e: SettingsError) -> SettingsError {
    if at.is_empty() {
        return e;
    }
    SettingsError(e.0.replacen("setting `", &format!("setting `{at}"), 1))
}

/// Refuses a key of `settings` not in `known`, naming the nearest known one.
fn unknown_keys(settings: &Settings, known: &[&str], at: &str) -> Result<(), SettingsError> {
    for key in settings_keys(settings) {
        if !known.contains(&key.as_str()) {
            return Err(SettingsError(format!(
                "unknown setting `{at}{key}` (known: {})",
                known.join(", ")
            )));
        }
    }
    Ok(())
}

/// The top-level keys of the settings table.
fn settings_keys(settings: &Settings) -> Vec<String> {
    serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(settings.raw_json())
        .map(|table| table.keys().cloned().collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(json: &str) -> Result<BridgeSettings, String> {
        let settings = Settings::from_json(json).map_err(|e| e.to_string())?;
        BridgeSettings::read(&settings).map_err(|e| e.to_string())
    }

    #[test]
    fn one_application() {
        let s = read(r#"{"module":"mysite.wsgi:app","python_path":["/srv"]}"#).unwrap();
        let app = &s.apps[0];
        assert_eq!(
            (app.module.as_str(), app.callable.as_str()),
            ("mysite.wsgi", "app")
        );
        assert_eq!((app.interface, app.mount.as_str()), (Interface::Wsgi, ""));
        assert_eq!(s.python_path, ["/srv"]);
        let s = read(r#"{"module":"hello"}"#).unwrap();
        assert_eq!(s.apps[0].callable, "application");
        let s = read(r#"{"module":"m:app","interface":"asgi","lifespan":"on"}"#).unwrap();
        assert_eq!(
            (s.apps[0].interface, s.apps[0].lifespan),
            (Interface::Asgi, Lifespan::On)
        );
        assert!(read("{}").unwrap_err().contains("`module` is required"));
        assert!(read(r#"{"module":"x:"}"#)
            .unwrap_err()
            .contains("setting `module`"));
        assert!(read(r#"{"module":"x","modul":"y"}"#)
            .unwrap_err()
            .contains("unknown setting `modul`"));
        let e = read(r#"{"module":"x","interface":"rsgi"}"#).unwrap_err();
        assert!(
            e.contains("setting `interface`") && e.contains("\"asgi\""),
            "{e}"
        );
        let e = read(r#"{"module":"x","lifespan":"on"}"#).unwrap_err();
        assert!(e.contains("`lifespan` applies to ASGI"), "{e}");
    }

    #[test]
    fn several_applications() {
        let s = read(
            r#"{"python_path":["/a"],"apps":[
                {"mount":"/","module":"site.wsgi"},
                {"mount":"/api/","module":"fast:app","interface":"asgi","python_path":["/b"]}]}"#,
        )
        .unwrap();
        assert_eq!(s.apps.len(), 2);
        assert_eq!(
            (s.apps[0].mount.as_str(), s.apps[0].interface),
            ("/api", Interface::Asgi)
        );
        assert_eq!(s.apps[0].python_path, ["/b"]);
        assert_eq!(s.apps[1].mount, "");
        let e = read(r#"{"module":"x","apps":[{"mount":"/","module":"y"}]}"#).unwrap_err();
        assert!(e.contains("exclude each other"), "{e}");
        let e = read(r#"{"apps":[{"module":"y"}]}"#).unwrap_err();
        assert!(e.contains("`apps[0].mount` is required"), "{e}");
        let e = read(r#"{"apps":[{"mount":"api","module":"y"}]}"#).unwrap_err();
        assert!(e.contains("`apps[0].mount`"), "{e}");
        let e = read(r#"{"apps":[{"mount":"/a","module":"y","interface":"x"}]}"#).unwrap_err();
        assert!(e.contains("`apps[0].interface`"), "{e}");
        let e = read(r#"{"apps":[{"mount":"/a","module":"y","extra":1}]}"#).unwrap_err();
        assert!(e.contains("unknown setting `apps[0].extra`"), "{e}");
        let e = read(r#"{"apps":[{"mount":"/a","module":"y"},{"mount":"/a/","module":"z"}]}"#)
            .unwrap_err();
        assert!(e.contains("two applications are mounted at \"/a\""), "{e}");
        assert!(read(r#"{"apps":[]}"#).unwrap_err().contains("non-empty"));
    }
}

//! The app-api this host is built with, as `stoa new-app` writes it into a
//! new project: its files (embedded by `build.rs`), its manifest made
//! standalone (the workspace's inherited keys filled in), and a Cargo.lock
//! that pins its dependencies to the versions the host itself was built
//! with, so that `cargo build --offline` finds them in the local registry
//! cache of any machine that built the host.

use toml::{Table, Value};

/// Every file of app-api: (path inside it, text).
pub const FILES: &[(&str, &str)] = include!(concat!(env!("OUT_DIR"), "/app_api_files.rs"));

/// The workspace manifest: the values app-api inherits.
const WORKSPACE: &str = include_str!("../../../../Cargo.toml");

/// The workspace's lock file: the versions the host was built with.
const LOCK: &str = include_str!("../../../../Cargo.lock");

/// The folder, inside a new project, the app-api is written to.
pub const FOLDER: &str = "stoa-app-api";

fn parse(what: &str, text: &str) -> Result<Table, String> {
    text.parse::<Table>()
        .map_err(|e| format!("the embedded {what} does not parse: {e}"))
}

/// The embedded app-api's version.
pub fn version() -> Result<String, String> {
    let manifest = parse("app-api manifest", file("Cargo.toml")?)?;
    manifest
        .get("package")
        .and_then(|p| p.get("version"))
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| "the embedded app-api manifest has no package.version".to_string())
}

fn file(path: &str) -> Result<&'static str, String> {
    FILES
        .iter()
        .find(|(p, _)| *p == path)
        .map(|(_, text)| *text)
        .ok_or_else(|| format!("the embedded app-api has no {path}"))
}

/// The files to write under [`FOLDER`]: app-api's, its manifest standalone.
pub fn files() -> Result<Vec<(&'static str, String)>, String> {
    let workspace = parse("workspace manifest", WORKSPACE)?;
    FILES
        .iter()
        .map(|&(path, text)| {
            let text = if path == "Cargo.toml" {
                standalone(text, &workspace)?
            } else {
                text.to_string()
            };
            Ok((path, text))
        })
        .collect()
}

/// The workspace's value of dependency `name`, as an inline TOML value.
pub fn workspace_dependency(name: &str) -> Result<String, String> {
    let workspace = parse("workspace manifest", WORKSPACE)?;
    inherited(&workspace, "dependencies", name)
}

fn inherited(workspace: &Table, section: &str, key: &str) -> Result<String, String> {
    workspace
        .get("workspace")
        .and_then(|w| w.get(section))
        .and_then(|s| s.get(key))
        .map(inline)
        .ok_or_else(|| format!("the workspace manifest has no workspace.{section}.{key}"))
}

/// `manifest` with each `KEY.workspace = true` line replaced by the
/// workspace's value (`[package]` keys and dependencies).
fn standalone(manifest: &str, workspace: &Table) -> Result<String, String> {
    let mut out = String::new();
    let mut section = String::new();
    for line in manifest.lines() {
        let trimmed = line.trim();
        if let Some(name) = trimmed.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
            section = name.trim().to_string();
        }
        match trimmed.strip_suffix(".workspace = true") {
            Some(key) => {
                let from = match section.as_str() {
                    "package" => "package",
                    s if s.ends_with("dependencies") => "dependencies",
                    s => return Err(format!("app-api inherits {key} in [{s}]")),
                };
                out.push_str(&format!("{key} = {}\n", inherited(workspace, from, key)?));
            }
            None if trimmed.contains("workspace") && !trimmed.starts_with('#') => {
                return Err(format!(
                    "app-api's manifest line {trimmed:?} is not standalone"
                ));
            }
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    Ok(out)
}

/// A TOML value on one line.
fn inline(value: &Value) -> String {
    match value {
        Value::String(s) => toml_string(s),
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(inline).collect();
            format!("[{}]", items.join(", "))
        }
        Value::Table(table) => {
            let items: Vec<String> = table
                .iter()
                .map(|(k, v)| format!("{k} = {}", inline(v)))
                .collect();
            format!("{{ {} }}", items.join(", "))
        }
        other => other.to_string(),
    }
}

/// A TOML basic string.
pub fn toml_string(text: &str) -> String {
    let escaped = text.replace('\\', "\\\\").replace('"', "\\\"");
    format!("\"{escaped}\"")
}

/// One `[[package]]` of a lock file.
#[derive(Clone, Debug)]
struct Locked {
    name: String,
    version: String,
    source: Option<String>,
    checksum: Option<String>,
    /// (name, version) of each dependency.
    dependencies: Vec<(String, String)>,
}

/// The lock file of a new app `name` (version 0.1.0) that depends on
/// app-api and abi_stable: app-api's and abi_stable's dependencies at the
/// versions of the host's own lock file, in cargo's own layout (so cargo
/// leaves it as it is).
pub fn lock(name: &str) -> Result<String, String> {
    let lock = parse("Cargo.lock", LOCK)?;
    let format = lock
        .get("version")
        .and_then(Value::as_integer)
        .ok_or("the embedded Cargo.lock has no version")?;
    let all = packages(&lock)?;
    let find = |dep: &str| -> Result<&Locked, String> {
        let mut words = dep.split(' ');
        let wanted = words.next().unwrap_or_default();
        let version = words.next();
        let mut matching = all
            .iter()
            .filter(|p| p.name == wanted && version.is_none_or(|v| p.version == v));
        match (matching.next(), matching.next()) {
            (Some(p), None) => Ok(p),
            _ => Err(format!("the embedded Cargo.lock has no single {dep}")),
        }
    };
    let app_api = find("stoa-app-api")?.clone();
    let abi_stable = find("abi_stable")?;
    let root = Locked {
        name: name.to_string(),
        version: "0.1.0".to_string(),
        source: None,
        checksum: None,
        dependencies: vec![
            (abi_stable.name.clone(), abi_stable.version.clone()),
            (app_api.name.clone(), app_api.version.clone()),
        ],
    };
    // The closure of both over the host's lock.
    let mut kept: Vec<Locked> = vec![root, app_api];
    let mut next = 0;
    while let Some(package) = kept.get(next).cloned() {
        next += 1;
        for (dep, version) in &package.dependencies {
            if !kept.iter().any(|p| &p.name == dep && &p.version == version) {
                kept.push(find(&format!("{dep} {version}"))?.clone());
            }
        }
    }
    kept.sort_by(|a, b| (&a.name, semver_key(&a.version)).cmp(&(&b.name, semver_key(&b.version))));
    Ok(lock_text(format, &kept))
}

/// The text of a lock file of `format` listing `kept` in order, as cargo
/// writes it (a dependency named with its version where two versions of
/// it are locked).
fn lock_text(format: i64, kept: &[Locked]) -> String {
    let several = |name: &str| kept.iter().filter(|p| p.name == name).count() > 1;
    let mut out = format!(
        "# This file is automatically @generated by Cargo.\n\
         # It is not intended for manual editing.\n\
         version = {format}\n"
    );
    for p in kept {
        out.push_str(&format!(
            "\n[[package]]\nname = {}\nversion = {}\n",
            toml_string(&p.name),
            toml_string(&p.version)
        ));
        if let Some(source) = &p.source {
            out.push_str(&format!("source = {}\n", toml_string(source)));
        }
        if let Some(checksum) = &p.checksum {
            out.push_str(&format!("checksum = {}\n", toml_string(checksum)));
        }
        if !p.dependencies.is_empty() {
            let mut deps: Vec<String> = p
                .dependencies
                .iter()
                .map(|(n, v)| {
                    if several(n) {
                        format!("{n} {v}")
                    } else {
                        n.clone()
                    }
                })
                .collect();
            deps.sort();
            out.push_str("dependencies = [\n");
            for d in deps {
                out.push_str(&format!(" {},\n", toml_string(&d)));
            }
            out.push_str("]\n");
        }
    }
    out
}

/// A version's order as cargo sorts them (numeric parts, then the rest).
fn semver_key(version: &str) -> (Vec<u64>, String) {
    let (core, rest) = version.split_once(['-', '+']).unwrap_or((version, ""));
    let numbers = core.split('.').map(|n| n.parse().unwrap_or(0)).collect();
    (numbers, rest.to_string())
}

/// The packages of a parsed lock file, each dependency resolved to a version.
fn packages(lock: &Table) -> Result<Vec<Locked>, String> {
    let list = lock
        .get("package")
        .and_then(Value::as_array)
        .ok_or("the embedded Cargo.lock has no [[package]]")?;
    let text = |t: &Table, key: &str| t.get(key).and_then(Value::as_str).map(str::to_string);
    let mut raw = Vec::new();
    for item in list {
        let t = item.as_table().ok_or("a [[package]] is not a table")?;
        let (Some(name), Some(version)) = (text(t, "name"), text(t, "version")) else {
            return Err("a [[package]] of the embedded Cargo.lock has no name or version".into());
        };
        let deps: Vec<String> = t
            .get("dependencies")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        raw.push((name, version, text(t, "source"), text(t, "checksum"), deps));
    }
    let version_of = |dep: &str| -> Result<(String, String), String> {
        let mut words = dep.split(' ');
        let name = words.next().unwrap_or_default().to_string();
        if let Some(v) = words.next() {
            return Ok((name, v.to_string()));
        }
        let mut found = raw.iter().filter(|r| r.0 == name);
        match (found.next(), found.next()) {
            (Some(r), None) => Ok((name, r.1.clone())),
            _ => Err(format!("the embedded Cargo.lock names {dep} ambiguously")),
        }
    };
    raw.iter()
        .map(|(name, version, source, checksum, deps)| {
            Ok(Locked {
                name: name.clone(),
                version: version.clone(),
                source: source.clone(),
                checksum: checksum.clone(),
                dependencies: deps
                    .iter()
                    .map(|d| version_of(d))
                    .collect::<Result<_, _>>()?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// The embedded copy is the app-api this host is built with, file for
    /// file (a file added to or removed from app-api, or changed, shows).
    #[test]
    fn the_embedded_app_api_is_the_one_built_with() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../app-api");
        let mut on_disk = Vec::new();
        let mut dirs = vec![root.clone()];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                if name == "target" || name.starts_with('.') {
                    continue;
                }
                if path.is_dir() {
                    dirs.push(path);
                } else {
                    let relative = path
                        .strip_prefix(&root)
                        .unwrap()
                        .to_string_lossy()
                        .into_owned();
                    on_disk.push((relative, std::fs::read_to_string(&path).unwrap()));
                }
            }
        }
        on_disk.sort();
        let embedded: Vec<(String, String)> = FILES
            .iter()
            .map(|(p, t)| (p.to_string(), t.to_string()))
            .collect();
        assert_eq!(embedded, on_disk);
        assert!(FILES.iter().any(|(p, _)| *p == "src/lib.rs"));
        use abi_stable::library::RootModule;
        let built = <stoa_app_api::abi::AppModuleRef as RootModule>::VERSION_STRINGS;
        assert_eq!(version().unwrap(), built.version);
    }

    #[test]
    fn the_manifest_is_standalone() {
        let files = files().unwrap();
        let manifest = &files.iter().find(|(p, _)| *p == "Cargo.toml").unwrap().1;
        assert!(!manifest.contains(".workspace"), "{manifest}");
        let parsed: Table = manifest.parse().unwrap();
        let deps = parsed["dependencies"].as_table().unwrap();
        assert_eq!(deps["abi_stable"]["version"].as_str(), Some("0.11"));
        assert_eq!(
            deps["abi_stable"]["default-features"].as_bool(),
            Some(false)
        );
        assert_eq!(parsed["package"]["edition"].as_str(), Some("2021"));
    }

    #[test]
    fn the_lock_pins_the_hosts_versions() {
        let text = lock("greet").unwrap();
        let parsed: Table = text.parse().unwrap();
        let ours = packages(&parsed).unwrap();
        let host = packages(&parse("Cargo.lock", LOCK).unwrap()).unwrap();
        for p in &ours {
            if p.name == "greet" {
                assert_eq!(p.dependencies.len(), 2);
                continue;
            }
            let same = host
                .iter()
                .find(|h| h.name == p.name && h.version == p.version)
                .unwrap_or_else(|| panic!("{} {} is not the host's", p.name, p.version));
            assert_eq!(same.checksum, p.checksum);
        }
        for needed in ["abi_stable", "stoa-app-api", "serde", "log", "libloading"] {
            assert!(ours.iter().any(|p| p.name == needed), "{needed}:\n{text}");
        }
        // The host's own crates stay out.
        assert!(
            !ours.iter().any(|p| p.name == "stoa" || p.name == "mio"),
            "{text}"
        );
    }
}

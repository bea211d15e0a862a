//! `stoa new-app NAME [--dir DIR] [--app-api PATH]`: writes a ready app
//! plugin crate (Cargo.toml with the crate types and dependencies a plugin
//! needs, an app with a synchronous and a deferred route, their unit tests,
//! a README), to be built and dropped into an apps directory. The crate
//! carries this host's own app-api (`stoa-app-api/`, written from the copy
//! embedded in the binary) and a Cargo.lock pinning its dependencies to the
//! versions the host was built with: it builds offline wherever the host was
//! built, and what it builds loads in this host.

mod embedded;

use clap::Parser;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The word after `stoa` that selects this subcommand.
pub const SUBCOMMAND: &str = "new-app";

/// Write a new Stoa app plugin crate.
///
/// The crate carries this stoa's own app-api (`stoa-app-api/`) and a
/// Cargo.lock pinning its dependencies to the versions this host was built
/// with: it needs no checkout, builds with `cargo build --offline` on any
/// machine that built the host, and its library loads in this host.
#[derive(Parser, Debug)]
#[command(name = "stoa new-app")]
struct NewApp {
    /// The app's name: its crate, its `[apps.NAME]` table and its mount
    /// prefix `/NAME` (letters, digits, `-` and `_`, starting with a letter).
    /// Pick a prefix no other app uses, nor a route of the app at `/`
    /// (`stoa check` notes a mount that hides another app's paths).
    name: String,

    /// Where to write the crate (default: ./NAME); must not exist or be empty.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,

    /// Depend on the stoa-app-api in this folder (an absolute `path`
    /// dependency) instead of writing this stoa's own app-api into the new
    /// crate (`stoa-app-api/`, the default: the exact ABI of this host).
    #[arg(long, value_name = "PATH")]
    app_api: Option<String>,
}

/// Runs the subcommand with the arguments after `new-app`.
pub fn main(args: impl IntoIterator<Item = OsString>) -> ExitCode {
    let argv = std::iter::once(OsString::from("stoa new-app")).chain(args);
    let options = match NewApp::try_parse_from(argv) {
        Ok(options) => options,
        Err(e) => e.exit(),
    };
    match create(&options) {
        Ok(summary) => {
            print!("{summary}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("stoa new-app: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Writes the crate; what to do next, or why nothing was written.
fn create(options: &NewApp) -> Result<String, String> {
    let name = options.name.as_str();
    check_name(name)?;
    let dir = options.dir.clone().unwrap_or_else(|| PathBuf::from(name));
    check_dir(&dir)?;
    let app_api = app_api_dependency(options.app_api.as_deref())?;
    let lib = name.replace('-', "_");
    let abi_stable = embedded::workspace_dependency("abi_stable")?;
    let fill = |template: &str| {
        template
            .replace("{name}", name)
            .replace("{lib}", &lib)
            .replace("{type}", &type_name(name))
            .replace("{app_api}", &app_api.dependency)
            .replace("{abi_stable}", &abi_stable)
            .replace("{app_api_version}", &app_api.version)
    };
    let mut files: Vec<(String, String)> = vec![
        (
            "Cargo.toml".into(),
            fill(include_str!("new_app/Cargo.toml.tmpl")),
        ),
        ("Cargo.lock".into(), embedded::lock(name)?),
        (
            "src/lib.rs".into(),
            fill(include_str!("new_app/lib.rs.tmpl")),
        ),
        (
            "README.md".into(),
            fill(include_str!("new_app/README.md.tmpl")),
        ),
        (
            ".gitignore".into(),
            fill(include_str!("new_app/gitignore.tmpl")),
        ),
    ];
    if options.app_api.is_none() {
        for (path, text) in embedded::files()? {
            files.push((format!("{}/{path}", embedded::FOLDER), text));
        }
    }
    for (file, text) in &files {
        let path = dir.join(file);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
        }
        std::fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    let shown = dir.display();
    Ok(format!(
        "created app {name} in {shown} (stoa-app-api {}, {})\n\
         next:\n  \
         cd {shown}\n  \
         cargo test\n  \
         cargo build --release\n  \
         cp target/release/lib{lib}.so APPS_DIR/   # served at /{name} and /{name}/later\n  \
         stoa check --apps APPS_DIR               # the mounts, and any route one hides\n  \
         cargo doc -p stoa-app-api --open         # the plugin author's guide\n",
        app_api.version, app_api.from
    ))
}

/// Words a crate (its library) cannot be named.
const RESERVED: &[&str] = &[
    "as",
    "async",
    "await",
    "break",
    "const",
    "continue",
    "crate",
    "dyn",
    "else",
    "enum",
    "extern",
    "false",
    "fn",
    "for",
    "if",
    "impl",
    "in",
    "let",
    "loop",
    "match",
    "mod",
    "move",
    "mut",
    "pub",
    "ref",
    "return",
    "self",
    "static",
    "struct",
    "super",
    "trait",
    "true",
    "type",
    "unsafe",
    "use",
    "where",
    "while",
    "abstract",
    "become",
    "box",
    "do",
    "final",
    "macro",
    "override",
    "priv",
    "try",
    "typeof",
    "unsized",
    "virtual",
    "yield",
    "test",
    "std",
    "core",
    "alloc",
    "proc_macro",
];

/// A crate name that also makes a good app name and mount prefix.
fn check_name(name: &str) -> Result<(), String> {
    let rule = "letters, digits, `-` and `_`, starting with a letter, at most 64 characters";
    let starts_well = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic());
    let chars_ok = name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !starts_well || !chars_ok || name.len() > 64 {
        return Err(format!("{name:?} is not a valid app name ({rule})"));
    }
    if RESERVED.contains(&name.replace('-', "_").as_str()) {
        return Err(format!(
            "{name:?} is a reserved word in Rust; choose another app name"
        ));
    }
    Ok(())
}

/// The target must not exist, or be an empty directory.
fn check_dir(dir: &Path) -> Result<(), String> {
    let shown = dir.display();
    match std::fs::read_dir(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("cannot use {shown}: {e}")),
        Ok(mut entries) => match entries.next() {
            None => Ok(()),
            Some(_) => Err(format!(
                "{shown} exists and is not empty; choose another --dir (nothing was written)"
            )),
        },
    }
}

/// The new crate's `stoa-app-api` dependency.
#[derive(Debug)]
struct AppApi {
    /// Its TOML value in the manifest.
    dependency: String,
    version: String,
    /// Where it comes from, for the summary.
    from: String,
}

/// This host's own app-api, written into the crate; or the one in folder
/// `given`. A URL is refused: a git dependency follows the repository, not
/// this host's ABI.
fn app_api_dependency(given: Option<&str>) -> Result<AppApi, String> {
    let ours = embedded::version()?;
    let Some(given) = given else {
        return Ok(AppApi {
            dependency: format!("{{ path = \"{}\" }}", embedded::FOLDER),
            version: ours,
            from: format!("this stoa's own, written to {}/", embedded::FOLDER),
        });
    };
    if given.contains("://") || given.starts_with("git@") {
        return Err(format!(
            "--app-api {given}: a git dependency is not pinned to this host's ABI \
             (it would follow the repository); leave --app-api out to get this stoa's \
             own app-api {ours}, or pass --app-api PATH (a folder)"
        ));
    }
    let manifest = Path::new(given).join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest).map_err(|e| {
        format!(
            "--app-api {given}: no stoa-app-api there ({}: {e}); pass its folder, \
             or leave --app-api out to get this stoa's own app-api {ours}",
            manifest.display()
        )
    })?;
    let parsed = text.parse::<toml::Table>().ok();
    let package = parsed.as_ref().and_then(|t| t.get("package"));
    let field = |key: &str| package.and_then(|p| p.get(key)).and_then(|v| v.as_str());
    if field("name") != Some("stoa-app-api") {
        return Err(format!(
            "--app-api {given}: {} is not stoa-app-api's manifest; pass its folder, \
             or leave --app-api out to get this stoa's own app-api {ours}",
            manifest.display()
        ));
    }
    let version = field("version").unwrap_or("(inherited)").to_string();
    let path = std::fs::canonicalize(given).map_err(|e| format!("cannot resolve {given}: {e}"))?;
    let path = path.display().to_string();
    Ok(AppApi {
        dependency: format!("{{ path = {} }}", embedded::toml_string(&path)),
        version,
        from: format!("at {path}"),
    })
}

/// `my-app` -> `MyApp`: the app's type in the generated code.
fn type_name(name: &str) -> String {
    let mut out = String::new();
    for part in name.split(['-', '_']).filter(|p| !p.is_empty()) {
        let mut chars = part.chars();
        if let Some(first) = chars.next() {
            out.push(first.to_ascii_uppercase());
            out.extend(chars);
        }
    }
    out.push_str("App");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        assert!(check_name("hello").is_ok());
        assert!(check_name("my-app_2").is_ok());
        for bad in ["", "2fast", "-x", "a b", "a/b", "héllo", &"x".repeat(65)] {
            let e = check_name(bad).unwrap_err();
            assert!(e.contains("is not a valid app name"), "{bad:?}: {e}");
        }
        assert!(check_name("self").unwrap_err().contains("reserved word"));
        assert_eq!(type_name("my-app_2"), "MyApp2App");
        assert_eq!(type_name("hello"), "HelloApp");
    }

    #[test]
    fn the_default_app_api_is_our_own_and_a_url_is_refused() {
        let ours = app_api_dependency(None).unwrap();
        assert_eq!(ours.dependency, "{ path = \"stoa-app-api\" }");
        assert_eq!(ours.version, embedded::version().unwrap());
        let e = app_api_dependency(Some("https://example.org/stoa.git")).unwrap_err();
        assert!(e.contains("not pinned to this host's ABI"), "{e}");
        let e = app_api_dependency(Some("/nonexistent/app-api")).unwrap_err();
        assert!(e.contains("no stoa-app-api there"), "{e}");
        let folder = concat!(env!("CARGO_MANIFEST_DIR"), "/../app-api");
        let given = app_api_dependency(Some(folder)).unwrap();
        assert!(
            given.dependency.starts_with("{ path = \"/"),
            "{}",
            given.dependency
        );
        assert_eq!(given.version, ours.version);
    }

    #[test]
    fn a_non_empty_dir_is_refused_and_nothing_written() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("keep"), "x").unwrap();
        let options = NewApp {
            name: "hello".into(),
            dir: Some(dir.path().to_path_buf()),
            app_api: None,
        };
        let e = create(&options).unwrap_err();
        assert!(e.contains("exists and is not empty"), "{e}");
        assert!(!dir.path().join("Cargo.toml").exists());
    }
}

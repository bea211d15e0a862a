//! `stoa new-app NAME [--dir DIR] [--app-api PATH|URL]`: writes a ready
//! app plugin crate (Cargo.toml with the crate types and dependencies a
//! plugin needs, an app with a synchronous and a deferred route, their unit
//! tests, a README), to be built and dropped into an apps directory.

use clap::Parser;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The word after `stoa` that selects this subcommand.
pub const SUBCOMMAND: &str = "new-app";

/// Where this binary was built from: its checkout's app-api, the default
/// dependency of a new app (a path dependency, absolute).
const BUILT_APP_API: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../app-api");

/// Write a new Stoa app plugin crate.
#[derive(Parser, Debug)]
#[command(name = "stoa new-app")]
struct NewApp {
    /// The app's name: its crate, its `[apps.NAME]` table and its mount
    /// prefix `/NAME` (letters, digits, `-` and `_`, starting with a letter).
    name: String,

    /// Where to write the crate (default: ./NAME); must not exist or be empty.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,

    /// The stoa-app-api to depend on: a path to its folder (a `path`
    /// dependency) or a git URL (a `git` dependency). Default: the app-api
    /// of the checkout this stoa was built from.
    #[arg(long, value_name = "PATH|URL")]
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
    let (dependency, from) = app_api_dependency(options.app_api.as_deref())?;
    let lib = name.replace('-', "_");
    let fill = |template: &str| {
        template
            .replace("{name}", name)
            .replace("{lib}", &lib)
            .replace("{type}", &type_name(name))
            .replace("{app_api}", &dependency)
    };
    let files = [
        ("Cargo.toml", fill(include_str!("new_app/Cargo.toml.tmpl"))),
        ("src/lib.rs", fill(include_str!("new_app/lib.rs.tmpl"))),
        ("README.md", fill(include_str!("new_app/README.md.tmpl"))),
        (".gitignore", fill(include_str!("new_app/gitignore.tmpl"))),
    ];
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
        "created app {name} in {shown} (stoa-app-api {from})\n\
         next:\n  \
         cd {shown}\n  \
         cargo test\n  \
         cargo build --release\n  \
         cp target/release/lib{lib}.so APPS_DIR/   # served at /{name} and /{name}/later\n  \
         cargo doc -p stoa-app-api --open         # the plugin author's guide\n"
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

/// The `stoa-app-api` dependency's TOML value, and what it names.
fn app_api_dependency(given: Option<&str>) -> Result<(String, String), String> {
    let given = given.unwrap_or(BUILT_APP_API);
    if given.contains("://") || given.starts_with("git@") {
        return Ok((
            format!("{{ git = {} }}", toml_string(given)),
            format!("from {given}"),
        ));
    }
    let manifest = Path::new(given).join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest).map_err(|e| {
        format!(
            "no stoa-app-api at {given} ({}: {e}); pass --app-api PATH (its folder) \
             or --app-api URL (a git repository)",
            manifest.display()
        )
    })?;
    if !text.contains("name = \"stoa-app-api\"") {
        return Err(format!(
            "{} is not stoa-app-api's manifest; pass --app-api PATH (its folder) or URL",
            manifest.display()
        ));
    }
    let path = std::fs::canonicalize(given).map_err(|e| format!("cannot resolve {given}: {e}"))?;
    let path = path.display().to_string();
    Ok((
        format!("{{ path = {} }}", toml_string(&path)),
        format!("at {path}"),
    ))
}

/// A TOML basic string.
fn toml_string(text: &str) -> String {
    let escaped = text.replace('\\', "\\\\").replace('"', "\\\"");
    format!("\"{escaped}\"")
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
    fn dependencies_are_path_or_git() {
        let (dep, _) = app_api_dependency(Some("https://example.org/stoa.git")).unwrap();
        assert_eq!(dep, "{ git = \"https://example.org/stoa.git\" }");
        let (dep, from) = app_api_dependency(None).unwrap();
        assert!(
            dep.starts_with("{ path = \"/") && dep.ends_with("app-api\" }"),
            "{dep}"
        );
        assert!(from.starts_with("at /"), "{from}");
        let e = app_api_dependency(Some("/nonexistent/app-api")).unwrap_err();
        assert!(e.contains("pass --app-api PATH"), "{e}");
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

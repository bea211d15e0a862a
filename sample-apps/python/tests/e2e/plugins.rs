//! The plugins the harness installs, by short name: this workspace's
//! `python` (the bridge), and the main workspace's `demo` (a native app served beside it),
//! built once per test process together with the `stoa` binary the harness
//! runs (`CARGO_BIN_EXE_stoa`, set by build.rs to the main workspace's
//! target directory).

use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The apps `Server::samples` would start (unused here: every test names
/// its apps).
pub const SAMPLE_APPS: &[&str] = &["python"];

/// The plugins' `.so` paths by short name, built on first use.
pub fn plugins() -> &'static HashMap<&'static str, PathBuf> {
    static PLUGINS: OnceLock<HashMap<&'static str, PathBuf>> = OnceLock::new();
    PLUGINS.get_or_init(|| {
        let here = Path::new(env!("CARGO_MANIFEST_DIR"));
        let root = here.join("../..");
        let mut found = HashMap::new();
        // The host and the demo app, in the main workspace's own target
        // directory (where build.rs told the harness the binary is).
        // In the test binary's own profile: a release run tests the
        // release host and plugins.
        let profile: &[&str] = if crate::harness::STOA.contains("/release/") {
            &["--release"]
        } else {
            &[]
        };
        let main_args = ["-p", "stoa", "-p", "demo", "--target-dir", "target"];
        let main = build(&root, &[&main_args[..], profile].concat());
        found.insert("demo", so_of(&main, "demo"));
        let bridge = build(here, &[&["--lib"][..], profile].concat());
        found.insert("python", so_of(&bridge, "stoa_python"));
        found
    })
}

/// `cargo build --message-format=json ARGS` in `dir`: cargo's messages.
fn build(dir: &Path, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO"))
        .current_dir(dir)
        .args(["build", "--message-format=json"])
        .args(args)
        .output()
        .expect("run cargo build");
    assert!(
        out.status.success(),
        "cargo build {args:?} in {} failed:\n{}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The `.so` cargo reports for the library target `target`.
fn so_of(messages: &str, target: &str) -> PathBuf {
    messages
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == target)
        .flat_map(|m| m["filenames"].as_array().cloned().unwrap_or_default())
        .filter_map(|f| f.as_str().map(PathBuf::from))
        .find(|f| f.extension().is_some_and(|e| e == "so"))
        .unwrap_or_else(|| panic!("cargo built no .so for {target}"))
}

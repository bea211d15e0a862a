//! The plugin libraries the suite installs: built once per test process
//! by a nested `cargo build` in the test binary's profile, their `.so`
//! paths taken from cargo's JSON messages.

use crate::harness::STOA;
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// Plugins the suite can install, by short name, and their cargo packages.
const PACKAGES: &[(&str, &str)] = &[
    ("hello-project", "hello-project"),
    ("article", "article"),
    ("environ", "environ"),
    ("demo", "demo"),
    ("misbehave", "stoa-test-misbehave"),
    ("not-stoa", "stoa-test-not-stoa"),
    ("wrong-abi", "stoa-test-wrong-abi"),
    ("old-abi", "stoa-test-old-abi"),
    ("hot-v1", "stoa-test-hot-v1"),
    ("hot-v2", "stoa-test-hot-v2"),
    ("abort-on-load", "stoa-test-abort-on-load"),
    ("slow-init", "stoa-test-slow-init"),
    ("stuck", "stoa-test-stuck"),
    ("crashy", "stoa-test-crashy"),
    ("renamed", "stoa-test-renamed"),
];

/// The three sample apps, as the README's first command installs them.
pub const SAMPLE_APPS: &[&str] = &["hello-project", "article", "environ"];

/// Builds every plugin once per test process (in the test binary's profile)
/// and returns their `.so` paths by short name.
pub fn plugins() -> &'static HashMap<&'static str, PathBuf> {
    static PLUGINS: OnceLock<HashMap<&'static str, PathBuf>> = OnceLock::new();
    PLUGINS.get_or_init(build_plugins)
}

fn build_plugins() -> HashMap<&'static str, PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("host/ sits in the workspace root");
    let mut cmd = Command::new(env!("CARGO"));
    cmd.current_dir(root)
        .args(["build", "--message-format=json"]);
    if STOA.contains("/release/") {
        cmd.arg("--release");
    }
    for (_, package) in PACKAGES {
        cmd.args(["-p", package]);
    }
    let out = cmd.output().expect("run cargo build for the plugins");
    assert!(
        out.status.success(),
        "building the plugins failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut found = HashMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(msg) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if msg["reason"] != "compiler-artifact" {
            continue;
        }
        let target = msg["target"]["name"].as_str().unwrap_or_default();
        let Some((short, _)) = PACKAGES
            .iter()
            .find(|(_, package)| package.replace('-', "_") == target)
        else {
            continue;
        };
        let files = msg["filenames"].as_array().cloned().unwrap_or_default();
        if let Some(so) = files
            .iter()
            .filter_map(Value::as_str)
            .find(|f| f.ends_with(".so"))
        {
            found.insert(*short, PathBuf::from(so));
        }
    }
    for (short, package) in PACKAGES {
        assert!(
            found.contains_key(short),
            "cargo built no .so for {package}"
        );
    }
    found.insert("abi-previous", build_previous(root));
    found
}

/// Builds the plugin of `tests/abi-previous` (a workspace of its own, built
/// against a frozen earlier stoa-app-api) into `target/abi-previous`, in
/// the test binary's profile; its `.so` path.
fn build_previous(root: &Path) -> PathBuf {
    let profile = if STOA.contains("/release/") {
        "release"
    } else {
        "debug"
    };
    let target = root.join("target").join("abi-previous");
    let mut cmd = Command::new(env!("CARGO"));
    cmd.current_dir(root.join("tests").join("abi-previous"))
        .arg("build")
        .arg("--target-dir")
        .arg(&target);
    if profile == "release" {
        cmd.arg("--release");
    }
    let out = cmd
        .output()
        .expect("run cargo build for tests/abi-previous");
    assert!(
        out.status.success(),
        "building tests/abi-previous failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    target.join(profile).join("libstoa_test_abi_previous.so")
}

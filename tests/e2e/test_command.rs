//! The README's test command, `tests/run.sh`: it refuses an unknown option
//! naming it, and with `--no-install` on a machine missing the tools the
//! suite drives it stops before any test, naming each missing tool and the
//! package that brings it. Its first steps are rustfmt's check and clippy
//! (warnings denied) for both workspaces, and CI (`.ci/run`) runs it.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The workspace root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .expect("the workspace root exists")
}

/// The script, from the workspace root.
fn script() -> PathBuf {
    root().join("tests/run.sh")
}

/// A PATH holding only the shell tools the script itself needs (bash, sh,
/// dirname, id, sed): none of nginx, haproxy, python3, curl or cargo.
fn bare_path(dir: &Path) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).expect("create bin");
    for tool in ["bash", "sh", "dirname", "id", "sed"] {
        let found = ["/usr/bin", "/bin"]
            .iter()
            .map(|d| Path::new(d).join(tool))
            .find(|p| p.exists())
            .unwrap_or_else(|| panic!("{tool} is needed to run tests/run.sh"));
        std::os::unix::fs::symlink(found, bin.join(tool)).expect("link a tool");
    }
    bin
}

#[test]
fn no_install_names_every_missing_tool_and_runs_no_test() {
    let dir = crate::harness::TempDir::new("run-sh");
    let out = Command::new("bash")
        .arg(script())
        .arg("--no-install")
        .env_clear()
        .env("PATH", bare_path(dir.path()))
        .output()
        .expect("run tests/run.sh");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    for named in [
        "rustfmt (rustup component rustfmt)",
        "clippy (rustup component clippy)",
        "curl (apt package curl)",
        "python3 (apt package python3)",
        "django (pip package django)",
        "kubernetes-validate (pip package kubernetes-validate)",
        "run without --no-install to install them",
    ] {
        assert!(stderr.contains(named), "{named:?} not named:\n{stderr}");
    }
    // The installed nginx of this machine is not on the bare PATH, but it
    // is found in /usr/sbin: it is named only where it is really missing.
    if !Path::new("/usr/sbin/nginx").exists() {
        assert!(stderr.contains("nginx (apt package nginx)"), "{stderr}");
    }
}

#[test]
fn an_unknown_option_is_refused_by_name() {
    let out = Command::new("bash")
        .arg(script())
        .arg("--no-instal")
        .output()
        .expect("run tests/run.sh");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("'--no-instal'"), "{stderr}");
    assert!(stderr.contains("--no-install"), "{stderr}");
}

#[test]
fn a_missing_rustfmt_alone_is_named_and_stops_the_run() {
    let dir = crate::harness::TempDir::new("run-sh-fmt");
    let bin = bare_path(dir.path());
    // A cargo whose clippy is there and whose rustfmt is not.
    let cargo = bin.join("cargo");
    std::fs::write(&cargo, "#!/bin/sh\n[ \"$1\" = fmt ] && exit 1\nexit 0\n").expect("write cargo");
    std::fs::set_permissions(&cargo, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("make cargo executable");
    let out = Command::new("bash")
        .arg(script())
        .arg("--no-install")
        .env_clear()
        .env("PATH", &bin)
        .output()
        .expect("run tests/run.sh");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("rustfmt (rustup component rustfmt)"),
        "{stderr}"
    );
    assert!(!stderr.contains("clippy (rustup"), "{stderr}");
}

/// The script's commands: its lines without comments and blank lines.
fn commands(text: &str) -> Vec<&str> {
    text.lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .collect()
}

#[test]
fn the_lint_steps_come_before_every_test() {
    let text = std::fs::read_to_string(script()).expect("read tests/run.sh");
    let lines = commands(&text);
    let first_test = lines
        .iter()
        .position(|line| line.starts_with("cargo test"))
        .expect("tests/run.sh runs cargo test");
    for step in [
        "cargo fmt --all --check",
        "cargo fmt --manifest-path sample-apps/wsgi/Cargo.toml --all --check",
        "cargo clippy --workspace --all-targets -- -D warnings",
        "cargo clippy --manifest-path sample-apps/wsgi/Cargo.toml --workspace --all-targets -- -D warnings",
    ] {
        let at = lines
            .iter()
            .position(|line| *line == step)
            .unwrap_or_else(|| panic!("tests/run.sh lacks the step {step:?}"));
        assert!(at < first_test, "{step:?} comes after the first cargo test");
    }
    // The frozen earlier release is built by the suite, never linted.
    assert!(
        !lines
            .iter()
            .any(|line| line.starts_with("cargo") && line.contains("abi-previous")),
        "tests/run.sh lints or builds tests/abi-previous itself"
    );
}

#[test]
fn ci_runs_the_test_command() {
    let ci = root().join(".ci/run");
    let text = std::fs::read_to_string(&ci).expect("read .ci/run");
    assert!(commands(&text).contains(&"tests/run.sh"), "{text}");
}

#[test]
fn the_toolchain_is_pinned_with_clippy_and_rustfmt() {
    let file = root().join("rust-toolchain.toml");
    let text = std::fs::read_to_string(&file).expect("read rust-toolchain.toml");
    let lines = commands(&text);
    let channel = lines
        .iter()
        .find_map(|line| line.strip_prefix("channel = "))
        .expect("rust-toolchain.toml names a channel");
    let version = channel.trim_matches('"');
    assert!(
        version.split('.').count() == 3 && version.split('.').all(|n| n.parse::<u32>().is_ok()),
        "the channel {channel} is not a pinned release"
    );
    assert!(
        lines.contains(&r#"components = ["clippy", "rustfmt"]"#),
        "{text}"
    );
}

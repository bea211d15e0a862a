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

/// The script's commands: its lines without comments and blank lines, a
/// step's command without its `step "name"` prefix.
fn commands(text: &str) -> Vec<&str> {
    text.lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(|line| match line.strip_prefix("step \"") {
            Some(rest) => rest.split_once("\" ").map_or(rest, |(_, command)| command),
            None => line,
        })
        .collect()
}

/// Tools the script checks for, each a stand-in that succeeds, and a
/// `cargo` that notes each call's arguments in `cargo.log` beside it and
/// fails the calls whose arguments contain `fail_on`.
fn stand_in_tools(dir: &Path, fail_on: &str) -> PathBuf {
    let bin = bare_path(dir);
    let ok = "#!/bin/sh\nexit 0\n";
    for tool in [
        "rustup",
        "nginx",
        "haproxy",
        "curl",
        "openssl",
        "testssl",
        "systemd-socket-activate",
        "systemd-analyze",
        "python3",
        "python3-config",
        "prlimit",
        "unshare",
        "kubernetes-validate",
        "hadolint",
        "h2load",
    ] {
        write_script(&bin.join(tool), ok);
    }
    let log = dir.join("cargo.log");
    let cargo = format!(
        "#!/bin/sh\necho \"$*\" >> '{}'\ncase \"$*\" in *'{fail_on}'*) exit 101 ;; esac\nexit 0\n",
        log.display()
    );
    write_script(&bin.join("cargo"), &cargo);
    bin
}

fn write_script(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).expect("write a stand-in tool");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
        .expect("make a stand-in tool executable");
}

#[test]
fn a_failing_suite_hides_no_other_and_fails_the_run() {
    let dir = crate::harness::TempDir::new("run-sh-all");
    let out = Command::new("bash")
        .arg(script())
        .arg("--no-install")
        .env_clear()
        .env("PATH", stand_in_tools(dir.path(), "-p stoa --test e2e"))
        .output()
        .expect("run tests/run.sh");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let calls = std::fs::read_to_string(dir.path().join("cargo.log")).expect("cargo was run");
    // The bridge's suites, after the failing main e2e suite, still ran.
    let main_e2e = calls
        .lines()
        .position(|l| l.contains("-p stoa --test e2e"))
        .unwrap_or_else(|| panic!("the main e2e suite never ran:\n{calls}"));
    let bridge_e2e = calls
        .lines()
        .position(|l| l.contains("sample-apps/python/Cargo.toml --test e2e"))
        .unwrap_or_else(|| panic!("the bridge's e2e suite never ran:\n{calls}"));
    assert!(main_e2e < bridge_e2e, "{calls}");
    assert!(stderr.contains("1 step(s) failed"), "{stderr}");
    assert!(
        stderr.contains("e2e (main): cargo test --release -p stoa --test e2e"),
        "{stderr}"
    );
    assert!(!stderr.contains("e2e (bridge)"), "{stderr}");
}

#[test]
fn a_run_whose_steps_all_pass_says_so() {
    let dir = crate::harness::TempDir::new("run-sh-green");
    let out = Command::new("bash")
        .arg(script())
        .arg("--no-install")
        .env_clear()
        .env("PATH", stand_in_tools(dir.path(), "no call has this"))
        .output()
        .expect("run tests/run.sh");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("every step passed"), "{stdout}");
    let calls = std::fs::read_to_string(dir.path().join("cargo.log")).expect("cargo was run");
    // The tool checks' `--version` calls aside, one call per step.
    let steps = calls.lines().filter(|l| !l.ends_with("--version")).count();
    assert_eq!(steps, 9, "{calls}");
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
        "cargo fmt --manifest-path sample-apps/python/Cargo.toml --all --check",
        "cargo clippy --workspace --all-targets -- -D warnings",
        "cargo clippy --manifest-path sample-apps/python/Cargo.toml --workspace --all-targets -- -D warnings",
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

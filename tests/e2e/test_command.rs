//! The README's test command, `tests/run.sh`: it refuses an unknown option
//! naming it, and with `--no-install` on a machine missing the tools the
//! suite drives it stops before any test, naming each missing tool and the
//! package that brings it.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The script, from the workspace root.
fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/run.sh")
        .canonicalize()
        .expect("tests/run.sh exists")
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

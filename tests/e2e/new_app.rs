//! `stoa new-app`, as a plugin author goes: write the crate into a
//! temporary directory, `cargo test` and `cargo build` it there (outside
//! this workspace, sharing its target dir and offline, so the compiled
//! dependencies are reused), drop the built library into an apps directory
//! and get both routes' answers from the real binary, on every backend.
//! A bad name and a non-empty directory are refused, writing nothing.

use crate::harness::{Server, TempDir, STOA};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

matrix!(a_new_app_is_tested_built_and_served);

/// `cargo SUBCOMMAND --offline` in `dir`, with this build's target dir
/// and profile; panics with cargo's output unless it succeeds.
fn cargo(dir: &Path, subcommand: &str) -> Output {
    // STOA is TARGET/<profile>/stoa.
    let target = Path::new(STOA)
        .parent()
        .and_then(Path::parent)
        .expect("stoa lives in TARGET/<profile>/");
    let mut cmd = Command::new(env!("CARGO"));
    cmd.current_dir(dir)
        .args([subcommand, "--offline"])
        .env("CARGO_TARGET_DIR", target);
    if STOA.contains("/release/") {
        cmd.arg("--release");
    }
    let out = cmd.output().expect("run cargo");
    assert!(
        out.status.success(),
        "cargo {subcommand} in the new app failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The scaffolded `hello` app, written, tested and built once per test
/// process; the path of its library.
fn hello_so() -> &'static Path {
    static SO: OnceLock<PathBuf> = OnceLock::new();
    SO.get_or_init(|| {
        let tmp = TempDir::new("new-app");
        let dir = tmp.path().join("hello");
        let out = Command::new(STOA)
            .args(["new-app", "hello", "--dir"])
            .arg(&dir)
            .output()
            .expect("run stoa new-app");
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{said}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(said.starts_with("created app hello in "), "{said}");
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).expect("Cargo.toml");
        for needed in [
            "\"cdylib\", \"rlib\"",
            "stoa-app-api = { path = \"/",
            "abi_stable",
        ] {
            assert!(manifest.contains(needed), "{needed} missing:\n{manifest}");
        }
        let tested = cargo(&dir, "test");
        let report = String::from_utf8_lossy(&tested.stdout);
        assert!(report.contains("test result: ok. 3 passed"), "{report}");
        cargo(&dir, "build");
        let profile = if STOA.contains("/release/") {
            "release"
        } else {
            "debug"
        };
        let so = Path::new(STOA)
            .parent()
            .and_then(Path::parent)
            .map(|target| target.join(profile).join("libhello.so"))
            .expect("stoa lives in TARGET/<profile>/");
        assert!(so.is_file(), "no {}", so.display());
        so
    })
}

fn a_new_app_is_tested_built_and_served(poller: &str) {
    let so = hello_so().to_path_buf();
    let server = Server::launch(poller)
        .prepare(move |apps| {
            std::fs::copy(&so, apps.join("libhello.so")).expect("install libhello.so");
        })
        .start();
    for (path, body) in [
        ("/hello", "hello from hello\n"),
        ("/hello/", "hello from hello\n"),
        ("/hello/later", "later from hello\n"),
    ] {
        let r = server.get(path);
        assert_eq!(
            (r.status, r.text()),
            (200, body),
            "{path}\n{}",
            server.log()
        );
    }
    assert_eq!(server.get("/hello/other").status, 404);
}

#[test]
fn bad_names_and_non_empty_dirs_are_refused() {
    let tmp = TempDir::new("new-app-refusals");
    let run = |name: &str, dir: &Path| {
        let out = Command::new(STOA)
            .args(["new-app", name, "--dir"])
            .arg(dir)
            .output()
            .expect("run stoa new-app");
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let fresh = tmp.path().join("fresh");
    let said = run("no way", &fresh);
    assert!(
        said.contains("\"no way\" is not a valid app name"),
        "{said}"
    );
    assert!(!fresh.exists());
    std::fs::write(tmp.path().join("keep"), "x").expect("write a file");
    let said = run("hello", tmp.path());
    assert!(said.contains("exists and is not empty"), "{said}");
    assert!(!tmp.path().join("Cargo.toml").exists());
}

//! `stoa new-app`, as a plugin author goes with an installed `stoa`: a
//! copy of the binary, away from this checkout, writes the crate into an
//! empty directory; nothing in it points into the checkout; it is tested and
//! built there offline (`--locked`: its Cargo.lock, pinned to the host's
//! versions, needs no change), so every dependency comes from the local
//! registry cache (built in the checkout's target dir, where the
//! workspace's own build of the same versions is reused); the library is
//! dropped into an apps directory and both routes answer from the real
//! binary. A bad name, a git `--app-api` and a non-empty directory are
//! refused, writing nothing. Picking the app's name (its mount): `stoa
//! check` notes a mount that hides another app's paths, and the host logs a
//! nested one.

use crate::common::{apps_dir_with, run_to_exit};
use crate::harness::{Server, TempDir, STOA};
use std::path::Path;
use std::process::{Command, Output};

/// `cargo SUBCOMMAND --offline --locked` in `dir` with target dir
/// `target`; panics with cargo's output unless it succeeds.
fn cargo(dir: &Path, subcommand: &str, target: &Path) -> Output {
    let out = Command::new(env!("CARGO"))
        .current_dir(dir)
        .args([subcommand, "--offline", "--locked"])
        .env("CARGO_TARGET_DIR", target)
        .output()
        .expect("run cargo");
    assert!(
        out.status.success(),
        "cargo {subcommand} in the new app failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Every file under `dir` that mentions `needle`.
fn files_naming(dir: &Path, needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for entry in std::fs::read_dir(&d).expect("read the new crate") {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if std::fs::read_to_string(&path).is_ok_and(|t| t.contains(needle)) {
                found.push(path.display().to_string());
            }
        }
    }
    found
}

#[test]
fn an_installed_stoa_scaffolds_an_app_that_builds_offline_and_is_served() {
    let tmp = TempDir::new("new-app");
    let bin = tmp.path().join("bin");
    let work = tmp.path().join("work");
    std::fs::create_dir_all(&bin).expect("mkdir bin");
    std::fs::create_dir_all(&work).expect("mkdir work");
    let stoa = bin.join("stoa");
    std::fs::copy(STOA, &stoa).expect("copy the stoa binary");
    let out = Command::new(&stoa)
        .args(["new-app", "greet"])
        .current_dir(&work)
        .output()
        .expect("run stoa new-app");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        said.starts_with("created app greet in greet (stoa-app-api "),
        "{said}"
    );
    let dir = work.join("greet");
    let checkout = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("host/ is in the checkout");
    let checkout = std::fs::canonicalize(checkout).expect("the checkout's path");
    let naming = files_naming(&dir, &checkout.display().to_string());
    assert!(
        naming.is_empty(),
        "these point into the checkout: {naming:?}"
    );
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).expect("Cargo.toml");
    for needed in [
        "\"cdylib\", \"rlib\"",
        "stoa-app-api = { path = \"stoa-app-api\" }",
        "abi_stable",
    ] {
        assert!(manifest.contains(needed), "{needed} missing:\n{manifest}");
    }
    // The build's target dir is the checkout's own (the binary lies in
    // TARGET/PROFILE/): the app-api's dependencies, built there for the
    // workspace at the same pinned versions, are reused, and only the new
    // crate and its embedded app-api compile. Nothing in the project
    // names it; the registry cache is the only source (--offline).
    let target = Path::new(STOA)
        .parent()
        .and_then(Path::parent)
        .expect("the binary lies in TARGET/PROFILE/")
        .to_path_buf();
    let tested = cargo(&dir, "test", &target);
    let report = String::from_utf8_lossy(&tested.stdout);
    assert!(report.contains("test result: ok. 3 passed"), "{report}");
    cargo(&dir, "build", &target);
    let so = target.join("debug/libgreet.so");
    assert!(so.is_file(), "no {}", so.display());
    let built = so.clone();
    let server = Server::launch("epoll")
        .prepare(move |apps| {
            std::fs::copy(&so, apps.join("libgreet.so")).expect("install libgreet.so");
        })
        .start();
    // Not left beside the workspace's own plugins.
    let _ = std::fs::remove_file(&built);
    for (path, body) in [
        ("/greet", "hello from greet\n"),
        ("/greet/", "hello from greet\n"),
        ("/greet/later", "later from greet\n"),
    ] {
        let r = server.get(path);
        assert_eq!(
            (r.status, r.text()),
            (200, body),
            "{path}\n{}",
            server.log()
        );
    }
    assert_eq!(server.get("/greet/other").status, 404);
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
    let out = Command::new(STOA)
        .args([
            "new-app",
            "greet",
            "--app-api",
            "https://example.org/stoa.git",
            "--dir",
        ])
        .arg(&fresh)
        .output()
        .expect("run stoa new-app");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(said.contains("not pinned to this host's ABI"), "{said}");
    assert!(!fresh.exists());
    std::fs::write(tmp.path().join("keep"), "x").expect("write a file");
    let said = run("hello", tmp.path());
    assert!(said.contains("exists and is not empty"), "{said}");
    assert!(!tmp.path().join("Cargo.toml").exists());
}

/// `stoa check --apps` over the samples with `extra` flags: its stdout.
fn check_samples(extra: &[&str]) -> String {
    let tmp = TempDir::new("mount-overlap");
    let apps = apps_dir_with(tmp.path(), &["hello-project", "article", "environ", "demo"]);
    let out = run_to_exit(
        Command::new(STOA)
            .arg("check")
            .arg("--apps")
            .arg(&apps)
            .args(extra)
            .args(["--bind", "127.0.0.1:0", "--log-level", "warn"])
            .env_remove("STOA_POLLER"),
    );
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "notes do not fail the check:\n{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The mistake the scaffold's old example made (an app named `hello`
/// takes `/hello/` from the sample project at `/`), and a mount inside
/// another app's: `stoa check` notes both, naming the apps and mounts; the
/// samples as they are mount nothing over each other.
#[test]
fn check_notes_a_nested_mount_and_the_root_routes_a_mount_hides() {
    let clean = check_samples(&[]);
    assert!(!clean.contains("note:"), "{clean}");
    let stdout = check_samples(&["--mount", "environ=/hello", "--mount", "demo=/article/x"]);
    let notes: Vec<&str> = stdout.lines().filter(|l| l.starts_with("note: ")).collect();
    assert_eq!(
        notes,
        [
            "note: mount app demo at /article/x is nested inside app article at /article: \
             article no longer gets /article/x and the paths under it",
            "note: mount app environ at /hello hides routes of app hello-project at /: \
             /hello (301), /hello/ (200)",
        ],
        "{stdout}"
    );
}

/// The host logs a nested mount when it mounts it (in a worker process
/// too, where the registry runs).
#[test]
fn a_nested_mount_is_logged_naming_both_apps() {
    let nested = "mount app demo at /article/x is nested inside app article at /article";
    for mode in [&[][..], &["--worker-mode", "process", "--workers", "1"]] {
        let server = Server::launch("epoll")
            .apps(&["article", "demo"])
            .args(&["--mount", "demo=/article/x"])
            .args(mode)
            .start();
        assert!(server.wait_log(&[nested]), "{mode:?}\n{}", server.log());
    }
}

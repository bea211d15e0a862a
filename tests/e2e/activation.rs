//! Socket activation and the upgrade's hand-over as a user meets them:
//! `LISTEN_FDNAMES` names shown on the `listening on` lines (and a name
//! count that does not match `LISTEN_FDS` refused), more passed sockets
//! than a loop used to take, the service manager's keep-alives after an
//! upgrade, and a drain during an unfinished upgrade. Backend-free: one
//! backend each.

use crate::deploy::KillPid;
use crate::deploy::{
    apps_dir, exchange, free_port, notify_socket, status_of, upgrade, wait_message,
};
use crate::harness::{wait_until, Captured, Group, Server, TempDir, STOA};
use rustix::process::Signal;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

/// A stoa started by `systemd-socket-activate` listening on `ports`, with
/// `extra` options for the tool (before the program); its process and its
/// standard output and error. The tool starts stoa at the first connection.
fn activated(
    ports: &[u16],
    extra: &[&str],
    apps: &std::path::Path,
) -> (Group, Arc<Captured>, Arc<Captured>) {
    let mut cmd = Command::new("systemd-socket-activate");
    for port in ports {
        cmd.arg("-l").arg(format!("127.0.0.1:{port}"));
    }
    cmd.args(extra)
        .arg(STOA)
        // Thread mode's upgrade: a new process takes the sockets over.
        .args(["--worker-mode", "thread"])
        .args(["--poller", "epoll", "--workers", "2", "--apps"])
        .arg(apps)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = Group::spawn(&mut cmd)
        .expect("systemd-socket-activate is needed (apt-get install -y systemd)");
    let stdout = Captured::collect(child.0.stdout.take().expect("piped stdout"));
    let stderr = Captured::collect(child.0.stderr.take().expect("piped stderr"));
    // The tool listens first, then starts stoa on a connection.
    let knocked = crate::harness::wait_until(Duration::from_secs(10), || {
        std::net::TcpStream::connect(("127.0.0.1", ports[0])).is_ok()
    });
    assert!(
        knocked,
        "systemd-socket-activate never listened: {}",
        stderr.text()
    );
    (child, stdout, stderr)
}

#[test]
fn listen_fdnames_name_the_listening_on_lines() {
    let dir = TempDir::new("fdnames");
    let apps = apps_dir(&dir, &["article"]);
    let (web, admin) = (free_port(), free_port());
    let (child, stdout, stderr) = activated(&[web, admin], &["--fdname=web:admin"], &apps);
    let shown = stdout.wait(Duration::from_secs(20), |t| t.lines().count() >= 2);
    let text = stdout.text();
    assert!(shown, "stdout: {text:?}\nstderr:\n{}", stderr.text());
    assert!(
        text.contains(&format!(
            "listening on http://127.0.0.1:{web} (socket web)\n"
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "listening on http://127.0.0.1:{admin} (socket admin)\n"
        )),
        "{text}"
    );
    assert_eq!(status_of(web, "/article"), 200);
    assert_eq!(status_of(admin, "/article"), 200);
    // An upgrade hands the names on with the sockets.
    let old = rustix::process::Pid::from_raw(child.0.id() as i32).expect("pid");
    rustix::process::kill_process(old, Signal::USR2).expect("SIGUSR2");
    let again = stdout.wait(Duration::from_secs(20), |t| t.lines().count() >= 4);
    let text = stdout.text();
    assert!(again, "stdout: {text:?}\nstderr:\n{}", stderr.text());
    let news: Vec<&str> = text.lines().skip(2).collect();
    assert_eq!(
        news,
        [
            format!("listening on http://127.0.0.1:{web} (socket web)"),
            format!("listening on http://127.0.0.1:{admin} (socket admin)"),
        ]
    );
    let upgraded = stderr.wait(Duration::from_secs(20), |t| {
        t.contains("upgrade: the new stoa (pid ")
    });
    assert!(upgraded, "{}", stderr.text());
    assert_eq!(status_of(web, "/article"), 200);
}

#[test]
fn a_name_count_unlike_listen_fds_is_refused_naming_both() {
    let dir = TempDir::new("fdnames-count");
    let apps = apps_dir(&dir, &["article"]);
    let ports = [free_port(), free_port()];
    let (mut child, stdout, stderr) = activated(&ports, &["-E", "LISTEN_FDNAMES=a:b:c"], &apps);
    let refused = stderr.wait(Duration::from_secs(20), |t| t.contains("LISTEN_FDNAMES="));
    let text = stderr.text();
    assert!(refused, "{text}");
    assert!(
        text.contains("LISTEN_FDNAMES=\"a:b:c\" names 3 socket(s) but LISTEN_FDS=2"),
        "{text}"
    );
    let exited = crate::harness::wait_until(Duration::from_secs(10), || {
        child.0.try_wait().ok().flatten().is_some()
    });
    assert!(exited, "stoa did not exit: {text}");
    assert!(!stdout.text().contains("listening on"), "{}", stdout.text());
}

/// Fresh connections to `port`, one request each, `n` in all; how many got
/// their 200 (a connection left unanswered for 2 s counts as not).
fn fresh_answers(port: u16, n: usize) -> usize {
    let answered = move |_| {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
        (exchange(&mut s) == Some(200)).then_some(())
    };
    let threads: Vec<_> = (0..4)
        .map(|_| std::thread::spawn(move || (0..n / 4).filter_map(answered).count()))
        .collect();
    threads.into_iter().map(|t| t.join().expect("client")).sum()
}

/// 33 workers on two TCP addresses hand over 66 sockets (each worker has
/// its own SO_REUSEPORT socket per address): the new process must accept
/// on every one, or the connections the kernel hashes to the others hang.
#[test]
fn an_upgrade_passing_more_than_64_sockets_serves_every_one() {
    let mut server = Server::launch("epoll")
        .apps(&["article"])
        .args(&["--workers", "33", "--bind", "127.0.0.1:0"])
        .start();
    // The second bind's line follows the first (the harness returns at
    // the first): wait for it.
    server
        .stdout
        .wait(crate::harness::LOG_WAIT, |t| t.lines().count() >= 2);
    let lines = server.stdout.text();
    let second: u16 = lines
        .lines()
        .nth(1)
        .and_then(|l| l.strip_prefix("listening on http://127.0.0.1:"))
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("no second listening on line: {lines:?}"));
    let ports = [server.port, second];
    let _new = upgrade(&mut server, Duration::from_secs(60));
    assert!(
        server.log_contains("serving 66 socket(s) passed"),
        "{}",
        server.log()
    );
    for port in ports {
        let answered = fresh_answers(port, 200);
        assert_eq!(answered, 200, "fresh connections to {port} answered");
    }
}

/// After an upgrade each worker holds the socket its predecessor had, alone:
/// when one is stuck, the watchdog takes it out of the accept group (shuts
/// its socket down) as it does for a socket the process bound itself, so
/// fresh connections are all answered by the other worker.
#[test]
fn after_an_upgrade_a_stuck_worker_leaves_the_accept_group() {
    let mut server = Server::launch("epoll")
        .apps(&["stuck", "article"])
        .args(&["--workers", "2", "--stuck-after", "1"])
        .args(&["--graceful-timeout", "2"])
        .start();
    let _new = upgrade(&mut server, Duration::from_secs(30));
    let mut spin = crate::client::Client::connect(server.port);
    spin.send(&crate::client::get("/_stuck/spin"));
    assert!(
        server.wait_log(&[
            "stuck: its loop has not turned",
            "in app stuck GET /_stuck/spin"
        ]),
        "{}",
        server.log()
    );
    assert_eq!(fresh_answers(server.port, 40), 40, "{}", server.log());
}

/// A worker that was stuck and turned again listens on a new socket; the
/// one the watchdog shut down is not handed to an upgrade (accepting on it
/// fails, and the new process's worker would pause its accepts).
#[test]
fn an_upgrade_after_a_worker_rejoined_hands_over_only_listening_sockets() {
    let mut server = Server::launch("epoll")
        .apps(&["stuck", "article"])
        .args(&["--workers", "2", "--stuck-after", "1"])
        .start();
    let mut spin = crate::client::Client::connect(server.port);
    spin.send(&crate::client::get("/_stuck/spin?ms=2500"));
    assert!(
        server.wait_log(&["rejoined the accept group"]),
        "{}",
        server.log()
    );
    let _new = upgrade(&mut server, Duration::from_secs(30));
    assert!(server.log_contains("a socket that no longer listens is not handed over"));
    assert_eq!(fresh_answers(server.port, 40), 40, "{}", server.log());
    assert!(
        !server.log_contains("accepts paused"),
        "the new process failed to accept: {}",
        server.log()
    );
}

/// A variable of process `pid`'s environment as it was started with.
pub(crate) fn environ_of(pid: u32, key: &str) -> Option<String> {
    let bytes = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    let prefix = format!("{key}=");
    bytes
        .split(|&b| b == 0)
        .map(String::from_utf8_lossy)
        .find_map(|kv| kv.strip_prefix(&prefix).map(str::to_string))
}

/// After an upgrade the service manager (here a test-side socket) must
/// go on getting WATCHDOG=1 from the new process: the private socket the
/// old one made for the new one's READY=1 is gone once it was ready.
#[test]
fn watchdog_keepalives_go_on_to_the_service_manager_after_an_upgrade() {
    let dir = TempDir::new("upgrade-watchdog");
    let (sock, path) = notify_socket(&dir);
    let path = path.to_str().expect("utf-8 path");
    let mut server = Server::launch("epoll")
        .apps(&["article"])
        .args(&["--workers", "2"])
        .env("NOTIFY_SOCKET", path)
        .env("WATCHDOG_USEC", "1000000")
        .start();
    assert!(wait_message(&sock, "WATCHDOG=1", Duration::from_secs(5)).is_some());
    let new = upgrade(&mut server, Duration::from_secs(30));
    // The new process was told READY=1 goes to a private socket, and
    // everything after to the service manager's.
    let private = environ_of(new.pid, "NOTIFY_SOCKET").expect("the new process's NOTIFY_SOCKET");
    assert_ne!(private, path);
    assert_eq!(
        environ_of(new.pid, "STOA_SERVICE_NOTIFY_SOCKET").as_deref(),
        Some(path)
    );
    assert!(
        !std::path::Path::new(&private).exists(),
        "the private socket {private} is still there"
    );
    let told = wait_message(
        &sock,
        &format!("MAINPID={}", new.pid),
        Duration::from_secs(5),
    );
    assert!(told.is_some(), "the manager was not told the new main pid");
    // The old process has exited: what comes now is the new one's.
    while sock.recv(&mut [0u8; 512]).is_ok() {}
    for _ in 0..3 {
        let late = wait_message(&sock, "WATCHDOG=1", Duration::from_secs(5));
        assert!(
            late.is_some(),
            "no WATCHDOG=1 from the new process {}",
            new.pid
        );
    }
    assert_eq!(
        status_of(server.port, "/article"),
        200,
        "the new stoa serves"
    );
}

/// Whether process `pid` is gone (a zombie not yet reaped counts as gone).
fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|t| t.trim_start().starts_with('Z')),
    }
}

/// SIGTERM while the new process of an upgrade is still starting (its
/// app's constructor runs): the old one stops the new one before it
/// exits, so no orphan goes on serving the sockets.
#[test]
fn a_drain_during_an_unfinished_upgrade_stops_the_new_process() {
    use crate::common::{bytes, install_atomically};
    let mut server = Server::launch("epoll")
        .apps(&["article"])
        .args(&["--workers", "1", "--no-watch"])
        .env("STOA_TEST_SLOW_INIT_MS", "forever")
        .start();
    let port = server.port;
    // Only the new process loads it (no watching here, no rescan).
    install_atomically(
        &server.apps_dir(),
        "libstoa_test_slow_init.so",
        &bytes("slow-init"),
    );
    server.signal(Signal::USR2);
    let started = server.wait_lines(&["upgrade: started the new stoa (pid "], 1);
    let new_pid: u32 = started
        .first()
        .and_then(|l| l.split("(pid ").nth(1)?.split(')').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no start line: {}", server.log()));
    let _new = KillPid::new(new_pid, server.pid());
    assert!(
        server.wait_log(&["slow-init constructor sleeping"]),
        "{}",
        server.log()
    );
    server.signal(Signal::TERM);
    assert!(
        server.wait_exit(Duration::from_secs(20)).is_some(),
        "the old stoa did not exit: {}",
        server.log()
    );
    assert!(
        wait_until(Duration::from_secs(10), || gone(new_pid)),
        "the unfinished new stoa (pid {new_pid}) is still running: {}",
        server.log()
    );
    assert!(
        server.log_contains(&format!("stopping the new stoa (pid {new_pid})")),
        "{}",
        server.log()
    );
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
        "something still listens on {port}"
    );
}

/// A new binary that ignores SIGTERM and never gets ready: the draining old
/// stoa kills it (SIGKILL after the bound) before it exits.
#[test]
fn a_new_process_that_ignores_sigterm_is_killed_when_the_old_one_drains() {
    use crate::deploy::start_copy;
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new("upgrade-ignores-term");
    let apps = apps_dir(&dir, &["article"]);
    let binary = dir.path().join("stoa");
    std::fs::copy(STOA, &binary).expect("copy stoa");
    let (mut child, port, log) = start_copy(&binary, &apps, "epoll", &[]);
    let text = || log.lock().map(|l| l.clone()).unwrap_or_default();
    let stubborn = dir.path().join("stoa.new");
    // It says when its trap is set: a SIGTERM before that would end it,
    // and the test is about one that outlives SIGTERM.
    let trapped = dir.path().join("trapped");
    let script = format!(
        "#!/bin/sh\ntrap '' TERM\ntouch '{}'\nexec sleep 600\n",
        trapped.display()
    );
    std::fs::write(&stubborn, script).expect("write");
    std::fs::set_permissions(&stubborn, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    std::fs::rename(&stubborn, &binary).expect("rename");
    let old = rustix::process::Pid::from_raw(child.0.id() as i32).expect("pid");
    rustix::process::kill_process(old, Signal::USR2).expect("SIGUSR2");
    let started = wait_until(Duration::from_secs(10), || {
        text().contains("upgrade: started the new stoa (pid ")
    });
    assert!(started, "{}", text());
    let new_pid: u32 = text()
        .split("upgrade: started the new stoa (pid ")
        .nth(1)
        .and_then(|t| t.split(')').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no pid: {}", text()));
    let _new = KillPid::new(new_pid, child.0.id());
    let set = wait_until(Duration::from_secs(10), || trapped.exists());
    assert!(set, "the new process never set its trap: {}", text());
    rustix::process::kill_process(old, Signal::TERM).expect("SIGTERM");
    let exited = wait_until(Duration::from_secs(20), || {
        child.0.try_wait().ok().flatten().is_some()
    });
    assert!(exited, "the old stoa did not exit: {}", text());
    assert!(gone(new_pid), "pid {new_pid} still runs: {}", text());
    assert!(
        text().contains("did not stop within 5s: SIGKILL"),
        "{}",
        text()
    );
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err());
}

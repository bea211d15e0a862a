//! The socket file of `--bind unix:PATH` in a directory others can write
//! in: its mode is never set through a path swapped for a symbolic link
//! (a bind loop raced by a swapper), a file unlinked while serving is
//! logged, and one put in its place is left there at exit. Backend-free,
//! so on one backend.

use crate::harness::{wait_until, Server, TempDir, WAIT};
use rustix::process::Signal;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .expect("the file")
        .permissions()
        .mode()
        & 0o777
}

#[test]
fn the_mode_is_never_set_through_a_path_swapped_for_a_symlink() {
    const TRIES: usize = 150;
    let dir = TempDir::new("unix-race");
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "secret").expect("write the victim");
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let sock = dir.path().join("race.sock");
    let bind = format!("unix:{}", sock.display());

    // The swapper: whenever the path is a socket, a symlink to the victim
    // takes its place.
    let (stop, swaps) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicUsize::new(0)),
    );
    let swapper = {
        let (stop, swaps, sock, victim) =
            (stop.clone(), swaps.clone(), sock.clone(), victim.clone());
        std::thread::spawn(move || {
            let t0 = Instant::now();
            while !stop.load(SeqCst) && t0.elapsed() < Duration::from_secs(120) {
                let socket =
                    std::fs::symlink_metadata(&sock).is_ok_and(|m| m.file_type().is_socket());
                if socket
                    && std::fs::remove_file(&sock).is_ok()
                    && std::os::unix::fs::symlink(&victim, &sock).is_ok()
                {
                    swaps.fetch_add(1, SeqCst);
                }
                std::hint::spin_loop();
            }
        })
    };
    // Stops the swapper however this test ends.
    struct Stop(Arc<AtomicBool>);
    impl Drop for Stop {
        fn drop(&mut self) {
            self.0.store(true, SeqCst);
        }
    }
    let stopper = Stop(stop);
    let t0 = Instant::now();
    let mut tries = 0;
    while tries < TRIES && t0.elapsed() < Duration::from_secs(90) && mode(&victim) == 0o600 {
        tries += 1;
        // The last try's symlink would be refused as "not a socket".
        let _ = std::fs::remove_file(&sock);
        let mut server = Server::launch("epoll")
            .args(&["--bind", &bind, "--workers", "1", "--no-watch"])
            .spawned();
        // It serves, or refuses to (a swapped socket found), either way
        // after the bind.
        let settled = wait_until(Duration::from_secs(20), || {
            server
                .stdout
                .text()
                .contains(&format!("listening on {bind}"))
                || server.log_contains("cannot bind")
        });
        assert!(
            settled,
            "try {tries}: neither served nor refused\n{}",
            server.log()
        );
        server.signal(Signal::KILL);
        assert!(server.wait_exit(Duration::from_secs(10)).is_some());
    }
    drop(stopper);
    swapper.join().expect("the swapper");
    let swaps = swaps.load(SeqCst);
    assert_eq!(
        format!("{:o}", mode(&victim)),
        "600",
        "try {tries} of {TRIES} set the socket mode on the file a symlink swapped in \
         for the socket points to ({swaps} swaps)"
    );
    assert!(
        swaps > 0,
        "the swapper never found the socket in {tries} tries"
    );
    eprintln!("{tries} tries, {swaps} swaps, the victim kept its mode");
}

#[test]
fn a_socket_file_unlinked_while_serving_is_logged_and_a_new_file_kept_at_exit() {
    socket_file_unlinked_while_serving(&[]);
}

/// In process mode the supervisor made the file, and watches it.
#[test]
fn a_socket_file_unlinked_under_worker_processes_is_logged_and_kept_at_exit() {
    socket_file_unlinked_while_serving(&["--worker-mode", "process", "--workers", "2"]);
}

fn socket_file_unlinked_while_serving(worker_mode: &[&str]) {
    let dir = TempDir::new("unix-gone");
    let sock = dir.path().join("gone.sock");
    let bind = format!("unix:{}", sock.display());
    let mut server = listening_on(&bind, worker_mode);
    assert_eq!(mode(&sock), 0o660);
    // No private directory is left beside it.
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .expect("the directory")
        .map(|e| e.expect("an entry").file_name())
        .collect();
    assert_eq!(names, ["gone.sock"], "{names:?}");

    std::fs::remove_file(&sock).expect("unlink the socket");
    let said = format!("{bind} was removed while serving");
    assert!(server.wait_log(&[&said]), "{}", server.log());
    // Someone else's file at the path now: not ours to remove at exit.
    std::fs::write(&sock, "another").expect("a new file");
    server.signal(Signal::TERM);
    assert!(server.wait_exit(Duration::from_secs(20)).is_some());
    assert_eq!(
        std::fs::read_to_string(&sock).ok().as_deref(),
        Some("another"),
        "the file put in the socket's place was removed at exit\n{}",
        server.log()
    );
    assert_eq!(
        server.log_lines(&[&said]).len(),
        1,
        "logged once\n{}",
        server.log()
    );
}

/// A supervisor that re-executed itself in place (SIGUSR2) still knows the
/// socket file it made: it removes the file at exit.
#[test]
fn a_supervisor_re_executed_by_sigusr2_removes_its_socket_file_at_exit() {
    let (dir, sock, mut server) = upgraded_on_a_unix_socket("unix-upgraded");
    server.signal(Signal::TERM);
    assert!(server.wait_exit(Duration::from_secs(20)).is_some());
    assert!(
        !sock.exists(),
        "the socket file outlived the server\n{}",
        server.log()
    );
    drop(dir);
}

/// ... and still watches it: an unlink after the re-execution is logged.
#[test]
fn a_supervisor_re_executed_by_sigusr2_still_watches_its_socket_file() {
    let (_dir, sock, server) = upgraded_on_a_unix_socket("unix-upgraded-watch");
    std::fs::remove_file(&sock).expect("unlink the socket");
    let said = format!("unix:{} was removed while serving", sock.display());
    assert!(server.wait_log(&[&said]), "{}", server.log());
}

/// A process-mode server on a Unix socket, upgraded in place once.
fn upgraded_on_a_unix_socket(name: &str) -> (TempDir, std::path::PathBuf, Server) {
    let dir = TempDir::new(name);
    let sock = dir.path().join("up.sock");
    let bind = format!("unix:{}", sock.display());
    let server = listening_on(&bind, &["--worker-mode", "process", "--workers", "1"]);
    server.signal(Signal::USR2);
    assert!(
        server.wait_log(&["supervisor re-executed in place from"]),
        "{}",
        server.log()
    );
    assert!(sock.exists(), "{}", server.log());
    (dir, sock, server)
}

/// A server with the article app on `bind`, once it says it listens there.
fn listening_on(bind: &str, args: &[&str]) -> Server {
    let server = Server::launch("epoll")
        .apps(&["article"])
        .args(&["--bind", bind])
        .args(args)
        .start();
    assert!(
        server
            .stdout
            .wait(WAIT, |t| t.contains(&format!("listening on {bind}"))),
        "{}",
        server.log()
    );
    server
}

//! A log that cannot be written never holds a request or a signal: a
//! stalled reader of the access log on stdout or of stderr, a closed
//! stderr pipe, a FIFO where the access log should be (at start, in
//! `stoa check` and on SIGUSR1), and a file size limit (`ulimit -f`, a
//! full disk as far as the host can tell) each cost lines, counted in
//! status and warned about once, while the host keeps serving and SIGTERM
//! still drains it. Backend-free: epoll.

use crate::client::{get, request};
use crate::common::{metrics, run_to_exit, status};
use crate::harness::{wait_until, Server, TempDir, SAMPLE_APPS, STOA, WAIT};
use rustix::process::Signal;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// SIGTERM drains and exits, cleanly, within a few seconds.
fn sigterm_exits(server: &mut Server) {
    server.signal(Signal::TERM);
    let status = server
        .wait_exit(Duration::from_secs(10))
        .unwrap_or_else(|| panic!("SIGTERM did not stop stoa: {}", server.log()));
    assert!(status.success(), "{status}: {}", server.log());
}

fn mkfifo(path: &Path) {
    rustix::fs::mknodat(
        rustix::fs::CWD,
        path,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap_or_else(|e| panic!("mkfifo {}: {e}", path.display()));
}

fn count(server: &Server, log: &str, what: &str) -> u64 {
    status(server)["logs"][log][what].as_u64().unwrap_or(0)
}

#[test]
fn a_stalled_reader_of_the_stdout_access_log_costs_lines_not_requests() {
    let mut server = Server::launch("epoll")
        .apps(SAMPLE_APPS)
        .args(&["--access-log", "-"])
        .start();
    server.stdout.pause();
    // Lines of about 1 KiB: the pipe (64 KiB) and the queue (4096 lines)
    // are full long before the last of these.
    let agent = format!("User-Agent: {}", "x".repeat(1000));
    let one = request("GET", "/hello/", &[&agent]);
    for batch in 0..100 {
        let mut c = server.connect();
        c.send(&one.repeat(50));
        for i in 0..50 {
            let r = c.read_response();
            assert_eq!(r.status, 200, "request {} of 5000", batch * 50 + i);
        }
    }
    assert!(
        server.wait_log(&["access log:", "line(s) dropped"]),
        "{}",
        server.log()
    );
    let dropped = count(&server, "access", "dropped");
    assert!(dropped > 0, "{}", status(&server)["logs"]);
    let series = metrics(&server);
    assert!(
        series
            .get("stoa_log_lines_dropped_total{log=\"access\"}")
            .is_some_and(|&n| n >= dropped as f64),
        "{series:?}"
    );
    // One warning, not one per lost line.
    let warned = server.log_lines(&["access log:", "dropped"]);
    assert_eq!(warned.len(), 1, "{warned:#?}");
    sigterm_exits(&mut server);
}

#[test]
fn a_stalled_reader_of_stderr_costs_error_lines_not_requests() {
    // At trace level every request is an error-log line.
    let mut server = Server::launch("epoll")
        .apps(SAMPLE_APPS)
        .args(&["--log-level", "trace"])
        .start();
    server.log_reader().pause();
    // The pipe (64 KiB) and the queue (1024 lines) are full long before
    // the last of these.
    for batch in 0..100 {
        let mut c = server.connect();
        c.send(&get("/hello/").repeat(50));
        for i in 0..50 {
            let r = c.read_response();
            assert_eq!(r.status, 200, "request {} of 5000", batch * 50 + i);
        }
    }
    assert!(
        count(&server, "error", "dropped") > 0,
        "{}",
        status(&server)["logs"]
    );
    sigterm_exits(&mut server);
}

#[test]
fn a_closed_stderr_pipe_stops_neither_logging_threads_nor_sigterm() {
    let mut server = Server::launch("epoll").apps(SAMPLE_APPS).start();
    server.log_reader().close_after_next_line();
    // Its line is the last one read; the pipe is closed after it.
    server.signal(Signal::HUP);
    assert!(
        server.log_reader().wait_ended(WAIT),
        "the stderr pipe is still open"
    );
    // The signal thread's next line meets the broken pipe (again, while a
    // process the suite forks at that moment still holds the read end).
    let counted = (0..5).any(|_| {
        server.signal(Signal::HUP);
        wait_until(Duration::from_secs(1), || {
            count(&server, "error", "write_errors") > 0
        })
    });
    assert_eq!(server.get("/hello/").status, 200);
    sigterm_exits(&mut server);
    assert!(counted, "no failed write of the error log counted");
}

#[test]
fn a_fifo_access_log_is_refused_at_start() {
    let dir = TempDir::new("fifo-start");
    let fifo = dir.path().join("access.log");
    mkfifo(&fifo);
    let arg = fifo.display().to_string();
    let (_, log) = Server::launch("epoll")
        .apps(SAMPLE_APPS)
        .args(&["--access-log", &arg])
        .refused();
    let expected = format!("--access-log {arg}: {arg} is a FIFO, not a regular file");
    assert!(log.contains(&expected), "{log}");
    assert!(log.contains("or - for standard output"), "{log}");
}

#[test]
fn check_reports_a_fifo_access_log() {
    let dir = TempDir::new("fifo-check");
    let apps = dir.path().join("apps");
    std::fs::create_dir(&apps).expect("create the apps dir");
    let fifo = dir.path().join("access.log");
    mkfifo(&fifo);
    let arg = fifo.display().to_string();
    let out = run_to_exit(
        Command::new(STOA)
            .arg("check")
            .arg("--apps")
            .arg(&apps)
            .args(["--bind", "127.0.0.1:0", "--access-log", &arg]),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    let expected = format!("problem: --access-log {arg}: {arg} is a FIFO, not a regular file");
    assert!(stdout.contains(&expected), "{stdout}");
}

#[test]
fn sigusr1_keeps_the_old_file_when_the_path_became_a_fifo() {
    let mut server = crate::logs::logging_one_request("epoll");
    let path = server.access_log_path().to_path_buf();
    let moved = path.with_extension("log.1");
    std::fs::rename(&path, &moved).expect("move the access log");
    // No reader: opening it for writing would block.
    mkfifo(&path);
    server.signal(Signal::USR1);
    let shown = path.display().to_string();
    assert!(
        server.wait_log(&[
            "SIGUSR1: cannot reopen the access log",
            &format!("{shown} is a FIFO"),
            "still writing to the old file",
        ]),
        "{}",
        server.log()
    );
    assert_eq!(server.get("/article").status, 200);
    let read = || std::fs::read_to_string(&moved).unwrap_or_default();
    assert!(
        wait_until(WAIT, || read().lines().count() == 2),
        "{}",
        read()
    );
    assert!(read().contains("GET /article"), "{}", read());
    sigterm_exits(&mut server);
}

#[test]
fn a_file_size_limit_on_the_access_log_costs_lines_not_the_host() {
    let mut server = crate::logs::logging_one_request("epoll");
    let path = server.access_log_path().to_path_buf();
    let size = || std::fs::metadata(&path).map_or(0, |m| m.len());
    // Room for a few more lines; then writes fail with EFBIG and the
    // kernel sends SIGXFSZ, whose default action kills the process.
    let limit = size() + 1000;
    let pid = i32::try_from(server.pid()).expect("a pid");
    let (mut soft, mut hard) = (0, 0);
    rlimit::prlimit(
        pid,
        rlimit::Resource::FSIZE,
        None,
        Some((&mut soft, &mut hard)),
    )
    .expect("read the server's RLIMIT_FSIZE (prlimit)");
    rlimit::prlimit(pid, rlimit::Resource::FSIZE, Some((limit, hard)), None)
        .expect("set the server's RLIMIT_FSIZE (prlimit)");
    let mut c = server.connect();
    for i in 0..300 {
        assert_eq!(c.request(&get("/hello/")).status, 200, "request {i}");
    }
    assert!(
        server.wait_log(&["access log:", "line(s) dropped", "File too large"]),
        "{}",
        server.log()
    );
    assert!(count(&server, "access", "write_errors") > 0);
    assert!(count(&server, "access", "dropped") > 0);
    assert!(size() <= limit, "{} > {limit}", size());
    // One warning for the lot, not one per request.
    let warned = server.log_lines(&["access log:"]);
    assert_eq!(warned.len(), 1, "{warned:#?}");
    sigterm_exits(&mut server);
}

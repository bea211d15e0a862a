//! Survival: a handler that never returns on the event loop is reported by
//! the watchdog (app and path), its worker leaves the accept group so new
//! clients are served by the others, ready and then health turn 503, and
//! SIGTERM still ends the process after the graceful timeout (also when the
//! app is stuck in a timer callback); a worker that turns again rejoins. On the blocking pool, a job whose deadline passed
//! while it waited is dropped unrun (also while every thread is hung), an
//! app alone uses the idle threads past its share, and another app is still
//! served, on threads of its share, while one app's jobs hang.

use crate::client::get;
use crate::common::{metrics, run_to_exit, status, try_get};
use crate::harness::{wait_until, Server, TempDir, STOA};
use rustix::process::Signal;
use std::process::Command;
use std::time::{Duration, Instant};

matrix!(
    stuck_worker_leaves_the_accept_group,
    stuck_worker_turns_unhealthy,
    stuck_single_worker_still_exits,
    worker_that_turns_again_rejoins,
    expired_blocking_job_never_runs,
    bad_survival_flags_are_refused,
);

const HEALTH: &str = "/.well-known/stoa/health";
const READY: &str = "/.well-known/stoa/ready";

/// Starts `stoa` with the stuck plugin (and `apps`), sends `path` on a
/// connection of its own, and waits for the watchdog to report it stuck in
/// the stuck app's `GET path` (without its query).
fn stick(
    poller: &str,
    apps: &[&str],
    args: &[&str],
    path: &str,
) -> (Server, crate::client::Client) {
    let place = format!("GET {}", path.split('?').next().unwrap_or(path));
    stick_in(poller, (apps, args), path, &place)
}

/// `stick`, with the place the watchdog names (after "in app stuck ").
fn stick_in(
    poller: &str,
    (apps, args): (&[&str], &[&str]),
    path: &str,
    place: &str,
) -> (Server, crate::client::Client) {
    let mut all = vec!["stuck"];
    all.extend_from_slice(apps);
    let server = Server::start(poller, &all, args);
    let mut client = server.connect();
    client.send(&get(path));
    let place = format!("in app stuck {place}");
    assert!(
        server.wait_log(&["stuck: its loop has not turned", &place]),
        "no watchdog line naming the app and path; log:\n{}",
        server.log()
    );
    (server, client)
}

/// Sends SIGTERM and returns how long the process took to exit.
fn terminate(server: &mut Server) -> Duration {
    let sent = Instant::now();
    server.signal(Signal::TERM);
    let exited = server.wait_exit(Duration::from_secs(15));
    assert!(exited.is_some(), "still running 15 s after SIGTERM");
    sent.elapsed()
}

fn stuck_worker_leaves_the_accept_group(poller: &str) {
    let args = [
        "--workers",
        "2",
        "--stuck-after",
        "1",
        "--graceful-timeout",
        "2",
    ];
    let (mut server, _spin) = stick(poller, &["article"], &args, "/_stuck/spin");
    let failed: Vec<String> = (0..40)
        .filter_map(|i| match try_get(server.port, "/article") {
            Ok(200) => None,
            other => Some(format!("request {i}: {other:?}")),
        })
        .collect();
    assert!(
        failed.is_empty(),
        "{} of 40 failed: {failed:?}",
        failed.len()
    );
    assert_eq!(try_get(server.port, HEALTH), Ok(200));
    assert_eq!(try_get(server.port, READY), Ok(503));
    let took = terminate(&mut server);
    assert!(
        took < Duration::from_secs(8),
        "exited {took:?} after SIGTERM"
    );
    assert!(server.log_contains("graceful timeout passed"));
}

fn stuck_worker_turns_unhealthy(poller: &str) {
    let args = [
        "--workers",
        "2",
        "--stuck-after",
        "1",
        "--unhealthy-after",
        "2",
    ];
    let (server, _spin) = stick(poller, &[], &args, "/_stuck/spin");
    let stuck = &status(server.port)["stuck_workers"];
    assert_eq!(stuck.as_array().map(Vec::len), Some(1), "{stuck}");
    assert_eq!(stuck[0]["in"], "app stuck GET /_stuck/spin");
    let flagged: f64 = (0..2)
        .map(|w| metrics(server.port)[&format!("stoa_worker_stuck{{worker=\"{w}\"}}")])
        .sum();
    assert_eq!(flagged, 1.0);
    assert!(
        wait_until(Duration::from_secs(10), || try_get(server.port, HEALTH)
            == Ok(503)),
        "health never turned 503"
    );
}

fn stuck_single_worker_still_exits(poller: &str) {
    let args = [
        "--workers",
        "1",
        "--stuck-after",
        "1",
        "--graceful-timeout",
        "2",
    ];
    // Stuck in a timer callback, which the watchdog knows as the app's own.
    let timer = "(timer callback)";
    let (mut server, _spin) = stick_in(poller, (&[], &args), "/_stuck/timer", timer);
    // Its listener is gone: a new client is refused at once, not left waiting.
    let refused = try_get(server.port, HEALTH);
    assert!(
        refused.as_ref().is_err_and(|e| e.starts_with("connect")),
        "{refused:?}"
    );
    let took = terminate(&mut server);
    assert!(
        took < Duration::from_secs(8),
        "exited {took:?} after SIGTERM"
    );
    assert!(server.wait_log(&["graceful timeout passed", "app stuck (timer callback)"]));
}

fn worker_that_turns_again_rejoins(poller: &str) {
    let args = ["--workers", "1", "--stuck-after", "1"];
    let (server, mut spin) = stick(poller, &[], &args, "/_stuck/spin?ms=2500");
    let answer = spin.read_response();
    assert_eq!((answer.status, answer.text()), (200, "spun\n"));
    assert!(
        server.wait_log(&["rejoined the accept group"]),
        "{}",
        server.log()
    );
    // The watchdog notices at its next look (a tenth of --stuck-after).
    let ready = || try_get(server.port, READY) == Ok(200);
    assert!(wait_until(Duration::from_secs(5), ready), "not ready again");
    assert_eq!(try_get(server.port, "/_stuck/ok"), Ok(200));
}

fn expired_blocking_job_never_runs(poller: &str) {
    let args = ["--app-timeout", "1", "--blocking-threads", "1"];
    let server = Server::start(poller, &["stuck"], &args);
    let mut first = server.connect();
    first.send(&get("/_stuck/block-ms?ms=2000"));
    assert!(server.wait_log(&["stuck: /block-ms started"]));
    // Queued behind the first: its deadline passes before the thread is free.
    let second = server.connect().request(&get("/_stuck/block-ms?ms=10"));
    assert_eq!(second.status, 504);
    // The first overran its deadline too (504), and is logged while it runs.
    assert_eq!(first.read_response().status, 504);
    assert!(server.wait_log(&["app stuck /_stuck/block-ms is running", "past its deadline"]));
    assert!(
        server.wait_log(&["dropped a blocking job of app stuck /_stuck/block-ms"]),
        "{}",
        server.log()
    );
    assert_eq!(
        server.get("/_stuck/started").text(),
        "1",
        "the expired job ran"
    );
}

/// Sends `path` on `n` connections of their own, kept open.
fn send_each(server: &Server, path: &str, n: usize) -> Vec<crate::client::Client> {
    (0..n)
        .map(|_| {
            let mut c = server.connect();
            c.send(&get(path));
            c
        })
        .collect()
}

/// `app`'s busy and waiting jobs on the pool, as status shows them.
fn pool_use(server: &Server, app: &str) -> (u64, u64) {
    let pool = &status(server.port)["blocking_pool"]["apps"][app];
    (
        pool["busy"].as_u64().unwrap_or(0),
        pool["queued"].as_u64().unwrap_or(0),
    )
}

// The pool's rules do not depend on the backend: one backend.

/// The seed's sleep experiment with default flags: one app's 40 blocking
/// requests all run at once, though its share is 32 of the 64 threads.
#[test]
fn a_lone_app_uses_the_idle_threads_past_its_share() {
    let server = Server::start("epoll", &["demo"], &[]);
    let _sleeping = send_each(&server, "/demo/syncsleep-handler/?seconds=10", 40);
    let all_run = wait_until(Duration::from_secs(5), || {
        pool_use(&server, "demo") == (40, 0)
    });
    assert!(all_run, "{:?}", pool_use(&server, "demo"));
    let pool = &status(server.port)["blocking_pool"];
    assert_eq!(
        (&pool["threads_per_app"], &pool["temporary_threads"]),
        (&32.into(), &0.into()),
        "{pool}"
    );
}

/// One app's jobs hang on every kept thread; another app is still served
/// (on a temporary thread of its share), and the hung app gets no more.
#[test]
fn another_app_is_served_while_one_apps_jobs_hang() {
    let server = Server::start("epoll", &["stuck", "demo"], &["--blocking-threads", "4"]);
    let _blocked = send_each(&server, "/_stuck/block", 4);
    let started = || server.get("/_stuck/started").text().parse::<u64>().unwrap();
    let all_run = wait_until(Duration::from_secs(5), || started() == 4);
    assert!(
        all_run,
        "{} started, {:?}",
        started(),
        pool_use(&server, "stuck")
    );
    // Past its share with every kept thread busy, a fifth waits.
    let _fifth = send_each(&server, "/_stuck/block", 1);
    let waits = wait_until(Duration::from_secs(5), || {
        pool_use(&server, "stuck") == (4, 1)
    });
    assert!(waits, "{:?}", pool_use(&server, "stuck"));
    let demo = server.get("/demo/syncsleep-handler/?seconds=0");
    assert_eq!(demo.status, 200, "{demo:?}");
    assert_eq!(started(), 4);
    assert_eq!(
        metrics(server.port)["stoa_blocking_busy{app=\"stuck\"}"],
        4.0
    );
    // The temporary thread leaves once idle.
    let left = wait_until(Duration::from_secs(5), || {
        metrics(server.port)["stoa_blocking_temporary_threads"] == 0.0
    });
    assert!(left, "{}", status(server.port)["blocking_pool"]);
}

/// With one hung thread and a queue of two: an app's request waiting in
/// room past its share gives way (503 naming the share) to another app's,
/// and the waiting requests still get their 504 when their app_timeout
/// passes, though no thread is free to drop them.
#[test]
fn a_request_waiting_past_its_share_gives_way_to_another_app() {
    let args = [
        "--blocking-threads",
        "1",
        "--blocking-queue",
        "2",
        "--app-timeout",
        "2s",
    ];
    let server = Server::start("epoll", &["stuck", "demo"], &args);
    let _running = send_each(&server, "/_stuck/block", 1);
    let started = || server.get("/_stuck/started").text().parse::<u64>().unwrap();
    assert!(wait_until(Duration::from_secs(5), || started() == 1));
    let mut within = send_each(&server, "/_stuck/block", 1);
    assert!(wait_until(Duration::from_secs(5), || {
        pool_use(&server, "stuck") == (1, 1)
    }));
    // Its share of the queue (one) is taken; free room is lent.
    let mut past = send_each(&server, "/_stuck/block", 1);
    let lent = wait_until(Duration::from_secs(5), || {
        pool_use(&server, "stuck") == (1, 2)
    });
    assert!(lent, "{:?}", pool_use(&server, "stuck"));
    let mut demo = send_each(&server, "/demo/syncsleep-handler/?seconds=0", 1);
    let r = past[0].read_response();
    assert_eq!(r.status, 503, "{r:?}");
    assert!(r.text().contains("blocking_share"), "{r:?}");
    assert!(
        server.wait_log(&["refused a waiting blocking job of app stuck /_stuck/block"]),
        "{}",
        server.log()
    );
    assert_eq!(pool_use(&server, "demo"), (0, 1));
    for c in [&mut within[0], &mut demo[0]] {
        let r = c.read_response();
        assert_eq!(r.status, 504, "{r:?}");
    }
}

/// The new bounds are refused, naming the flag, when they make no sense.
fn bad_survival_flags_are_refused(poller: &str) {
    let dir = TempDir::new("survival-flags");
    for (flags, named) in [
        (
            ["--stuck-after", "5", "--unhealthy-after", "2"],
            "--unhealthy-after",
        ),
        (
            ["--blocking-share", "0", "--workers", "1"],
            "--blocking-share",
        ),
        (["--stuck-after", "0", "--workers", "1"], "--stuck-after"),
    ] {
        let out = run_to_exit(
            Command::new(STOA)
                .args(["--bind", "127.0.0.1:0", "--poller", poller, "--apps"])
                .arg(dir.path())
                .args(flags),
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{flags:?} accepted");
        assert!(stderr.contains(named), "{flags:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{flags:?} started");
    }
}

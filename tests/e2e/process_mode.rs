//! Process mode (`--worker-mode process`): a supervisor and worker
//! processes on the same sockets. Serving is a request-path matter (every
//! backend); the supervisor's replacing, draining and signals are
//! backend-free (epoll).

use crate::deploy::Load;
use crate::harness::{wait_until, Server, WAIT};
use rustix::process::Signal;
use std::time::Duration;

matrix!(serves_every_app_from_two_worker_processes);

/// The worker pids the supervisor logged as started, in order.
fn started_pids(server: &Server) -> Vec<u32> {
    server
        .log_lines(&["started (pid "])
        .iter()
        .filter(|l| l.contains("supervisor"))
        .filter_map(|l| l.split("(pid ").nth(1)?.split(')').next()?.parse().ok())
        .collect()
}

fn process_mode(poller: &str, extra: &[&str]) -> Server {
    let mut args = vec!["--worker-mode", "process"];
    args.extend_from_slice(extra);
    Server::launch(poller)
        .apps(&["article", "hello-project"])
        .args(&args)
        .start()
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        !s.rsplit(')')
            .next()
            .is_some_and(|t| t.trim_start().starts_with('Z'))
    })
}

fn serves_every_app_from_two_worker_processes(poller: &str) {
    let server = process_mode(poller, &["--workers", "2"]);
    assert!(server.wait_lines(&["supervisor", ") ready"], 2).len() >= 2);
    for _ in 0..20 {
        assert_eq!(server.get("/article").status, 200);
        assert_eq!(server.get("/hello/").status, 200);
    }
    let pids = started_pids(&server);
    assert_eq!(pids.len(), 2, "{}", server.log());
    assert!(pids.iter().all(|&p| p != server.pid()));
}

#[test]
fn a_killed_worker_is_logged_and_replaced_while_the_other_serves() {
    let server = process_mode("epoll", &["--workers", "2"]);
    server.wait_lines(&["supervisor", ") ready"], 2);
    let victim = started_pids(&server)[0];
    let load = Load::start(server.port, 2);
    std::thread::sleep(Duration::from_millis(200));
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(victim as i32).expect("a pid"),
        Signal::KILL,
    )
    .expect("kill a worker");
    assert!(server.wait_log(&[&format!(
        "worker 0 (pid {victim}) was killed by signal 9 (SIGKILL)"
    )]));
    assert!(server.wait_log(&["worker 0 replaced by pid"]));
    std::thread::sleep(Duration::from_millis(300));
    let (ok, failed) = load.finish();
    eprintln!("a worker killed under load: {ok} answered, {failed} failed");
    assert!(ok > 0);
    // Only what was in flight on the killed worker may fail: two clients.
    assert!(failed <= 2, "{failed} failed of {}", ok + failed);
    assert_eq!(server.get("/article").status, 200);
}

#[test]
fn sigterm_drains_every_worker_and_exits_0() {
    let mut server = process_mode("epoll", &["--workers", "2"]);
    server.wait_lines(&["supervisor", ") ready"], 2);
    let pids = started_pids(&server);
    server.signal(Signal::TERM);
    let status = server.wait_exit(Duration::from_secs(20)).expect("exited");
    assert!(status.success(), "{status:?}: {}", server.log());
    assert!(server.log_contains("every worker drained; exiting"));
    assert!(wait_until(Duration::from_secs(5), || pids
        .iter()
        .all(|&p| !alive(p))));
}

#[test]
fn a_worker_is_recycled_after_its_max_requests_with_no_request_lost() {
    let server = process_mode("epoll", &["--workers", "1", "--worker-max-requests", "50"]);
    server.wait_lines(&["supervisor", ") ready"], 1);
    let supervisor = server.pid();
    let load = Load::start(server.port, 2);
    assert!(server.wait_log(&["is replaced: it served --worker-max-requests"]));
    assert!(server.wait_log(&["serves; pid"]));
    std::thread::sleep(Duration::from_millis(300));
    let (ok, failed) = load.finish();
    eprintln!("a worker recycled under load: {ok} answered, {failed} failed");
    assert_eq!(failed, 0, "{ok} answered: {}", server.log());
    assert!(started_pids(&server).len() >= 2);
    assert_eq!(server.pid(), supervisor);
}

#[test]
fn sigusr2_replaces_every_worker_one_at_a_time_keeping_the_pid() {
    let server = process_mode("epoll", &["--workers", "2"]);
    server.wait_lines(&["supervisor", ") ready"], 2);
    let first = started_pids(&server);
    let load = Load::start(server.port, 3);
    std::thread::sleep(Duration::from_millis(200));
    server.signal(Signal::USR2);
    let swapped = server.wait_lines(&["serves; pid", "drains"], 2);
    assert_eq!(swapped.len(), 2, "{}", server.log());
    let pid = server.pid();
    assert!(server.wait_log(&[&format!(
        "supervisor re-executed in place from {} (pid {pid}), serving with 2 worker(s)",
        crate::harness::STOA
    )]));
    std::thread::sleep(Duration::from_millis(300));
    let (ok, failed) = load.finish();
    eprintln!("SIGUSR2 in process mode under load: {ok} answered, {failed} failed");
    assert_eq!(failed, 0, "{ok} answered: {}", server.log());
    assert!(wait_until(Duration::from_secs(10), || first
        .iter()
        .all(|&p| !alive(p))));
    assert_eq!(server.get("/article").status, 200);
}

#[test]
fn a_worker_timeout_not_above_stuck_after_is_refused() {
    let (code, log) = Server::launch("epoll")
        .args(&[
            "--worker-mode",
            "process",
            "--stuck-after",
            "5s",
            "--worker-timeout",
            "5s",
        ])
        .refused();
    assert!(!code.success());
    assert!(
        log.contains("--worker-timeout 5s must be more than --stuck-after 5s")
            && log.contains("try --worker-timeout 6s"),
        "{log}"
    );
}

/// Runs as PID 1 of a new PID namespace (as in a container), with a user
/// namespace too where this is not root; fails naming `unshare` if the
/// machine refuses both.
fn as_pid_1() -> String {
    let root = rustix::process::geteuid().is_root();
    let flags = if root {
        "--pid --fork --mount-proc"
    } else {
        "-r --pid --fork --mount-proc"
    };
    let probe = std::process::Command::new("unshare")
        .args(flags.split(' '))
        .arg("true")
        .status()
        .unwrap_or_else(|e| panic!("unshare (util-linux) is needed: {e}"));
    assert!(
        probe.success(),
        "unshare {flags} is refused on this machine"
    );
    format!("exec unshare {flags} \"$0\" \"$@\"")
}

#[test]
fn replaces_past_the_generation_cap_as_pid_1_recycle_workers_and_lose_nothing() {
    use crate::common::{bytes, install_atomically, wait_body, HOT};
    let server = Server::launch("epoll")
        .apps(&["article"])
        .file(HOT, &bytes("hot-v1"))
        .shell(&as_pid_1())
        .args(&[
            "--worker-mode",
            "process",
            "--workers",
            "2",
            "--max-generations",
            "4",
            "--graceful-timeout",
            "5",
        ])
        .start();
    assert!(server.log_contains("supervisor: 2 worker process(es)"));
    wait_body(&server, "/hot", "v1");
    let rss = |server: &Server| -> Vec<u64> {
        crate::common::status(server.port)["per_worker"]
            .as_array()
            .map(|rows| {
                rows.iter()
                    .filter_map(|r| r["rss_bytes"].as_u64())
                    .collect()
            })
            .unwrap_or_default()
    };
    let fresh: u64 = rss(&server).into_iter().max().unwrap_or(0);
    let load = Load::start(server.port, 2);
    let dir = server.apps_dir();
    let replaces = 40;
    // Each worker logs one load of each round's file: a replace, or the
    // first load of the worker that replaces one at the cap. Answers alone
    // cannot tell: with one worker on each version, ten fresh connections
    // in a row to one of them come by chance within the wait, the rounds
    // then come faster than a file settles, and no worker loads again.
    let loads = |n: usize| server.wait_lines(&["hot 0.1.0 at /hot from"], n).len();
    assert_eq!(loads(2), 2, "{}", server.log());
    for round in 0..replaces {
        let version = if round % 2 == 0 { "v2" } else { "v1" };
        install_atomically(&dir, HOT, &bytes(&format!("hot-{version}")));
        wait_body(&server, "/hot", version);
        let want = 2 + 2 * (round + 1);
        assert!(loads(want) >= want, "round {round}: {}", server.log());
        assert!(wait_until(crate::common::HOT_WAIT, || (0..10).all(|_| {
            crate::common::fetch(&server, "/hot") == (200, version.to_string())
        })));
    }
    let recycled = server.wait_lines(&["is replaced: its apps reached --max-generations"], 2);
    std::thread::sleep(Duration::from_millis(300));
    let (ok, failed) = load.finish();
    eprintln!(
        "{replaces} replaces past --max-generations 4 as PID 1: {} worker replacements, \
         {ok} answered, {failed} failed",
        recycled.len()
    );
    let health = crate::common::log_health(&server);
    assert!(recycled.len() >= 2, "{}\n{health}", server.log());
    assert_eq!(failed, 0, "{ok} answered: {}", server.log());
    assert!(!server.log_contains("re-executing the host"));
    // Old generations go with the workers that held them.
    let after: u64 = rss(&server).into_iter().max().unwrap_or(u64::MAX);
    eprintln!("worker RSS: {fresh} bytes fresh, {after} after {replaces} replaces");
    assert!(after < fresh * 2, "{fresh} bytes fresh, {after} after");
    assert_eq!(server.get("/article").status, 200);
}

/// A supervisor as PID 1 of its own namespace cannot see the pids of the
/// supervisors outside it: each looks dead from there. Their stores of
/// plugin copies must stay (each supervisor holds its store's lock), or the
/// container would remove a live neighbour's rollback copies.
#[test]
fn a_supervisor_as_pid_1_leaves_a_live_neighbours_store_alone() {
    let outside = process_mode("epoll", &["--workers", "1"]);
    assert!(outside.wait_log(&["supervisor", ") ready"]));
    let worker = started_pids(&outside)[0];
    let store = crate::activation::environ_of(worker, "STOA_GENERATIONS")
        .map(std::path::PathBuf::from)
        .expect("the worker's STOA_GENERATIONS");
    assert!(store.is_dir(), "{}", store.display());
    let inside = Server::launch("epoll")
        .apps(&["article"])
        .shell(&as_pid_1())
        .args(&["--worker-mode", "process", "--workers", "1"])
        .start();
    assert!(inside.wait_log(&["supervisor", ") ready"]));
    assert_eq!(inside.get("/article").status, 200);
    assert!(
        store.is_dir(),
        "the PID-1 supervisor removed a live store: {}",
        inside.log()
    );
    assert!(!inside.log_contains(&store.display().to_string()));
    assert_eq!(outside.get("/article").status, 200);
}

/// Thread mode as PID 1 (a container without an init): a re-exec would
/// end the namespace when the old process exits, so the replace past
/// `--max-generations` and SIGUSR2 are refused with a line naming
/// `--worker-mode process`, and the host serves on, the old version
/// mounted.
#[test]
fn thread_mode_as_pid_1_refuses_to_reexec_and_serves_on() {
    use crate::common::{bytes, install_atomically, wait_body, HOT};
    let server = Server::launch("epoll")
        .apps(&["article"])
        .file(HOT, &bytes("hot-v1"))
        .shell(&as_pid_1())
        .args(&["--worker-mode", "thread", "--max-generations", "2"])
        .start();
    wait_body(&server, "/hot", "v1");
    let dir = server.apps_dir();
    install_atomically(&dir, HOT, &bytes("hot-v2"));
    wait_body(&server, "/hot", "v2");
    // The third generation is past the cap: a re-exec would load it.
    install_atomically(&dir, HOT, &bytes("hot-v1"));
    let refused = "refused: this stoa is PID 1 in thread mode";
    assert!(
        server.wait_log(&[
            "--on-generation-cap reexec",
            refused,
            "--worker-mode process"
        ]),
        "{}",
        server.log()
    );
    // SIGUSR2 goes to stoa itself: the child of `unshare --fork`.
    let children = std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", server.pid()))
        .expect("read unshare's children");
    let stoa: i32 = children
        .split_whitespace()
        .next()
        .and_then(|p| p.parse().ok())
        .expect("unshare has a child");
    let pid = rustix::process::Pid::from_raw(stoa).expect("a pid");
    rustix::process::kill_process(pid, Signal::USR2).expect("signal stoa");
    assert!(
        server.wait_log(&["SIGUSR2 refused: this stoa is PID 1 in thread mode"]),
        "{}",
        server.log()
    );
    assert!(
        !server.log_contains("re-executing the host"),
        "{}",
        server.log()
    );
    assert!(
        !server.log_contains("starting a new stoa"),
        "{}",
        server.log()
    );
    // Still the one process, serving the version it had.
    assert!(alive(server.pid()) && alive(stoa as u32));
    assert_eq!(
        crate::common::fetch(&server, "/hot"),
        (200, "v2".to_string())
    );
    assert_eq!(server.get("/article").status, 200);
}

/// A plugin is vetted once for the whole host, at start-up and on a hot
/// drop: one load probe however many workers, and the other workers load
/// the copy the probe passed.
#[test]
fn a_plugin_is_probed_once_for_every_worker() {
    use crate::common::{bytes, install_atomically, HOT};
    let server = Server::launch("epoll")
        .apps(&["article"])
        .file(HOT, &bytes("hot-v1"))
        .args(&[
            "--worker-mode",
            "process",
            "--workers",
            "3",
            "--log-level",
            "debug",
        ])
        .start();
    server.wait_lines(&["supervisor", ") ready"], 3);
    let probes = |server: &Server| server.log_lines(&["load probe of", HOT]).len();
    let shared = |server: &Server| {
        server
            .log_lines(&["loading the copy another worker vetted"])
            .iter()
            .filter(|l| l.contains(HOT))
            .count()
    };
    // The workers' lines may reach the log after the supervisor's.
    wait_until(WAIT, || probes(&server) >= 1 && shared(&server) >= 2);
    assert_eq!(
        (probes(&server), shared(&server)),
        (1, 2),
        "{}",
        server.log()
    );
    install_atomically(&server.apps_dir(), HOT, &bytes("hot-v2"));
    assert!(
        wait_until(crate::common::HOT_WAIT, || shared(&server) == 4),
        "{}",
        server.log()
    );
    assert!(wait_until(crate::common::HOT_WAIT, || (0..12).all(|_| {
        crate::common::fetch(&server, "/hot") == (200, "v2".to_string())
    })));
    wait_until(WAIT, || probes(&server) >= 2);
    assert_eq!(probes(&server), 2, "{}", server.log());
}

/// Worker processes share the access log's pipe: every line arrives whole
/// (each write holds whole lines, at most `PIPE_BUF` bytes), none is lost
/// or cut into another.
#[test]
fn worker_processes_write_whole_lines_into_one_pipe() {
    let server = Server::launch("epoll")
        .apps(&["article"])
        .args(&[
            "--worker-mode",
            "process",
            "--workers",
            "3",
            "--access-log",
            "-",
        ])
        .stdout_pipe(4096)
        .start();
    server.wait_lines(&["supervisor", ") ready"], 3);
    // Lines of about 2 KiB: two of them in one write would pass PIPE_BUF,
    // and a pipe of one page takes such a write in two parts.
    let pad = "x".repeat(1900);
    let (threads, each) = (6, 100);
    std::thread::scope(|s| {
        for t in 0..threads {
            let pad = &pad;
            let port = server.port;
            s.spawn(move || {
                for i in 0..each {
                    let path = format!("/article?t={t}&i={i}&pad={pad}");
                    assert_eq!(crate::common::try_get(port, &path), Ok(200));
                }
            });
        }
    });
    let total = threads * each;
    let marker = "\"GET /article?t=";
    assert!(
        server
            .stdout
            .wait(Duration::from_secs(20), |t| t.matches(marker).count()
                >= total),
        "{} access lines of {total}",
        server.stdout.text().matches(marker).count()
    );
    let out = server.stdout.text();
    let mut seen = std::collections::HashSet::new();
    for line in out.lines() {
        if line.starts_with("listening on") {
            continue;
        }
        assert!(
            line.matches(marker).count() == 1 && line.matches(&*pad).count() == 1,
            "a line not whole: {line:?}"
        );
        let at = line.find(marker).map_or(0, |i| i + marker.len());
        let key: String = line[at..].split("&pad=").next().unwrap_or("").to_string();
        assert!(seen.insert(key), "a line twice: {line:?}");
    }
    assert_eq!(seen.len(), total);
    // Every worker wrote some of them (the others' counts in status are
    // published snapshots, up to a tenth of a second old).
    let every = || {
        let s = crate::common::status(server.port);
        let rows = s["per_worker"].as_array().cloned().unwrap_or_default();
        rows.len() == 3 && rows.iter().all(|r| r["requests"].as_u64() > Some(0))
    };
    assert!(
        wait_until(Duration::from_secs(10), every),
        "{}",
        crate::common::status(server.port)
    );
}

matrix!(metrics_add_up_every_worker_process_and_keep_a_dead_ones_counts);

fn metrics_add_up_every_worker_process_and_keep_a_dead_ones_counts(poller: &str) {
    use crate::common::{metrics, status};
    let server = process_mode(poller, &["--workers", "2"]);
    server.wait_lines(&["supervisor", ") ready"], 2);
    let sent = 200;
    for _ in 0..sent {
        assert_eq!(crate::common::try_get(server.port, "/article"), Ok(200));
    }
    let article_2xx = |port| {
        metrics(port)
            .get("stoa_requests_total{app=\"article\",class=\"2xx\"}")
            .copied()
    };
    // Each worker publishes its counters a few times a second.
    assert!(
        wait_until(Duration::from_secs(5), || article_2xx(server.port)
            == Some(sent as f64)),
        "article 2xx: {:?} of {sent}",
        article_2xx(server.port)
    );
    // Whichever worker answers adds up the others' last published
    // counters (a tenth of a second old at most): wait for both to agree.
    assert!(wait_until(Duration::from_secs(5), || status(server.port)
        ["requests"]["article"]["2xx"]
        == sent));
    let s = status(server.port);
    assert_eq!(s["worker_mode"], "process", "{s}");
    let rows = s["per_worker"].as_array().cloned().unwrap_or_default();
    assert_eq!(rows.len(), 2, "{s}");
    let pids: Vec<u64> = rows.iter().filter_map(|r| r["pid"].as_u64()).collect();
    assert_eq!(pids.len(), 2, "{s}");
    assert_ne!(pids[0], pids[1]);
    assert!(
        rows.iter().all(|r| r["rss_bytes"].as_u64() > Some(0)
            && r["generation"] == 1
            && r["crashes"] == 0),
        "{s}"
    );
    // The error log's lines are the host's: every worker's, summed (one
    // answer holding both workers' published counts: wait for it).
    let written = |v: &serde_json::Value| v["logs"]["error"]["written"].as_u64().unwrap_or(0);
    let mut last = s.clone();
    let summed = wait_until(Duration::from_secs(5), || {
        last = status(server.port);
        let rows = last["per_worker"].as_array().cloned().unwrap_or_default();
        let by_worker: Vec<u64> = rows.iter().map(written).collect();
        by_worker.len() == 2
            && by_worker.iter().all(|&n| n > 0)
            && written(&last) >= by_worker.iter().sum::<u64>()
    });
    assert!(summed, "{last}");
    // Kill one: its counters stay in the totals, its death is counted (its
    // last published ones: a second of quiet lets it publish them all; a
    // crash loses what came in its last tenth of a second).
    std::thread::sleep(Duration::from_secs(1));
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(pids[0] as i32).expect("pid"),
        Signal::KILL,
    )
    .expect("kill");
    assert!(server.wait_log(&["replaced by pid"]));
    assert!(wait_until(Duration::from_secs(5), || {
        let s = status(server.port);
        s["supervisor"]["crashes"] == 1 && s["per_worker"].as_array().map(Vec::len) == Some(2)
    }));
    assert!(wait_until(Duration::from_secs(5), || status(server.port)
        ["requests"]["article"]["2xx"]
        == sent));
    let s = status(server.port);
    assert_eq!(s["supervisor"]["crashes_by_app"]["(none)"], 1, "{s}");
    // The killed worker's place shows its second generation and the crash.
    let rows = s["per_worker"].as_array().cloned().unwrap_or_default();
    assert!(
        rows.iter()
            .any(|r| r["generation"] == 2 && r["crashes"] == 1)
            && rows
                .iter()
                .any(|r| r["generation"] == 1 && r["crashes"] == 0),
        "{s}"
    );
    let m = metrics(server.port);
    assert_eq!(
        m.get("stoa_worker_crashes_total{app=\"(none)\"}"),
        Some(&1.0)
    );
    assert!(wait_until(Duration::from_secs(5), || article_2xx(
        server.port
    ) == Some(
        sent as f64
    )));
}

#[test]
fn a_worker_whose_blocking_pool_hangs_past_worker_timeout_is_replaced() {
    let server = Server::launch("epoll")
        .apps(&["stuck", "article"])
        .args(&[
            "--worker-mode",
            "process",
            "--workers",
            "1",
            "--blocking-threads",
            "2",
            "--app-timeout",
            "1s",
            "--stuck-after",
            "1s",
            "--worker-timeout",
            "2s",
            "--graceful-timeout",
            "1s",
        ])
        .start();
    server.wait_lines(&["supervisor", ") ready"], 1);
    // Two handlers that never return take both pool threads.
    let mut hung: Vec<_> = (0..2).map(|_| server.connect()).collect();
    for c in hung.iter_mut() {
        c.send(&crate::client::get("/_stuck/block"));
    }
    assert!(server.wait_log(&[
        "is replaced: every thread of its blocking pool has run a job past its deadline"
    ]));
    assert!(server.wait_log(&["serves; pid"]));
    assert_eq!(server.get("/article").status, 200);
}

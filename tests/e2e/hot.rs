//! Hot plugins: apps added, replaced and removed in a running server's apps
//! directory. A plugin dropped in (renamed from a dotfile, or copied in
//! place) is mounted within seconds; a replacement under a concurrent load
//! loop fails no request and then serves alone; a broken replacement is
//! refused while the old version keeps serving; a removed app finishes its
//! in-flight requests and then answers 404; a half-written file is not
//! loaded until complete; `--no-watch` waits for SIGHUP; and
//! `--max-generations` caps the replacements kept in memory.
//!
//! The test plugins `hot-v1` and `hot-v2` are both the app `hot` at `/hot`,
//! answering `v1` or `v2`. Plugin files are always copied into the apps
//! directory (never hard-linked), so changing it never touches `target/`.

use crate::client::{get, Client};
use crate::common::{
    bytes, fetch, install_atomically, path_of, status, wait_body, wait_log, HOT, HOT_WAIT,
};
use crate::harness::{plugins, wait_until, Server};
use serde_json::Value;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

matrix!(
    drop_in_by_rename,
    drop_in_by_copy,
    replace_under_load,
    broken_replacement_keeps_the_old_version,
    remove_finishes_in_flight_requests_then_404,
    half_written_file_waits_until_complete,
    sighup_rescans_with_no_watch,
    max_generations_refuses_a_third_load,
    max_generations_also_caps_remove_and_re_add,
);

/// A server with `article` hard-linked in, the given `(file, plugin)`
/// pairs copied in, and the extra flags.
fn start(poller: &str, files: &[(&str, &str)], args: &[&str]) -> Server {
    let mut launch = Server::launch(poller).apps(&["article"]).args(args);
    for (file, plugin) in files {
        launch = launch.file(file, &bytes(plugin));
    }
    launch.start()
}

/// Waits until `GET path` answers 404.
fn wait_404(server: &Server, path: &str) {
    let mut last = (0, String::new());
    let ok = wait_until(HOT_WAIT, || {
        last = fetch(server, path);
        last.0 == 404
    });
    assert!(
        ok,
        "{path} did not become 404 within {HOT_WAIT:?}; last: {last:?}"
    );
}

fn drop_in_by_rename(poller: &str) {
    let server = start(poller, &[], &[]);
    assert_eq!(fetch(&server, "/hot").0, 404);
    install_atomically(&server.apps_dir(), HOT, &bytes("hot-v1"));
    wait_body(&server, "/hot", "v1");
    wait_log(&server, &["loaded app hot", &path_of(&server, HOT)]);
    assert_eq!(fetch(&server, "/article").0, 200, "article still answers");
    assert!(server.log_lines(&["refused plugin"]).is_empty());
}

fn drop_in_by_copy(poller: &str) {
    let server = start(poller, &[], &[]);
    assert_eq!(fetch(&server, "/hot").0, 404);
    let so = &plugins()["hot-v1"];
    std::fs::copy(so, server.apps_dir().join(HOT)).expect("copy the plugin in");
    wait_body(&server, "/hot", "v1");
    wait_log(&server, &["loaded app hot", &path_of(&server, HOT)]);
    assert!(server.log_lines(&["refused plugin"]).is_empty());
}

/// What one load thread saw.
#[derive(Default)]
struct Seen {
    v1: usize,
    v2: usize,
    failures: Vec<String>,
}

/// Requests `/hot` until `stop`, `MAX` requests in all, or 20 s; on one
/// keep-alive connection if `keep_alive`, else a new one per request.
fn load(
    port: u16,
    keep_alive: bool,
    stop: &AtomicBool,
    total: &AtomicUsize,
    v2: &AtomicUsize,
) -> Seen {
    const MAX: usize = 6000;
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut seen = Seen::default();
    let mut conn = keep_alive.then(|| Client::connect(port));
    while !stop.load(Relaxed) && total.fetch_add(1, Relaxed) < MAX && Instant::now() < deadline {
        let r = match &mut conn {
            Some(c) => c.request(&get("/hot")),
            None => Client::connect(port).request(&get("/hot")),
        };
        match (r.status, r.body.as_slice()) {
            (200, b"v1") if seen.v2 == 0 => seen.v1 += 1,
            (200, b"v2") => {
                seen.v2 += 1;
                v2.fetch_add(1, Relaxed);
            }
            (status, body) => seen.failures.push(format!(
                "{status} {:?} (after {} v1, {} v2)",
                String::from_utf8_lossy(body),
                seen.v1,
                seen.v2
            )),
        }
        // Paced, so the loop spans the swap (it takes a second or two).
        std::thread::sleep(Duration::from_millis(3));
    }
    seen
}

fn replace_under_load(poller: &str) {
    let server = start(poller, &[(HOT, "hot-v1")], &[]);
    wait_body(&server, "/hot", "v1");
    let dir = server.apps_dir();
    let tmp = dir.join(format!(".{HOT}"));
    std::fs::write(&tmp, bytes("hot-v2")).expect("write v2 as a dotfile");

    let stop = Arc::new(AtomicBool::new(false));
    let total = Arc::new(AtomicUsize::new(0));
    let v2 = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..4)
        .map(|i| {
            let (stop, total, v2) = (stop.clone(), total.clone(), v2.clone());
            let port = server.port;
            std::thread::spawn(move || load(port, i % 2 == 0, &stop, &total, &v2))
        })
        .collect();
    assert!(
        wait_until(HOT_WAIT, || total.load(Relaxed) >= 100),
        "the load did not start"
    );
    std::fs::rename(&tmp, dir.join(HOT)).expect("rename v2 over v1");
    let swapped = wait_until(HOT_WAIT, || fetch(&server, "/hot") == (200, "v2".into()));
    // Let the load run on the new version for a while before stopping it.
    wait_until(HOT_WAIT, || v2.load(Relaxed) >= 100);
    stop.store(true, Relaxed);
    let mut failures = Vec::new();
    let (mut v1s, mut v2s) = (0, 0);
    for (i, t) in threads.into_iter().enumerate() {
        match t.join() {
            Ok(seen) => {
                v1s += seen.v1;
                v2s += seen.v2;
                failures.extend(
                    seen.failures
                        .into_iter()
                        .map(|f| format!("thread {i}: {f}")),
                );
            }
            Err(_) => failures.push(format!("thread {i} panicked (see its message above)")),
        }
    }
    assert!(
        failures.is_empty(),
        "{} failed requests: {failures:#?}",
        failures.len()
    );
    assert!(swapped, "/hot never answered v2 within {HOT_WAIT:?}");
    assert!(
        v1s > 0 && v2s > 0,
        "the load saw {v1s} v1 and {v2s} v2 answers"
    );
    for _ in 0..20 {
        assert_eq!(
            fetch(&server, "/hot"),
            (200, "v2".into()),
            "only v2 after the swap"
        );
    }
    wait_log(&server, &["replaced app hot", &path_of(&server, HOT)]);
}

fn broken_replacement_keeps_the_old_version(poller: &str) {
    let server = start(poller, &[(HOT, "hot-v1")], &[]);
    wait_body(&server, "/hot", "v1");
    install_atomically(&server.apps_dir(), HOT, b"not a library");
    let path = path_of(&server, HOT);
    wait_log(&server, &["refused plugin", &path, "keeps serving"]);
    let line = server.log_lines(&["refused plugin", &path]).remove(0);
    assert!(line.contains("(app hot 0.1.0 keeps serving)"), "{line}");
    for _ in 0..10 {
        assert_eq!(fetch(&server, "/hot"), (200, "v1".into()));
    }
    assert_eq!(fetch(&server, "/article").0, 200, "article still answers");
    let doc = status(&server);
    let refused = doc["refused"].as_array().expect("a refused list");
    let entry = refused
        .iter()
        .find(|r| r["file"] == path.as_str())
        .unwrap_or_else(|| panic!("{path} not in refused: {refused:#?}"));
    assert!(
        !entry["reason"].as_str().unwrap_or_default().is_empty(),
        "no reason: {entry}"
    );
    // One refusal for the file, not one per scan.
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(server.log_lines(&["refused plugin", &path]).len(), 1);
    // A good file after the broken one is loaded, and the refusal cleared.
    install_atomically(&server.apps_dir(), HOT, &bytes("hot-v2"));
    wait_body(&server, "/hot", "v2");
    assert!(status(&server)["refused"]
        .as_array()
        .is_some_and(|r| r.is_empty()));
}

fn remove_finishes_in_flight_requests_then_404(poller: &str) {
    const FILE: &str = "libstoa_test_misbehave.so";
    let server = start(poller, &[(FILE, "misbehave"), (HOT, "hot-v1")], &[]);
    assert_eq!(fetch(&server, "/_test/ok"), (200, "ok".into()));
    let mut clients: Vec<Client> = (0..10).map(|_| server.connect()).collect();
    for (i, c) in clients.iter_mut().enumerate() {
        c.send(&get(&format!("/_test/later?n={i}")));
    }
    // All ten are with the app (each logs as it takes its request).
    let taken = wait_until(HOT_WAIT, || {
        server.log_lines(&["answering /_test/later"]).len() >= 10
    });
    assert!(taken, "the app did not take 10 requests");
    std::fs::remove_file(server.apps_dir().join(FILE)).expect("remove the plugin");
    for (i, c) in clients.iter_mut().enumerate() {
        let r = c.read_response();
        assert_eq!(
            (r.status, r.text()),
            (200, format!("later /_test/later?n={i}").as_str())
        );
    }
    // Keep deferred requests going through the unmount: each is answered
    // by the app (200) or, once unmounted, 404; never anything else.
    let mut gone = vec![false; clients.len()];
    let ok = wait_until(HOT_WAIT, || {
        for (i, c) in clients.iter_mut().enumerate() {
            let r = c.request(&get("/_test/later"));
            match (r.status, gone[i]) {
                (404, _) => gone[i] = true,
                (200, false) => assert_eq!(r.text(), "later /_test/later"),
                (status, _) => panic!(
                    "client {i}: {status} {:?} (after a 404: {})",
                    r.body, gone[i]
                ),
            }
        }
        gone.iter().all(|g| *g)
    });
    assert!(ok, "/_test/later still answers after the removal");
    wait_log(
        &server,
        &["unmounted app misbehave", &path_of(&server, FILE)],
    );
    wait_404(&server, "/_test/later");
    assert_eq!(fetch(&server, "/_test/ok").0, 404);
    assert_eq!(
        fetch(&server, "/hot"),
        (200, "v1".into()),
        "the other apps stay"
    );
}

fn half_written_file_waits_until_complete(poller: &str) {
    let server = start(poller, &[], &[]);
    let v1 = bytes("hot-v1");
    let (first, rest) = v1.split_at(v1.len() / 2);
    let target = server.apps_dir().join(HOT);
    std::fs::write(&target, first).expect("write the first half");
    std::thread::sleep(Duration::from_millis(500));
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&target)
        .expect("reopen to append");
    file.write_all(rest).expect("write the rest");
    drop(file);
    wait_body(&server, "/hot", "v1");
    let path = path_of(&server, HOT);
    assert!(
        server.log_lines(&["refused plugin", &path]).is_empty(),
        "the half-written file was tried: {:#?}",
        server.log_lines(&["refused plugin", &path])
    );
    // The log is read by another thread: the load line may trail the answer.
    assert!(
        server.wait_log(&["loaded app hot", &path]),
        "{}",
        server.log()
    );
    assert_eq!(server.log_lines(&["loaded app hot", &path]).len(), 1);
    assert!(status(&server)["refused"]
        .as_array()
        .is_some_and(|r| r.is_empty()));
}

/// The pid of this server, for `kill`.
fn server_pid(server: &Server) -> i32 {
    i32::try_from(server.pid()).expect("a pid")
}

fn sighup_rescans_with_no_watch(poller: &str) {
    let server = start(poller, &[], &["--no-watch"]);
    assert!(server.wait_log(&["not watching", "--no-watch"]));
    std::fs::copy(&plugins()["hot-v1"], server.apps_dir().join(HOT)).expect("copy the plugin in");
    // Nothing happens without a signal (a watch would load it in ~2 s).
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(3) {
        assert_eq!(fetch(&server, "/hot").0, 404, "loaded without SIGHUP");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(server.log_lines(&["loaded app hot"]).is_empty());
    let pid = server_pid(&server);
    // SAFETY: kill(2) on the pid of our own child process.
    assert_eq!(
        unsafe { libc::kill(pid, libc::SIGHUP) },
        0,
        "kill -HUP {pid}"
    );
    wait_body(&server, "/hot", "v1");
    wait_log(&server, &["SIGHUP: rescanning"]);
    wait_log(&server, &["loaded app hot", &path_of(&server, HOT)]);
}

fn max_generations_refuses_a_third_load(poller: &str) {
    let server = start(
        poller,
        &[(HOT, "hot-v1")],
        &["--max-generations", "2", "--on-generation-cap", "refuse"],
    );
    wait_body(&server, "/hot", "v1");
    let dir = server.apps_dir();
    install_atomically(&dir, HOT, &bytes("hot-v2"));
    wait_body(&server, "/hot", "v2");
    install_atomically(&dir, HOT, &bytes("hot-v1"));
    let path = path_of(&server, HOT);
    wait_log(&server, &["refused plugin", &path, "replace refused"]);
    let line = server.log_lines(&["replace refused"]).remove(0);
    assert!(line.contains("--max-generations 2"), "{line}");
    assert!(line.contains("keeps serving"), "{line}");
    for _ in 0..10 {
        assert_eq!(
            fetch(&server, "/hot"),
            (200, "v2".into()),
            "the previous version serves"
        );
    }
    let doc = status(&server);
    let hot: Vec<&Value> = doc["generations"]
        .as_array()
        .expect("a generations list")
        .iter()
        .filter(|g| g["app"] == "hot")
        .collect();
    assert_eq!(hot.len(), 2, "{hot:#?}");
    for (n, g) in hot.iter().enumerate() {
        assert_eq!(g["generation"], n + 1, "{g}");
        assert_eq!(g["file"], path.as_str(), "{g}");
        assert!(g["mapped_bytes"].as_u64().is_some_and(|b| b > 0), "{g}");
    }
    assert!(doc["refused"]
        .as_array()
        .is_some_and(|r| r.iter().any(|e| e["file"] == path.as_str())));
}

/// Removing an app and dropping it in again loads another generation of
/// the same app (libraries are never unloaded): the cap must count it too.
fn max_generations_also_caps_remove_and_re_add(poller: &str) {
    let server = start(
        poller,
        &[(HOT, "hot-v1")],
        &["--max-generations", "2", "--on-generation-cap", "refuse"],
    );
    wait_body(&server, "/hot", "v1");
    let dir = server.apps_dir();
    install_atomically(&dir, HOT, &bytes("hot-v2"));
    wait_body(&server, "/hot", "v2");
    std::fs::remove_file(dir.join(HOT)).expect("remove the plugin");
    wait_404(&server, "/hot");
    install_atomically(&dir, HOT, &bytes("hot-v1"));
    let path = path_of(&server, HOT);
    let acted = wait_until(HOT_WAIT, || {
        !server.log_lines(&["refused plugin", &path]).is_empty()
            || server.log_lines(&["loaded app hot", &path]).len() > 1
    });
    assert!(acted, "the re-added file was neither loaded nor refused");
    let generations = status(&server)["generations"]
        .as_array()
        .map_or(0, |g| g.iter().filter(|g| g["app"] == "hot").count());
    assert_eq!(
        (
            server.log_lines(&["loaded app hot", &path]).len(),
            generations
        ),
        (1, 2),
        "(load lines, generations of hot in status) past --max-generations 2"
    );
    assert!(server.wait_log(&["refused plugin", &path, "--max-generations 2"]));
    assert_eq!(fetch(&server, "/hot").0, 404);
}

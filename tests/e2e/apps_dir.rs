//! The apps directory over time, as an operator meets it: an apps directory
//! or plugin file any user can write (or another user owns) is refused at
//! start-up and on a hot drop, `--insecure-apps-dir` loads it with a loud
//! warning, a symlinked release loads and switches; a scan that fails (the
//! directory renamed away) leaves every app mounted and is logged once and
//! counted, a directory rebuilt in place keeps every app and generation, and clients past the descriptor limit leave the scans room; SIGHUP does not load a file still being
//! written but loads it once it has settled; and a slow or hung app
//! constructor delays only its own app, never hot reload, start-up or
//! shutdown; but `/ready` says 503 naming it while it constructs at
//! start-up, up to `--init-timeout`, past which its app is refused.

use crate::common::{
    bytes, fetch, install_atomically, path_of, slow_init_gate, status, wait_body, wait_log, HOT,
    HOT_WAIT,
};
use crate::harness::{wait_until, Server, TempDir, SAMPLE_APPS};
use rustix::process::Signal;
use std::io::Write;
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

matrix!(
    world_writable_apps_dir_is_refused,
    untrusted_plugin_files_are_refused,
    insecure_apps_dir_loads_with_a_warning,
    symlinked_release_loads_and_switches,
    renamed_apps_dir_keeps_the_apps,
    descriptor_limit_leaves_the_scans_room,
    sighup_waits_for_a_file_still_being_written,
    hung_constructor_blocks_neither_reload_nor_shutdown,
    hung_constructor_at_start_up_serves_the_others,
    slow_constructor_mounts_its_app_when_it_returns,
);

/// The file the `slow-init` test plugin is installed as.
const SLOW: &str = "libstoa_test_slow_init.so";

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// The reason status gives for refusing `file` (a full path).
fn refused_reason(server: &Server, file: &str) -> String {
    let doc = status(server);
    let refused = doc["refused"].as_array().expect("a refused list");
    let entry = refused
        .iter()
        .find(|r| r["file"] == file)
        .unwrap_or_else(|| panic!("{file} not in refused: {refused:#?}"));
    entry["reason"].as_str().unwrap_or_default().to_string()
}

/// The failed scans were logged once, their end once, and counted (at
/// least `min`) alike in status and metrics.
fn assert_one_failure_streak(server: &Server, min: u64) {
    wait_log(server, &["can be read again"]);
    let failures = server.log_lines(&["cannot read the apps directory"]);
    assert_eq!(failures.len(), 1, "{failures:#?}");
    let doc = status(server);
    assert!(doc["apps_scan_error"].is_null(), "{doc:#}");
    let in_status = doc["apps_scan_failures"].as_u64().unwrap_or(0);
    let metrics = server.get("/.well-known/stoa/metrics").text().to_string();
    let in_metrics = metrics
        .lines()
        .find_map(|l| l.strip_prefix("stoa_apps_scan_failures_total "))
        .and_then(|v| v.trim().parse().ok());
    assert!(
        in_status >= min && in_metrics == Some(in_status),
        "{in_status} failures in status, {in_metrics:?} in metrics"
    );
}

fn world_writable_apps_dir_is_refused(poller: &str) {
    let server = Server::launch(poller)
        .apps(&["article"])
        .prepare(|dir| chmod(dir, 0o777))
        .start();
    let dir = server.apps_dir();
    let article = path_of(&server, "libarticle.so");
    wait_log(
        &server,
        &["refused plugin", &article, "writable by any user"],
    );
    assert!(refused_reason(&server, &article)
        .contains("apps directory is writable by any user (mode 0777)"));
    assert_eq!(
        fetch(&server, "/article").0,
        404,
        "loaded from a world-writable dir"
    );
    // A hot drop into it is refused too.
    install_atomically(&dir, HOT, &bytes("hot-v1"));
    let hot = path_of(&server, HOT);
    wait_log(&server, &["refused plugin", &hot, "writable by any user"]);
    assert_eq!(fetch(&server, "/hot").0, 404);
    // One line for the directory and one per file, not one per scan.
    std::thread::sleep(Duration::from_millis(1500));
    let dir_name = dir.display().to_string();
    assert_eq!(
        server
            .log_lines(&["untrusted apps directory", &dir_name])
            .len(),
        1
    );
    assert_eq!(server.log_lines(&["refused plugin", &article]).len(), 1);
    assert_eq!(server.log_lines(&["refused plugin", &hot]).len(), 1);
    // Group-writable is trusted: both load.
    chmod(&dir, 0o775);
    wait_log(&server, &["trusted again", &dir_name]);
    // Each file loads in its own turn of the scan: wait for each.
    wait_body(&server, "/hot", "v1");
    let article = wait_until(HOT_WAIT, || fetch(&server, "/article").0 == 200);
    assert!(article, "{}", server.log());
}

fn untrusted_plugin_files_are_refused(poller: &str) {
    let server = Server::launch(poller)
        .file(HOT, &bytes("hot-v1"))
        .file("libarticle.so", &bytes("article"))
        .file("libenviron.so", &bytes("environ"))
        .prepare(|dir| {
            chmod(&dir.join(HOT), 0o666);
            std::os::unix::fs::chown(dir.join("libarticle.so"), Some(65534), None)
                .expect("chown to nobody");
            chmod(&dir.join("libenviron.so"), 0o664);
        })
        .start();
    let hot = path_of(&server, HOT);
    let article = path_of(&server, "libarticle.so");
    wait_log(
        &server,
        &[
            "refused plugin",
            &hot,
            "the file is writable by any user (mode 0666)",
        ],
    );
    wait_log(&server, &["refused plugin", &article, "owned by uid 65534"]);
    assert!(refused_reason(&server, &article).contains("owned by uid 65534"));
    assert_eq!(fetch(&server, "/hot").0, 404);
    assert_eq!(fetch(&server, "/article").0, 404);
    assert_eq!(
        fetch(&server, "/_environ").0,
        200,
        "a group-writable file loads"
    );
    // Fixing the mode is enough: the file is looked at again and loaded.
    chmod(&server.apps_dir().join(HOT), 0o644);
    wait_body(&server, "/hot", "v1");
    assert_eq!(server.log_lines(&["refused plugin", &hot]).len(), 1);
}

fn insecure_apps_dir_loads_with_a_warning(poller: &str) {
    let server = Server::launch(poller)
        .file(HOT, &bytes("hot-v1"))
        .prepare(|dir| {
            chmod(dir, 0o777);
            chmod(&dir.join(HOT), 0o666);
        })
        .args(&["--insecure-apps-dir"])
        .start();
    wait_body(&server, "/hot", "v1");
    let dir = server.apps_dir().display().to_string();
    let hot = path_of(&server, HOT);
    assert_eq!(
        server
            .log_lines(&["WARN", "INSECURE", &dir, "--insecure-apps-dir"])
            .len(),
        2
    );
    assert_eq!(
        server
            .log_lines(&["WARN", "INSECURE", &hot, "mode 0666"])
            .len(),
        1
    );
    assert!(server.log_lines(&["refused plugin"]).is_empty());
}

fn symlinked_release_loads_and_switches(poller: &str) {
    let releases = TempDir::new("releases");
    let release = |name: &str, plugin: &str| {
        let dir = releases.path().join(name);
        std::fs::create_dir(&dir).expect("a release dir");
        std::fs::write(dir.join(HOT), bytes(plugin)).expect("a release file");
        dir.join(HOT)
    };
    let (v1, v2) = (release("v1", "hot-v1"), release("v2", "hot-v2"));
    let first = v1.clone();
    let server = Server::launch(poller)
        .apps(&["article"])
        .prepare(move |dir| std::os::unix::fs::symlink(first, dir.join(HOT)).expect("symlink"))
        .start();
    let link = path_of(&server, HOT);
    wait_body(&server, "/hot", "v1");
    wait_log(&server, &["loaded app hot", &link]);
    let apps = status(&server)["apps"].clone();
    let entry = apps
        .as_array()
        .and_then(|a| a.iter().find(|a| a["name"] == "hot"));
    assert_eq!(
        entry.map(|e| e["file"].clone()),
        Some(link.as_str().into()),
        "{apps:#}"
    );
    // Switch the release: a new link renamed over the old one.
    let switch = |to: &Path| {
        let tmp = server.apps_dir().join(".libhot.so.new");
        std::os::unix::fs::symlink(to, &tmp).expect("symlink");
        std::fs::rename(&tmp, server.apps_dir().join(HOT)).expect("rename the link");
    };
    switch(&v2);
    wait_body(&server, "/hot", "v2");
    // A link to a target any user can write is refused; v2 keeps serving.
    chmod(&v1, 0o666);
    switch(&v1);
    wait_log(
        &server,
        &[
            "refused plugin",
            &link,
            "the link's target is writable by any user",
        ],
    );
    assert_eq!(fetch(&server, "/hot"), (200, "v2".to_string()));
}

/// Requests `/article` on new connections until `stop`; the statuses.
fn article_loop(port: u16, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<Vec<u16>> {
    std::thread::spawn(move || {
        let mut seen = Vec::new();
        while !stop.load(Relaxed) {
            let r = crate::client::Client::connect(port).request(&crate::client::get("/article"));
            seen.push(r.status);
            std::thread::sleep(Duration::from_millis(20));
        }
        seen
    })
}

fn renamed_apps_dir_keeps_the_apps(poller: &str) {
    let server = Server::samples(poller);
    let dir = server.apps_dir();
    let away = dir.with_file_name("apps.away");
    let stop = Arc::new(AtomicBool::new(false));
    let requests = article_loop(server.port, stop.clone());
    std::thread::sleep(Duration::from_millis(300));
    std::fs::rename(&dir, &away).expect("rename the apps dir away");
    std::thread::sleep(Duration::from_secs(3));
    std::fs::rename(&away, &dir).expect("rename it back");
    // Requests keep flowing through the next scans (1 s apart).
    std::thread::sleep(Duration::from_millis(2500));
    stop.store(true, Relaxed);
    let seen = requests.join().expect("the request loop");
    let failed: Vec<&u16> = seen.iter().filter(|s| **s != 200).collect();
    assert!(
        seen.len() > 20 && failed.is_empty(),
        "{} of {} not 200: {failed:?}",
        failed.len(),
        seen.len()
    );
    assert_one_failure_streak(&server, 2);
}

/// Clients past what `ulimit -n` allows no longer take the descriptors
/// the apps directory's scans need: the connection cap follows the limit
/// (issue 15), so the scans go on and the apps stay mounted.
fn descriptor_limit_leaves_the_scans_room(poller: &str) {
    let server = Server::launch(poller)
        .apps(SAMPLE_APPS)
        .shell("ulimit -n 100")
        .start();
    assert_eq!(fetch(&server, "/article").0, 200);
    let clients: Vec<TcpStream> = (0..150)
        .map(|_| TcpStream::connect(("127.0.0.1", server.port)).expect("connect"))
        .collect();
    std::thread::sleep(Duration::from_millis(2500));
    drop(clients);
    let served = wait_until(Duration::from_secs(10), || {
        fetch(&server, "/article").0 == 200
    });
    assert!(served, "{}", server.log());
    assert!(
        !server.log_contains("cannot read the apps directory"),
        "{}",
        server.log()
    );
}

/// Requests each path in turn on new connections until `stop`; the
/// (path, status) of each.
fn request_loop(
    port: u16,
    paths: &'static [&'static str],
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<Vec<(&'static str, u16)>> {
    std::thread::spawn(move || {
        let mut seen = Vec::new();
        while !stop.load(Relaxed) {
            for path in paths {
                let r = crate::client::Client::connect(port).request(&crate::client::get(path));
                seen.push((*path, r.status));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        seen
    })
}

/// `rm -rf apps && mkdir apps && cp ...` with the same files: every app
/// keeps serving throughout (a removal waits for the settle time, as an
/// addition does), and each file back with the bytes of its mounted
/// generation keeps that generation (nothing is loaded again, nothing is
/// counted towards `--max-generations`). Backend-free: one backend.
#[test]
fn an_apps_dir_rebuilt_in_place_keeps_serving_and_its_generations() {
    let server = Server::launch("epoll")
        .apps(SAMPLE_APPS)
        .file(HOT, &bytes("hot-v1"))
        .start();
    wait_body(&server, "/hot", "v1");
    let dir = server.apps_dir();
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .expect("list the apps dir")
        .map(|e| e.expect("an entry").path())
        .map(|p| {
            let name = p
                .file_name()
                .expect("a name")
                .to_string_lossy()
                .into_owned();
            (name, std::fs::read(&p).expect("read a plugin"))
        })
        .collect();
    files.sort();
    assert_eq!(
        files.len(),
        4,
        "{:?}",
        files.iter().map(|f| &f.0).collect::<Vec<_>>()
    );
    let stop = Arc::new(AtomicBool::new(false));
    let requests = request_loop(server.port, &["/hot", "/article", "/hello/"], stop.clone());
    std::fs::remove_dir_all(&dir).expect("rm -rf apps");
    std::fs::create_dir(&dir).expect("mkdir apps");
    // The host has seen the files gone (it says what it does about it).
    let hot = path_of(&server, HOT);
    let noticed = wait_until(HOT_WAIT, || {
        !server.log_lines(&[&hot, "is gone"]).is_empty()
            || !server.log_lines(&["unmounted app hot"]).is_empty()
    });
    assert!(
        noticed,
        "the emptied apps dir was never noticed: {}",
        server.log()
    );
    for (name, contents) in &files {
        std::fs::write(dir.join(name), contents).expect("cp a plugin back");
    }
    // Each file is looked at again once it has settled.
    let settled = |name: &str| {
        let path = path_of(&server, name);
        !server
            .log_lines(&[&path, "holds the same bytes"])
            .is_empty()
            || server.log_lines(&["loaded app", &path]).len() > 1
            || !server.log_lines(&["replaced app", &path]).is_empty()
    };
    let done = wait_until(HOT_WAIT, || files.iter().all(|(name, _)| settled(name)));
    stop.store(true, Relaxed);
    let seen = requests.join().expect("the request loop");
    assert!(
        done,
        "the files put back were not all looked at: {}",
        server.log()
    );
    let failed: Vec<_> = seen.iter().filter(|(_, s)| *s != 200).collect();
    assert!(
        seen.len() > 10 && failed.is_empty(),
        "{} of {} requests failed during the rebuild: {failed:?}",
        failed.len(),
        seen.len()
    );
    for (name, _) in &files {
        let path = path_of(&server, name);
        assert_eq!(
            server
                .log_lines(&[&path, "holds the same bytes", "generation 1)"])
                .len(),
            1,
            "{name}: {}",
            server.log()
        );
    }
    assert!(
        server.log_lines(&["unmounted app"]).is_empty()
            && server.log_lines(&["replaced app"]).is_empty(),
        "{}",
        server.log()
    );
    // Status lists one generation per app, as before the rebuild.
    let doc = status(&server);
    let generations = doc["generations"].as_array().expect("a generations list");
    assert_eq!(generations.len(), 4, "{doc:#}");
    assert!(generations.iter().all(|g| g["generation"] == 1), "{doc:#}");
    assert_eq!(fetch(&server, "/hot"), (200, "v1".into()));
}

fn sighup_waits_for_a_file_still_being_written(poller: &str) {
    let server = Server::launch(poller)
        .apps(&["article"])
        .args(&["--no-watch"])
        .start();
    let v1 = bytes("hot-v1");
    let mut chunks = v1.chunks(v1.len() / 12 + 1);
    let target = server.apps_dir().join(HOT);
    let mut file = std::fs::File::create(&target).expect("create the plugin file");
    file.write_all(chunks.next().expect("a chunk"))
        .expect("write");
    server.signal(Signal::HUP);
    wait_log(&server, &["SIGHUP: rescanning"]);
    // Growing across more than two settle times: never loaded meanwhile.
    for chunk in chunks {
        std::thread::sleep(Duration::from_millis(250));
        file.write_all(chunk).expect("append");
        assert_eq!(fetch(&server, "/hot").0, 404, "loaded while being written");
    }
    drop(file);
    let hot = path_of(&server, HOT);
    assert!(server
        .log_lines(&["hot"])
        .iter()
        .all(|l| !l.contains("loaded app")));
    // Loaded once settled, without a second signal.
    wait_body(&server, "/hot", "v1");
    assert_eq!(server.log_lines(&["SIGHUP: rescanning"]).len(), 1);
    // The log is read by another thread: wait for the load line.
    assert!(
        server.wait_log(&["loaded app hot", &hot]),
        "{}",
        server.log()
    );
    assert_eq!(server.log_lines(&["loaded app hot", &hot]).len(), 1);
    assert!(
        server.log_lines(&["refused plugin"]).is_empty(),
        "{}",
        server.log()
    );
}

fn hung_constructor_blocks_neither_reload_nor_shutdown(poller: &str) {
    let mut server = Server::launch(poller)
        .apps(&["article"])
        .env("STOA_TEST_SLOW_INIT_MS", "forever")
        .args(&["--graceful-timeout", "2"])
        .start();
    let dir = server.apps_dir();
    install_atomically(&dir, SLOW, &bytes("slow-init"));
    server.signal(Signal::HUP);
    wait_log(&server, &["slow-init constructor sleeping"]);
    assert_eq!(fetch(&server, "/slow").0, 404);
    // Another drop is loaded while the constructor hangs.
    install_atomically(&dir, HOT, &bytes("hot-v1"));
    wait_body(&server, "/hot", "v1");
    wait_log(
        &server,
        &[
            "app slow-init constructor still running after 5 s",
            &path_of(&server, SLOW),
        ],
    );
    // Signals are still read: another SIGHUP, then SIGTERM ends the process.
    server.signal(Signal::HUP);
    assert!(wait_until(HOT_WAIT, || server
        .log_lines(&["SIGHUP: rescanning"])
        .len()
        == 2));
    server.signal(Signal::TERM);
    let exited = server.wait_exit(Duration::from_secs(2 + 8));
    assert!(
        exited.is_some(),
        "alive 10 s after SIGTERM with --graceful-timeout 2"
    );
}

fn hung_constructor_at_start_up_serves_the_others(poller: &str) {
    let server = Server::launch(poller)
        .apps(&["article", "slow-init"])
        .env("STOA_TEST_SLOW_INIT_MS", "forever")
        .start();
    assert_eq!(fetch(&server, "/article").0, 200);
    assert_eq!(fetch(&server, "/slow").0, 404);
    let slow = path_of(&server, SLOW);
    wait_log(
        &server,
        &[
            "WARN",
            "app slow-init constructor still running after 5 s",
            &slow,
        ],
    );
    wait_log(&server, &["serving while 1 app constructor(s) still run"]);
    let constructing = status(&server)["constructing"].clone();
    assert_eq!(
        constructing,
        serde_json::json!([{"app": "slow-init", "file": slow}]),
        "status while the constructor runs"
    );
}

fn slow_constructor_mounts_its_app_when_it_returns(poller: &str) {
    let server = Server::launch(poller)
        .apps(&["article"])
        .env("STOA_TEST_SLOW_INIT_MS", "3000")
        .start();
    let dir = server.apps_dir();
    // Named to sort (and so be scanned) before libhot.so.
    install_atomically(&dir, "liba_slow.so", &bytes("slow-init"));
    install_atomically(&dir, HOT, &bytes("hot-v1"));
    wait_log(&server, &["slow-init constructor sleeping"]);
    // Not mounted while it constructs: 404 at once, then 200.
    let mut not_yet = 0;
    let mounted = wait_until(HOT_WAIT, || match fetch(&server, "/slow") {
        (200, body) => body == "constructed",
        (404, _) => {
            not_yet += 1;
            false
        }
        other => panic!("/slow answered {other:?}"),
    });
    assert!(
        mounted && not_yet > 0,
        "mounted: {mounted}, 404s before: {not_yet}"
    );
    wait_body(&server, "/hot", "v1");
    // The other drop did not wait for the slow constructor. (The log is
    // read by another thread: wait for the line that trails the answer.)
    assert!(
        server.wait_log(&["loaded app slow-init"]),
        "{}",
        server.log()
    );
    let log = server.log();
    let at = |needle: &str| {
        log.find(needle)
            .unwrap_or_else(|| panic!("no {needle:?} in\n{log}"))
    };
    assert!(at("loaded app hot") < at("loaded app slow-init"), "{log}");
}

const READY: &str = "/.well-known/stoa/ready";

/// Start-up serves (the port is printed after the 5 s start-up wait) while
/// `slow-init` still constructs, but `/ready` answers 503 naming it, a line
/// says start-up still waits for it, and `/ready` turns 200 (the app
/// mounted) once its constructor returns.
#[test]
fn ready_waits_for_a_constructor_at_start_up() {
    let dir = TempDir::new("ready-init");
    let (config, gate) = slow_init_gate(dir.path());
    let server = Server::launch("epoll")
        .apps(&["article", "slow-init"])
        .args(&["--config", &config])
        .start();
    let (code, body) = fetch(&server, READY);
    assert_eq!(code, 503, "{body}");
    assert!(body.contains("app(s) slow-init still runs"), "{body}");
    assert_eq!(
        status(&server)["starting"],
        serde_json::json!(["slow-init"])
    );
    assert_eq!(
        fetch(&server, "/article").0,
        200,
        "the others serve meanwhile"
    );
    assert_eq!(fetch(&server, "/slow").0, 404);
    wait_log(
        &server,
        &[
            "app slow-init constructor still running after 5 s",
            "READY=1 and /ready wait for it up to --init-timeout 1m",
        ],
    );
    wait_log(
        &server,
        &[
            "start-up still waits for app slow-init",
            "refused at --init-timeout 1m",
        ],
    );
    std::fs::write(&gate, "").expect("open the gate");
    let ready = wait_until(HOT_WAIT, || fetch(&server, READY).0 == 200);
    assert!(ready, "{}", server.log());
    assert_eq!(fetch(&server, "/slow"), (200, "constructed".to_string()));
    assert_eq!(status(&server)["starting"], serde_json::json!([]));
}

/// A constructor still running at `--init-timeout` (7 s: past the 5 s
/// start-up wait, so the apps thread refuses it) is logged and its app
/// refused; the host gets ready without it, and what the constructor
/// returns later is not mounted.
#[test]
fn a_constructor_past_init_timeout_is_refused() {
    let dir = TempDir::new("init-timeout");
    let (config, gate) = slow_init_gate(dir.path());
    let server = Server::launch("epoll")
        .apps(&["article", "slow-init"])
        .args(&["--config", &config, "--init-timeout", "7"])
        .start();
    assert_eq!(fetch(&server, READY).0, 503);
    let slow = path_of(&server, SLOW);
    wait_log(
        &server,
        &[
            "ERROR",
            "refused plugin",
            &slow,
            "app slow-init constructor still running after --init-timeout 7s: not mounted",
        ],
    );
    let ready = wait_until(HOT_WAIT, || fetch(&server, READY).0 == 200);
    assert!(ready, "{}", server.log());
    let refused = status(&server)["refused"].to_string();
    assert!(refused.contains("--init-timeout 7s"), "{refused}");
    std::fs::write(&gate, "").expect("open the gate");
    wait_log(
        &server,
        &[
            "the constructor of app slow-init",
            "after --init-timeout; not mounted",
        ],
    );
    assert_eq!(fetch(&server, "/slow").0, 404);
}

#[test]
fn init_timeout_under_a_second_is_refused() {
    for (given, says) in [
        ("0", "\"0\" is not a positive duration"),
        ("500ms", "give at least 1s"),
    ] {
        let (_, log) = Server::launch("epoll")
            .apps(&["article"])
            .args(&["--init-timeout", given])
            .refused();
        assert!(
            log.contains("--init-timeout") && log.contains(says),
            "{log}"
        );
    }
}

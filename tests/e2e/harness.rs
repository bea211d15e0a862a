//! The end-to-end harness: starts the real `stoa` binary on
//! `--bind 127.0.0.1:0` (or a fixed port, to start again where a stopped
//! one listened) with a fresh apps directory, reads the port it prints, and
//! collects its log so tests can assert on it; a test can signal the
//! process by its pid and wait for its exit status. The plugins come
//! from `plugins.rs`, the raw HTTP client from `client.rs`; `matrix!` runs a
//! test once per poller backend, and with `tls:` once more per backend
//! against a `tls://` bind.

use crate::client::{tls_fixture, Client, Response, Transport};
pub use crate::plugins::{plugins, SAMPLE_APPS};
use rustix::process::Signal;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// The binary under test.
pub const STOA: &str = env!("CARGO_BIN_EXE_stoa");

/// How long the host may take to load its apps and print its port.
pub const START_TIMEOUT: Duration = Duration::from_secs(20);

/// How long to wait for a state a test polls (a status field, a count).
pub const WAIT: Duration = Duration::from_secs(5);

/// How long `wait_log`, `wait_lines` and `access_lines` wait for a line:
/// long, since on two shared cores under a full suite a line that follows
/// a worker's death and replacement (a new process loading its apps) can
/// take seconds; a wait that succeeds returns at the line.
pub const LOG_WAIT: Duration = Duration::from_secs(30);

/// Runs a test function `fn name(poller: &str)` once per backend, as five
/// `#[test]`s `name::select`, `name::poll`, `name::epoll`, `name::io_uring`
/// and `name::io_uring_completion`, so a failure names its backend and the
/// backends run in parallel. Attributes written before a name
/// (`#[ignore = "..."]`) apply to its five tests. The io_uring tests are
/// skipped, saying so, only under `STOA_TEST_SKIP_IO_URING=1` (see
/// `skip_io_uring`).
///
/// `matrix!(tls: a, b)` runs each `fn name(on: Backend)` over plain TCP as
/// above and over TLS as five more, `name::tls::select` and so on: the
/// server listens on `tls://` with the test certificate, and its
/// `connect`, `get` and the status helpers speak TLS.
macro_rules! matrix {
    (@backends $test:path, $on:path, [$($meta:meta),*]) => {
        #[test]
        $(#[$meta])*
        fn select() {
            $test($on("select"))
        }
        #[test]
        $(#[$meta])*
        fn poll() {
            $test($on("poll"))
        }
        #[test]
        $(#[$meta])*
        fn epoll() {
            $test($on("epoll"))
        }
        #[test]
        $(#[$meta])*
        fn io_uring() {
            if !$crate::harness::skip_io_uring() {
                $test($on("io_uring"))
            }
        }
        #[test]
        $(#[$meta])*
        fn io_uring_completion() {
            if !$crate::harness::skip_io_uring() {
                $test($on("io_uring-completion"))
            }
        }
    };
    (tls: $($(#[$meta:meta])* $name:ident),* $(,)?) => {
        $(
            mod $name {
                matrix!(@backends super::$name, $crate::harness::Backend::plain, [$($meta),*]);
                mod tls {
                    matrix!(@backends super::super::$name, $crate::harness::Backend::tls, [$($meta),*]);
                }
            }
        )*
    };
    ($($(#[$meta:meta])* $name:ident),* $(,)?) => {
        $(
            mod $name {
                matrix!(@backends super::$name, ::std::convert::identity, [$($meta),*]);
            }
        )*
    };
}

/// What a test runs on: a poller backend, and how its clients reach the
/// host (`matrix!(tls: ..)` gives both transports). A `&str` is the
/// backend over plain TCP.
#[derive(Clone, Copy, Debug)]
pub struct Backend<'a> {
    pub poller: &'a str,
    pub transport: Transport,
}

impl<'a> Backend<'a> {
    pub fn plain(poller: &'a str) -> Self {
        Backend {
            poller,
            transport: Transport::Plain,
        }
    }

    pub fn tls(poller: &'a str) -> Self {
        Backend {
            poller,
            transport: Transport::Tls,
        }
    }
}

impl<'a> From<&'a str> for Backend<'a> {
    fn from(poller: &'a str) -> Self {
        Backend::plain(poller)
    }
}

impl std::fmt::Display for Backend<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.transport {
            Transport::Plain => f.write_str(self.poller),
            Transport::Tls => write!(f, "{} over TLS", self.poller),
        }
    }
}

/// True when `STOA_TEST_SKIP_IO_URING=1` opts out of the io_uring tests
/// (for a kernel that refuses io_uring, where they would fail), said on
/// stderr past the test harness's capture so a skip is never silent.
pub fn skip_io_uring() -> bool {
    use std::io::Write;
    let skip = std::env::var_os("STOA_TEST_SKIP_IO_URING").is_some_and(|v| v == "1");
    if skip {
        let _ = writeln!(
            std::io::stderr(),
            "io_uring test SKIPPED (STOA_TEST_SKIP_IO_URING=1)"
        );
    }
    skip
}

/// A directory under the system temp dir, unique per test, removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(what: &str) -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("stoa-e2e-{}-{n}-{what}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("create a temp dir");
        TempDir(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Text a child process writes, line by line, with a way to wait for it.
#[derive(Default)]
pub struct Captured {
    /// The text so far, and whether the stream has ended.
    state: Mutex<(String, bool)>,
    changed: Condvar,
    /// What the reader does after its next line.
    hold: Mutex<Hold>,
    hold_changed: Condvar,
}

/// What a `Captured` reader does after each line.
#[derive(Default, Clone, Copy, PartialEq)]
enum Hold {
    #[default]
    Read,
    /// Stops reading (the pipe fills, and the writer stalls).
    Pause,
    /// Closes the pipe (the writer gets EPIPE).
    Close,
}

impl Captured {
    /// Starts a thread copying `stream` into a new buffer.
    pub fn collect(stream: impl Read + Send + 'static) -> Arc<Self> {
        let captured = Arc::new(Captured::default());
        let sink = captured.clone();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stream);
            let mut line = Vec::new();
            loop {
                line.clear();
                // A read error ends the text too, said in it (it would
                // otherwise look like the child closing its end).
                let n = lines.read_until(b'\n', &mut line).unwrap_or_else(|e| {
                    line = format!("(the test could not read on: {e})\n").into_bytes();
                    0
                });
                let mut state = sink.state.lock().unwrap_or_else(|p| p.into_inner());
                state.0.push_str(&String::from_utf8_lossy(&line));
                state.1 = n == 0;
                sink.changed.notify_all();
                if n == 0 {
                    return;
                }
                drop(state);
                let mut hold = sink.hold.lock().unwrap_or_else(|p| p.into_inner());
                while *hold == Hold::Pause {
                    hold = sink
                        .hold_changed
                        .wait(hold)
                        .unwrap_or_else(|p| p.into_inner());
                }
                if *hold == Hold::Close {
                    sink.state.lock().unwrap_or_else(|p| p.into_inner()).1 = true;
                    sink.changed.notify_all();
                    // Dropping the reader closes the pipe.
                    return;
                }
            }
        });
        captured
    }

    fn set_hold(&self, hold: Hold) {
        *self.hold.lock().unwrap_or_else(|p| p.into_inner()) = hold;
        self.hold_changed.notify_all();
    }

    /// Stops reading after the next line: the child's writes then fill
    /// the pipe and block (a stalled log reader).
    pub fn pause(&self) {
        self.set_hold(Hold::Pause);
    }

    /// Closes the pipe after the next line: the child's writes then fail
    /// with EPIPE (a log reader that died).
    pub fn close_after_next_line(&self) {
        self.set_hold(Hold::Close);
    }

    /// Waits up to `timeout` for the stream to have ended (or been closed).
    pub fn wait_ended(&self, timeout: Duration) -> bool {
        self.wait_state(timeout, |_| false).1
    }

    pub fn text(&self) -> String {
        self.state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .0
            .clone()
    }

    /// Waits until `done` holds for the text; false on timeout or if the
    /// stream ended without it.
    pub fn wait(&self, timeout: Duration, done: impl Fn(&str) -> bool) -> bool {
        done(&self.wait_state(timeout, &done).0)
    }

    /// Waits until `done` holds for the text, the stream ends, or `timeout`
    /// passes; the state then.
    fn wait_state(
        &self,
        timeout: Duration,
        done: impl Fn(&str) -> bool,
    ) -> std::sync::MutexGuard<'_, (String, bool)> {
        let deadline = Instant::now() + timeout;
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if done(&state.0) || state.1 || left.is_zero() {
                return state;
            }
            state = self
                .changed
                .wait_timeout(state, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}

/// A step run on the apps directory before the binary starts.
type Prepare = Box<dyn FnOnce(&Path)>;

/// What to start: the backend, the plugins, extra files and flags.
pub struct Launch {
    poller: String,
    transport: Transport,
    port: u16,
    bind: Option<String>,
    apps: Vec<String>,
    files: Vec<(String, Vec<u8>)>,
    args: Vec<String>,
    env: Vec<(String, String)>,
    poller_flag: bool,
    access_log: bool,
    sparse: Vec<(String, u64)>,
    shell: Option<String>,
    prepare: Vec<Prepare>,
    stdout_pipe: Option<usize>,
    /// Leaves `--worker-mode` to the binary's default (process).
    default_mode: bool,
}

impl Launch {
    /// Starts the binary in its default worker mode, process mode: a
    /// supervisor and worker processes. Without it (and without a
    /// `--worker-mode` of the test's own or `STOA_WORKER_MODE`) the harness
    /// passes `--worker-mode thread`: most tests are of the request path,
    /// which both modes share, and one process per test is faster to start
    /// and to read; process mode's own behaviour (crashes, replacing,
    /// signals, the default itself) is tested in `process_mode.rs`,
    /// `supervisor.rs`, `process_upgrade.rs` and the default-mode tests.
    pub fn default_worker_mode(mut self) -> Self {
        self.default_mode = true;
        self
    }

    /// The plugins (short names) to copy into the apps directory.
    pub fn apps(mut self, apps: &[&str]) -> Self {
        self.apps.extend(apps.iter().map(|a| a.to_string()));
        self
    }

    /// Listens on 127.0.0.1:`port` instead of a port the system picks
    /// (0), e.g. to start again on the port of a server that has exited.
    pub fn port(mut self, port: u16) -> Self {
        self.port = port;
        self
    }

    /// Listens on this `--bind` value as given (it must resolve to
    /// 127.0.0.1) instead of 127.0.0.1:`port` (`tls://127.0.0.1:PORT` over
    /// TLS).
    pub fn bind(mut self, addr: &str) -> Self {
        self.bind = Some(addr.to_string());
        self
    }

    /// Extra flags after `--bind`, `--apps` and `--poller`.
    pub fn args(mut self, args: &[&str]) -> Self {
        self.args.extend(args.iter().map(|a| a.to_string()));
        self
    }

    /// Sets an environment variable for the server.
    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.to_string(), value.to_string()));
        self
    }

    /// Chooses the backend through `STOA_POLLER` instead of `--poller`.
    pub fn poller_via_env(mut self) -> Self {
        self.poller_flag = false;
        let poller = self.poller.clone();
        self.env("STOA_POLLER", &poller)
    }

    /// Writes a file with these bytes into the apps directory.
    pub fn file(mut self, name: &str, contents: &[u8]) -> Self {
        self.files.push((name.to_string(), contents.to_vec()));
        self
    }

    /// Creates a sparse file of `len` bytes in the apps directory.
    pub fn sparse_file(mut self, name: &str, len: u64) -> Self {
        self.sparse.push((name.to_string(), len));
        self
    }

    /// Starts the binary as `sh -c '<prefix>; exec stoa ...'` (the same
    /// pid), e.g. `ulimit -n 100`.
    pub fn shell(mut self, prefix: &str) -> Self {
        self.shell = Some(prefix.to_string());
        self
    }

    /// Makes the pipe of the binary's standard output hold only `bytes`
    /// (at least a page), so a write longer than that waits for the reader
    /// partway, as on a busy log pipeline.
    pub fn stdout_pipe(mut self, bytes: usize) -> Self {
        self.stdout_pipe = Some(bytes);
        self
    }

    /// Runs `f` on the filled apps directory before the binary starts.
    pub fn prepare(mut self, f: impl FnOnce(&Path) + 'static) -> Self {
        self.prepare.push(Box::new(f));
        self
    }

    /// Turns on `--access-log` into a file of the server's temp dir.
    pub fn access_log(mut self) -> Self {
        self.access_log = true;
        self
    }

    /// Starts the binary and waits for its `listening on` line.
    pub fn start(self) -> Server {
        let wanted = self.port;
        let mut server = self.spawn();
        server.await_listening(wanted);
        server
    }

    /// Runs the binary expecting it to refuse to start: waits for its exit
    /// and returns the status and the log (stderr). Panics if it serves.
    pub fn refused(self) -> (ExitStatus, String) {
        let mut server = self.spawn();
        let status = server.wait_exit(START_TIMEOUT);
        let stdout = server.stdout.text();
        assert!(
            !stdout.contains("listening on"),
            "it started: {stdout}\n{}",
            server.log.text()
        );
        let status = status.unwrap_or_else(|| panic!("still running: {}", server.log.text()));
        assert!(
            !status.success(),
            "exit status {status}: {}",
            server.log.text()
        );
        // The log reader may lag the exit by a moment.
        let log = server.log.clone();
        log.wait(Duration::from_secs(2), |t| {
            t.contains("ERROR") || t.contains("error")
        });
        (status, log.text())
    }

    /// Starts the binary without waiting for anything (killed on drop).
    pub fn spawned(self) -> Server {
        self.spawn()
    }

    /// Fills the apps directory and spawns the binary.
    fn spawn(self) -> Server {
        let dir = TempDir::new(&self.poller);
        let apps = dir.path().join("apps");
        std::fs::create_dir(&apps).expect("create the apps dir");
        for name in &self.apps {
            let so = plugins()
                .get(name.as_str())
                .unwrap_or_else(|| panic!("no plugin named {name}"));
            let file = so.file_name().expect("a plugin file name");
            // A hard link is a real file in the directory, without copying
            // tens of megabytes per test; copy across filesystems.
            let to = apps.join(file);
            if std::fs::hard_link(so, &to).is_err() {
                std::fs::copy(so, &to).expect("copy a plugin");
            }
        }
        for (name, contents) in &self.files {
            std::fs::write(apps.join(name), contents).expect("write a file into the apps dir");
        }
        for (name, len) in &self.sparse {
            let file = std::fs::File::create(apps.join(name)).expect("create a sparse file");
            file.set_len(*len).expect("size a sparse file");
        }
        for f in self.prepare {
            f(&apps);
        }
        let access_log = dir.path().join("access.log");
        let mut cmd = match &self.shell {
            Some(prefix) => {
                let mut sh = Command::new("sh");
                sh.arg("-c")
                    .arg(format!("{prefix}\nexec \"$0\" \"$@\""))
                    .arg(STOA);
                sh
            }
            None => Command::new(STOA),
        };
        let scheme = match self.transport {
            Transport::Plain => "",
            Transport::Tls => "tls://",
        };
        let bind =
            (self.bind.clone()).unwrap_or_else(|| format!("{scheme}127.0.0.1:{}", self.port));
        cmd.arg("--bind")
            .arg(bind)
            .arg("--apps")
            .arg(&apps)
            .env_remove("STOA_POLLER")
            .envs(self.env.iter().map(|(k, v)| (k, v)));
        if self.poller_flag {
            cmd.args(["--poller", &self.poller]);
        }
        if self.access_log {
            cmd.arg("--access-log").arg(&access_log);
        }
        if self.transport == Transport::Tls {
            cmd.arg("--tls-cert").arg(tls_fixture("cert.pem"));
            cmd.arg("--tls-key").arg(tls_fixture("key.pem"));
        }
        let chooses_mode = self.default_mode
            || self.args.iter().any(|a| a.starts_with("--worker-mode"))
            || self.env.iter().any(|(k, _)| k == "STOA_WORKER_MODE");
        if !chooses_mode {
            cmd.args(["--worker-mode", "thread"]);
        }
        let mut child = cmd
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .expect("spawn stoa");
        note_spawned(child.id());
        let out = child.stdout.take().expect("piped stdout");
        if let Some(bytes) = self.stdout_pipe {
            rustix::pipe::fcntl_setpipe_size(&out, bytes).expect("F_SETPIPE_SZ on stdout's pipe");
        }
        let stdout = Captured::collect(out);
        let log = Captured::collect(child.stderr.take().expect("piped stderr"));
        Server {
            child,
            port: 0,
            poller: self.poller,
            transport: self.transport,
            stdout,
            log,
            access_log,
            dir,
        }
    }
}

impl Server {
    /// Waits for the `listening on` line (on `wanted`, unless 0) and for
    /// the log to catch up with it.
    fn await_listening(&mut self, wanted: u16) {
        let server = self;
        let started = server.stdout.wait(START_TIMEOUT, |t| t.contains('\n'));
        let first = server.stdout.text();
        let listening = match server.transport {
            Transport::Plain => "listening on http://",
            Transport::Tls => "listening on https://",
        };
        let port = first
            .lines()
            .next()
            .and_then(|l| l.strip_prefix(listening)?.strip_prefix("127.0.0.1:"))
            .and_then(|p| p.trim().parse().ok());
        match (started, port) {
            (true, Some(port)) if wanted == 0 || port == wanted => {
                server.port = port;
                // The log is read by another thread: wait until it has
                // caught up with the same line, so everything logged
                // before it (loaded apps, refusals) is there to assert on.
                let logged = server.log.wait(START_TIMEOUT, |t| t.contains(listening));
                assert!(logged, "stoa printed its port but never logged it");
            }
            _ => panic!(
                "stoa --poller {} did not print its port (asked for {wanted}); \
                 stdout: {first:?}\nstderr:\n{}",
                server.poller,
                server.log.text()
            ),
        }
    }
}

/// A running `stoa` in a process group of its own, killed as a group and
/// cleaned up on drop (a re-executed or upgraded stoa is in the group but
/// is not the harness's child).
pub struct Server {
    child: Child,
    pub port: u16,
    pub poller: String,
    /// How `connect` reaches it.
    pub transport: Transport,
    pub stdout: Arc<Captured>,
    log: Arc<Captured>,
    access_log: PathBuf,
    dir: TempDir,
}

impl Server {
    /// Describes a start: `Server::launch("epoll").apps(..).start()`, or
    /// over TLS `Server::launch(Backend::tls("epoll"))`: it listens on
    /// `tls://` with the test certificate.
    pub fn launch<'a>(on: impl Into<Backend<'a>>) -> Launch {
        let on = on.into();
        Launch {
            poller: on.poller.to_string(),
            transport: on.transport,
            port: 0,
            bind: None,
            apps: Vec::new(),
            files: Vec::new(),
            args: Vec::new(),
            env: Vec::new(),
            poller_flag: true,
            access_log: false,
            sparse: Vec::new(),
            shell: None,
            stdout_pipe: None,
            default_mode: false,
            prepare: Vec::new(),
        }
    }

    /// Starts `stoa` with these plugins (short names) and extra flags.
    pub fn start<'a>(on: impl Into<Backend<'a>>, apps: &[&str], extra_args: &[&str]) -> Server {
        Server::launch(on).apps(apps).args(extra_args).start()
    }

    /// Starts `stoa` with the three sample apps.
    pub fn samples<'a>(on: impl Into<Backend<'a>>) -> Server {
        Server::start(on, SAMPLE_APPS, &[])
    }

    /// A new keep-alive connection (over TLS to a TLS server).
    pub fn connect(&self) -> Client {
        Client::connect_over(self.port, self.transport)
    }

    /// `GET path` with `Host: localhost` on a new connection.
    pub fn get(&self, path: &str) -> Response {
        self.connect().request(&crate::client::get(path))
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends `signal` to the server's pid only.
    pub fn signal(&self, signal: Signal) {
        assert!(
            !reused(self.pid()),
            "the server (pid {}) is gone and its number taken",
            self.pid()
        );
        let pid = i32::try_from(self.pid())
            .ok()
            .and_then(rustix::process::Pid::from_raw)
            .expect("a child pid");
        rustix::process::kill_process(pid, signal).expect("signal the server");
    }

    /// Waits up to `timeout` for the server to exit; its status if it did.
    /// The exited child stays here, so the status can be asked again.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let mut status = None;
        wait_until(timeout, || {
            status = self.child.try_wait().expect("try_wait");
            status.is_some()
        });
        if status.is_some() {
            // The log is copied by another thread: let it reach the end of
            // the stream (bounded: a re-executed successor keeps it open).
            self.log.wait(Duration::from_secs(2), |_| false);
        }
        status
    }

    /// The reader of the host's stderr (to pause or close it).
    pub fn log_reader(&self) -> &Captured {
        &self.log
    }

    /// Everything the host has logged so far.
    pub fn log(&self) -> String {
        self.log.text()
    }

    pub fn log_contains(&self, needle: &str) -> bool {
        self.log().contains(needle)
    }

    /// Waits until the log holds a line containing every needle.
    pub fn wait_log(&self, needles: &[&str]) -> bool {
        self.log.wait(LOG_WAIT, |t| {
            t.lines().any(|l| needles.iter().all(|n| l.contains(n)))
        })
    }

    /// Waits until at least `n` log lines contain every needle (a line the
    /// host writes after its answer may lag it), then returns all of them.
    pub fn wait_lines(&self, needles: &[&str], n: usize) -> Vec<String> {
        self.log.wait(LOG_WAIT, |t| {
            t.lines()
                .filter(|l| needles.iter().all(|x| l.contains(x)))
                .count()
                >= n
        });
        self.log_lines(needles)
    }

    /// The log lines that contain every needle, as they stand now (for a
    /// line that must be absent; `wait_lines` for one that must be there).
    pub fn log_lines(&self, needles: &[&str]) -> Vec<String> {
        self.log()
            .lines()
            .filter(|l| needles.iter().all(|n| l.contains(n)))
            .map(str::to_string)
            .collect()
    }

    /// The path of this server's apps directory.
    pub fn apps_dir(&self) -> PathBuf {
        self.dir.path().join("apps")
    }

    /// The file `--access-log` writes to (with `Launch::access_log`).
    pub fn access_log_path(&self) -> &Path {
        &self.access_log
    }

    /// Waits until the access log holds a line containing each of `lines`;
    /// false (after `LOG_WAIT`) if one never comes.
    pub fn wait_access_log(&self, lines: &[&str]) -> bool {
        let read = || std::fs::read_to_string(&self.access_log).unwrap_or_default();
        wait_until(LOG_WAIT, || {
            let text = read();
            lines.iter().all(|l| text.contains(l))
        })
    }

    /// The access log's text as it stands now.
    pub fn access_log_text(&self) -> String {
        std::fs::read_to_string(&self.access_log).unwrap_or_default()
    }

    /// Waits until the access log has `n` lines, and returns them.
    pub fn access_lines(&self, n: usize) -> Vec<String> {
        let read = || std::fs::read_to_string(&self.access_log).unwrap_or_default();
        wait_until(LOG_WAIT, || read().lines().count() >= n);
        read().lines().map(str::to_string).collect()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        kill_group(&mut self.child);
        // A paused reader reads on to the end of the stream, and ends.
        for captured in [&self.stdout, &self.log] {
            if *captured.hold.lock().unwrap_or_else(|p| p.into_inner()) == Hold::Pause {
                captured.set_hold(Hold::Read);
            }
        }
        if std::thread::panicking() {
            eprintln!(
                "--- stoa --poller {} (port {}) log ---\n{}",
                self.poller,
                self.port,
                self.log.text()
            );
        }
    }
}

/// Kills `child`'s process group (the child leads it: spawned with
/// `process_group(0)`) with SIGKILL, then reaps the child.
pub fn kill_group(child: &mut Child) {
    let group = i32::try_from(child.id())
        .ok()
        .filter(|_| !reused(child.id()))
        .and_then(rustix::process::Pid::from_raw);
    if let Some(group) = group {
        // ESRCH when every member is gone already: nothing to do.
        let _ = rustix::process::kill_process_group(group, Signal::KILL);
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// The start time of each process the harness spawned as a group leader,
/// by pid. Pid numbers wrap (at `pid_max`, 32768 on the CI machine, within
/// minutes of a busy suite): a test that reaped its child and kills its
/// group later must not hit another test's new group of the same number.
static SPAWNED: Mutex<BTreeMap<u32, u64>> = Mutex::new(BTreeMap::new());

/// Notes the start time of `pid`, a group leader just spawned.
pub fn note_spawned(pid: u32) {
    if let Some((_, start)) = group_and_start(pid) {
        SPAWNED
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(pid, start);
    }
}

/// True if the number `pid` of a process the harness spawned now belongs
/// to another process (its start time differs from the one noted).
fn reused(pid: u32) -> bool {
    let noted = SPAWNED
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(&pid)
        .copied();
    match (noted, group_and_start(pid)) {
        (Some(noted), Some((_, now))) => noted != now,
        _ => false,
    }
}

/// A child process started in a process group of its own (nginx and its
/// workers, HAProxy, a host started by another tool), killed as a group
/// and reaped on drop.
pub struct Group(pub Child);

impl Group {
    /// Spawns `cmd` as the leader of a new process group.
    pub fn spawn(cmd: &mut Command) -> std::io::Result<Group> {
        let child = cmd.process_group(0).spawn()?;
        note_spawned(child.id());
        Ok(Group(child))
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        kill_group(&mut self.0);
    }
}

/// The process group and start time (in clock ticks since boot) of `pid`,
/// from `/proc/PID/stat`; `None` if there is no such process.
pub fn group_and_start(pid: u32) -> Option<(u32, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The fields after the command's closing parenthesis: the state (3),
    // ppid (4), pgrp (5), ... starttime (22).
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    Some((fields.get(2)?.parse().ok()?, fields.get(19)?.parse().ok()?))
}

/// Polls `done` until it holds or `timeout` passes; returns its last value.
pub fn wait_until(timeout: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if done() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

//! Worker processes (`--worker-mode process`): a supervisor that loads no
//! app and N worker processes that serve. A crash (SIGSEGV, abort) takes
//! down only its worker's connections: the others keep answering, the
//! death is logged with the requests in flight there, and the worker is
//! replaced; a worker that exits is logged with its status and replaced; a
//! worker stuck past `--worker-timeout` is killed (logged with the app and
//! path) while new connections are answered; fresh connections reach both
//! workers, which are not the supervisor; and a supervisor killed with
//! SIGKILL leaves no worker behind. The `crashy` plugin does the crashing.

use crate::client::request;
use crate::deploy::KillPid;
use crate::harness::{wait_until, Server};
use rustix::process::Signal;
use std::collections::BTreeSet;
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

matrix!(
    the_default_mode_contains_a_crash_on_the_loop_and_on_the_pool,
    a_crash_names_and_logs_the_requests_waiting_for_an_answer,
    a_crash_takes_down_only_its_worker,
    a_stuck_worker_is_killed_while_others_answer,
    fresh_connections_reach_both_workers,
);

/// Two worker processes; no quarantine, as these tests crash the same
/// plugin over and over on purpose (the quarantine has tests of its own).
const PROCESS_MODE: [&str; 6] = [
    "--worker-mode",
    "process",
    "--workers",
    "2",
    "--quarantine-after",
    "0",
];

/// How long a replaced worker may take to serve (a debug build loading its
/// apps on a loaded machine), and a request to wait in the listen queue
/// meanwhile.
const RESPAWN: Duration = Duration::from_secs(30);

/// How long a request on a live worker may take before it counts as hung.
const HANG: Duration = Duration::from_secs(10);

/// Starts `stoa` in process mode with two workers, these apps and flags,
/// without core dumps (a hundred crashes would write a hundred).
fn start(poller: &str, apps: &[&str], args: &[&str]) -> Server {
    Server::launch(poller)
        .apps(apps)
        .args(&PROCESS_MODE)
        .args(args)
        .shell("ulimit -c 0")
        .start()
}

/// A keep-alive connection that reports what went wrong instead of
/// panicking (a crash ends connections on purpose).
struct Conn {
    stream: TcpStream,
    unread: Vec<u8>,
    /// The last answer said `Connection: close` (the host closes a
    /// connection after --max-requests-per-conn requests).
    closing: bool,
}

/// What became of a request.
#[derive(Debug)]
enum Outcome {
    /// The status and body.
    Answered(u16, Vec<u8>),
    /// The connection ended (closed or reset) before a whole answer.
    Ended(String),
    /// No answer within `HANG`.
    Hung,
}

impl Conn {
    fn open(port: u16, timeout: Duration) -> Result<Conn, String> {
        let stream =
            TcpStream::connect(("127.0.0.1", port)).map_err(|e| format!("connect: {e}"))?;
        stream
            .set_read_timeout(Some(timeout))
            .map_err(|e| format!("set a read timeout: {e}"))?;
        Ok(Conn {
            stream,
            unread: Vec::new(),
            closing: false,
        })
    }

    /// Reads more; the outcome that ends the wait if nothing came.
    fn fill(&mut self) -> Result<(), Outcome> {
        let mut chunk = [0u8; 4096];
        match self.stream.read(&mut chunk) {
            Ok(0) => Err(Outcome::Ended("closed".into())),
            Ok(n) => {
                self.unread.extend_from_slice(&chunk[..n]);
                Ok(())
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                Err(Outcome::Hung)
            }
            Err(e) => Err(Outcome::Ended(e.to_string())),
        }
    }

    /// `GET path` on this connection, and its answer (framed by
    /// Content-Length, as every route used here answers).
    fn get(&mut self, path: &str) -> Outcome {
        if let Err(e) = self.stream.write_all(&request("GET", path, &[])) {
            return Outcome::Ended(format!("send: {e}"));
        }
        self.answer().unwrap_or_else(|outcome| outcome)
    }

    fn answer(&mut self) -> Result<Outcome, Outcome> {
        let head_end = loop {
            if let Some(i) = self.unread.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            self.fill()?;
        };
        let head = String::from_utf8_lossy(&self.unread[..head_end]).to_ascii_lowercase();
        let status = head.split(' ').nth(1).and_then(|s| s.parse().ok());
        let length = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse::<usize>().ok());
        self.closing = head.lines().any(|l| l.trim() == "connection: close");
        let (Some(status), Some(length)) = (status, length) else {
            return Ok(Outcome::Ended(format!("unframed answer {head:?}")));
        };
        while self.unread.len() < head_end + length {
            self.fill()?;
        }
        let body = self.unread[head_end..head_end + length].to_vec();
        self.unread.drain(..head_end + length);
        Ok(Outcome::Answered(status, body))
    }
}

/// The pid a worker answers on `conn` (`/crashy/pid`).
fn pid_on(conn: &mut Conn) -> Result<u32, Outcome> {
    match conn.get("/crashy/pid") {
        Outcome::Answered(200, body) => String::from_utf8_lossy(&body)
            .trim()
            .parse()
            .map_err(|_| Outcome::Answered(200, body)),
        other => Err(other),
    }
}

/// Asks `/crashy/pid` on rounds of 16 concurrent fresh connections until
/// `n` distinct pids answered or `RESPAWN` passed; the pids seen.
fn worker_pids(server: &Server, n: usize) -> BTreeSet<u32> {
    let port = server.port;
    let mut seen = BTreeSet::new();
    wait_until(RESPAWN, || {
        std::thread::scope(|s| {
            let asks: Vec<_> = (0..16)
                .map(|_| s.spawn(move || Conn::open(port, HANG).ok().map(|mut c| pid_on(&mut c))))
                .collect();
            for ask in asks {
                if let Ok(Some(Ok(pid))) = ask.join() {
                    seen.insert(pid);
                }
            }
        });
        seen.len() >= n
    });
    seen
}

/// The pid in a supervisor line `worker I (pid P) ...`.
fn pid_in(line: &str) -> Option<u32> {
    let (_, rest) = line.split_once("(pid ")?;
    rest.split(')').next()?.parse().ok()
}

/// The worker index in a supervisor line `worker I ...`.
fn index_in(line: &str) -> Option<u32> {
    let (_, rest) = line.split_once("worker ")?;
    rest.split(' ').next()?.parse().ok()
}

/// Sends `path` on a connection of its own and waits (up to `RESPAWN`, as
/// both workers may be down) for the connection to end: the request ends
/// its worker, so no answer may come.
fn crash(server: &Server, path: &str) {
    let mut conn = Conn::open(server.port, RESPAWN).expect("connect to stoa");
    match conn.get(path) {
        Outcome::Ended(_) => {}
        other => panic!("{path} did not end its worker: {other:?}"),
    }
}

/// Whether process `pid` has ended: gone from /proc, or a zombie (ended,
/// not yet reaped by the process that adopted it).
fn ended(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return true;
    };
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, r)| r.trim().chars().next());
    matches!(state, Some('Z' | 'X'))
}

/// The parent pid of a running process.
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// Worker pids, each killed when what this returns is dropped if it is
/// still the process named (`KillPid`; a worker leads a group of its
/// own): a test that fails after killing the supervisor leaves none
/// behind, even outside its group.
fn reap(pids: &BTreeSet<u32>) -> Vec<KillPid> {
    pids.iter().map(|&p| KillPid::new(p, p)).collect()
}

/// Sets its flag on drop: load threads stop also when the test fails.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Article clients: few, so a crash costs a bounded number of requests.
const ARTICLE_CLIENTS: usize = 4;

/// Crashes, one after another.
const CRASHES: usize = 100;

/// What one article client saw.
#[derive(Default)]
struct Tally {
    ok: u64,
    /// Answers other than 200.
    wrong: Vec<String>,
    /// Requests whose connection ended unanswered, by the worker pid it
    /// was on (`None`: the pid question itself failed).
    ended: Vec<(Option<u32>, String)>,
    hung: u64,
}

/// Keep-alive `GET /article`s until `stop`, each connection's worker known
/// by asking `/crashy/pid` first; a connection that ends is counted and
/// replaced by a new one, as is one the host closes after saying so.
fn article_client(port: u16, stop: &AtomicBool) -> Tally {
    let mut tally = Tally::default();
    while !stop.load(Ordering::Relaxed) {
        let mut conn = match Conn::open(port, HANG) {
            Ok(conn) => conn,
            Err(e) => {
                tally.ended.push((None, e));
                continue;
            }
        };
        let pid = match pid_on(&mut conn) {
            Ok(pid) => pid,
            Err(Outcome::Ended(why)) => {
                tally.ended.push((None, why));
                continue;
            }
            Err(Outcome::Hung) => {
                tally.hung += 1;
                continue;
            }
            Err(other) => {
                tally.wrong.push(format!("/crashy/pid: {other:?}"));
                continue;
            }
        };
        while !stop.load(Ordering::Relaxed) && !conn.closing {
            match conn.get("/article") {
                Outcome::Answered(200, _) => tally.ok += 1,
                Outcome::Answered(status, body) => tally
                    .wrong
                    .push(format!("{status} {}", String::from_utf8_lossy(&body))),
                Outcome::Ended(why) => {
                    tally.ended.push((Some(pid), why));
                    break;
                }
                Outcome::Hung => {
                    tally.hung += 1;
                    break;
                }
            }
        }
    }
    tally
}

/// `ARTICLE_CLIENTS` keep-alive `/article` clients, each on a thread of
/// its own, told to stop when the load is finished or dropped (a test that
/// fails leaves none running).
struct ArticleLoad {
    stop: StopOnDrop,
    clients: Vec<std::thread::JoinHandle<Tally>>,
}

impl ArticleLoad {
    fn start(port: u16) -> Self {
        let stop = StopOnDrop(Arc::new(AtomicBool::new(false)));
        let clients = (0..ARTICLE_CLIENTS)
            .map(|_| {
                let stop = stop.0.clone();
                std::thread::spawn(move || article_client(port, &stop))
            })
            .collect();
        ArticleLoad { stop, clients }
    }

    /// Stops the clients; what each saw.
    fn finish(self) -> Vec<Tally> {
        drop(self.stop);
        self.clients
            .into_iter()
            .map(|c| c.join().expect("an article client"))
            .collect()
    }
}

/// What the `/article` clients saw while workers crashed: answers (some),
/// all 200, none hung, and only requests on a worker in `dead` ended
/// unanswered; how many did.
fn lost_only_on_the_dead(tallies: &[Tally], dead: &BTreeSet<u32>) -> usize {
    let ok: u64 = tallies.iter().map(|t| t.ok).sum();
    let wrong: Vec<_> = tallies.iter().flat_map(|t| &t.wrong).collect();
    let hung: u64 = tallies.iter().map(|t| t.hung).sum();
    let ended: Vec<_> = tallies.iter().flat_map(|t| &t.ended).collect();
    assert!(ok > 0, "no /article answered during the crashes");
    assert!(wrong.is_empty(), "answers other than 200: {wrong:?}");
    assert_eq!(hung, 0, "requests with no answer within {HANG:?}");
    let on_live: Vec<_> = ended
        .iter()
        .filter(|(pid, _)| pid.is_some_and(|p| !dead.contains(&p)))
        .collect();
    assert!(
        on_live.is_empty(),
        "requests ended on a worker that did not die ({ok} answered): {on_live:?}"
    );
    ended.len()
}

/// With no `--worker-mode` (process mode is the default), a native
/// handler writing through NULL on the loop and one aborting on the
/// blocking pool each cost their own request and the connections of their
/// worker: `/article` clients meanwhile see only answers or, on the dead
/// worker, a closed connection; each death is logged naming the app and
/// the request (where it ran), and each lost request has an access-log
/// line with status 502.
fn the_default_mode_contains_a_crash_on_the_loop_and_on_the_pool(poller: &str) {
    let server = Server::launch(poller)
        .apps(&["crashy", "article"])
        .default_worker_mode()
        .access_log()
        .args(&["--workers", "2", "--quarantine-after", "0"])
        .shell("ulimit -c 0")
        .start();
    assert!(server.wait_log(&["supervisor: 2 worker process(es)"]));
    let first = worker_pids(&server, 2);
    assert_eq!(first.len(), 2, "two workers never answered: {first:?}");
    let load = ArticleLoad::start(server.port);
    let crashes = [
        (
            "/crashy/null",
            "was killed by signal 11 (SIGSEGV); in flight: 1 request(s): crashy GET /crashy/null",
        ),
        (
            "/crashy/abort?pool=1",
            "was killed by signal 6 (SIGABRT); in flight: 1 request(s): \
             crashy GET /crashy/abort?pool=1 (blocking pool)",
        ),
    ];
    for (k, (path, line)) in crashes.iter().enumerate() {
        crash(&server, path);
        let ready = |t: &str| t.lines().filter(|l| l.contains(") ready")).count();
        let replaced = server
            .log_reader()
            .wait(RESPAWN, |t| t.contains(line) && ready(t) >= 3 + k);
        assert!(
            replaced,
            "no line `{line}`, or its worker not ready again; log:\n{}",
            server.log()
        );
    }
    let tallies = load.finish();
    let dead: BTreeSet<u32> = server
        .log_lines(&["was killed by signal"])
        .iter()
        .filter_map(|l| pid_in(l))
        .collect();
    assert_eq!(dead.len(), 2, "{}", server.log());
    lost_only_on_the_dead(&tallies, &dead);
    // The lost requests' lines, written by the supervisor.
    let lost = [
        "\"GET /crashy/null HTTP/1.1\" 502 0 \"-\" \"-\" app=crashy gen=-",
        "\"GET /crashy/abort?pool=1 HTTP/1.1\" 502 0 \"-\" \"-\" app=crashy gen=-",
    ];
    assert!(
        server.wait_access_log(&lost),
        "no 502 lines {lost:?} in the access log:\n{}",
        server.access_log_text()
    );
    let text = server.access_log_text();
    for l in lost {
        let n = text.lines().filter(|line| line.contains(l)).count();
        assert_eq!(n, 1, "{l}: {n} lines:\n{text}");
    }
}

/// A request whose answer comes later (from a thread of the app's) is in
/// flight too: a crash meanwhile names it beside the request that crashed,
/// and logs a 502 line for each.
fn a_crash_names_and_logs_the_requests_waiting_for_an_answer(poller: &str) {
    let server = Server::launch(poller)
        .apps(&["crashy"])
        .default_worker_mode()
        .access_log()
        .args(&["--workers", "1", "--quarantine-after", "0"])
        .shell("ulimit -c 0")
        .start();
    let mut slow = Conn::open(server.port, RESPAWN).expect("connect to stoa");
    slow.stream
        .write_all(&request("GET", "/crashy/slow?ms=60000", &[]))
        .expect("send /slow");
    assert!(
        server.wait_log(&["crashy: /slow started"]),
        "{}",
        server.log()
    );
    crash(&server, "/crashy/null");
    let line = "in flight: 2 request(s): crashy GET /crashy/null, \
                crashy GET /crashy/slow?ms=60000 (waiting for its answer)";
    assert!(
        server.wait_log(&[line]),
        "no line {line:?}:\n{}",
        server.log()
    );
    let lost = [
        "\"GET /crashy/null HTTP/1.1\" 502 ",
        "\"GET /crashy/slow?ms=60000 HTTP/1.1\" 502 ",
    ];
    assert!(
        server.wait_access_log(&lost),
        "no 502 lines {lost:?} in the access log:\n{}",
        server.access_log_text()
    );
    // Its connection died with the worker, unanswered.
    let mut rest = Vec::new();
    let _ = slow.stream.read_to_end(&mut rest);
    assert!(!String::from_utf8_lossy(&rest).starts_with("HTTP/1.1 200"));
}

fn a_crash_takes_down_only_its_worker(poller: &str) {
    let server = start(poller, &["crashy", "article"], &[]);
    let first = worker_pids(&server, 2);
    assert_eq!(first.len(), 2, "two workers never answered: {first:?}");
    let load = ArticleLoad::start(server.port);
    let died = "was killed by signal 11 (SIGSEGV)";
    // One crash at a time, each once the last one's replacement serves: a
    // worker is always up, and the article clients on it keep answering.
    let count = |t: &str, needle: &str| t.lines().filter(|l| l.contains(needle)).count();
    for k in 1..=CRASHES {
        crash(&server, "/crashy/segv");
        let replaced = server.log_reader().wait(RESPAWN, |t| {
            count(t, died) >= k && count(t, ") ready") >= 2 + k
        });
        assert!(
            replaced,
            "crash {k}: no line `{died}`, or its worker not ready again; log:\n{}",
            server.log()
        );
    }
    let tallies = load.finish();
    let deaths = server.log_lines(&[died]);
    assert_eq!(deaths.len(), CRASHES, "{deaths:#?}");
    let unnamed: Vec<_> = deaths
        .iter()
        .filter(|l| !l.contains("crashy GET /crashy/segv"))
        .collect();
    assert!(
        unnamed.is_empty(),
        "deaths not naming the request: {unnamed:#?}"
    );
    let dead: BTreeSet<u32> = deaths.iter().filter_map(|l| pid_in(l)).collect();
    assert_eq!(dead.len(), CRASHES, "a pid per death: {deaths:#?}");

    // A crash ends the connections of its worker, costing each client
    // there one request (it then opens a new connection, on a live
    // worker), and the crashes come one at a time: at most CRASHES x
    // (clients on the crashed worker). Which worker a connection lands on
    // is the kernel's choice, so clients-per-worker is bounded by
    // ARTICLE_CLIENTS only.
    let ended = lost_only_on_the_dead(&tallies, &dead);
    assert!(
        ended <= CRASHES * ARTICLE_CLIENTS,
        "{ended} /article requests ended unanswered over {CRASHES} crashes"
    );
    let now = worker_pids(&server, 2);
    assert_eq!(now.len(), 2, "both workers are not back: {now:?}");
    assert!(now.is_disjoint(&dead), "{now:?} among the dead {dead:?}");
}

#[test]
fn a_worker_that_exits_is_logged_and_replaced() {
    ends_and_is_replaced("/crashy/exit?code=3", "exited with status 3");
}

#[test]
fn a_worker_that_aborts_is_logged_and_replaced() {
    ends_and_is_replaced("/crashy/abort", "was killed by signal 6 (SIGABRT)");
}

/// Sends `path`, which ends its worker: the death is logged as `how` with
/// the request, and the worker is replaced by one that answers.
fn ends_and_is_replaced(path: &str, how: &str) {
    let server = start("epoll", &["crashy"], &[]);
    let before = worker_pids(&server, 2);
    assert_eq!(before.len(), 2, "two workers never answered: {before:?}");
    crash(&server, path);
    let route = path.split('?').next().unwrap_or(path);
    let request = format!("in flight: 1 request(s): crashy GET {route}");
    let needles = [how, &request];
    assert!(
        server.wait_log(&needles),
        "no line {needles:?}; log:\n{}",
        server.log()
    );
    let line = server.log_lines(&needles).remove(0);
    let (index, pid) = (index_in(&line), pid_in(&line));
    assert!(
        pid.is_some_and(|p| before.contains(&p)),
        "{line:?} names none of the workers {before:?}"
    );
    let index = index.unwrap_or_else(|| panic!("no worker index in {line:?}"));
    let replaced = format!("worker {index} replaced by pid");
    assert!(server.wait_log(&[&replaced]), "log:\n{}", server.log());
    let new = server
        .log_lines(&[&replaced])
        .first()
        .and_then(|l| l.split(&replaced).nth(1)?.trim().parse::<u32>().ok());
    let after = worker_pids(&server, 2);
    assert!(
        after.len() == 2 && new.is_some_and(|p| after.contains(&p)),
        "the replacement {new:?} does not answer: {after:?}"
    );
}

fn a_stuck_worker_is_killed_while_others_answer(poller: &str) {
    let args = [
        "--stuck-after",
        "1s",
        "--unhealthy-after",
        "2s",
        "--worker-timeout",
        "10s",
    ];
    let server = start(poller, &["crashy"], &args);
    let before = worker_pids(&server, 2);
    assert_eq!(before.len(), 2, "two workers never answered: {before:?}");
    let mut spinning = Conn::open(server.port, RESPAWN).expect("connect to stoa");
    spinning
        .stream
        .write_all(&request("GET", "/crashy/spin?secs=600", &[]))
        .expect("send /crashy/spin");
    assert!(
        server.wait_log(&["crashy: /spin started"]),
        "log:\n{}",
        server.log()
    );
    // Once its own watchdog finds it stuck, the host is not ready, and
    // status names it, whichever worker answers (the other one does: the
    // stuck loop accepts nothing).
    assert!(server.wait_log(&["stuck: its loop has not turned"]));
    let (code, body) = crate::common::fetch(&server, "/.well-known/stoa/ready");
    assert_eq!(code, 503, "{body}");
    assert!(
        body.contains("1 of 2 worker(s) stuck in app code"),
        "{body}"
    );
    let s = crate::common::status(server.port);
    let stuck = &s["stuck_workers"][0];
    assert!(
        stuck["pid"]
            .as_u64()
            .is_some_and(|p| before.contains(&(p as u32)))
            && stuck["in"]
                .as_str()
                .is_some_and(|w| w.contains("/crashy/spin")),
        "{s}"
    );
    // Past --unhealthy-after the host is unhealthy, whichever worker
    // answers, until the stuck one is replaced.
    let health = || crate::common::fetch(&server, "/.well-known/stoa/health");
    assert!(
        wait_until(Duration::from_secs(8), || health().0 == 503),
        "/health never said 503 with a worker stuck past --unhealthy-after 2s: {:?}\n{}",
        health(),
        server.log()
    );
    let stop = AtomicBool::new(false);
    let port = server.port;
    let answers = std::thread::scope(|s| {
        let asking = s.spawn(|| {
            let (mut ok, mut other) = (0u64, Vec::new());
            while !stop.load(Ordering::Relaxed) {
                match Conn::open(port, HANG).map(|mut conn| conn.get("/crashy/ok")) {
                    Ok(Outcome::Answered(200, _)) => ok += 1,
                    outcome => other.push(format!("{outcome:?}")),
                }
            }
            (ok, other)
        });
        let killed = [
            "has been stuck for",
            "in crashy GET /crashy/spin",
            "killing it (--worker-timeout 10s)",
        ];
        let found = server.log_reader().wait(Duration::from_secs(20), |t| {
            t.lines().any(|l| killed.iter().all(|n| l.contains(n)))
        });
        let ended = found && matches!(spinning.answer(), Err(Outcome::Ended(_)));
        let back = found && worker_pids(&server, 2).len() == 2;
        stop.store(true, Ordering::Relaxed);
        let answers = asking.join().expect("the asking thread");
        assert!(
            found,
            "no kill line naming crashy GET /crashy/spin; log:\n{}",
            server.log()
        );
        assert!(ended, "the stuck request's connection did not end");
        assert!(
            back,
            "the killed worker was not replaced; log:\n{}",
            server.log()
        );
        answers
    });
    let (ok, other) = answers;
    assert!(
        ok > 0 && other.is_empty(),
        "new connections while a worker was stuck: {ok} answered 200, others: {other:?}"
    );
    assert!(
        wait_until(Duration::from_secs(10), || health().0 == 200),
        "/health still {:?} once the stuck worker was replaced",
        health()
    );
}

fn fresh_connections_reach_both_workers(poller: &str) {
    let server = start(poller, &["crashy"], &[]);
    let pids = worker_pids(&server, 2);
    assert_eq!(
        pids.len(),
        2,
        "one worker answered every connection: {pids:?}"
    );
    assert!(
        !pids.contains(&server.pid()),
        "the supervisor served: {pids:?}"
    );
    for &pid in &pids {
        assert_eq!(
            parent_of(pid),
            Some(server.pid()),
            "worker {pid} is not the supervisor's child"
        );
    }
}

#[test]
fn a_supervisor_killed_leaves_no_worker() {
    let mut server = start("epoll", &["crashy"], &[]);
    let pids = worker_pids(&server, 2);
    assert_eq!(pids.len(), 2, "two workers never answered: {pids:?}");
    let _reap = reap(&pids);
    server.signal(Signal::KILL);
    assert!(
        server.wait_exit(Duration::from_secs(10)).is_some(),
        "the supervisor outlived SIGKILL"
    );
    let port = server.port;
    let gone = wait_until(Duration::from_secs(10), || {
        pids.iter().all(|&p| ended(p)) && TcpStream::connect(("127.0.0.1", port)).is_err()
    });
    let running: Vec<_> = pids.iter().filter(|&&p| !ended(p)).collect();
    assert!(
        gone,
        "10 s after the supervisor's SIGKILL: workers {running:?} run, \
         connecting to {port} {}",
        match TcpStream::connect(("127.0.0.1", port)) {
            Ok(_) => "succeeds".to_string(),
            Err(e) => format!("fails ({e})"),
        }
    );
}

/// The supervisor's store of plugin copies, `stoa-generations-PID-*` in
/// the temp dir, if there is one for `pid`.
fn store_of(pid: u32) -> Option<std::path::PathBuf> {
    let prefix = format!("stoa-generations-{pid}-");
    std::fs::read_dir(std::env::temp_dir())
        .ok()?
        .flatten()
        .find(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| e.path())
}

/// A supervisor killed with SIGKILL cannot remove its store of plugin
/// copies; the next one to start removes it (a host killed over and over
/// does not fill the disk with copies of its plugins).
#[test]
fn a_killed_supervisor_s_store_is_removed_by_the_next() {
    let mut first = start("epoll", &["crashy"], &[]);
    let pid = first.pid();
    let store = store_of(pid).unwrap_or_else(|| panic!("no store of pid {pid}"));
    let _reap = reap(&worker_pids(&first, 2));
    first.signal(Signal::KILL);
    assert!(first.wait_exit(Duration::from_secs(10)).is_some());
    drop(first);
    assert!(store.exists(), "{} went with SIGKILL", store.display());
    let next = start("epoll", &["crashy"], &[]);
    let removed = wait_until(RESPAWN, || !store.exists());
    assert!(
        removed,
        "{} is still there once the next stoa runs:\n{}",
        store.display(),
        next.log()
    );
    // The next one's own store is there while it runs.
    assert!(store_of(next.pid()).is_some_and(|s| s.exists()));
}

/// Two worker processes, plugins quarantined after three deaths.
const QUARANTINE_AFTER_3: [&str; 6] = [
    "--worker-mode",
    "process",
    "--workers",
    "2",
    "--quarantine-after",
    "3",
];

/// Three requests to /crashy/segv, one after another, each on a
/// connection that waits (up to `RESPAWN`) for its worker to die, then for
/// the death line naming the request. No wait for the replacement: the
/// next request waits in the shared backlog until a worker takes it (a
/// worker that dies before the supervisor saw it ready is started again
/// after a pause, and no "replaced by" line is logged for it).
fn crash_three_times(server: &Server) {
    for round in 1..=3 {
        crash(server, "/crashy/segv");
        assert!(
            server
                .wait_lines(&["in flight: 1 request(s): crashy GET /crashy/segv"], round)
                .len()
                >= round,
            "{}",
            server.log()
        );
    }
}

/// Requests that kill worker processes `--quarantine-after` times quarantine
/// the plugin: every worker refuses it, the others serve on.
#[test]
fn a_plugin_that_keeps_killing_workers_is_quarantined() {
    let server = Server::launch("epoll")
        .apps(&["crashy", "article"])
        .shell("ulimit -c 0")
        .args(&QUARANTINE_AFTER_3)
        .start();
    server.wait_lines(&["supervisor", ") ready"], 2);
    crash_three_times(&server);
    assert!(server.wait_log(&[
        "quarantined: app crashy (plugin bytes",
        "killed 3 worker process(es) within 60 s"
    ]));
    // Every worker takes it out of service (a worker that was serving it)
    // or refuses it (one started after): its mount answers 503 naming the
    // quarantine (nothing older to roll back to); the other app serves on.
    // Each of the two workers says so, each on its own next look: answers
    // alone could all come from one of them.
    let acted = || -> BTreeSet<u32> {
        server
            .log_lines(&["stoa::apps::registry", "quarantined: app crashy"])
            .iter()
            .filter_map(|l| {
                let (_, rest) = l.split_once(" pid ")?;
                rest.split(']').next()?.parse().ok()
            })
            .collect()
    };
    let both = wait_until(RESPAWN, || acted().len() >= 2);
    assert!(both, "workers that acted: {:?}\n{}", acted(), server.log());
    assert_quarantine_answer(&server);
    assert_eq!(crate::common::try_get(server.port, "/article"), Ok(200));
    let s = crate::common::status(server.port);
    assert_eq!(s["supervisor"]["quarantined"][0]["app"], "crashy", "{s}");
}

/// A constructor that kills every worker at start-up is quarantined, and
/// the host starts serving its other apps instead of crash-looping.
#[test]
fn a_constructor_that_kills_every_worker_at_start_up_is_quarantined() {
    let dir = crate::harness::TempDir::new("quarantine-start");
    let config = dir.path().join("stoa.toml");
    std::fs::write(
        &config,
        "[apps.crashy.settings]\nabort_in_constructor = true\n",
    )
    .expect("write the config");
    let server = Server::launch("epoll")
        .apps(&["crashy", "article"])
        .shell("ulimit -c 0")
        .args(&QUARANTINE_AFTER_3)
        .args(&["--config", config.to_str().expect("utf-8")])
        .start();
    assert!(server.wait_log(&["quarantined: app crashy (plugin bytes"]));
    assert!(server.wait_log(&["refused plugin"]), "{}", server.log());
    assert_eq!(crate::common::try_get(server.port, "/article"), Ok(200));
    // Every worker, the ones started after the quarantine too, holds the
    // mount with a 503 naming it.
    for _ in 0..4 {
        assert_quarantine_answer(&server);
    }
}

/// `/crashy/ok` answers 503 whose body names the quarantine and the flags
/// behind it.
fn assert_quarantine_answer(server: &Server) {
    let (status, body) = crate::common::fetch(server, "/crashy/ok");
    assert_eq!(status, 503, "{body}");
    assert!(
        body.contains("quarantined: app crashy (plugin bytes")
            && body.contains("--quarantine-after"),
        "{body}"
    );
}

/// A worker whose resident memory passes --worker-max-memory is replaced
/// (one at a time: its replacement serves first); nothing is lost.
#[test]
fn a_worker_past_its_memory_limit_is_replaced() {
    let server = Server::launch("epoll")
        .apps(&["crashy", "article"])
        .args(&[
            "--worker-mode",
            "process",
            "--workers",
            "1",
            "--worker-max-memory",
            "96M",
        ])
        .start();
    server.wait_lines(&["supervisor", ") ready"], 1);
    assert_eq!(
        crate::common::try_get(server.port, "/crashy/alloc?mb=128"),
        Ok(200)
    );
    assert!(server.wait_log(&[
        "is replaced: its resident memory",
        "passed --worker-max-memory"
    ]));
    assert!(server.wait_log(&["serves; pid"]));
    assert_eq!(crate::common::try_get(server.port, "/article"), Ok(200));
    // The old worker drains and goes; the new one is small.
    assert!(wait_until(Duration::from_secs(10), || {
        let s = crate::common::status(server.port);
        let rows = s["per_worker"].as_array().cloned().unwrap_or_default();
        rows.len() == 1 && rows[0]["rss_bytes"].as_u64().is_some_and(|r| r < 96 << 20)
    }));
}

/// A bad plugin dropped over a good one is quarantined once it has killed
/// workers `--quarantine-after` times, and every worker rolls the file back
/// to the bytes it replaced: the good app serves again.
#[test]
fn a_bad_drop_over_a_good_one_is_quarantined_and_rolled_back() {
    use crate::common::{bytes, install_atomically, wait_body, HOT};
    let server = Server::launch("epoll")
        .apps(&["article"])
        .file(HOT, &bytes("hot-v1"))
        .shell("ulimit -c 0")
        .args(&QUARANTINE_AFTER_3)
        .start();
    server.wait_lines(&["supervisor", ") ready"], 2);
    wait_body(&server, "/hot", "v1");
    // The bad build lands on the same file; each worker notices it on its
    // own scan, so wait for both (answers alone may all come from one).
    install_atomically(&server.apps_dir(), HOT, &bytes("crashy"));
    assert!(
        server
            .wait_lines(&["replaced app hot 0.1.0 with crashy 0.1.0"], 2)
            .len()
            >= 2,
        "{}",
        server.log()
    );
    // A worker logs the replace just before it publishes the new mounts.
    assert!(wait_until(crate::common::HOT_WAIT, || (0..6).all(
        |_| crate::common::try_get(server.port, "/crashy/ok") == Ok(200)
    )));
    crash_three_times(&server);
    assert!(server.wait_log(&["quarantined: app crashy (plugin bytes"]));
    // Each of the two workers serving now rolls back (at its start, or
    // taking the mounted generation out of service).
    assert!(
        server
            .wait_lines(
                &["are quarantined; rolling back to the bytes they replaced"],
                2
            )
            .len()
            >= 2,
        "{}",
        server.log()
    );
    // Every worker, fresh ones too, serves the good version again.
    assert!(
        wait_until(crate::common::HOT_WAIT, || (0..10).all(|_| {
            crate::common::fetch(&server, "/hot") == (200, "v1".to_string())
        })),
        "{}",
        server.log()
    );
    // And none serves the quarantined bytes (a worker logs its rollback
    // just before it publishes it: fresh connections until every one says
    // 404).
    let gone = wait_until(crate::common::HOT_WAIT, || {
        (0..10).all(|_| crate::common::fetch(&server, "/crashy/ok").0 == 404)
    });
    assert!(gone, "{}", server.log());
    assert_eq!(crate::common::try_get(server.port, "/article"), Ok(200));
}

//! The supervisor's loop: signals in, worker processes watched a few times
//! a second.

use super::binary::Binary;
use super::death::{End, InFlight};
use super::decide::{decide, Decision, Ending, Then};
use super::handoff::{inherited_area, Handoff};
use super::procs::{backoff, Place, Proc, Rows};
use super::quarantine::Deaths;
use super::resume::{self, Resumed};
use super::store::Store;
use super::tally::Tally;
use crate::checks;
use crate::cli::Cli;
use crate::error::BootError;
use crate::listen;
use crate::listen::tls::expiry::unix_now;
use crate::listen::tls::watch::{Part, Watch};
use crate::ops::access_log::{AccessLog, Answered};
use crate::ops::notify;
use crate::ops::pid_file::PidFile;
use crate::ops::watchdog::place_in_row;
use crate::ops::worker_row::{area_words, buffered_word, open_words, Phase, Recycle};
use crate::settings::Bind;
use crate::shm::Area;
use crossbeam_channel::Receiver;
use rustix::process::{Pid, Signal, WaitOptions};
use signal_hook::consts::{SIGCHLD, SIGHUP, SIGINT, SIGTERM, SIGUSR1, SIGUSR2};
use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

/// How often the workers are looked at.
const TICK: Duration = Duration::from_millis(50);

/// How long a worker may take to serve beyond `--init-timeout` (its
/// constructors' bound): loading, the load probe, binding its loop.
const START_SLACK: Duration = Duration::from_secs(60);

/// How often resident memory is read (`--worker-max-memory`).
const MEMORY_EVERY: Duration = Duration::from_secs(1);
/// How often the Unix socket files it made are looked at.
const FILES_EVERY: Duration = Duration::from_secs(1);

struct Supervisor {
    /// What workers start from, and the binary SIGUSR2 is trying.
    binary: Binary,
    candidate: Option<Candidate>,
    args: Vec<OsString>,
    sockets: Vec<OwnedFd>,
    /// The sockets' names (`LISTEN_FDNAMES`: a TLS one's is `tls`), handed
    /// on with them.
    names: String,
    area: Area,
    rows: Rows,
    row_count: usize,
    places: Vec<Place>,
    worker_timeout: Duration,
    graceful: Duration,
    max_memory: u64,
    /// How long a worker (the first ones, an upgrade's) may take to serve.
    start_bound: Duration,
    /// Set once every first worker served and the host was announced.
    announced: bool,
    draining: Option<Instant>,
    memory_checked: Instant,
    /// When the Unix socket files were last looked at.
    files_checked: Instant,
    /// `WATCHDOG=1` to the service manager: how often, and when last.
    keepalive: Option<(Duration, Instant)>,
    /// Crashes and the counters of ended workers, for status and metrics.
    tally: Tally,
    /// Deaths by plugin bytes, for the quarantine.
    deaths: Deaths,
    tls: Option<TlsWatch>,
    /// `--access-log`: the supervisor writes the lines of requests lost
    /// with a worker that died.
    access_log: Option<AccessLog>,
}

/// The supervisor's copy of the TLS sites, read again when their files
/// change (each worker reloads its own), so that its expiry warnings,
/// said once for the host, follow a renewal.
struct TlsWatch {
    watch: Watch,
    /// `--tls-watch-interval`.
    every: Duration,
    checked: Instant,
}

/// A binary SIGUSR2 is trying, and since when.
struct Candidate {
    binary: Binary,
    since: Instant,
}

pub fn run(cli: Cli) -> Result<(), BootError> {
    match listen::raise_fd_limit() {
        Ok(n) => log::info!("file descriptor limit (RLIMIT_NOFILE) = {n}"),
        Err(e) => log::warn!("cannot raise RLIMIT_NOFILE: {e}"),
    }
    checks::watchdog_bounds(&cli)?;
    checks::worker_timeout(&cli)?;
    let workers = cli
        .workers
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1);
    let backlog = cli.backlog.unwrap_or_else(listen::somaxconn);
    let mut resumed = resume::take();
    let bound = match &mut resumed {
        Some(r) => {
            listen::adopt_created(std::mem::take(&mut r.unix_files));
            listen::adopt_all(listen::inherited()?.unwrap_or_default(), 1)?
        }
        None => listeners(&cli, backlog)?,
    };
    // Checked here once, so a bad file fails the start, not each worker;
    // kept to say when a certificate nears its end (`TlsWatch`).
    let tls = checks::tls_config(&cli, &bound.tls_addrs(), None)?.map(|sites| TlsWatch {
        watch: Watch::new(sites, Part::Supervisor),
        every: cli.tls_watch_interval,
        checked: Instant::now(),
    });
    let handed = bound.duplicates()?;
    let names = listen::fd_names(handed.iter().map(|h| h.name.as_deref()));
    let sockets: Vec<OwnedFd> = handed.into_iter().map(|h| h.fd).collect();
    let shown = bound.shown.clone();
    drop(bound);
    let mut pid_file = cli.pid_file.as_deref().map(PidFile::claim).transpose()?;
    // A place's serving process, its replacement, and one draining.
    let row_count = resumed.as_ref().map_or(workers * 3, |r| r.rows);
    let area = match &resumed {
        Some(r) => inherited_area(r.sockets, area_words(row_count))?,
        None => Area::create(area_words(row_count))
            .map_err(|e| BootError::system("create the workers' shared area", e))?,
    };
    // The workers' shared session-ticket keys: made now (kept by a
    // re-executed supervisor), rotated on the tick.
    let ticket_keys = crate::ops::worker_row::ticket_words(area.words);
    crate::listen::tls::tickets::rotate(ticket_keys);
    let rows = Rows::new(area.words, row_count);
    let tally = Tally::new(area.words, workers);
    let signals = signals()?;
    let _store = Store::open(resumed.is_some())?;
    let path = crate::ops::upgrade::own_binary();
    let binary = Binary::open(&path, 64 + sockets.len())
        .map_err(|e| BootError::file("open the binary workers start from", &path, e))?;
    let access_log = match &cli.access_log {
        Some(target) => Some(
            AccessLog::open(target, cli.log_format)
                .map_err(|e| e.within("--access-log", target))?,
        ),
        None => None,
    };
    log::info!(
        "supervisor: {workers} worker process(es), backlog={backlog}, worker_timeout={:?}",
        cli.worker_timeout
    );
    let mut sup = Supervisor {
        binary,
        candidate: None,
        args: std::env::args_os().skip(1).collect(),
        sockets,
        names,
        area,
        rows,
        row_count,
        places: (0..workers).map(|_| Place::default()).collect(),
        worker_timeout: cli.worker_timeout,
        graceful: cli.graceful_timeout,
        max_memory: cli.worker_max_memory.unwrap_or(0),
        start_bound: cli.init_timeout + START_SLACK,
        announced: false,
        draining: None,
        memory_checked: Instant::now(),
        files_checked: Instant::now(),
        keepalive: notify::watchdog_every().map(|every| (every, Instant::now())),
        tally,
        deaths: Deaths::new(cli.quarantine_after, cli.quarantine_window),
        tls,
        access_log,
    };
    if let Some(tls) = &mut sup.tls {
        tls.watch.tick(unix_now());
    }
    match resumed {
        Some(resumed) => sup.adopt(resumed),
        None => {
            for i in 0..workers {
                sup.start(i)?;
            }
        }
    }
    let started = Instant::now();
    loop {
        match signals.recv_timeout(TICK) {
            Ok(signal) => {
                if let Some(code) = sup.on_signal(signal) {
                    return code;
                }
            }
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => {
                return Err(BootError::system(
                    "read signals",
                    std::io::Error::other("the signal thread stopped"),
                ))
            }
        }
        sup.reap()?;
        if crate::listen::tls::tickets::rotate(ticket_keys) {
            log::info!("TLS session tickets: a new key; the one before last is erased");
        }
        if let Some(done) = sup.drained() {
            return done;
        }
        sup.watch();
        sup.keep_alive();
        if let Some(failed) = sup.upgrade_step() {
            return failed;
        }
        if !sup.announced {
            if sup.all_ready() {
                if let Some(file) = &mut pid_file {
                    file.serving()?;
                }
                sup.announce(&shown);
            } else if started.elapsed() > sup.start_bound {
                sup.kill_all();
                return Err(BootError::system(
                    "start the workers",
                    std::io::Error::other(format!(
                        "not every worker served within {} s (--init-timeout and {} s more)",
                        sup.start_bound.as_secs(),
                        START_SLACK.as_secs()
                    )),
                ));
            }
        }
    }
}

impl Supervisor {
    fn handoff(&self) -> Handoff<'_> {
        let binary = self.candidate.as_ref().map_or(&self.binary, |c| &c.binary);
        Handoff {
            exe: binary.exec_path(),
            args: &self.args,
            sockets: &self.sockets,
            names: &self.names,
            area: &self.area,
            rows: self.row_count,
        }
    }

    /// Starts a process for place `i` (its serving one, or its
    /// replacement when one serves).
    fn start(&mut self, i: usize) -> Result<(), BootError> {
        let Some((row_index, row)) = self.rows.take() else {
            log::error!("worker {i}: no free row in the shared area; not started");
            return Ok(());
        };
        row.set_phase(Phase::Starting);
        row.set_place(i);
        let from = self
            .candidate
            .as_ref()
            .map_or(&self.binary, |c| &c.binary)
            .path
            .clone();
        let spawned = self.handoff().command(row_index).and_then(|mut cmd| {
            cmd.spawn()
                .map_err(|e| BootError::file("start a worker process from", &from, e))
        });
        let child = match spawned {
            Ok(child) => child,
            Err(e) => {
                self.rows.give_back(row_index);
                return Err(e);
            }
        };
        let Some(pid) = i32::try_from(child.id()).ok().and_then(Pid::from_raw) else {
            return Ok(());
        };
        // Reaped by `reap`, never through the handle.
        drop(child);
        let mut proc = Proc::new(pid, row_index, row);
        proc.from_candidate = self.candidate.is_some();
        self.tally.started(i);
        let place = &mut self.places[i];
        place.start_at = None;
        if place.serving.is_some() {
            log::info!("worker {i}: replacement started (pid {})", proc.pid());
            place.next = Some(proc);
        } else {
            log::info!("worker {i} started (pid {})", proc.pid());
            place.serving = Some(proc);
        }
        Ok(())
    }

    fn all_ready(&self) -> bool {
        self.places
            .iter()
            .all(|p| p.serving.as_ref().is_some_and(|s| s.ready))
    }

    /// Says where the host listens (standard output, the log) and tells
    /// the service manager it is ready.
    fn announce(&mut self, shown: &[String]) {
        self.announced = true;
        crate::boot::announce(shown);
        notify::ready(&format!(
            "{} worker process(es) serving on {}",
            self.places.len(),
            shown.join(", ")
        ));
    }

    /// Acts on a signal; `Some` to end the supervisor with that result.
    fn on_signal(&mut self, signal: i32) -> Option<Result<(), BootError>> {
        match signal {
            SIGCHLD => {}
            SIGHUP | SIGUSR1 => {
                let what = if signal == SIGHUP {
                    "SIGHUP: every worker rescans the apps directory"
                } else {
                    "SIGUSR1: every worker reopens its log files"
                };
                log::info!("{what}");
                if signal == SIGUSR1 {
                    crate::ops::error_log::reopen();
                    if let Some(log) = &self.access_log {
                        log.reopen();
                    }
                }
                let sig = if signal == SIGHUP {
                    Signal::HUP
                } else {
                    Signal::USR1
                };
                for p in self
                    .places
                    .iter()
                    .flat_map(|p| p.serving.iter().chain(&p.next))
                {
                    p.signal(sig);
                }
            }
            SIGUSR2 => self.replace_all("SIGUSR2"),
            _ if self.draining.is_some() => {
                log::warn!("second signal {signal}: killing the workers and exiting now");
                self.kill_all();
                return Some(Err(BootError::system(
                    "drain",
                    std::io::Error::other("stopped by a second signal"),
                )));
            }
            _ => {
                log::info!(
                    "signal {signal}: draining every worker (graceful timeout {:?})",
                    self.graceful
                );
                notify::stopping(&format!("draining after signal {signal}"));
                self.draining = Some(Instant::now());
                // New connections are refused once the workers close theirs.
                self.sockets.clear();
                for p in self.places.iter().flat_map(Place::all) {
                    p.signal(Signal::TERM);
                }
            }
        }
        None
    }

    /// While draining: done once every worker is gone; kills the rest
    /// past the graceful timeout.
    fn drained(&mut self) -> Option<Result<(), BootError>> {
        let since = self.draining?;
        let past = since.elapsed() > self.graceful + Duration::from_secs(1);
        if self.places.iter().all(|p| p.all().next().is_none()) {
            if past {
                return Some(Err(BootError::system(
                    "drain",
                    std::io::Error::other("the graceful timeout passed: workers were killed"),
                )));
            }
            log::info!("every worker drained; exiting");
            return Some(Ok(()));
        }
        if past {
            log::warn!("graceful timeout passed; killing the workers still running");
            self.kill_all();
        }
        None
    }

    /// One access-log line for each request lost with a dead worker, as
    /// a 502 (what nginx logs when its upstream dies mid-request).
    fn log_lost(&self, in_flight: &InFlight) {
        let Some(log) = &self.access_log else {
            return;
        };
        let answered = Answered {
            status: 502,
            bytes: 0,
            micros: 0,
        };
        for info in in_flight.lost_requests() {
            log.write(&info, &answered);
        }
    }

    fn kill_all(&mut self) {
        for p in self.places.iter().flat_map(Place::all) {
            p.signal(Signal::KILL);
        }
    }

    /// Reaps every child that ended (as PID 1, adopted ones too) and acts
    /// on the workers among them.
    fn reap(&mut self) -> Result<(), BootError> {
        loop {
            let ended = match rustix::process::wait(WaitOptions::NOHANG) {
                Ok(Some(ended)) => ended,
                Ok(None) => return Ok(()),
                Err(rustix::io::Errno::CHILD) => return Ok(()),
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => {
                    log::warn!("waitpid: {e}");
                    return Ok(());
                }
            };
            let (pid, status) = ended;
            if status.stopped() || status.continued() {
                continue;
            }
            self.ended(pid, End::of(status))?;
        }
    }

    /// A worker process ended: frees what it held, gathers the facts,
    /// and does what `decide` says.
    fn ended(&mut self, pid: Pid, end: End) -> Result<(), BootError> {
        let found = self
            .places
            .iter_mut()
            .enumerate()
            .find_map(|(i, place)| place.take(pid).map(|(p, role)| (i, p, role)));
        let Some((i, proc, role)) = found else {
            log::debug!("reaped pid {} ({})", pid.as_raw_nonzero(), end.how());
            return Ok(());
        };
        let in_flight = InFlight::of(&proc.row);
        if end.is_crash() {
            self.log_lost(&in_flight);
        }
        self.free_row(&proc);
        let now = Instant::now();
        let culprit = in_flight.culprit.as_ref();
        let place = &self.places[i];
        let ending = Ending {
            role,
            end,
            ready: proc.ready,
            killed: proc.killed,
            from_candidate: proc.from_candidate,
            blame: culprit.map(|(_, digest)| self.deaths.blame(digest, now)),
            draining: self.draining.is_some(),
            announced: self.announced,
            upgrading: self.candidate.is_some(),
            next_starting: place.next.is_some(),
            failed_starts: place.failed_starts,
        };
        let (quarantine, then) = match decide(&ending) {
            Decision::LetGo { unasked: true } => {
                let (pid, how, what) = (proc.pid(), end.how(), in_flight.describe());
                log::warn!("worker {i} (pid {pid}) {how} while draining; {what}");
                return Ok(());
            }
            Decision::LetGo { unasked: false } => {
                log::info!(
                    "worker {i} (pid {}) {} after draining",
                    proc.pid(),
                    end.how()
                );
                return Ok(());
            }
            Decision::Counted { quarantine, then } => (quarantine, then),
        };
        self.count_death(i, &in_flight, quarantine, now);
        log::error!(
            "worker {i} (pid {}) {}; {}",
            proc.pid(),
            end.how(),
            in_flight.describe()
        );
        self.follow(i, then, end)
    }

    /// A worker ended: its counters join the retired ones, what it held
    /// in the host-wide counts is free again, and its row is no longer a
    /// worker of the host's status.
    fn free_row(&mut self, proc: &Proc) {
        self.tally.retire(&proc.row);
        give_back_holdings(self.area.words, &proc.row);
        proc.row.reset();
        self.rows.give_back(proc.row_index);
    }

    /// Counts a death against place `i`, the app its loop was in, and the
    /// plugin bytes it died of (quarantined now if `quarantine`).
    fn count_death(&mut self, i: usize, in_flight: &InFlight, quarantine: bool, now: Instant) {
        self.places[i].crashes += 1;
        self.tally.crashed(i, in_flight.app());
        let Some((app, digest)) = &in_flight.culprit else {
            return;
        };
        self.deaths.record(digest, now);
        if quarantine {
            let q = self.deaths.quarantined(app, digest);
            log::error!(
                "quarantined: {}; every worker refuses it, and takes it out of service",
                q.why()
            );
            self.tally.quarantine(q);
        }
    }

    /// Does what place `i` needs after a death (`end`) that counts.
    fn follow(&mut self, i: usize, then: Then, end: End) -> Result<(), BootError> {
        let place = &mut self.places[i];
        match then {
            Then::FailStart => {
                // A worker that cannot start at all: the start-up fails,
                // as a host that cannot load its apps does.
                self.kill_all();
                return Err(BootError::system(
                    format!("start worker {i}"),
                    std::io::Error::other(format!(
                        "it {} before it served (its log lines above say why)",
                        end.how()
                    )),
                ));
            }
            // Its replacement was on the way: it takes over.
            Then::TakeOver => place.serving = place.next.take(),
            Then::Replace => {
                place.failed_starts = 0;
                self.start(i)?;
                if let Some(new) = &self.places[i].serving {
                    log::info!("worker {i} replaced by pid {}", new.pid());
                }
            }
            Then::ReplaceAfterBackoff {
                failed_starts,
                pause,
            } => {
                log::warn!(
                    "worker {i} died before it served ({failed_starts} time(s) in a row); \
                     starting it again in {pause:?}"
                );
                place.failed_starts = failed_starts;
                place.start_at = Some(Instant::now() + pause);
            }
            Then::RetryReplacement {
                failed_starts,
                pause,
            } => {
                log::warn!("worker {i}: its replacement died before it served; again in {pause:?}");
                place.failed_starts = failed_starts;
                place.start_at = Some(Instant::now() + pause);
            }
            Then::AbandonUpgrade => {
                self.abandon_upgrade(&format!("a worker started from it {}", end.how()))
            }
        }
        Ok(())
    }

    /// Readiness, stuck loops, replacements asked for, memory, and
    /// delayed starts.
    fn watch(&mut self) {
        if self.draining.is_some() {
            return;
        }
        let now = Instant::now();
        let check_memory =
            self.max_memory > 0 && now.duration_since(self.memory_checked) >= MEMORY_EVERY;
        if check_memory {
            self.memory_checked = now;
        }
        for i in 0..self.places.len() {
            self.watch_place(i, now, check_memory);
        }
        // The socket files are the supervisor's: it made them.
        if now.duration_since(self.files_checked) >= FILES_EVERY {
            self.files_checked = now;
            crate::listen::watch_unix_sockets();
        }
        if let Some(tls) = self.tls.as_mut().filter(|t| now >= t.checked + t.every) {
            tls.checked = now;
            tls.watch.tick(unix_now());
        }
    }

    fn watch_place(&mut self, i: usize, now: Instant, check_memory: bool) {
        let timeout = self.worker_timeout;
        let max_memory = self.max_memory;
        let place = &mut self.places[i];
        if let Some(next) = &mut place.next {
            if next.says_ready() {
                next.ready = true;
                let next = place.next.take();
                if let (Some(old), Some(new)) = (place.serving.take(), next) {
                    log::info!(
                        "worker {i}: pid {} serves; pid {} drains",
                        new.pid(),
                        old.pid()
                    );
                    old.signal(Signal::TERM);
                    place.leaving.push(old);
                    place.serving = Some(new);
                }
            }
        }
        let mut replace = None;
        if let Some(p) = &mut place.serving {
            if !p.ready && p.says_ready() {
                p.ready = true;
                place.failed_starts = 0;
                log::info!("worker {i} (pid {}) ready", p.pid());
            }
            if p.ready && !p.killed {
                let pulse = p.row.pulse()[0].load(std::sync::atomic::Ordering::Relaxed);
                if pulse != p.pulse || pulse & 1 == 1 {
                    p.pulse = pulse;
                    p.pulse_since = now;
                } else if now.duration_since(p.pulse_since) >= timeout {
                    log::error!(
                        "worker {i} (pid {}) has been stuck for {}s in {}; killing it \
                         (--worker-timeout {})",
                        p.pid(),
                        now.duration_since(p.pulse_since).as_secs(),
                        place_in_row(&p.row).unwrap_or_else(|| "host code".to_string()),
                        humantime::format_duration(timeout)
                    );
                    p.killed = true;
                    p.signal(Signal::KILL);
                }
                if let Some(why) = p.row.recycle() {
                    replace = Some(why.reason().to_string());
                } else if check_memory {
                    let rss = crate::ops::peers::rss_bytes(p.pid() as u32);
                    if rss > max_memory {
                        replace = Some(format!(
                            "its resident memory {} passed --worker-max-memory {}",
                            crate::budget::size_text(rss as usize),
                            crate::budget::size_text(max_memory as usize)
                        ));
                    }
                }
            }
        }
        let paused = place.start_at.is_some_and(|at| now < at);
        if let (Some(why), None, Some(p), false) = (replace, &place.next, &place.serving, paused) {
            log::info!("worker {i} (pid {}) is replaced: {why}", p.pid());
            if let Err(e) = self.start(i) {
                log::error!("worker {i}: cannot start its replacement: {e}");
            }
        }
        let place = &mut self.places[i];
        if place.serving.is_none() && place.start_at.is_some_and(|at| now >= at) {
            if let Err(e) = self.start(i) {
                log::error!("worker {i}: cannot start it again: {e}");
                self.places[i].start_at = Some(now + backoff(8));
            }
        }
    }

    /// Sends the service manager's `WATCHDOG=1` every half period while
    /// at least one worker serves with a loop that turns; withheld only
    /// when none does (a dead or stuck worker is replaced here, at
    /// `--worker-timeout` for a stuck one).
    fn keep_alive(&mut self) {
        let Some((every, last)) = self.keepalive else {
            return;
        };
        if last.elapsed() < every || self.draining.is_some() {
            return;
        }
        let now = Instant::now();
        // The host serves while one worker does: a dead or stuck worker is
        // replaced here, and a service-manager restart would undo that.
        let serving = self.places.iter().any(|p| {
            p.serving
                .as_ref()
                .is_some_and(|s| s.ready && now.duration_since(s.pulse_since) < every * 2)
        });
        if serving {
            notify::watchdog();
        } else {
            log::debug!("WATCHDOG=1 withheld: a worker is starting or stuck");
        }
        self.keepalive = Some((every, now));
    }

    /// SIGUSR2: replaces every worker, one place at a time, with workers
    /// of the binary now at the path; once every place is served by one,
    /// the supervisor re-executes itself from it, in place.
    fn replace_all(&mut self, why: &str) {
        if self.draining.is_some() {
            log::warn!("{why} ignored: draining");
            return;
        }
        if self.candidate.is_some() {
            log::warn!("{why} ignored: an upgrade is already under way");
            return;
        }
        let path = crate::ops::upgrade::own_binary();
        let binary = match Binary::open(&path, 64 + self.sockets.len()) {
            Ok(binary) => binary,
            Err(e) => {
                log::error!(
                    "{why}: cannot open {}: {e}; nothing changes",
                    path.display()
                );
                return;
            }
        };
        log::info!(
            "{why}: replacing every worker, one at a time, with workers of {}",
            path.display()
        );
        self.candidate = Some(Candidate {
            binary,
            since: Instant::now(),
        });
    }

    /// Gives an upgrade up: the running binary's workers keep serving.
    fn abandon_upgrade(&mut self, why: &str) {
        let Some(candidate) = self.candidate.take() else {
            return;
        };
        let mixed = self
            .places
            .iter()
            .filter(|p| p.serving.as_ref().is_some_and(|s| s.from_candidate))
            .count();
        log::error!(
            "upgrade failed: {why}; the workers of the running binary keep serving \
             ({} is not used{})",
            candidate.binary.path.display(),
            if mixed > 0 {
                format!(
                    "; the {mixed} worker(s) already started from it are replaced by workers of \
                     the running binary, each serving before its old one drains"
                )
            } else {
                String::new()
            }
        );
        for place in &mut self.places {
            if let Some(p) = &place.serving {
                match p.from_candidate {
                    true => p.row.ask_recycle(Recycle::Abandoned),
                    false => p.row.clear_recycle(),
                }
            }
            place.start_at = None;
            place.failed_starts = 0;
        }
    }

    /// While an upgrade is under way: once every place is served by a
    /// worker of the new binary (and the old ones have drained), the
    /// supervisor re-executes itself from it. `Some` only if that failed
    /// past recovery.
    fn upgrade_step(&mut self) -> Option<Result<(), BootError>> {
        let since = self.candidate.as_ref()?.since;
        if self.draining.is_some() {
            self.candidate = None;
            return None;
        }
        if since.elapsed() > self.start_bound * self.places.len() as u32 {
            self.abandon_upgrade(&format!(
                "its workers did not all serve within {} s",
                (self.start_bound * self.places.len() as u32).as_secs()
            ));
            return None;
        }
        // One place at a time: the next one once no replacement is under
        // way (one asked for otherwise, e.g. at the generation cap, runs
        // its course first and is replaced again).
        let busy = self
            .places
            .iter()
            .any(|p| p.next.is_some() || !p.leaving.is_empty());
        if !busy {
            let next = self.places.iter().find_map(|p| {
                p.serving
                    .as_ref()
                    .filter(|s| !s.from_candidate && s.row.recycle().is_none())
            });
            if let Some(p) = next {
                p.row.ask_recycle(Recycle::Upgrade);
            }
        }
        let done = self.places.iter().all(|p| {
            p.next.is_none()
                && p.leaving.is_empty()
                && p.serving
                    .as_ref()
                    .is_some_and(|s| s.ready && s.from_candidate)
        });
        if !done {
            return None;
        }
        let candidate = self.candidate.take()?;
        let resumed = Resumed {
            sockets: self.sockets.len(),
            rows: self.row_count,
            workers: self
                .places
                .iter()
                .enumerate()
                .filter_map(|(i, p)| p.serving.as_ref().map(|s| (i, s.pid(), s.row_index)))
                .collect(),
            crashes: self.places.iter().map(|p| p.crashes).collect(),
            unix_files: listen::created_files(),
        };
        log::info!(
            "upgrade: every worker runs {}; the supervisor re-executes itself from it (pid {} \
             stays)",
            candidate.binary.path.display(),
            std::process::id()
        );
        crate::ops::error_log::flush(crate::ops::log_writer::EXIT_FLUSH);
        let e = resume::exec(
            &candidate.binary.exec_path(),
            &self.args,
            &self.sockets,
            &self.names,
            &self.area,
            &resumed,
        );
        // The workers already run the new binary; this image goes on
        // supervising them.
        log::error!("{e}; this supervisor goes on with the new workers");
        self.binary = candidate.binary;
        None
    }

    /// A re-executed supervisor takes its workers over.
    fn adopt(&mut self, resumed: Resumed) {
        for (i, pid, row_index) in resumed.workers {
            let (Some(pid), Some(row)) = (Pid::from_raw(pid), self.rows.claim(row_index)) else {
                continue;
            };
            if i >= self.places.len() {
                self.places.resize_with(i + 1, Place::default);
            }
            let mut proc = Proc::new(pid, row_index, row);
            proc.ready = true;
            self.places[i].serving = Some(proc);
            self.places[i].crashes = resumed.crashes.get(i).copied().unwrap_or(0);
        }
        self.announced = true;
        log::info!(
            "supervisor re-executed in place from {} (pid {}), serving with {} worker(s)",
            self.binary.path.display(),
            std::process::id(),
            self.places.iter().filter(|p| p.serving.is_some()).count()
        );
        // Places the old image left without a worker start now.
        for i in 0..self.places.len() {
            if self.places[i].serving.is_none() {
                if let Err(e) = self.start(i) {
                    log::error!("worker {i}: cannot start it: {e}");
                }
            }
        }
    }
}

/// A worker ended: the connection slots and buffered bytes it held in the
/// host-wide counts are free again.
fn give_back_holdings(
    area: &'static [std::sync::atomic::AtomicU64],
    row: &crate::ops::worker_row::Row,
) {
    use std::sync::atomic::Ordering::SeqCst;
    let (open, _) = open_words(area);
    for (total, mine) in [(open, row.held()), (buffered_word(area), row.buffered())] {
        let n = mine.swap(0, SeqCst);
        let _ = total.fetch_update(SeqCst, SeqCst, |t| Some(t.saturating_sub(n)));
    }
}

/// The signals the supervisor acts on, from a thread of their own.
fn signals() -> Result<Receiver<i32>, BootError> {
    let mut signals =
        signal_hook::iterator::Signals::new([SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2, SIGCHLD])
            .map_err(|e| BootError::system("install signal handlers", e))?;
    let (tx, rx) = crossbeam_channel::unbounded();
    std::thread::Builder::new()
        .name("stoa-signals".into())
        .spawn(move || {
            for signal in signals.forever() {
                if tx.send(signal).is_err() {
                    return;
                }
            }
        })
        .map_err(|e| BootError::thread("the signal thread", e))?;
    Ok(rx)
}

/// One listening socket per bind (shared by every worker), or the service
/// manager's.
fn listeners(cli: &Cli, backlog: i32) -> Result<listen::Bound, BootError> {
    if let Some(sockets) = listen::inherited()? {
        log::info!(
            "serving {} socket(s) passed by the service manager (LISTEN_FDS); --bind is not used",
            sockets.len()
        );
        return listen::adopt_all(sockets, 1);
    }
    if !cli.reuse_port {
        for b in cli.bind.iter().filter(|b| !matches!(b, Bind::Unix(_))) {
            checks::address_is_free(b)?;
        }
    }
    listen::bind_all(&cli.bind, 1, backlog, cli.unix_mode)
}

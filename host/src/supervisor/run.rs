//! The supervisor's start-up and loop: the listening sockets, the pid
//! file, the shared area and the store, the first workers (or a
//! re-executed supervisor's), then signals in and the workers watched a
//! few times a second.

use super::binary::Binary;
use super::handoff::inherited_area;
use super::procs::{Place, Rows};
use super::quarantine::Deaths;
use super::resume::{self, Resumed};
use super::signals::signals;
use super::store::Store;
use super::tally::Tally;
use super::{Supervisor, TlsWatch};
use crate::checks;
use crate::cli::Cli;
use crate::error::BootError;
use crate::listen;
use crate::listen::tls::expiry::unix_now;
use crate::listen::tls::watch::{Part, Watch};
use crate::ops::access_log::AccessLog;
use crate::ops::notify;
use crate::ops::pid_file::PidFile;
use crate::ops::worker_row::area_words;
use crate::settings::Bind;
use crate::shm::Area;
use crossbeam_channel::Receiver;
use std::os::fd::OwnedFd;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

/// How often the workers are looked at.
const TICK: Duration = Duration::from_millis(50);

/// How long a worker may take to serve beyond `--init-timeout` (its
/// constructors' bound): loading, the load probe, binding its loop.
const START_SLACK: Duration = Duration::from_secs(60);

/// Process mode: supervises the worker processes until the drain.
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
    let listening = Listening::open(&cli, backlog, resumed.as_mut())?;
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
    let signals = signals()?;
    let _store = Store::open(resumed.is_some())?;
    let mut sup = Supervisor::new(&cli, workers, listening, area, row_count)?;
    log::info!(
        "supervisor: {workers} worker process(es), backlog={backlog}, worker_timeout={:?}",
        cli.worker_timeout
    );
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
    sup.supervise(&signals, &mut pid_file, ticket_keys)
}

/// The listening sockets, bound once (or adopted) and handed to every
/// worker; the supervisor accepts on none of them.
struct Listening {
    sockets: Vec<OwnedFd>,
    /// Their `LISTEN_FDNAMES`.
    names: String,
    /// Each as the start-up line shows it.
    shown: Vec<String>,
    tls: Option<TlsWatch>,
}

impl Listening {
    /// Every `--bind` (or the service manager's sockets, or, re-executed,
    /// the previous image's), its TLS files checked.
    fn open(cli: &Cli, backlog: i32, resumed: Option<&mut Resumed>) -> Result<Self, BootError> {
        let bound = match resumed {
            Some(r) => {
                listen::adopt_created(std::mem::take(&mut r.unix_files));
                listen::adopt_all(listen::inherited()?.unwrap_or_default(), 1)?
            }
            None => listeners(cli, backlog)?,
        };
        // Checked here once, so a bad file fails the start, not each worker;
        // kept to say when a certificate nears its end (`TlsWatch`).
        let tls = checks::tls_config(cli, &bound.tls_addrs(), None)?.map(|sites| TlsWatch {
            watch: Watch::new(sites, Part::Supervisor),
            every: cli.tls_watch_interval,
            checked: Instant::now(),
        });
        let handed = bound.duplicates()?;
        let names = listen::fd_names(handed.iter().map(|h| h.name.as_deref()));
        Ok(Listening {
            sockets: handed.into_iter().map(|h| h.fd).collect(),
            names,
            shown: bound.shown.clone(),
            tls,
        })
    }
}

impl Supervisor {
    /// A supervisor of `workers` places, none started yet.
    fn new(
        cli: &Cli,
        workers: usize,
        listening: Listening,
        area: Area,
        row_count: usize,
    ) -> Result<Self, BootError> {
        let path = crate::ops::upgrade::own_binary();
        let binary = Binary::open(&path, 64 + listening.sockets.len())
            .map_err(|e| BootError::file("open the binary workers start from", &path, e))?;
        let access_log = match &cli.access_log {
            Some(target) => Some(
                AccessLog::open(target, cli.log_format)
                    .map_err(|e| e.within("--access-log", target))?,
            ),
            None => None,
        };
        Ok(Supervisor {
            binary,
            candidate: None,
            args: std::env::args_os().skip(1).collect(),
            sockets: listening.sockets,
            names: listening.names,
            rows: Rows::new(area.words, row_count),
            tally: Tally::new(area.words, workers),
            area,
            row_count,
            places: (0..workers).map(|_| Place::default()).collect(),
            worker_timeout: cli.worker_timeout,
            graceful: cli.graceful_timeout,
            max_memory: cli.worker_max_memory.unwrap_or(0),
            start_bound: cli.init_timeout + START_SLACK,
            announced: false,
            shown: listening.shown,
            draining: None,
            memory_checked: Instant::now(),
            files_checked: Instant::now(),
            keepalive: notify::watchdog_every().map(|every| (every, Instant::now())),
            deaths: Deaths::new(cli.quarantine_after, cli.quarantine_window),
            tls: listening.tls,
            access_log,
        })
    }

    /// Signals in, the workers reaped and watched every tick, the upgrade
    /// stepped, the host announced once every first worker serves; until
    /// the drain ends (or start-up fails).
    fn supervise(
        &mut self,
        signals: &Receiver<i32>,
        pid_file: &mut Option<PidFile>,
        ticket_keys: &'static [AtomicU64],
    ) -> Result<(), BootError> {
        let started = Instant::now();
        loop {
            match signals.recv_timeout(TICK) {
                Ok(signal) => {
                    if let Some(code) = self.on_signal(signal) {
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
            self.reap()?;
            if crate::listen::tls::tickets::rotate(ticket_keys) {
                log::info!("TLS session tickets: a new key; the one before last is erased");
            }
            if let Some(done) = self.drained() {
                return done;
            }
            self.watch();
            self.keep_alive();
            if let Some(failed) = self.upgrade_step() {
                return failed;
            }
            if !self.announced {
                self.await_first_workers(started, pid_file)?;
            }
        }
    }

    /// Before the host was announced: announces it once every first
    /// worker serves; fails the start-up past `start_bound`.
    fn await_first_workers(
        &mut self,
        started: Instant,
        pid_file: &mut Option<PidFile>,
    ) -> Result<(), BootError> {
        if self.all_ready() {
            if let Some(file) = pid_file {
                file.serving()?;
            }
            self.announce();
        } else if started.elapsed() > self.start_bound {
            self.kill_all();
            return Err(BootError::system(
                "start the workers",
                std::io::Error::other(format!(
                    "not every worker served within {} s (--init-timeout and {} s more)",
                    self.start_bound.as_secs(),
                    START_SLACK.as_secs()
                )),
            ));
        }
        Ok(())
    }

    /// Every place is served by a worker that says it serves.
    fn all_ready(&self) -> bool {
        self.places
            .iter()
            .all(|p| p.serving.as_ref().is_some_and(|s| s.ready))
    }

    /// Says where the host listens (standard output, the log) and tells
    /// the service manager it is ready.
    fn announce(&mut self) {
        self.announced = true;
        crate::boot::announce(&self.shown);
        notify::ready(&format!(
            "{} worker process(es) serving on {}",
            self.places.len(),
            self.shown.join(", ")
        ));
    }
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

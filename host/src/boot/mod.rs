//! Start-up and shutdown: pollers and listeners first (low descriptors),
//! then the blocking pool and the apps, then one event-loop thread per
//! worker; signals drain them. One assembly (`serve`) for both ways a
//! process serves, thread mode (`threads`) and a worker process of process
//! mode (`worker`); what differs between them is their `mode::Mode`.

mod mode;
mod threads;
mod worker;

pub use worker::WorkerRole;

use crate::apps::plugin_copy::PluginCopies;
use crate::apps::pool::Pool;
use crate::apps::quarantine::Guard;
use crate::apps::registry::{AppState, AppTable, Registry, Scan};
use crate::apps::retire;
use crate::apps::services;
use crate::apps::watcher::{self, Event};
use crate::budget::size_text;
use crate::checks;
use crate::cli::{Cli, Measured};
use crate::control::{Control, Request, Requests};
use crate::error::BootError;
use crate::inbox::Inbox;
use crate::listen;
use crate::ops::access_log::AccessLog;
use crate::ops::log_writer::EXIT_FLUSH;
use crate::ops::upgrade::Upgrade;
use crate::ops::watchdog::{self, Board, Watched};
use crate::ops::worker_row::Row;
use crate::poller::{self, Poller};
use crate::server::handles::Handles;
use crate::server::listeners::Listeners;
use crate::server::spares::Spares;
use crate::server::Server;
use crate::settings::{OnGenerationCap, Overload, Settings};
use crate::signals::{self, Steered};
use crate::stats::Stats;
use crossbeam_channel::{Receiver, Sender};
use mode::{Loops, Mode};
use std::collections::HashMap;
use std::io::Write;
use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;
use threads::Threads;
use worker::Worker;

/// Thread mode: this process serves, one event-loop thread per worker.
pub fn run(cli: Cli) -> Result<(), BootError> {
    checks::process_mode_only(&cli)?;
    serve(cli, Threads::default())
}

/// One worker process of process mode: one event loop on the sockets the
/// supervisor handed over, its state in `role.row`.
pub fn run_worker(mut cli: Cli, role: WorkerRole) -> Result<(), BootError> {
    cli.workers = Some(1);
    serve(cli, Worker::new(role))
}

/// Builds every handle and thread of a process in `mode`, serves until
/// the drain, and shuts down.
fn serve(cli: Cli, mut mode: impl Mode) -> Result<(), BootError> {
    match listen::raise_fd_limit() {
        Ok(n) => log::info!("file descriptor limit (RLIMIT_NOFILE) = {n}"),
        Err(e) => log::warn!("cannot raise RLIMIT_NOFILE: {e}"),
    }
    let pollers = pollers(&cli)?;
    let workers = pollers.len();
    let settings = Arc::new(cli.settings(measure(&cli, &pollers)?));
    let budget = mode.budget(max_buffered(&cli, &settings)?);
    let backlog = cli.backlog.unwrap_or_else(listen::somaxconn);
    let mut bound = mode.listeners(&cli, workers, backlog)?;
    let tls = checks::tls_config(&cli, &bound.tls_addrs(), mode.ticket_keys())?;
    let upgrade = Arc::new(Upgrade::new(bound.duplicates()?));
    log::info!("workers={workers} backlog={backlog}");
    mode.claim_pid_file(&cli)?;
    let board = watchdog(&cli, mode.rows(workers), bound.tcp_addrs.clone(), backlog)?;

    // Timers and the pool must exist before apps are initialised.
    let inboxes: Vec<Arc<Inbox>> = pollers
        .iter()
        .map(|p| Arc::new(Inbox::new(p.waker())))
        .collect();
    let pool = start_pool(&cli, &inboxes[0])?;
    let stats = Arc::new(Stats::new(workers));
    let (requests, incoming) = signals::channel();
    let registry = load_apps(&cli, &stats, Some(&requests), mode.guard())?;
    // One spare descriptor per loop of this process (`server::spares`).
    let spares = Spares::new(match settings.overload {
        Overload::Shed => workers,
        Overload::Queue => 0,
    });
    let handles = Arc::new(Handles {
        open: mode.open_count(settings.max_connections),
        settings,
        apps: AppTable::new(mounted(&cli, &registry)?),
        pool: (!cli.blocking_on_loop).then_some(pool),
        access_log: open_access_log(&cli)?,
        control: Arc::new(Control::default()),
        board: Arc::new(board),
        stats,
        budget,
        peers: mode.peers(),
        spares,
        tls: tls.clone(),
    });
    log::info!(
        "{} app(s) mounted, {} plugin file(s) refused",
        handles.apps.load().mounts.apps().len(),
        handles.apps.load().refused.len()
    );

    let servers = servers(pollers, inboxes, &mut bound, &handles)?;
    let stop_apps = registry.events();
    let (started_tx, started) = crossbeam_channel::bounded(1);
    let apps = AppsThread {
        registry,
        started: started_tx,
    };
    let steering = Steering {
        requests,
        incoming,
        tls,
    };
    let apps_thread = start_threads(&cli, apps, &handles, upgrade, &mode, steering)?;
    let loops = mode.start(servers, &started, &handles, &bound.shown)?;
    let failed = join_loops(loops);
    mode.leave(&handles);
    shut_down(&handles, &stop_apps, apps_thread, failed)
}

/// One poller per worker (`--workers`, or one per CPU), of the backend
/// `--poller` names.
fn pollers(cli: &Cli) -> Result<Vec<Box<dyn Poller>>, BootError> {
    let workers = cli
        .workers
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    (0..workers.max(1))
        .map(|_| poller::create_by_flag(&cli.poller))
        .collect()
}

/// What the settings need from the machine: the worker count, the
/// connection cap the descriptor limit allows, the backend's name.
fn measure(cli: &Cli, pollers: &[Box<dyn Poller>]) -> Result<Measured, BootError> {
    let workers = pollers.len();
    let first = &pollers[0];
    let poller = first.name();
    let budget = checks::fd_budget(cli, first.features().fd_limit, workers);
    let max_connections = checks::connection_cap(cli.max_connections, &budget, poller)?;
    log::info!(
        "poller={poller} fd_cap={max_connections} (host-wide, over {workers} worker(s), \
         --overload {}; RLIMIT_NOFILE={}, {} kept for the host)",
        cli.overload.name(),
        budget
            .nofile
            .map_or_else(|| "?".to_string(), |n| n.to_string()),
        budget.reserved()
    );
    Ok(Measured {
        workers,
        max_connections,
        poller,
    })
}

/// The host-wide bound on buffered bytes (`--max-buffered`), said once.
fn max_buffered(cli: &Cli, settings: &Settings) -> Result<usize, BootError> {
    let (max_buffered, rule) = crate::ops::memory::max_buffered(cli.max_buffered, settings)?;
    log::info!(
        "max_buffered={} ({rule}); body_min_rate={} bytes/s after body_timeout",
        size_text(max_buffered),
        cli.body_min_rate
    );
    Ok(max_buffered)
}

/// The blocking pool, installed for the apps' `spawn_blocking` (timers
/// set off the loops go to `default_inbox`).
fn start_pool(cli: &Cli, default_inbox: &Arc<Inbox>) -> Result<Arc<Pool>, BootError> {
    let pool = Pool::new(cli.blocking_threads, cli.blocking_queue, cli.blocking_share)
        .map_err(|e| BootError::system("start the blocking pool", e))?;
    services::install(pool.clone(), default_inbox.clone());
    if cli.blocking_on_loop {
        log::info!("blocking handlers run on the event loop (--blocking-on-loop)");
    } else {
        log::info!(
            "blocking pool: {} threads, queue {}, each app guaranteed {} thread(s) and {} waiting \
             job(s) ({}%), and idle ones past that",
            pool.threads(),
            cli.blocking_queue,
            pool.group_threads(),
            pool.group_queue(),
            cli.blocking_share
        );
    }
    Ok(pool)
}

/// The apps loaded at start-up, checked against the mounts and tables
/// that name them (and `--strict-plugins`).
fn mounted(cli: &Cli, registry: &Registry) -> Result<AppState, BootError> {
    let state = registry.state();
    checks::mounts_name_loaded_apps(cli, &state)?;
    if cli.strict_plugins {
        checks::no_refused_plugins(&state)?;
    }
    if state.mounts.apps().is_empty() {
        log::warn!(
            "no app loaded from {}; every request will get 404",
            cli.apps.display()
        );
    }
    Ok(state)
}

fn open_access_log(cli: &Cli) -> Result<Option<Arc<AccessLog>>, BootError> {
    let Some(target) = &cli.access_log else {
        return Ok(None);
    };
    let log =
        AccessLog::open(target, cli.log_format).map_err(|e| e.within("--access-log", target))?;
    Ok(Some(Arc::new(log)))
}

/// The apps thread (watching the directory unless `--no-watch`), the
/// watchdog, the TLS files' watch, and the signal and control threads.
fn start_threads(
    cli: &Cli,
    apps: AppsThread,
    handles: &Handles,
    upgrade: Arc<Upgrade>,
    mode: &dyn Mode,
    steering: Steering,
) -> Result<JoinHandle<()>, BootError> {
    let AppsThread { registry, started } = apps;
    let Steering {
        requests,
        incoming,
        tls,
    } = steering;
    if cli.no_watch {
        log::info!(
            "not watching {} (--no-watch); SIGHUP rescans it",
            cli.apps.display()
        );
    }
    let events = registry.events();
    let apps_thread = watcher::spawn(
        registry,
        handles.apps.clone(),
        handles.control.clone(),
        !cli.no_watch,
        started,
    )?;
    watchdog::spawn(Watched {
        board: handles.board.clone(),
        stats: handles.stats.clone(),
        control: handles.control.clone(),
        pool: handles.pool.clone(),
        max_requests: mode.max_requests(cli),
        peers: handles.peers.clone(),
        access_log: handles.access_log.clone(),
        worker_timeout: mode.pool_hung_bound(cli),
    })
    .map_err(|e| BootError::thread("the watchdog", e))?;
    if let Some(sites) = &tls {
        crate::listen::tls::watch::spawn(sites.clone(), mode.tls_part(), cli.tls_watch_interval)?;
    }
    let steered = Steered {
        control: handles.control.clone(),
        access_log: handles.access_log.clone(),
        apps: events,
        upgrade,
        graceful: cli.graceful_timeout,
        row: mode.row(),
        tls,
    };
    signals::watch(steered, requests, incoming)?;
    Ok(apps_thread)
}

/// What the apps thread takes: the registry, and where it says that
/// every start-up constructor has returned.
struct AppsThread {
    registry: Registry,
    started: Sender<()>,
}

/// The control requests' channel: who may ask, and what the control
/// thread reads.
struct Steering {
    requests: Requests,
    incoming: Receiver<Request>,
    /// The TLS binds' files, read again on SIGHUP.
    tls: Option<Arc<crate::listen::tls::TlsSites>>,
}

/// One event loop per poller, each on its share of the listeners.
fn servers(
    pollers: Vec<Box<dyn Poller>>,
    inboxes: Vec<Arc<Inbox>>,
    bound: &mut listen::Bound,
    handles: &Arc<Handles>,
) -> Result<Vec<Server>, BootError> {
    // One table of every listener's facts, shared by the loops (read
    // before the loops take their listeners).
    let facts = Arc::new(Listeners::of_bound(
        bound,
        handles.tls.as_ref(),
        handles.settings.https_redirect,
    ));
    let per_worker = std::mem::take(&mut bound.per_worker);
    let mut servers = Vec::with_capacity(pollers.len());
    for (i, ((poller, listeners), inbox)) in
        pollers.into_iter().zip(per_worker).zip(inboxes).enumerate()
    {
        handles.control.add_waker(poller.waker());
        servers.push(
            Server::new(i, poller, listeners, facts.clone(), handles.clone(), inbox)
                .map_err(|e| BootError::system(format!("start worker {i}"), e))?,
        );
    }
    Ok(servers)
}

/// One thread per loop.
fn spawn_loops(servers: Vec<Server>) -> Result<Loops, BootError> {
    servers
        .into_iter()
        .enumerate()
        .map(|(i, mut server)| {
            std::thread::Builder::new()
                .name(format!("stoa-worker-{i}"))
                .spawn(move || server.run())
                .map_err(|e| BootError::thread(format!("worker thread {i}"), e))
        })
        .collect()
}

/// Says where the host listens (standard output, the log): it serves from
/// now on, while the constructors start-up waits for may still run.
pub(crate) fn announce(shown: &[String]) {
    let mut stdout = std::io::stdout();
    for shown in shown {
        let _ = writeln!(stdout, "listening on {shown}");
    }
    let _ = stdout.flush();
    for shown in shown {
        log::info!("listening on {shown}");
    }
}

/// Waits until the apps thread has seen every start-up constructor return
/// or be refused at `--init-timeout` (it logs the ones it waits for);
/// false if the host drains first.
fn await_start_up(started: &Receiver<()>, handles: &Handles) -> bool {
    let starting = handles.apps.load().starting.clone();
    if !starting.is_empty() {
        log::info!(
            "READY=1 and /ready wait for the constructor of app(s) {}",
            starting.join(", ")
        );
    }
    loop {
        match started.recv_timeout(std::time::Duration::from_millis(200)) {
            Ok(()) => return !handles.control.draining(),
            Err(_) if handles.control.draining() => return false,
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => return false,
        }
    }
}

/// Waits for every loop to drain; the last failure, if any.
fn join_loops(loops: Loops) -> Option<BootError> {
    let mut failed = None;
    for (i, h) in loops.into_iter().enumerate() {
        match h.join() {
            Ok(Ok(())) => {}
            Ok(Err(source)) => failed = Some(BootError::Worker { worker: i, source }),
            Err(_) => failed = Some(BootError::WorkerPanicked { worker: i }),
        }
    }
    failed
}

/// After the drain: the apps retired, the access log's last lines
/// written, and the loops' failure, if any, as the result.
fn shut_down(
    handles: &Handles,
    stop_apps: &Sender<Event>,
    apps_thread: JoinHandle<()>,
    failed: Option<BootError>,
) -> Result<(), BootError> {
    retire_mounted(&handles.apps, stop_apps, apps_thread);
    if let Some(log) = &handles.access_log {
        if !log.flush(EXIT_FLUSH) {
            log::warn!("the access log did not take its last lines within {EXIT_FLUSH:?}");
        }
    }
    match failed {
        Some(e) => Err(e),
        None => {
            log::info!("drained; exiting");
            Ok(())
        }
    }
}

/// After the drain: stops the apps thread and unpublishes the apps, so the
/// generations still mounted are retired once their requests (if any are
/// left after a forced drain) let go; waits for that a bounded time.
fn retire_mounted(apps: &AppTable, stop: &Sender<Event>, apps_thread: JoinHandle<()>) {
    // Already gone if it saw the drain itself.
    let _ = stop.send(Event::Stop);
    if apps_thread.join().is_err() {
        log::error!("the apps thread panicked");
    }
    apps.publish(AppState::default());
    retire::wait_all(retire::RETIRE_BOUND);
}

/// The registry with every plugin of the apps directory loaded and
/// constructed (constructors bounded, see `watcher::await_constructors`;
/// the host's readiness waits for those of apps not `optional`).
pub(crate) fn load_apps(
    cli: &Cli,
    stats: &Arc<Stats>,
    requests: Option<&Requests>,
    guard: Option<Arc<dyn Guard>>,
) -> Result<Registry, BootError> {
    let mounts: HashMap<String, String> = cli.mounts.iter().cloned().collect();
    let copies = PluginCopies::from_env(cli.max_plugin_size)?;
    let mut registry =
        Registry::new(&cli.apps, mounts, cli.max_generations, copies).map_err(|e| {
            let shown = crate::cli::shown_path(&cli.apps);
            BootError::file("read the apps directory", shown, e)
        })?;
    registry.set_insecure(cli.insecure_apps_dir);
    registry.count_in(stats.clone());
    if let Some(guard) = guard {
        registry.set_guard(guard);
    }
    if let Some(requests) = requests.filter(|_| cli.on_generation_cap == OnGenerationCap::Reexec) {
        registry.set_reexec_at_cap(requests.clone());
    }
    registry.set_settings(
        cli.app_sections
            .iter()
            .map(|(name, section)| {
                let settings: Arc<str> = Arc::from(section.settings_json());
                (name.clone(), (settings, section.limits))
            })
            .collect(),
    );
    registry.set_init_timeout(cli.init_timeout);
    registry.scan(Scan::Startup);
    registry.hold_start_up(|app| cli.app_sections.get(app).is_some_and(|s| s.optional));
    watcher::await_constructors(&mut registry);
    Ok(registry)
}

/// The watchdog's board, from `--stuck-after` and `--unhealthy-after`.
fn watchdog(
    cli: &Cli,
    rows: Vec<Row>,
    addrs: Vec<Option<SocketAddr>>,
    backlog: i32,
) -> Result<Board, BootError> {
    checks::watchdog_bounds(cli)?;
    log::info!(
        "watchdog: a loop is stuck after {:?} without turning, the process unhealthy after {:?}",
        cli.stuck_after,
        cli.unhealthy_after
    );
    Ok(Board::new(
        rows,
        cli.stuck_after,
        cli.unhealthy_after,
        addrs,
        backlog,
    ))
}

//! The `stoa` binary: flags, logging, loading the apps, running the loop.

mod access_log;
mod cli;
mod conn;
mod http;
mod listen;
mod loader;
mod poller;
mod request;
mod responder;
mod server;
mod services;
mod timers;

use clap::Parser;
use std::collections::HashMap;
use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    if let Err(e) = setup_logging(cli.log_level) {
        eprintln!("stoa: cannot set up logging: {e}");
        return ExitCode::FAILURE;
    }
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            log::error!("{e}");
            ExitCode::FAILURE
        }
    }
}

fn setup_logging(level: log::LevelFilter) -> Result<(), fern::InitError> {
    fern::Dispatch::new()
        .format(|out, message, record| {
            out.finish(format_args!(
                "{} {:<5} {}: {}",
                humantime::format_rfc3339_millis(std::time::SystemTime::now()),
                record.level(),
                record.target(),
                message
            ))
        })
        .level(level)
        .chain(std::io::stderr())
        .apply()?;
    Ok(())
}

fn run(cli: cli::Cli) -> Result<(), String> {
    match listen::raise_fd_limit() {
        Ok(n) => log::info!("file descriptor limit (RLIMIT_NOFILE) = {n}"),
        Err(e) => log::warn!("cannot raise RLIMIT_NOFILE: {e}"),
    }
    // The poller (and its waker) and the listener are created first, so they
    // hold low descriptors (select cannot watch one >= FD_SETSIZE).
    let poller = poller::create_by_flag(&cli.poller)?;
    let max_connections = connection_cap(poller.fd_limit(), cli.max_connections);
    match poller.fd_limit() {
        Some(limit) => log::info!(
            "poller={} fd_cap={max_connections} (FD_SETSIZE={limit})",
            poller.name()
        ),
        None => log::info!("poller={} fd_cap={max_connections}", poller.name()),
    }
    let backlog = cli.backlog.unwrap_or_else(listen::somaxconn);
    let listener =
        listen::bind(cli.bind, backlog).map_err(|e| format!("cannot bind {}: {e}", cli.bind))?;
    log::info!("backlog={backlog}");
    let local = listener
        .local_addr()
        .map_err(|e| format!("listener address: {e}"))?;

    // Timers and the pool must exist before apps are initialised.
    let inbox = Arc::new(responder::Inbox::new(poller.waker()));
    let pool = services::Pool::new(cli.blocking_threads, cli.blocking_queue)
        .map_err(|e| format!("cannot start the blocking pool: {e}"))?;
    services::install(pool.clone(), inbox.clone());
    log::info!(
        "blocking handlers: {}",
        if cli.blocking_on_loop {
            "on the event loop (--blocking-on-loop)".to_string()
        } else {
            format!(
                "pool of {} threads, queue {}",
                cli.blocking_threads, cli.blocking_queue
            )
        }
    );

    let mounts: HashMap<String, String> = cli.mounts.iter().cloned().collect();
    let loaded = loader::load_dir(&cli.apps, &mounts)
        .map_err(|e| format!("cannot read the apps directory {}: {e}", cli.apps.display()))?;
    let access_log = match &cli.access_log {
        Some(target) => Some(
            access_log::AccessLog::open(target).map_err(|e| format!("access log {target}: {e}"))?,
        ),
        None => None,
    };
    let shared = Arc::new(server::Shared {
        mounts: loader::MountTable::new(loaded.apps.clone()),
        params: http::ConnParams::default(),
        access_log,
        max_connections,
        pool: (!cli.blocking_on_loop).then_some(pool),
        loop_block_warn: std::time::Duration::from_millis(cli.loop_block_warn),
    });
    log::info!(
        "{} app(s) mounted, {} plugin file(s) refused",
        shared.mounts.apps().len(),
        loaded.refused.len()
    );
    let mut server = server::Server::new(poller, listener, shared, inbox)
        .map_err(|e| format!("cannot start the event loop: {e}"))?;

    let mut stdout = std::io::stdout();
    let _ = writeln!(stdout, "listening on http://{local}");
    let _ = stdout.flush();
    log::info!("listening on http://{local}");
    server.run().map_err(|e| format!("event loop failed: {e}"))
}

/// File descriptors kept free under FD_SETSIZE for stdio, the poller's
/// waker, the listener, log files and plugin libraries.
const RESERVED_FDS: usize = 24;

/// The connection cap: the operator's, bounded by the backend's fd limit.
fn connection_cap(fd_limit: Option<usize>, requested: Option<usize>) -> usize {
    let backend_cap = fd_limit.map(|l| l.saturating_sub(RESERVED_FDS));
    match (requested, backend_cap) {
        (Some(n), Some(cap)) => n.min(cap),
        (Some(n), None) => n,
        (None, Some(cap)) => cap,
        (None, None) => 10_000,
    }
    .max(1)
}

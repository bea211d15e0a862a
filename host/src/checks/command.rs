//! `stoa check` and `--print-config`: the configuration as the server
//! would take it, every problem of it at once (values, addresses, TLS,
//! log targets, plugins and mounts), with warnings that do not fail it.

use super::{
    address_is_free, connection_cap, fd_budget, holders, mounts_name_loaded_apps, placed,
    process_mode_only, refusal_lines, tls, tls_config, watchdog_bounds, worker_timeout,
};
use crate::cli::Cli;
use crate::error::{BootError, UnixRefusal};
use crate::settings::Bind;

/// `stoa check`: the configuration as the server would take it, every
/// plugin loaded through the real loader (constructors run, nothing is
/// served), the mounts resolved, each TLS certificate reviewed (`tls`);
/// prints the effective configuration, the mount table, one line per
/// certificate, one per warning and one per problem. Err when there is
/// any problem (warnings pass).
pub fn check(cli: &Cli) -> Result<(), BootError> {
    let mut problems: Vec<String> = Vec::new();
    let config = cli
        .config
        .as_ref()
        .map_or_else(|| "none".to_string(), |p| p.display().to_string());
    println!("# configuration file: {config}");
    println!("{}", cli.effective_config);
    match crate::poller::create_by_flag(&cli.poller) {
        Ok(poller) => {
            let budget = fd_budget(cli, poller.features().fd_limit, cli.workers.unwrap_or(1));
            note(
                &mut problems,
                connection_cap(cli.max_connections, &budget, poller.name()).map(|_| ()),
            );
        }
        Err(e) => note(&mut problems, Err(e)),
    }
    for bind in &cli.bind {
        if !cli.reuse_port || matches!(bind, Bind::Unix(_)) {
            address_problems(&mut problems, cli, bind);
        }
    }
    problems.extend(value_problems(cli));
    let mut warnings = Vec::new();
    if let Ok(sites) = cli.tls_sites() {
        let review = tls::review(&sites, crate::listen::tls::expiry::unix_now());
        for line in &review.notes {
            println!("# tls {line}");
        }
        problems.extend(review.problems);
        warnings = review.warnings;
    }
    for line in relative_paths(cli) {
        println!("# {line}");
    }
    for (flag, target) in [
        ("--access-log", &cli.access_log),
        ("--error-log", &cli.error_log),
    ] {
        if let Some(target) = target {
            note(
                &mut problems,
                crate::ops::log_target::check(target).map_err(|e| e.within(flag, target)),
            );
        }
    }
    apps_report(cli, &mut problems);
    for w in &warnings {
        println!("warning: {w}");
    }
    for p in &problems {
        println!("problem: {p}");
    }
    if problems.is_empty() {
        match warnings.len() {
            0 => println!("stoa check: the configuration is OK"),
            n => println!("stoa check: the configuration is OK, with {n} warning(s)"),
        }
        Ok(())
    } else {
        Err(BootError::CheckFailed {
            problems: problems.len(),
        })
    }
}

/// Loads the apps as the server would (constructors run, nothing served)
/// and prints how the workers run and the mount table; refused plugins and
/// mounts naming no app are problems.
fn apps_report(cli: &Cli, problems: &mut Vec<String>) {
    match crate::boot::load_apps(
        cli,
        &std::sync::Arc::new(crate::stats::Stats::new(1)),
        None,
        None,
    ) {
        Ok(registry) => {
            let state = registry.state();
            println!("# workers");
            println!("{}", workers_line(cli));
            println!("# mounts");
            for app in state.mounts.apps() {
                let mount = if app.mount.is_empty() {
                    "/"
                } else {
                    &app.mount
                };
                println!(
                    "{mount} -> {} {} ({})",
                    app.name,
                    app.version,
                    app.file.display()
                );
            }
            crate::apps::overlap::notes(state.mounts.apps())
                .iter()
                .for_each(|line| println!("note: {line}"));
            problems.extend(refusal_lines(&state));
            note(problems, mounts_name_loaded_apps(cli, &state));
            // The apps were constructed: retire them before exiting.
            drop((state, registry));
            crate::apps::retire::wait_all(crate::apps::retire::RETIRE_BOUND);
        }
        Err(e) => note(problems, Err(e)),
    }
}

/// How the checked configuration runs its workers, in words: "process
/// mode: a supervisor and 4 worker processes".
fn workers_line(cli: &Cli) -> String {
    let n = cli
        .workers
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    match cli.worker_mode {
        crate::settings::WorkerMode::Process => {
            format!("process mode: a supervisor and {n} worker process(es), each its own apps")
        }
        crate::settings::WorkerMode::Thread => format!(
            "thread mode: one process, {n} event-loop thread(s); no crash containment \
             (--worker-mode process has it)"
        ),
    }
}

/// Adds `r`'s problem, one entry per line of it.
fn note(problems: &mut Vec<String>, r: Result<(), BootError>) {
    if let Err(e) = r {
        problems.extend(e.to_string().lines().map(str::to_string));
    }
}

/// An address in use is a problem unless a live stoa holds it (the one
/// this check is run next to, before a reload): then a line says so.
fn address_problems(problems: &mut Vec<String>, cli: &Cli, bind: &Bind) {
    let in_use = match address_is_free(bind) {
        Ok(()) => return,
        Err(
            e @ (BootError::AddressInUse { .. }
            | BootError::UnixBind {
                why: UnixRefusal::InUse,
                ..
            }),
        ) => e,
        Err(e) => return note(problems, Err(e)),
    };
    match holders::who_holds(bind, cli.pid_file.as_deref()) {
        holders::Held::Stoa(pids) => {
            let pids: Vec<String> = pids.iter().map(u32::to_string).collect();
            let s = if pids.len() == 1 { "" } else { "s" };
            println!(
                "# {bind}: in use, held by stoa pid{s} {} (a live stoa: not a problem)",
                pids.join(", ")
            );
        }
        holders::Held::Other(who) => {
            problems.push(format!("{in_use}; held by {} (not a stoa)", who.join(", ")))
        }
        holders::Held::Unseen(why) => problems.push(format!("{in_use}; {why}")),
    }
}

/// The problems of the values themselves, which need no socket or plugin:
/// what `--print-config` refuses as `stoa check` does.
pub fn value_problems(cli: &Cli) -> Vec<String> {
    let mut problems = Vec::new();
    let tls_binds: Vec<_> = cli
        .bind
        .iter()
        .filter_map(|b| match b {
            Bind::Tls(a) => Some(Some(*a)),
            _ => None,
        })
        .collect();
    note(&mut problems, tls_config(cli, &tls_binds, None).map(|_| ()));
    note(&mut problems, watchdog_bounds(cli));
    match cli.worker_mode {
        crate::settings::WorkerMode::Thread => note(&mut problems, process_mode_only(cli)),
        crate::settings::WorkerMode::Process => note(&mut problems, worker_timeout(cli)),
    }
    let settings = cli.settings(crate::cli::Measured {
        workers: 1,
        max_connections: 1,
        poller: "check",
    });
    note(
        &mut problems,
        crate::ops::memory::max_buffered(cli.max_buffered, &settings)
            .map(|_| ())
            .or_else(|e| placed(cli, e)),
    );
    problems
}

/// `--print-config`: the effective configuration on standard output, or
/// (nothing printed) one `problem:` line per value `stoa check` refuses,
/// on standard error.
pub fn print_config(cli: &Cli) -> Result<(), BootError> {
    let problems = value_problems(cli);
    if problems.is_empty() {
        print!("{}", cli.effective_config);
        return Ok(());
    }
    for p in &problems {
        eprintln!("problem: {p}");
    }
    eprintln!(
        "stoa --print-config: {} problem(s), nothing printed (stoa check reports them with the rest)",
        problems.len()
    );
    Err(BootError::CheckFailed {
        problems: problems.len(),
    })
}

/// The relative paths of the configuration, each with what it is relative
/// to: the working directory (not the configuration file's directory).
fn relative_paths(cli: &Cli) -> Vec<String> {
    let mut paths: Vec<(&str, std::path::PathBuf)> = vec![("apps_dir", cli.apps.clone())];
    paths.extend(cli.pid_file.clone().map(|p| ("pid_file", p)));
    paths.extend(
        cli.access_log
            .as_ref()
            .filter(|t| *t != "-")
            .map(|t| ("access_log", t.into())),
    );
    paths.extend(cli.bind.iter().filter_map(|b| match b {
        Bind::Unix(p) => Some(("bind", p.clone())),
        Bind::Tcp(_) | Bind::Name { .. } | Bind::Tls(_) => None,
    }));
    paths
        .into_iter()
        .filter(|(_, p)| p.is_relative())
        .map(|(key, p)| format!("{key}: {}", crate::cli::shown_path(&p)))
        .collect()
}

//! The `stoa` binary: flags, logging, then `boot` does the rest.
#![deny(unsafe_code)]

use std::process::ExitCode;
use stoa::apps::{plugin_copy, probe};
use stoa::checks::command;
use stoa::ops::{error_log, log_writer};
use stoa::settings::WorkerMode;
use stoa::{boot, cli, supervisor};

fn main() -> ExitCode {
    // The hidden load-probe subcommand (probe.rs), before any flag parsing.
    let mut args = std::env::args_os().skip(1);
    if args.next().is_some_and(|a| a == probe::SUBCOMMAND) {
        return probe::child_main(args.next());
    }
    // `stoa new-app NAME ...` writes a plugin crate and exits.
    let mut argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    // A worker process of process mode: the supervisor's own arguments follow.
    let worker = argv
        .get(1)
        .is_some_and(|a| a == supervisor::handoff::SUBCOMMAND);
    if worker {
        argv.remove(1);
    }
    if argv.get(1).is_some_and(|a| a == cli::new_app::SUBCOMMAND) {
        return cli::new_app::main(argv.split_off(2));
    }
    // `stoa check ...` is `stoa --check-config ...`, the nginx -t habit.
    if argv.get(1).is_some_and(|a| a == "check") {
        argv[1] = "--check-config".into();
    }
    let cli = match cli::load(argv) {
        Ok(cli) => cli,
        Err(cli::LoadError::Args(e)) => e.exit(),
        Err(cli::LoadError::File(e)) => {
            eprintln!("stoa: {e}");
            return ExitCode::FAILURE;
        }
    };
    if cli.print_config {
        // Its problems, if any, are printed (to stderr) by print_config.
        return match command::print_config(&cli) {
            Ok(()) => ExitCode::SUCCESS,
            Err(_) => ExitCode::FAILURE,
        };
    }
    // `stoa check` reports on the error log's file without creating it.
    let error_file = cli.error_log.as_deref().filter(|_| !cli.check_config);
    if let Err(e) = error_log::setup(cli.log_level, cli.log_format, error_file) {
        eprintln!("stoa: cannot set up logging: {e}");
        return ExitCode::FAILURE;
    }
    if worker || cli.worker_mode == WorkerMode::Process {
        log_writer::write_whole_lines();
    }
    let result = if cli.check_config {
        command::check(&cli)
    } else if worker {
        supervisor::handoff::take().and_then(|role| boot::run_worker(cli, role))
    } else if cli.worker_mode == WorkerMode::Process {
        supervisor::run(cli)
    } else {
        boot::run(cli)
    };
    plugin_copy::remove_private_dir();
    stoa::listen::remove_unix_sockets();
    let code = match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            log::error!("{e}");
            ExitCode::FAILURE
        }
    };
    error_log::flush(log_writer::EXIT_FLUSH);
    code
}

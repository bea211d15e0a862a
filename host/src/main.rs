//! The `stoa` binary: flags, logging, then `boot` does the rest.
#![deny(unsafe_code)]

use std::process::ExitCode;
use stoa::apps::{plugin_copy, probe};
use stoa::cli::LogFormat;
use stoa::{boot, cli};

fn main() -> ExitCode {
    // The hidden load-probe subcommand (probe.rs), before any flag parsing.
    let mut args = std::env::args_os().skip(1);
    if args.next().is_some_and(|a| a == probe::SUBCOMMAND) {
        return probe::child_main(args.next());
    }
    // `stoa new-app NAME ...` writes a plugin crate and exits.
    let mut argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
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
        print!("{}", cli.effective_config);
        return ExitCode::SUCCESS;
    }
    if let Err(e) = setup_logging(cli.log_level, cli.log_format) {
        eprintln!("stoa: cannot set up logging: {e}");
        return ExitCode::FAILURE;
    }
    let result = if cli.check_config {
        boot::check(cli)
    } else {
        boot::run(cli)
    };
    plugin_copy::remove_private_dir();
    stoa::listen::remove_unix_sockets();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            log::error!("{e}");
            ExitCode::FAILURE
        }
    }
}

/// The error log on stderr: `TIME LEVEL TARGET: MESSAGE`, or one JSON
/// object per line with `time`, `level`, `target` and `message`.
fn setup_logging(level: log::LevelFilter, format: LogFormat) -> Result<(), fern::InitError> {
    let dispatch = match format {
        LogFormat::Text => fern::Dispatch::new().format(|out, message, record| {
            out.finish(format_args!(
                "{} {:<5} {}: {}",
                humantime::format_rfc3339_millis(std::time::SystemTime::now()),
                record.level(),
                record.target(),
                message
            ))
        }),
        LogFormat::Json => fern::Dispatch::new().format(|out, message, record| {
            let line = serde_json::json!({
                "time": humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string(),
                "level": record.level().as_str(),
                "target": record.target(),
                "message": message.to_string(),
            });
            out.finish(format_args!("{line}"))
        }),
    };
    // tungstenite logs every frame at debug and trace; the host logs what
    // a WebSocket comes to itself.
    dispatch
        .level(level)
        .level_for("tungstenite", level.min(log::LevelFilter::Info))
        .chain(std::io::stderr())
        .apply()?;
    Ok(())
}

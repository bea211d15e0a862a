//! The error log: standard error, or the file `--error-log` names
//! (appended to, reopened on SIGUSR1). Each line is `TIME LEVEL TARGET:
//! MESSAGE`, or one JSON object with `time`, `level`, `target` and
//! `message`. When standard error is the journal (`JOURNAL_STREAM` names
//! its device and inode, as systemd sets it for a service), a line starts
//! with its sd-daemon(3) priority (`<3>` error, `<4>` warn, `<6>` info,
//! `<7>` debug and trace) and carries no time: the journal stamps it.
//! Lines go through the log writer's queue (`log_writer`): a stalled or
//! broken standard error (a dead `| tee`, a restarted journald) loses and
//! counts lines, and never stops or kills the thread that logs.

use crate::error::BootError;
use crate::ops::log_target::Target;
use crate::ops::log_writer::{LineCounts, Sink};
use crate::settings::LogFormat;
use std::os::fd::AsFd;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime};

/// Lines of the error log that may wait for standard error.
const QUEUE_LINES: usize = 1024;

static SINK: OnceLock<Sink> = OnceLock::new();

/// Process mode: which worker process writes (`worker I pid P`), so lines
/// from N processes on one standard error tell their writer.
static WRITER: OnceLock<String> = OnceLock::new();

/// Names this process on every line from now on (a worker process).
pub fn name_writer(name: String) {
    let _ = WRITER.set(name);
}

/// The error log's file, when `--error-log` names one (SIGUSR1 reopens it).
static FILE: OnceLock<()> = OnceLock::new();

/// How a line of the error log is written.
#[derive(Clone, Copy)]
struct Style {
    format: LogFormat,
    /// Standard error is the journal: a priority prefix, no time.
    journal: bool,
}

/// sd-daemon(3)'s priority of a level (syslog's numbers).
fn priority(level: log::Level) -> u8 {
    match level {
        log::Level::Error => 3,
        log::Level::Warn => 4,
        log::Level::Info => 6,
        log::Level::Debug | log::Level::Trace => 7,
    }
}

/// True if `out` is the stream `JOURNAL_STREAM` names (`DEVICE:INODE`,
/// as systemd sets it when a service's output goes to the journal).
fn is_journal(out: &std::fs::File) -> bool {
    let Some(named) = std::env::var_os("JOURNAL_STREAM") else {
        return false;
    };
    let Ok(st) = rustix::fs::fstat(out) else {
        return false;
    };
    named
        .to_str()
        .and_then(|v| v.split_once(':'))
        .is_some_and(|(dev, ino)| {
            dev.parse::<u64>().ok() == Some(st.st_dev) && ino.parse::<u64>().ok() == Some(st.st_ino)
        })
}

/// One line of the error log, as `--log-format` asks.
fn line(style: Style, message: &std::fmt::Arguments, record: &log::Record) -> String {
    if style.journal {
        return journal_line(style.format, message, record);
    }
    let now = humantime::format_rfc3339_millis(SystemTime::now());
    match style.format {
        LogFormat::Text => match WRITER.get() {
            Some(writer) => format!(
                "{now} {:<5} [{writer}] {}: {message}",
                record.level(),
                record.target()
            ),
            None => format!("{now} {:<5} {}: {message}", record.level(), record.target()),
        },
        LogFormat::Json => {
            let mut v = serde_json::json!({
                "time": now.to_string(),
                "level": record.level().as_str(),
                "target": record.target(),
                "message": message.to_string(),
            });
            if let (Some(writer), Some(map)) = (WRITER.get(), v.as_object_mut()) {
                map.insert("process".into(), serde_json::Value::from(writer.as_str()));
            }
            v.to_string()
        }
    }
}

/// A line for the journal: the priority, then the line without its time.
fn journal_line(format: LogFormat, message: &std::fmt::Arguments, record: &log::Record) -> String {
    let level = record.level();
    let priority = priority(level);
    match format {
        LogFormat::Text => match WRITER.get() {
            Some(writer) => format!(
                "<{priority}>{level:<5} [{writer}] {}: {message}",
                record.target()
            ),
            None => format!("<{priority}>{level:<5} {}: {message}", record.target()),
        },
        LogFormat::Json => {
            let mut v = serde_json::json!({
                "level": level.as_str(),
                "target": record.target(),
                "message": message.to_string(),
            });
            if let (Some(writer), Some(map)) = (WRITER.get(), v.as_object_mut()) {
                map.insert("process".into(), serde_json::Value::from(writer.as_str()));
            }
            format!("<{priority}>{v}")
        }
    }
}

/// Installs the error log, to standard error or to the file `--error-log`
/// names (`file`; `/dev/stderr` and `-` for standard error and output),
/// and makes a file write past the size limit (`ulimit -f`) fail with
/// EFBIG rather than kill the host with SIGXFSZ.
pub fn setup(
    level: log::LevelFilter,
    format: LogFormat,
    file: Option<&str>,
) -> Result<(), BootError> {
    signal_hook::flag::register(libc::SIGXFSZ, Arc::new(AtomicBool::new(false)))
        .map_err(|e| BootError::system("catch SIGXFSZ", e))?;
    let mut target = match file {
        Some(spec) => Target::parse(spec).map_err(|e| e.within("--error-log", spec))?,
        None => Target::stream(std::io::stderr().as_fd(), "standard error")?,
    };
    let journal = matches!(target, Target::Stream(..)) && is_journal(target.out());
    if matches!(target, Target::File(..)) {
        let _ = FILE.set(());
    }
    let style = Style { format, journal };
    let sink = Sink::spawn("error log", target, QUEUE_LINES)?;
    if SINK.set(sink).is_err() {
        return Err(BootError::LogSetUp);
    }
    // fern filters and formats; its one output only queues the line (a
    // fern stream output would write, and panic, in the logging thread).
    fern::Dispatch::new()
        .level(level)
        // tungstenite logs every frame at debug and trace; the host logs
        // what a WebSocket comes to itself.
        .level_for("tungstenite", level.min(log::LevelFilter::Info))
        .format(move |out, message, record| {
            out.finish(format_args!("{}", line(style, message, record)))
        })
        .chain(fern::Output::call(|record| {
            if let Some(sink) = SINK.get() {
                sink.send(format!("{}\n", record.args()));
            }
        }))
        .apply()?;
    Ok(())
}

/// Opens the `--error-log` file again (after logrotate moved it), on
/// SIGUSR1; the writer logs the outcome, and keeps the old file if the
/// new one cannot be opened. Nothing to do on standard error.
pub fn reopen() {
    if FILE.get().is_some() {
        if let Some(sink) = SINK.get() {
            sink.reopen();
        }
    }
}

/// Waits up to `timeout` for the lines logged so far to be written (before
/// the process exits); false if standard error did not take them.
pub fn flush(timeout: Duration) -> bool {
    SINK.get().is_some_and(|sink| sink.flush(timeout))
}

/// What became of the error log's lines, once it is set up.
pub fn counts() -> Option<&'static LineCounts> {
    SINK.get().map(Sink::counts)
}

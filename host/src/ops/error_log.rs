//! The error log on standard error: `TIME LEVEL TARGET: MESSAGE`, or one
//! JSON object per line with `time`, `level`, `target` and `message`.
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

/// One line of the error log, as `--log-format` asks.
fn line(format: LogFormat, message: &std::fmt::Arguments, record: &log::Record) -> String {
    let now = humantime::format_rfc3339_millis(SystemTime::now());
    match format {
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

/// Installs the error log, and makes a file write past the size limit
/// (`ulimit -f`) fail with EFBIG rather than kill the host with SIGXFSZ.
pub fn setup(level: log::LevelFilter, format: LogFormat) -> Result<(), BootError> {
    signal_hook::flag::register(libc::SIGXFSZ, Arc::new(AtomicBool::new(false)))
        .map_err(|e| BootError::system("catch SIGXFSZ", e))?;
    let target = Target::stream(std::io::stderr().as_fd(), "standard error")?;
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
            out.finish(format_args!("{}", line(format, message, record)))
        })
        .chain(fern::Output::call(|record| {
            if let Some(sink) = SINK.get() {
                sink.send(format!("{}\n", record.args()));
            }
        }))
        .apply()?;
    Ok(())
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

//! The error log on standard error: `TIME LEVEL TARGET: MESSAGE`, or one
//! JSON object per line with `time`, `level`, `target` and `message`.
//! Lines go through the log writer's queue (`log_writer`): a stalled or
//! broken standard error (a dead `| tee`, a restarted journald) loses and
//! counts lines, and never stops or kills the thread that logs.

use crate::cli::LogFormat;
pub use crate::ops::log_writer::EXIT_FLUSH;
use crate::ops::log_writer::{LineCounts, Sink, Target};
use std::os::fd::AsFd;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime};

/// Lines of the error log that may wait for standard error.
const QUEUE_LINES: usize = 1024;

static SINK: OnceLock<Sink> = OnceLock::new();

struct Logger {
    level: log::LevelFilter,
    /// tungstenite logs every frame at debug and trace; the host logs
    /// what a WebSocket comes to itself.
    tungstenite: log::LevelFilter,
    format: LogFormat,
}

impl Logger {
    fn level_for(&self, target: &str) -> log::LevelFilter {
        let dependency = target
            .strip_prefix("tungstenite")
            .is_some_and(|rest| rest.is_empty() || rest.starts_with("::"));
        if dependency {
            self.tungstenite
        } else {
            self.level
        }
    }

    fn line(&self, record: &log::Record) -> String {
        let now = humantime::format_rfc3339_millis(SystemTime::now());
        let mut line = match self.format {
            LogFormat::Text => format!(
                "{now} {:<5} {}: {}",
                record.level(),
                record.target(),
                record.args()
            ),
            LogFormat::Json => serde_json::json!({
                "time": now.to_string(),
                "level": record.level().as_str(),
                "target": record.target(),
                "message": record.args().to_string(),
            })
            .to_string(),
        };
        line.push('\n');
        line
    }
}

impl log::Log for Logger {
    fn enabled(&self, metadata: &log::Metadata) -> bool {
        metadata.level() <= self.level_for(metadata.target())
    }

    fn log(&self, record: &log::Record) {
        if self.enabled(record.metadata()) {
            if let Some(sink) = SINK.get() {
                sink.send(self.line(record));
            }
        }
    }

    fn flush(&self) {}
}

/// Installs the error log, and makes a file write past the size limit
/// (`ulimit -f`) fail with EFBIG rather than kill the host with SIGXFSZ.
pub fn setup(level: log::LevelFilter, format: LogFormat) -> Result<(), String> {
    signal_hook::flag::register(libc::SIGXFSZ, Arc::new(AtomicBool::new(false)))
        .map_err(|e| format!("cannot catch SIGXFSZ: {e}"))?;
    let target = Target::stream(std::io::stderr().as_fd(), "standard error")?;
    let sink = Sink::spawn("error log", target, QUEUE_LINES)?;
    if SINK.set(sink).is_err() {
        return Err("the error log is already set up".into());
    }
    let logger = Logger {
        level,
        tungstenite: level.min(log::LevelFilter::Info),
        format,
    };
    log::set_boxed_logger(Box::new(logger)).map_err(|e| e.to_string())?;
    log::set_max_level(level);
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

//! Where log lines are written: a bounded queue in front of a writer thread
//! of its own, for the error log and for the access log each. A thread that
//! logs never waits on the log's reader: when the queue is full (a stalled
//! pipe, a slow disk) the line is dropped and counted, and a failed write
//! (a broken pipe, a full disk, a file past `ulimit -f`) is counted too.
//! Both show in status and metrics, with one warning a minute at most.
//! Where the lines go is `log_target`.

use crate::error::BootError;
use crate::ops::log_target::Target;
use crate::ops::log_target::{open_regular, write_all};
use crossbeam_channel::{bounded, select, unbounded, Receiver, Sender, TrySendError};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The shortest time between two warnings about one log's lost lines.
const WARN_EVERY: Duration = Duration::from_secs(60);
/// How long an exit waits for a log's queued lines (a stalled reader
/// must not hold the exit).
pub const EXIT_FLUSH: Duration = Duration::from_secs(1);
/// How long the writer lets lines gather after a batch that emptied the
/// queue (the most a line waits beyond its write).
const GATHER: Duration = Duration::from_millis(10);
/// The most bytes the writer hands to one `write`.
const BATCH_BYTES: usize = 64 * 1024;

/// The most a write to a pipe keeps whole among other writers' (POSIX
/// `PIPE_BUF` on Linux).
const PIPE_BUF: usize = 4096;

/// Process mode: the supervisor and its workers share standard error (and
/// may share a log file), so each write holds whole lines and at most
/// `PIPE_BUF` bytes (a longer line goes alone) and no line of one process
/// is cut by another's.
static WHOLE_LINES: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Makes every log writer of this process write whole lines, at most
/// `PIPE_BUF` bytes a write (process mode).
pub fn write_whole_lines() {
    WHOLE_LINES.store(true, Relaxed);
}

/// What became of a log's lines.
#[derive(Default)]
pub struct LineCounts {
    pub written: AtomicU64,
    /// Lines not written: the queue was full, or their write failed.
    pub dropped: AtomicU64,
    /// Failed writes (each may have carried several lines).
    pub write_errors: AtomicU64,
}

impl LineCounts {
    /// Written, dropped and write errors, now (as a worker process
    /// publishes them).
    pub fn numbers(&self) -> [u64; 3] {
        [&self.written, &self.dropped, &self.write_errors].map(|n| n.load(Relaxed))
    }

    /// Counts holding `numbers` (a sum over worker processes).
    pub fn of_numbers([written, dropped, write_errors]: [u64; 3]) -> Self {
        LineCounts {
            written: AtomicU64::new(written),
            dropped: AtomicU64::new(dropped),
            write_errors: AtomicU64::new(write_errors),
        }
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "written": self.written.load(Relaxed),
            "dropped": self.dropped.load(Relaxed),
            "write_errors": self.write_errors.load(Relaxed),
        })
    }
}

/// Each log's counts as `"logs": {"error": {...}, "access": {...}}` of
/// status (a log that is off is absent).
pub fn status_json(logs: &[(&str, &LineCounts)]) -> serde_json::Value {
    logs.iter()
        .map(|(name, counts)| (name.to_string(), counts.json()))
        .collect::<serde_json::Map<_, _>>()
        .into()
}

/// Each log's counts as Prometheus counters labelled `log="error"` or
/// `log="access"`.
pub fn metrics(logs: &[(&str, &LineCounts)], out: &mut String) {
    use std::fmt::Write;
    type Field = fn(&LineCounts) -> u64;
    let fields: [(&str, Field); 3] = [
        ("stoa_log_lines_written_total", |c| c.written.load(Relaxed)),
        ("stoa_log_lines_dropped_total", |c| c.dropped.load(Relaxed)),
        ("stoa_log_write_errors_total", |c| {
            c.write_errors.load(Relaxed)
        }),
    ];
    for (metric, field) in fields {
        let _ = writeln!(out, "# TYPE {metric} counter");
        for (name, counts) in logs {
            let _ = writeln!(out, "{metric}{{log=\"{name}\"}} {}", field(counts));
        }
    }
}

enum Msg {
    Line(String),
    /// Answered once every line queued before it is written (or lost).
    Flush(Sender<()>),
}

/// When the last warning went out, and the counts it reported.
struct Reported {
    at: Option<Instant>,
    dropped: u64,
    write_errors: u64,
    last_error: Option<String>,
}

/// What the senders and the writer thread share.
struct Common {
    /// `access log` or `error log`, at the start of its warnings.
    log: &'static str,
    counts: LineCounts,
    reported: Mutex<Reported>,
}

impl Common {
    /// Warns about lines lost since the last warning, at most once a
    /// minute (a warning about the error log itself may be lost as well:
    /// it is counted, and the counts are in status and metrics).
    fn report(&self) {
        let Ok(mut r) = self.reported.try_lock() else {
            return;
        };
        let dropped = self.counts.dropped.load(Relaxed);
        let errors = self.counts.write_errors.load(Relaxed);
        if (dropped, errors) == (r.dropped, r.write_errors)
            || r.at.is_some_and(|at| at.elapsed() < WARN_EVERY)
        {
            return;
        }
        let why = match (&r.last_error, errors > r.write_errors) {
            (Some(e), true) => {
                format!("{} write(s) failed, the last: {e}", errors - r.write_errors)
            }
            _ => "its queue was full: the reader is slower than the requests".to_string(),
        };
        let lost = dropped - r.dropped;
        (r.at, r.dropped, r.write_errors) = (Some(Instant::now()), dropped, errors);
        drop(r);
        log::warn!(
            "{}: {lost} line(s) dropped ({why}); the next report in a minute at the \
             earliest, the totals in status `logs`",
            self.log
        );
    }
}

/// The sending side of one log.
pub struct Sink {
    lines: Sender<Msg>,
    reopen: Sender<()>,
    common: Arc<Common>,
}

impl Sink {
    /// Starts the writer thread of `target`, with room for `capacity`
    /// lines waiting.
    pub fn spawn(log: &'static str, target: Target, capacity: usize) -> Result<Sink, BootError> {
        let (lines, lines_rx) = bounded(capacity);
        let (reopen, reopen_rx) = unbounded();
        let common = Arc::new(Common {
            log,
            counts: LineCounts::default(),
            reported: Mutex::new(Reported {
                at: None,
                dropped: 0,
                write_errors: 0,
                last_error: None,
            }),
        });
        let writer = Writer {
            target,
            lines: lines_rx,
            reopen: reopen_rx,
            common: common.clone(),
            buf: Vec::with_capacity(BATCH_BYTES),
        };
        std::thread::Builder::new()
            .name(format!("stoa-{}", log.replace(' ', "-")))
            .spawn(move || writer.run())
            .map_err(|e| BootError::thread(format!("the {log} writer thread"), e))?;
        Ok(Sink {
            lines,
            reopen,
            common,
        })
    }

    /// Queues one line (ending in a newline), or drops and counts it.
    pub fn send(&self, line: String) {
        if let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) =
            self.lines.try_send(Msg::Line(line))
        {
            self.common.counts.dropped.fetch_add(1, Relaxed);
            self.common.report();
        }
    }

    /// Asks the writer to reopen its file (it answers in the error log).
    pub fn reopen(&self) {
        let _ = self.reopen.send(());
    }

    /// Waits up to `timeout` for the lines queued so far to be written;
    /// false if the writer did not get there (a stalled reader).
    pub fn flush(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let (done, done_rx) = bounded(1);
        self.lines.send_timeout(Msg::Flush(done), timeout).is_ok()
            && done_rx
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .is_ok()
    }

    pub fn counts(&self) -> &LineCounts {
        &self.common.counts
    }
}

struct Writer {
    target: Target,
    lines: Receiver<Msg>,
    reopen: Receiver<()>,
    common: Arc<Common>,
    buf: Vec<u8>,
}

impl Writer {
    fn run(mut self) {
        loop {
            select! {
                recv(self.lines) -> msg => match msg {
                    // Lines that come while it sleeps are taken in the next
                    // batch, without waking it: a busy host's workers never
                    // pay a wake-up (a futex call) per line.
                    Ok(msg) => if !self.batch(msg) {
                        std::thread::sleep(GATHER);
                    },
                    Err(_) => return,
                },
                recv(self.reopen) -> asked => match asked {
                    Ok(()) => self.reopen(),
                    Err(_) => return,
                },
                default(WARN_EVERY) => {}
            }
            self.common.report();
        }
    }

    /// Writes `first` and whatever else is queued, up to a batch; true if
    /// it stopped at the batch size (more may be waiting).
    fn batch(&mut self, first: Msg) -> bool {
        let mut next = Some(first);
        let mut lines = 0;
        let mut flushed = Vec::new();
        while let Some(msg) = next.take() {
            match msg {
                Msg::Line(line) => {
                    let shared = WHOLE_LINES.load(Relaxed);
                    if shared && !self.buf.is_empty() && self.buf.len() + line.len() > PIPE_BUF {
                        self.write(lines);
                        lines = 0;
                    }
                    self.buf.extend_from_slice(line.as_bytes());
                    lines += 1;
                }
                Msg::Flush(done) => flushed.push(done),
            }
            if self.buf.len() < BATCH_BYTES {
                next = self.lines.try_recv().ok();
            }
        }
        let full = self.buf.len() >= BATCH_BYTES;
        self.write(lines);
        for done in flushed {
            let _ = done.send(());
        }
        full
    }

    fn write(&mut self, lines: u64) {
        if lines == 0 {
            return;
        }
        let counts = &self.common.counts;
        match write_all(self.target.out(), &self.buf) {
            Ok(()) => counts.written.fetch_add(lines, Relaxed),
            Err(e) => {
                let e = format!("{}: {e}", self.target.name());
                if let Ok(mut r) = self.common.reported.lock() {
                    r.last_error = Some(e);
                }
                counts.write_errors.fetch_add(1, Relaxed);
                counts.dropped.fetch_add(lines, Relaxed)
            }
        };
        self.buf.clear();
    }

    fn reopen(&mut self) {
        let log = self.common.log;
        let Target::File(_, path) = &self.target else {
            log::info!(
                "SIGUSR1: the {log} is {}; nothing to reopen",
                self.target.name()
            );
            return;
        };
        match open_regular(path) {
            Ok(file) => {
                log::info!("SIGUSR1: reopened the {log} {}", path.display());
                let path = path.clone();
                self.target = Target::File(file, path);
            }
            Err(e) => {
                log::error!("SIGUSR1: cannot reopen the {log}: {e}; still writing to the old file")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_queue_drops_and_counts() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let path = dir.path().join("a.log");
        let target = Target::File(open_regular(&path).expect("open"), path.clone());
        let sink = Sink::spawn("test log", target, 4).expect("spawn");
        for i in 0..1000 {
            sink.send(format!("line {i}\n"));
        }
        assert!(sink.flush(Duration::from_secs(5)));
        let c = sink.counts();
        let (written, dropped) = (c.written.load(Relaxed), c.dropped.load(Relaxed));
        assert_eq!(written + dropped, 1000);
        let text = std::fs::read_to_string(&path).expect("read");
        assert_eq!(text.lines().count() as u64, written);
    }
}

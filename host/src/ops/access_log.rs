//! The access log, one line per answered request. In text format the
//! combined log format that nginx and Apache write
//! (`%h - - [%t] "%r" %>s %b "%{Referer}i" "%{User-Agent}i"`, times in UTC)
//! followed by `app=NAME gen=N us=D`; in JSON format one object per line.
//! SIGUSR1 reopens the file (logrotate's convention).
//! Lines are written by a thread of their own (`log_writer`).

use crate::error::BootError;
use crate::ops::log_target::Target;
use crate::ops::log_writer::{LineCounts, Sink};
use crate::settings::LogFormat;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// What the access log needs of a request, kept only when it is on.
pub struct AccessInfo {
    /// The client as resolved through trusted proxies (`ADDR:PORT`).
    pub client: Arc<str>,
    pub method: String,
    pub target: String,
    /// `HTTP/1.0` or `HTTP/1.1`.
    pub protocol: String,
    pub referer: Option<String>,
    pub user_agent: Option<String>,
    /// The app that answered and its library generation (`None` where
    /// it is not known: a request lost with its worker process); `None`
    /// for the host's own answers (no mount, the host endpoints).
    pub app: Option<(String, Option<u32>)>,
}

/// How a request was answered.
pub struct Answered {
    pub status: u16,
    /// Body bytes sent.
    pub bytes: usize,
    /// From dispatch to the answer queued, in microseconds.
    pub micros: u64,
}

/// Lines of the access log that may wait for the writer: about a tenth
/// of a second of a busy host, for a disk or a reader that hesitates.
const QUEUE_LINES: usize = 4096;

/// Where access log lines go: a queue to a writer thread (`log_writer`),
/// so a slow reader or a full disk costs lines, counted, never a worker.
pub struct AccessLog {
    sink: Sink,
    format: LogFormat,
}

impl AccessLog {
    /// `-` (or `/dev/stdout`) is standard output, `/dev/stderr` standard
    /// error; anything else a regular file opened for appending.
    pub fn open(target: &str, format: LogFormat) -> Result<Self, BootError> {
        let sink = Sink::spawn("access log", Target::parse(target)?, QUEUE_LINES)?;
        Ok(AccessLog { sink, format })
    }

    /// Opens the file at the configured path again (after logrotate moved
    /// it) and writes there from now on; on failure the old file is kept.
    /// The writer thread opens it (never blocking) and logs the outcome.
    pub fn reopen(&self) {
        self.sink.reopen();
    }

    /// Queues one line.
    pub fn write(&self, info: &AccessInfo, answered: &Answered) {
        let now = SystemTime::now();
        let mut line = match self.format {
            LogFormat::Text => text_line(info, answered, now),
            LogFormat::Json => json_line(info, answered, now),
        };
        line.push('\n');
        self.sink.send(line);
    }

    /// Waits up to `timeout` for the queued lines to be written.
    pub fn flush(&self, timeout: Duration) -> bool {
        self.sink.flush(timeout)
    }

    pub fn counts(&self) -> &LineCounts {
        self.sink.counts()
    }
}

/// The address without its port.
fn host_of(client: &str) -> &str {
    client.rsplit_once(':').map_or(client, |(h, _)| h)
}

/// The combined format, then `app=NAME gen=N us=D` (`-` for no app).
fn text_line(info: &AccessInfo, answered: &Answered, now: SystemTime) -> String {
    let request_line = format!("{} {} {}", info.method, info.target, info.protocol);
    let (app, generation) = match &info.app {
        Some((name, generation)) => (
            escape_word(name),
            generation.map_or_else(|| "-".to_string(), |g| g.to_string()),
        ),
        None => ("-".to_string(), "-".to_string()),
    };
    format!(
        "{} - - [{}] \"{}\" {} {} \"{}\" \"{}\" app={app} gen={generation} us={}",
        host_of(&info.client),
        clf_time(now),
        escape(&request_line),
        answered.status,
        answered.bytes,
        escape(info.referer.as_deref().unwrap_or("-")),
        escape(info.user_agent.as_deref().unwrap_or("-")),
        answered.micros
    )
}

/// One JSON object; absent headers and the app of a host answer are null.
fn json_line(info: &AccessInfo, answered: &Answered, now: SystemTime) -> String {
    serde_json::json!({
        "client": host_of(&info.client),
        "time": humantime::format_rfc3339_millis(now).to_string(),
        "method": info.method,
        "target": info.target,
        "protocol": info.protocol,
        "status": answered.status,
        "bytes": answered.bytes,
        "referer": info.referer,
        "user_agent": info.user_agent,
        "app": info.app.as_ref().map(|(name, _)| name),
        "gen": info.app.as_ref().and_then(|(_, generation)| *generation),
        "us": answered.micros,
    })
    .to_string()
}

/// An app name as one space-free word of the text line.
fn escape_word(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_whitespace() || c == '"' || c.is_control() {
                '?'
            } else {
                c
            }
        })
        .collect()
}

/// Quotes and control characters would break the line format.
fn escape(s: &str) -> String {
    s.chars()
        .map(|c| if c == '"' || c.is_control() { '?' } else { c })
        .collect()
}

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// `10/Oct/2000:13:55:36 +0000`.
fn clf_time(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{d:02}/{}/{y}:{:02}:{:02}:{:02} +0000",
        MONTHS[(m - 1) as usize],
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// Days since 1970-01-01 to (year, month 1-12, day 1-31), proleptic Gregorian
/// (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_clf_time() {
        let t = UNIX_EPOCH + Duration::from_secs(971_186_136);
        assert_eq!(clf_time(t), "10/Oct/2000:13:55:36 +0000");
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(19_782), (2024, 2, 29));
    }

    #[test]
    fn escapes_quotes() {
        assert_eq!(escape("a\"b\n"), "a?b?");
        assert_eq!(escape_word("my app\""), "my?app?");
    }

    fn info(app: Option<(String, Option<u32>)>) -> AccessInfo {
        AccessInfo {
            client: "10.0.0.1:5000".into(),
            method: "GET".into(),
            target: "/a?b=\"c\"".into(),
            protocol: "HTTP/1.1".into(),
            referer: None,
            user_agent: Some("ua \"x\"".into()),
            app,
        }
    }

    fn answered(status: u16, bytes: usize, micros: u64) -> Answered {
        Answered {
            status,
            bytes,
            micros,
        }
    }

    #[test]
    fn text_line_appends_app_generation_and_micros() {
        let t = UNIX_EPOCH + Duration::from_secs(971_186_136);
        let answered = answered(200, 12, 345);
        assert_eq!(
            text_line(&info(Some(("hello".into(), Some(2)))), &answered, t),
            "10.0.0.1 - - [10/Oct/2000:13:55:36 +0000] \"GET /a?b=?c? HTTP/1.1\" 200 12 \"-\" \"ua ?x?\" app=hello gen=2 us=345"
        );
        assert!(text_line(&info(None), &answered, t).ends_with(" app=- gen=- us=345"));
    }

    #[test]
    fn json_line_escapes_and_nulls() {
        let t = UNIX_EPOCH + Duration::from_millis(971_186_136_007);
        let answered = answered(404, 0, 9);
        let v: serde_json::Value =
            serde_json::from_str(&json_line(&info(None), &answered, t)).expect("JSON");
        assert_eq!(v["time"], "2000-10-10T13:55:36.007Z");
        assert_eq!(v["target"], "/a?b=\"c\"");
        assert_eq!(v["user_agent"], "ua \"x\"");
        assert!(v["referer"].is_null() && v["app"].is_null() && v["gen"].is_null());
        assert_eq!(
            (v["status"].as_u64(), v["us"].as_u64()),
            (Some(404), Some(9))
        );
    }
}

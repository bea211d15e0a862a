//! The access log, in the combined log format that nginx and Apache write
//! (`%h - - [%t] "%r" %>s %b "%{Referer}i" "%{User-Agent}i"`), times in UTC.

use std::fs::OpenOptions;
use std::io::{self, Write};
use std::path::Path;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

/// Where access log lines go.
pub struct AccessLog {
    out: Mutex<Box<dyn Write + Send>>,
}

impl AccessLog {
    /// `-` is standard output; anything else a file opened for appending.
    pub fn open(target: &str) -> io::Result<Self> {
        let out: Box<dyn Write + Send> = if target == "-" {
            Box::new(io::stdout())
        } else {
            Box::new(
                OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(Path::new(target))?,
            )
        };
        Ok(AccessLog {
            out: Mutex::new(out),
        })
    }

    /// Writes one line.
    pub fn write(
        &self,
        peer: &str,
        request_line: &str,
        status: u16,
        bytes: usize,
        referer: &str,
        user_agent: &str,
    ) {
        let host = peer.rsplit_once(':').map_or(peer, |(h, _)| h);
        let line = format!(
            "{host} - - [{}] \"{}\" {status} {bytes} \"{}\" \"{}\"\n",
            clf_time(SystemTime::now()),
            escape(request_line),
            escape(referer),
            escape(user_agent)
        );
        let mut out = self.out.lock().unwrap_or_else(|p| p.into_inner());
        if let Err(e) = out.write_all(line.as_bytes()).and_then(|()| out.flush()) {
            log::warn!("access log write failed: {e}");
        }
    }
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
    use std::time::Duration;

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
    }
}

//! How near a served certificate is to its end, and the log lines that
//! say so: a certificate within `WARN_WITHIN` of its notAfter is a
//! warning, an expired one an error, each said at start and again once a
//! day while it stays so; a certificate renewed (a reload that brings a
//! later notAfter) is said no more.

use super::config::CertFacts;
use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Seconds in a day: how often a warning is said again.
pub const DAY: i64 = 86_400;

/// A certificate this close to its notAfter is warned about (and is a
/// warning of `stoa check`).
pub const WARN_WITHIN: i64 = 14 * DAY;

/// Where a certificate stands, `now` being seconds since the Unix epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Standing {
    /// More than `WARN_WITHIN` left.
    Fresh,
    /// Valid for this many more seconds, `WARN_WITHIN` or less.
    Expiring(i64),
    /// Expired this many seconds ago.
    Expired(i64),
}

impl Standing {
    pub fn of(not_after: i64, now: i64) -> Self {
        let left = not_after.saturating_sub(now);
        match left {
            l if l < 0 => Standing::Expired(l.saturating_neg()),
            l if l <= WARN_WITHIN => Standing::Expiring(l),
            _ => Standing::Fresh,
        }
    }
}

/// Seconds since the Unix epoch now.
pub fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// `unix` (seconds since the epoch) as RFC 3339 in UTC
/// (`2026-12-02T10:00:00Z`); a time before the epoch shows as the epoch.
pub fn rfc3339(unix: i64) -> String {
    let secs = u64::try_from(unix).unwrap_or(0);
    humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_secs(secs)).to_string()
}

/// A span of seconds in the largest whole unit that fits, with the hours
/// past whole days: `2 days 23 hours`, `3 days`, `5 hours`, `40 minutes`,
/// `12 seconds`.
pub fn span(secs: i64) -> String {
    match secs {
        s if s >= 2 * DAY && s % DAY >= 3600 => {
            format!("{} days {} hours", s / DAY, s % DAY / 3600)
        }
        s if s >= 2 * DAY => format!("{} days", s / DAY),
        s if s >= 2 * 3600 => format!("{} hours", s / 3600),
        s if s >= 2 * 60 => format!("{} minutes", s / 60),
        s => format!("{s} seconds"),
    }
}

/// What a certificate is called in the log: its site, file and names.
fn shown(site: &str, cert: &CertFacts) -> String {
    let names = match cert.names.is_empty() {
        true => "no DNS name".to_string(),
        false => cert.names.join(", "),
    };
    format!("{} ({site}; {names})", cert.path.display())
}

/// The log line for a certificate not `Fresh`, with its level.
pub fn line(site: &str, cert: &CertFacts, now: i64) -> Option<(log::Level, String)> {
    let at = rfc3339(cert.not_after);
    match Standing::of(cert.not_after, now) {
        Standing::Fresh => None,
        Standing::Expiring(left) => Some((
            log::Level::Warn,
            format!(
                "the TLS certificate {} expires in {}, at {at}: renew it (a changed file is \
                 read again within --tls-watch-interval, or on SIGHUP)",
                shown(site, cert),
                span(left)
            ),
        )),
        Standing::Expired(ago) => Some((
            log::Level::Error,
            format!(
                "the TLS certificate {} expired {} ago, at {at}: clients refuse it; renew it \
                 (a changed file is read again within --tls-watch-interval, or on SIGHUP)",
                shown(site, cert),
                span(ago)
            ),
        )),
    }
}

/// The warnings said so far: when, for which certificate (by site and
/// file, and its notAfter then).
#[derive(Default)]
pub struct Warnings {
    said: HashMap<(String, PathBuf), (i64, i64)>,
}

impl Warnings {
    /// Says what must be said of `certs` at `now`: each certificate not
    /// `Fresh` that was not said of in the last day (or had another
    /// notAfter then). Returns the lines said, for tests.
    pub fn tick(&mut self, certs: &[(String, CertFacts)], now: i64) -> Vec<String> {
        let mut lines = Vec::new();
        let mut keep = HashMap::new();
        for (site, cert) in certs {
            let Some((level, text)) = line(site, cert, now) else {
                continue;
            };
            let key = (site.clone(), cert.path.clone());
            let last = self.said.get(&key).copied();
            let due = match last {
                Some((not_after, at)) => not_after != cert.not_after || now - at >= DAY,
                None => true,
            };
            let at = match due {
                true => {
                    log::log!(level, "{text}");
                    lines.push(text);
                    now
                }
                false => last.map_or(now, |(_, at)| at),
            };
            keep.insert(key, (cert.not_after, at));
        }
        // A certificate renewed or no longer served is forgotten.
        self.said = keep;
        lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cert(not_after: i64) -> Vec<(String, CertFacts)> {
        vec![(
            "--tls-cert/--tls-key".to_string(),
            CertFacts {
                path: "/etc/stoa/cert.pem".into(),
                names: vec!["example.com".into()],
                not_after,
            },
        )]
    }

    #[test]
    fn standings_and_spans() {
        let now = 1_000_000_000;
        assert_eq!(Standing::of(now + WARN_WITHIN + 1, now), Standing::Fresh);
        assert_eq!(
            Standing::of(now + WARN_WITHIN, now),
            Standing::Expiring(WARN_WITHIN)
        );
        assert_eq!(Standing::of(now, now), Standing::Expiring(0));
        assert_eq!(Standing::of(now - 5, now), Standing::Expired(5));
        assert_eq!(span(3 * DAY + 7), "3 days");
        assert_eq!(span(3 * DAY - 7), "2 days 23 hours");
        assert_eq!(span(DAY), "24 hours");
        assert_eq!(span(150), "2 minutes");
        assert_eq!(span(12), "12 seconds");
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_796_205_600), "2026-12-02T10:00:00Z");
    }

    #[test]
    fn a_warning_is_said_once_a_day_and_stops_after_a_renewal() {
        let now = 1_000_000_000;
        let mut w = Warnings::default();
        let soon = cert(now + 3 * DAY);
        let said = w.tick(&soon, now);
        assert_eq!(said.len(), 1);
        assert!(
            said[0].contains("/etc/stoa/cert.pem")
                && said[0].contains("expires in 3 days")
                && said[0].contains("example.com"),
            "{said:?}"
        );
        assert!(w.tick(&soon, now + 5).is_empty());
        assert!(w.tick(&soon, now + DAY - 1).is_empty());
        assert_eq!(w.tick(&soon, now + DAY).len(), 1);
        // Renewed: nothing more.
        let renewed = cert(now + 90 * DAY);
        assert!(w.tick(&renewed, now + DAY + 5).is_empty());
        assert!(w.tick(&renewed, now + 3 * DAY).is_empty());
        // An expired certificate (another notAfter): said at once, as such.
        let said = w.tick(&cert(now), now + 2 * DAY);
        assert_eq!(said.len(), 1);
        assert!(said[0].contains("expired 2 days ago"), "{said:?}");
    }
}

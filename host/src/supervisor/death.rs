//! How a worker process ended, in words, and what it was serving then
//! (read from its row, which outlives it).

use crate::ops::access_log::AccessInfo;
use crate::ops::in_flight::Flight;
use crate::ops::spot::Spotted;
use crate::ops::watchdog::{app_in_row, slot_in_row, spot_in_row};
use crate::ops::worker_row::Row;
use rustix::process::WaitStatus;

/// How a process ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    Exited(i32),
    Signaled(i32),
}

impl End {
    pub fn of(status: WaitStatus) -> Self {
        match (status.exit_status(), status.terminating_signal()) {
            (Some(code), _) => End::Exited(code),
            (None, Some(sig)) => End::Signaled(sig),
            (None, None) => End::Exited(-1),
        }
    }

    /// "exited with status 3", "was killed by signal 11 (SIGSEGV)".
    pub fn how(self) -> String {
        match self {
            End::Exited(code) => format!("exited with status {code}"),
            End::Signaled(sig) => format!("was killed by signal {sig} ({})", signal_name(sig)),
        }
    }

    /// True for an end that is not a clean exit.
    pub fn is_crash(self) -> bool {
        self != End::Exited(0)
    }
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        1 => "SIGHUP",
        2 => "SIGINT",
        4 => "SIGILL",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        13 => "SIGPIPE",
        15 => "SIGTERM",
        24 => "SIGXCPU",
        25 => "SIGXFSZ",
        31 => "SIGSYS",
        _ => "another signal",
    }
}

/// What a dead worker was serving: the request its loop was running (if
/// it was in app code), the requests on its blocking pool or waiting for
/// an answer the app gives later, and
/// its open connections, which died with it.
pub struct InFlight {
    /// The app and request (or callback) on the loop.
    pub on_loop: Option<(String, Spotted)>,
    /// The requests on the blocking pool or waiting for a later answer.
    pub waiting: Vec<Flight>,
    /// Requests past the board's entries: counted, not named.
    pub unlisted: u64,
    /// Connections open at the worker's last report (a tenth of a second
    /// old at most).
    pub open: u64,
    /// The plugin it died of, `(app or file, digest)`: the app its loop
    /// was in, else the plugin code its apps thread ran.
    pub culprit: Option<(String, String)>,
}

impl InFlight {
    pub fn of(row: &Row) -> Self {
        let from_loop = slot_in_row(row)
            .map(|slot| app_in_row(row, slot))
            .and_then(|(app, digest)| Some((app, digest?)));
        let hazard = row.hazard().read_settled();
        let from_apps_thread = hazard
            .split_once('\t')
            .map(|(what, digest)| (what.to_string(), digest.to_string()));
        let (waiting, unlisted) = row.flights().running();
        InFlight {
            on_loop: spot_in_row(row),
            waiting,
            unlisted,
            open: row.open(),
            culprit: from_loop.or(from_apps_thread),
        }
    }

    /// The app the loop was in, if any.
    pub fn app(&self) -> Option<&str> {
        self.on_loop.as_ref().map(|(app, _)| app.as_str())
    }

    /// "in flight: 2 request(s): crashy GET /crashy/segv, python GET /abort
    /// (blocking pool); 3 open connection(s) closed".
    pub fn describe(&self) -> String {
        let mut named: Vec<String> = Vec::new();
        if let Some((app, spotted)) = &self.on_loop {
            named.push(format!("{app} {}", spotted.place()));
        }
        for f in &self.waiting {
            named.push(format!(
                "{} {} {} ({})",
                f.app,
                f.method,
                f.target,
                f.waits.said()
            ));
        }
        let count = named.len() as u64 + self.unlisted;
        let mut text = match (count, self.unlisted) {
            (0, _) => "in flight: 0 request(s)".to_string(),
            (_, 0) => format!("in flight: {count} request(s): {}", named.join(", ")),
            (_, more) => format!(
                "in flight: {count} request(s): {}{}{more} more",
                named.join(", "),
                if named.is_empty() { "" } else { ", " }
            ),
        };
        if self.open > 0 {
            text.push_str(&format!("; {} open connection(s) closed", self.open));
        }
        text
    }

    /// The access-log lines of the requests lost with the worker (a
    /// callback on the loop is no request): each answered 502, as nginx
    /// logs a request whose upstream died, with its app.
    pub fn lost_requests(&self) -> Vec<AccessInfo> {
        let on_loop = self.on_loop.iter().filter(|(_, s)| !s.client.is_empty());
        let on_loop = on_loop.map(|(app, s)| Flight::on_loop(app, s));
        on_loop
            .chain(self.waiting.iter().cloned())
            .map(|f| f.access_info())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_end_reads_as_a_user_would_say_it() {
        assert_eq!(End::Exited(3).how(), "exited with status 3");
        assert_eq!(End::Signaled(11).how(), "was killed by signal 11 (SIGSEGV)");
        assert!(End::Signaled(6).is_crash());
        assert!(End::Exited(1).is_crash());
        assert!(!End::Exited(0).is_crash());
    }
}

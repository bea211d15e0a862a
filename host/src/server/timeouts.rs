//! Connection timeouts: a periodic sweep over the connections' deadlines
//! (cheaper than a timer per connection), answering 408 for a stalled head
//! or body, 504 for an app that did not answer, and closing idle or stuck
//! connections.

use super::Server;
use crate::conn::Deadline;
use crate::http::answer::HostAnswer;
use crate::http::response::Persist;
use crate::http::{ConnParams, HttpError};
use crate::poller::Token;
use std::time::{Duration, Instant};

impl Server {
    /// Applies every connection deadline that has passed.
    pub(super) fn sweep(&mut self, now: Instant) {
        let expired: Vec<(usize, Deadline)> = self
            .conns
            .iter()
            .filter_map(|(k, c)| c.deadline.filter(|(at, _)| *at <= now).map(|(_, d)| (k, d)))
            .collect();
        for (key, deadline) in expired {
            let token = Token(key);
            match deadline {
                Deadline::Idle | Deadline::Send => {
                    if let Some(conn) = self.conns.get(key) {
                        log::debug!("{}: {deadline:?} timeout, closing", conn.peer);
                    }
                    self.close(token);
                }
                Deadline::Head | Deadline::Body => {
                    let error = if deadline == Deadline::Head {
                        HttpError::HeadTimeout
                    } else {
                        HttpError::BodyTimeout
                    };
                    if let Some(conn) = self.conns.get_mut(key) {
                        conn.fail(&error, self.date.get());
                    }
                    self.pump(token);
                }
                Deadline::App => self.app_timed_out(token),
            }
        }
    }

    /// The app has not answered within `app_timeout`: the client gets 504
    /// and the connection closes; the app's late answer will be dropped.
    fn app_timed_out(&mut self, token: Token) {
        let Some(pending) = self.conns.get_mut(token.0).and_then(|c| c.pending.as_mut()) else {
            return;
        };
        pending.persist = Persist::Close;
        let app = pending
            .slot
            .and_then(|s| {
                self.shared
                    .apps
                    .load()
                    .mounts
                    .apps()
                    .iter()
                    .find(|a| a.slot == s)
                    .cloned()
            })
            .map_or_else(|| "?".to_string(), |a| a.name.clone());
        log::warn!(
            "app {app} did not answer {} within app_timeout ({} s); answering 504",
            pending.path.as_deref().unwrap_or("a request"),
            self.shared.params.app_timeout.as_secs_f32()
        );
        self.finish(token, HostAnswer::AppTimeout.response());
        self.pump(token);
    }
}

/// How often deadlines are checked: a tenth of the shortest timeout,
/// between 10 ms and 1 s.
pub(super) fn sweep_interval(p: &ConnParams) -> Duration {
    [
        p.head_timeout,
        p.body_timeout,
        p.send_timeout,
        p.keep_alive_timeout,
        p.app_timeout,
    ]
    .into_iter()
    .min()
    .unwrap_or(Duration::from_secs(1))
    .div_f32(10.0)
    .clamp(Duration::from_millis(10), Duration::from_secs(1))
}

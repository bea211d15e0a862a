//! Counting deaths against plugin bytes: when the same bytes (the app a
//! worker's loop was in, or the plugin its apps thread was loading or
//! constructing) kill `--quarantine-after` worker processes within
//! `--quarantine-window`, they are quarantined, and every worker refuses
//! them through its guard (`apps::quarantine`).

use super::decide::Blame;
use crate::ops::peers::Quarantined;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// The recent deaths of each plugin's bytes, by digest; whether they
/// reach the bound is `decide`'s to say.
pub struct Deaths {
    after: u32,
    window: Duration,
    by_digest: HashMap<String, Vec<Instant>>,
}

impl Deaths {
    pub fn new(after: u32, window: Duration) -> Self {
        Deaths {
            after,
            window,
            by_digest: HashMap::new(),
        }
    }

    /// How a death of bytes `digest` now would count: the deaths of the
    /// same bytes within the window before it (older ones are forgotten),
    /// and the bound.
    pub fn blame(&mut self, digest: &str, now: Instant) -> Blame {
        let before = match self.by_digest.get_mut(digest) {
            Some(times) => {
                times.retain(|t| now.duration_since(*t) <= self.window);
                u32::try_from(times.len()).unwrap_or(u32::MAX)
            }
            None => 0,
        };
        Blame {
            before,
            after: self.after,
        }
    }

    /// Counts a death of bytes `digest` now (nothing is kept without a
    /// quarantine).
    pub fn record(&mut self, digest: &str, now: Instant) {
        if self.after > 0 {
            self.by_digest
                .entry(digest.to_string())
                .or_default()
                .push(now);
        }
    }

    /// The quarantine of `app`'s bytes `digest`, which reached the bound.
    pub fn quarantined(&self, app: &str, digest: &str) -> Quarantined {
        Quarantined {
            app: app.rsplit('/').next().unwrap_or(app).to_string(),
            digest: digest.to_string(),
            crashes: self.after,
            window_secs: self.window.as_secs(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts a death the way `reap` does: blamed, then recorded.
    fn die(d: &mut Deaths, digest: &str, at: Instant) -> Blame {
        let blame = d.blame(digest, at);
        d.record(digest, at);
        blame
    }

    #[test]
    fn deaths_count_per_bytes_within_the_window() {
        let mut d = Deaths::new(3, Duration::from_secs(60));
        let t = Instant::now();
        assert_eq!(die(&mut d, "x", t).before, 0);
        assert_eq!(die(&mut d, "y", t).before, 0);
        assert_eq!(die(&mut d, "x", t + Duration::from_secs(1)).before, 1);
        let third = die(&mut d, "x", t + Duration::from_secs(2));
        assert_eq!(
            third,
            Blame {
                before: 2,
                after: 3
            }
        );
        let q = d.quarantined("dir/a", "x");
        assert_eq!((q.app.as_str(), q.crashes, q.window_secs), ("a", 3, 60));
        // Spread past the window: never more than one before.
        let mut d = Deaths::new(3, Duration::from_secs(10));
        for i in 0..6 {
            assert!(die(&mut d, "x", t + Duration::from_secs(i * 6)).before <= 1);
        }
    }

    #[test]
    fn without_a_quarantine_nothing_is_kept() {
        let mut d = Deaths::new(0, Duration::from_secs(60));
        let t = Instant::now();
        for _ in 0..3 {
            assert_eq!(
                die(&mut d, "x", t),
                Blame {
                    before: 0,
                    after: 0
                }
            );
        }
        assert!(d.by_digest.is_empty());
    }
}

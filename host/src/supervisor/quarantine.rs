//! Counting deaths against plugin bytes: when the same bytes (the app a
//! worker's loop was in, or the plugin its apps thread was loading or
//! constructing) kill `--quarantine-after` worker processes within
//! `--quarantine-window`, they are quarantined, and every worker refuses
//! them through its guard (`apps::quarantine`).

use crate::ops::peers::Quarantined;
use std::collections::HashMap;
use std::time::{Duration, Instant};

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

    /// Counts a death of `app`'s bytes `digest` now; the quarantine when
    /// this one reaches the bound (once).
    pub fn count(&mut self, app: &str, digest: &str, now: Instant) -> Option<Quarantined> {
        if self.after == 0 {
            return None;
        }
        let times = self.by_digest.entry(digest.to_string()).or_default();
        times.retain(|t| now.duration_since(*t) <= self.window);
        times.push(now);
        let crashes = u32::try_from(times.len()).unwrap_or(u32::MAX);
        (crashes == self.after).then(|| Quarantined {
            app: app.rsplit('/').next().unwrap_or(app).to_string(),
            digest: digest.to_string(),
            crashes,
            window_secs: self.window.as_secs(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bound_within_the_window_quarantines_once() {
        let mut d = Deaths::new(3, Duration::from_secs(60));
        let t = Instant::now();
        assert!(d.count("a", "x", t).is_none());
        assert!(d.count("b", "y", t).is_none());
        assert!(d.count("a", "x", t + Duration::from_secs(1)).is_none());
        let q = d
            .count("a", "x", t + Duration::from_secs(2))
            .expect("quarantined");
        assert_eq!((q.app.as_str(), q.crashes), ("a", 3));
        assert!(d.count("a", "x", t + Duration::from_secs(3)).is_none());
        // Spread past the window: never three at once.
        let mut d = Deaths::new(3, Duration::from_secs(10));
        for i in 0..6 {
            assert!(d.count("a", "x", t + Duration::from_secs(i * 6)).is_none());
        }
    }
}

//! Flood accounting for one HTTP/2 connection: token buckets for the
//! resets a client causes and the control frames it sends. A client past
//! either gets GOAWAY ENHANCE_YOUR_CALM: the attacks of that shape (Rapid
//! Reset, MadeYouReset, SETTINGS, PING and empty-frame floods) cost the
//! host a bounded amount of work per connection and second.

use std::time::Instant;

/// A token bucket: `burst` tokens, refilled at `rate` a second.
#[derive(Clone, Debug)]
pub struct Bucket {
    rate: f64,
    burst: f64,
    tokens: f64,
    at: Option<Instant>,
}

impl Bucket {
    pub fn new(rate: u32, burst: u32) -> Self {
        let burst = f64::from(burst.max(1));
        Bucket {
            rate: f64::from(rate.max(1)),
            burst,
            tokens: burst,
            at: None,
        }
    }

    /// Takes a token at `now`; false if there was none (the client is
    /// over its rate).
    pub fn take(&mut self, now: Instant) -> bool {
        if let Some(at) = self.at {
            let secs = now.saturating_duration_since(at).as_secs_f64();
            self.tokens = (self.tokens + secs * self.rate).min(self.burst);
        }
        self.at = Some(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// What a connection's client may cost: resets and control frames.
#[derive(Clone, Debug)]
pub struct Guard {
    pub resets: Bucket,
    pub control: Bucket,
}

#[cfg(test)]
mod tests {
    use super::Bucket;
    use std::time::{Duration, Instant};

    #[test]
    fn a_bucket_gives_its_burst_then_its_rate() {
        let t0 = Instant::now();
        let mut b = Bucket::new(10, 5);
        assert_eq!((0..8).filter(|_| b.take(t0)).count(), 5);
        // A tenth of a second later: one more token.
        let t1 = t0 + Duration::from_millis(100);
        assert!(b.take(t1));
        assert!(!b.take(t1));
        // Refills up to the burst, not past it.
        let t2 = t1 + Duration::from_secs(60);
        assert_eq!((0..8).filter(|_| b.take(t2)).count(), 5);
    }
}

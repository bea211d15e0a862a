//! Connections past the cap under `--overload shed`: each is answered at
//! once with `503 Service Unavailable`, `Retry-After: 1` and
//! `Connection: close`, then closes as any connection with bytes unread
//! does (`Conn::linger`: a FIN after the answer, then what the client still
//! sends is read and dropped) in a short list of its own, at most
//! `LINGER`. Closing at once with request bytes unread would send a reset,
//! which can destroy the 503 before the client reads it. The list is
//! bounded (`MAX_LINGERING` per worker, the oldest closed first: these
//! connections are past the cap, so their descriptors are counted apart)
//! and looked at once per loop turn, never blocking.
//!
//! A client accepted with a spare descriptor (`spares`) is closed after
//! one read instead.

use super::conn::{Conn, Flow};
use crate::http::answer::HostAnswer;
use crate::http::reader::BufPool;
use crate::listen::Accepted;
use crate::settings::LingerLimits;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Longest linger of a shed connection (less if `--lingering-time` or
/// `--lingering-timeout` is).
pub const LINGER: Duration = Duration::from_secs(2);
/// Most shed connections one worker keeps lingering.
pub const MAX_LINGERING: usize = 8;
/// How often the loop looks at lingering connections while any are left.
pub const LINGER_TICK: Duration = Duration::from_millis(20);

/// The shed connections of one worker.
pub struct Shedder {
    lingering: VecDeque<Conn<Accepted>>,
    limits: LingerLimits,
}

impl Shedder {
    /// A shedder whose connections linger within `limits` and `LINGER`.
    pub fn new(limits: &LingerLimits) -> Self {
        Shedder {
            lingering: VecDeque::new(),
            limits: LingerLimits {
                time: limits.time.min(LINGER),
                timeout: limits.timeout.min(LINGER),
                most: MAX_LINGERING,
                ..*limits
            },
        }
    }

    /// Answers `stream` 503; it lingers until `sweep` closes it. With
    /// `keep_fd` false (the spare descriptor was used for it) it is closed
    /// after one read.
    pub fn shed(
        &mut self,
        stream: Accepted,
        peer: Arc<str>,
        date: &str,
        now: Instant,
        keep_fd: bool,
        pool: &mut BufPool,
    ) {
        let mut conn = Conn::new(stream, peer);
        conn.refuse(HostAnswer::AtCapacity, date, pool);
        // A fresh socket's send buffer takes the whole answer at once; a
        // client that cannot take it is not waited for.
        if conn.flush(pool).is_err() || conn.has_output() {
            return;
        }
        if conn.linger(now, &self.limits) == Flow::Close || !keep_fd {
            return;
        }
        if self.lingering.len() >= MAX_LINGERING {
            // What it sent is read first, so its close is a FIN, not a reset.
            if let Some(mut oldest) = self.lingering.pop_front() {
                let _ = oldest.linger(now, &self.limits);
            }
        }
        self.lingering.push_back(conn);
    }

    /// Reads and discards what lingering connections have sent; closes
    /// those at EOF, failed or past their bounds.
    pub fn sweep(&mut self, now: Instant) {
        let limits = self.limits;
        self.lingering
            .retain_mut(|conn| conn.linger(now, &limits) == Flow::Open);
    }

    /// How long the loop may wait before `sweep` is due again.
    pub fn timeout(&self) -> Option<Duration> {
        (!self.lingering.is_empty()).then_some(LINGER_TICK)
    }

    /// How many shed connections are lingering.
    pub fn lingering(&self) -> usize {
        self.lingering.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::unix::net::UnixStream;

    fn pair() -> (Accepted, UnixStream) {
        let (a, b) = UnixStream::pair().expect("pair");
        a.set_nonblocking(true).expect("nonblocking");
        (Accepted::Unix(mio::net::UnixStream::from_std(a)), b)
    }

    fn shed(s: &mut Shedder, stream: Accepted, now: Instant, keep_fd: bool) {
        let date = "Thu, 01 Jan 1970 00:00:00 GMT";
        let peer: Arc<str> = Arc::from("peer");
        s.shed(stream, peer, date, now, keep_fd, &mut BufPool::default());
    }

    #[test]
    fn shed_answers_503_then_closes_at_eof_or_expiry() {
        let mut s = Shedder::new(&LingerLimits::default());
        let now = Instant::now();
        let (a, mut client) = pair();
        let (b, _quiet) = pair();
        shed(&mut s, a, now, true);
        shed(&mut s, b, now, true);
        let mut answer = String::new();
        client.read_to_string(&mut answer).expect("read to the FIN");
        assert!(answer.starts_with("HTTP/1.1 503 "), "{answer}");
        assert!(answer.contains("Retry-After: 1\r\n"), "{answer}");
        assert!(answer.contains("Connection: close\r\n"), "{answer}");
        assert_eq!(s.timeout(), Some(LINGER_TICK));
        drop(client);
        s.sweep(now);
        assert_eq!(s.lingering(), 1, "the closed one is gone");
        s.sweep(now + LINGER);
        assert_eq!((s.lingering(), s.timeout()), (0, None));
    }

    #[test]
    fn the_list_is_bounded_and_a_spare_accepted_one_is_not_kept() {
        let mut s = Shedder::new(&LingerLimits::default());
        let now = Instant::now();
        let peers: Vec<UnixStream> = (0..MAX_LINGERING + 5)
            .map(|_| {
                let (a, b) = pair();
                shed(&mut s, a, now, true);
                b
            })
            .collect();
        assert_eq!(s.lingering(), MAX_LINGERING);
        let (a, _b) = pair();
        shed(&mut s, a, now, false);
        assert_eq!(s.lingering(), MAX_LINGERING);
        drop(peers);
    }
}

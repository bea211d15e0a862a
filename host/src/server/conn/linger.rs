//! The lingering close, one for every connection that closes while its
//! client may still be sending: an error answer (400, 408, 413, 431, 501
//! sent before the request was all read), an answer given before a
//! streamed body all came, pipelined bytes after a `Connection: close`
//! answer, a WebSocket whose last frame is out, an HTTP/2 connection whose
//! GOAWAY is out (with its last streams' answers), a client shed at the
//! cap.
//! Closing such a socket with bytes unread makes the kernel send a reset,
//! which can destroy the answer before the client reads it. So, once the
//! answer is out, the connection is half-closed (a FIN after the answer)
//! and what the client still sends is read and dropped until its EOF, or
//! until a bound of `LingerLimits` (its time, its wait for bytes, its byte
//! count), then closed.

use super::{Conn, Flow, Phase, Transport};
use crate::server::ws_link::CLOSE_GRACE;
use crate::settings::LingerLimits;
use std::io;
use std::time::{Duration, Instant};

/// Bytes dropped per read (a buffer on the stack).
const DROP_CHUNK: usize = 16 * 1024;

/// Most bytes one call drops: a client that sends without pause is read
/// on at the loop's next turn (`Lingerers::read_on`), so it cannot hold
/// the loop from the other connections for all of `--lingering-bytes`.
const TURN_BYTES: usize = 256 * 1024;

/// A lingering close under way.
pub struct LingerState {
    /// When it began (the connection's place in its worker's list).
    since: Instant,
    /// When it ends whatever comes.
    until: Instant,
    /// When it ends if no byte comes meanwhile (moved by each read).
    quiet_until: Instant,
    quiet: Duration,
    /// Bytes still to drop before it gives up.
    left: u64,
    /// The last call stopped at `TURN_BYTES` with more to read: due again
    /// at once.
    more: bool,
    /// Counted among its worker's lingering connections (`Lingerers`): one
    /// that ends in the call that began it never is.
    counted: bool,
}

impl LingerState {
    fn new(now: Instant, limits: &LingerLimits) -> Self {
        LingerState {
            since: now,
            until: now + limits.time,
            quiet_until: now + limits.timeout,
            quiet: limits.timeout,
            left: limits.bytes,
            more: false,
            counted: false,
        }
    }

    /// When the connection is closed if its client has not closed first,
    /// or (`since`, passed already) when it is to be read on.
    pub fn deadline(&self) -> Instant {
        match self.more {
            true => self.since,
            false => self.until.min(self.quiet_until),
        }
    }

    /// Ends the linger by `at` at the latest (a drain).
    pub fn end_by(&mut self, at: Instant) {
        self.until = self.until.min(at);
    }
}

impl<S> Conn<S> {
    /// True when the loop should call `linger`: the connection lingers,
    /// or its answer (a WebSocket's last frame) is out and request bytes
    /// may be left unread.
    pub fn lingers(&self) -> bool {
        let due = match &self.phase {
            Phase::Lingering(_) => return true,
            Phase::Closing { linger } => *linger,
            Phase::Upgraded(link) => link.done(),
            // HTTP/2 after its GOAWAY: a connection error, or a drain whose
            // streams have all ended. The client may still be sending
            // (window updates for the last DATA, frames of a flood).
            Phase::H2(ref s) => s.machine.failed() || (s.machine.going_away() && s.is_idle()),
            Phase::Reading(_) | Phase::Dispatched(_) | Phase::Streaming { .. } => false,
        };
        due && !self.has_output() && !self.read_closed
    }

    /// The lingering close under way, if it has begun.
    fn linger_state(&self) -> Option<&LingerState> {
        match &self.phase {
            Phase::Lingering(state) => Some(state),
            _ => None,
        }
    }

    /// True once half-closed and dropping what the client sends.
    pub fn is_lingering(&self) -> bool {
        self.linger_state().is_some()
    }

    /// When a lingering connection is closed if its client has not
    /// closed first (or read on, after a call that stopped with more).
    pub fn deadline_of_linger(&self) -> Option<Instant> {
        self.linger_state().map(LingerState::deadline)
    }

    /// True when the last `linger` stopped with more to read: its due
    /// deadline asks for another read, not the close.
    pub fn lingers_on(&self) -> bool {
        self.linger_state().is_some_and(|s| s.more)
    }

    /// Marks the lingering connection as counted by its worker's list.
    pub fn count_lingering(&mut self) {
        if let Phase::Lingering(state) = &mut self.phase {
            state.counted = true;
        }
    }

    /// True if the worker's list counts this lingering connection.
    pub fn lingering_counted(&self) -> bool {
        self.linger_state().is_some_and(|s| s.counted)
    }

    /// When the lingering close began, if it has.
    pub fn lingering_since(&self) -> Option<Instant> {
        self.linger_state().map(|s| s.since)
    }
}

impl<S: Transport> Conn<S> {
    /// The lingering close. While the answer is going out, waits. Then,
    /// once, half-closes and starts the bounds (`limits`; a WebSocket's
    /// are at most `CLOSE_GRACE`, as its close handshake's). Each call
    /// reads and drops what the client has sent, until the transport
    /// would block; `Close` at the client's EOF, a failed read, or a bound
    /// reached.
    pub fn linger(&mut self, now: Instant, limits: &LingerLimits) -> Flow {
        self.linger_at_most(now, limits, TURN_BYTES)
    }

    /// Half-closes and moves to `Lingering` (a WebSocket's link goes: its
    /// last frame is out); false if the half-close failed.
    fn begin_linger(&mut self, now: Instant, limits: &LingerLimits) -> bool {
        if let Err(e) = self.stream.shutdown_write() {
            log::debug!("{}: half-close failed: {e}", self.peer);
            return false;
        }
        let limits = match self.phase {
            Phase::Upgraded(_) => LingerLimits {
                time: limits.time.min(CLOSE_GRACE),
                timeout: limits.timeout.min(CLOSE_GRACE),
                ..*limits
            },
            _ => *limits,
        };
        self.phase = Phase::Lingering(Box::new(LingerState::new(now, &limits)));
        // A TLS session's close_notify may still wait for the socket.
        self.held = self.stream.has_buffered_output();
        // The answer is out: a WebSocket's session (or a stream) has ended.
        self.tail = None;
        self.read_ready = true;
        // Bytes buffered past the answer are dropped too (the read buffer
        // goes back to the pool: see `release_buffers`).
        self.reader.abandon();
        true
    }

    /// `linger`, dropping at most `turn` bytes before it returns `Open`
    /// with more to read (`lingers_on`).
    fn linger_at_most(&mut self, now: Instant, limits: &LingerLimits, turn: usize) -> Flow {
        if self.has_output() {
            return Flow::Open;
        }
        if self.read_closed {
            return Flow::Close;
        }
        if !self.is_lingering() && !self.begin_linger(now, limits) {
            return Flow::Close;
        }
        let Phase::Lingering(state) = &mut self.phase else {
            return Flow::Close;
        };
        if now >= state.until {
            log::debug!("{}: lingered --lingering-time; closing", self.peer);
            return Flow::Close;
        }
        state.more = false;
        let mut scratch = [0u8; DROP_CHUNK];
        let mut read = 0;
        loop {
            if read >= turn {
                state.more = true;
                return Flow::Open;
            }
            let want = DROP_CHUNK.min(turn - read);
            match self.stream.read(&mut scratch[..want]) {
                Ok(0) => {
                    self.read_closed = true;
                    return Flow::Close;
                }
                Ok(n) => {
                    read += n;
                    state.quiet_until = now + state.quiet;
                    state.left = state.left.saturating_sub(n as u64);
                    if state.left == 0 {
                        log::debug!("{}: dropped --lingering-bytes; closing", self.peer);
                        return Flow::Close;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.read_ready = self.stream.has_buffered_input();
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Flow::Close,
            }
        }
        if now >= state.quiet_until {
            log::debug!("{}: nothing for --lingering-timeout; closing", self.peer);
            return Flow::Close;
        }
        Flow::Open
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::reader::BufPool;
    use crate::http::HttpError;
    use crate::listen::Accepted;
    use std::io::Read;
    use std::io::Write;
    use std::os::unix::net::UnixStream;
    use std::sync::Arc;

    /// A connection over one end of a socket pair that has answered 413
    /// (its answer written), and the client's end.
    fn refused(pool: &mut BufPool) -> (Conn<Accepted>, UnixStream) {
        let (a, b) = UnixStream::pair().expect("pair");
        a.set_nonblocking(true).expect("nonblocking");
        let stream = Accepted::Unix(mio::net::UnixStream::from_std(a));
        let mut conn = Conn::new(stream, Arc::from("peer"));
        conn.fail(&HttpError::BodyTooLarge, "-", pool);
        conn.flush(pool).expect("flush");
        assert!(conn.lingers() && !conn.finished());
        (conn, b)
    }

    fn limits(bytes: u64) -> LingerLimits {
        LingerLimits {
            bytes,
            ..LingerLimits::default()
        }
    }

    #[test]
    fn the_answer_ends_in_a_fin_and_what_follows_is_dropped_until_eof() {
        let mut pool = BufPool::default();
        let (mut conn, mut client) = refused(&mut pool);
        let now = Instant::now();
        client.write_all(&[b'x'; 50_000]).expect("more body");
        assert_eq!(conn.linger(now, &limits(1 << 20)), Flow::Open);
        assert!(conn.is_lingering());
        let mut answer = String::new();
        client
            .read_to_string(&mut answer)
            .expect("the answer, then a FIN");
        assert!(answer.starts_with("HTTP/1.1 413 "), "{answer}");
        client.write_all(&[b'x'; 50_000]).expect("still more");
        assert_eq!(conn.linger(now, &limits(1 << 20)), Flow::Open);
        drop(client);
        assert_eq!(conn.linger(now, &limits(1 << 20)), Flow::Close);
    }

    #[test]
    fn a_client_that_keeps_sending_is_read_on_later_not_all_at_once() {
        let mut pool = BufPool::default();
        let (mut conn, mut client) = refused(&mut pool);
        let now = Instant::now();
        client.write_all(&[b'x'; 20_000]).expect("more body");
        // 4 KiB a call: the first stops with more to read, due at once.
        assert_eq!(conn.linger_at_most(now, &limits(1 << 20), 4096), Flow::Open);
        assert!(conn.lingers_on());
        assert!(conn.deadline_of_linger().is_some_and(|at| at <= now));
        // Called again until the socket is empty: then it waits for the
        // client's next bytes (the quiet timeout), not at once.
        let mut calls = 1;
        while conn.lingers_on() {
            assert_eq!(conn.linger_at_most(now, &limits(1 << 20), 4096), Flow::Open);
            calls += 1;
            assert!(calls < 100, "never emptied");
        }
        assert!(calls >= 5, "20,000 bytes in 4 KiB steps took {calls} calls");
        let quiet = LingerLimits::default().timeout;
        assert_eq!(conn.deadline_of_linger(), Some(now + quiet));
        drop(client);
        assert_eq!(conn.linger(now, &limits(1 << 20)), Flow::Close);
    }

    #[test]
    fn each_bound_closes() {
        let mut pool = BufPool::default();
        let now = Instant::now();
        let l = limits(1 << 20);
        // Bytes: past `bytes` dropped.
        let (mut conn, mut client) = refused(&mut pool);
        client.write_all(&[b'x'; 20_000]).expect("body");
        assert_eq!(conn.linger(now, &limits(10_000)), Flow::Close);
        // Silence: nothing within `timeout`.
        let (mut conn, _client) = refused(&mut pool);
        assert_eq!(conn.linger(now, &l), Flow::Open);
        assert_eq!(conn.deadline_of_linger(), Some(now + l.timeout));
        assert_eq!(conn.linger(now + l.timeout, &l), Flow::Close);
        // Time: bytes keep coming, `time` ends it.
        let (mut conn, mut client) = refused(&mut pool);
        assert_eq!(conn.linger(now, &l), Flow::Open);
        let mut at = now;
        while at < now + l.time {
            client.write_all(b"x").expect("a byte");
            assert_eq!(conn.linger(at, &l), Flow::Open);
            at += l.timeout / 2;
        }
        assert_eq!(conn.linger(at, &l), Flow::Close);
    }
}

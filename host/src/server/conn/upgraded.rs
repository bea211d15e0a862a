//! A connection's WebSocket half: the switch from HTTP (the `101`, the
//! bytes that followed the handshake) and the moves of its frames between
//! the socket, the codec and the output (see `server::ws_link` for the link).

use super::{Conn, Flow, Phase, Transport};
use crate::http::reader::BufPool;
use crate::http::websocket::codec::Step;
use crate::http::websocket::handshake::write_switch;
use crate::server::exchange::Pending;
use crate::server::ws_link::{Expired, Link};
use std::io::{self, Read};
use std::time::Instant;
use stoa_app_api::Header;

/// Most read-and-write rounds of one pump.
const PUMP_ROUNDS: usize = 8;

/// Most bytes one pump reads from the peer: past it the rest waits for
/// the loop's next turn, so a peer that sends without end (pongs, a huge
/// fragmented message) does not keep the loop from its other connections.
const PUMP_READ: usize = 64 * 1024;

/// A reader that counts what it read (any byte from the peer, a ping
/// included, shows it is alive).
struct Counted<'a, R> {
    inner: &'a mut R,
    n: usize,
}

impl<R: Read> Read for Counted<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.n += n;
        Ok(n)
    }
}

impl<S> Conn<S> {
    /// True once switched to WebSocket.
    pub fn is_upgraded(&self) -> bool {
        matches!(self.phase, Phase::Upgraded(_))
    }

    /// The WebSocket, while switched to one.
    pub fn link(&mut self) -> Option<&mut Link> {
        match &mut self.phase {
            Phase::Upgraded(link) => Some(link),
            _ => None,
        }
    }

    /// Queues the codec's frames for the socket.
    fn queue_frames(&mut self, pool: &mut BufPool) {
        if let Phase::Upgraded(link) = &mut self.phase {
            let frames = link.codec().output();
            if !frames.is_empty() {
                self.out.push_bytes(pool, frames);
                frames.clear();
            }
        }
    }
}

impl<S: Transport> Conn<S> {
    /// Answers the request with the app `101 Switching Protocols` (its
    /// `Sec-WebSocket-Accept` value and the app's checked headers, as
    /// `switch` holds them, and `date`) and switches to WebSocket: `link`
    /// is made from the bytes the client sent after its handshake. Returns
    /// the request answered.
    pub fn upgrade(
        &mut self,
        switch: (&str, &[Header]),
        date: &str,
        pool: &mut BufPool,
        link: impl FnOnce(Vec<u8>) -> Link,
    ) -> Option<Pending> {
        let (pending, _) = self.take_dispatch()?;
        let (accept, headers) = switch;
        let mut head = Vec::with_capacity(192);
        write_switch(&mut head, accept, date, headers);
        self.out.push_bytes(pool, &head);
        let rest = self.reader.take_rest(pool);
        self.phase = Phase::Upgraded(Box::new(link(rest)));
        self.served += 1;
        // The bytes after the handshake are read first.
        self.read_ready = true;
        Some(pending)
    }

    /// Reads frames while it may (bytes waiting, output under the bound),
    /// hands their messages to the app, writes, and says whether to keep
    /// the connection. Once no frame is to be read or sent and the last
    /// one is out, the connection is due to linger (`linger`), so that
    /// bytes still in flight from the peer do not turn the close into a
    /// reset that would lose the close frame.
    pub fn pump_ws(&mut self, now: Instant, pool: &mut BufPool) -> Flow {
        // A fast producer to a fast reader would keep the loop here; after
        // a few rounds, or `PUMP_READ` bytes read, the rest waits for the
        // next turn (the app's queued messages have a notice in the inbox,
        // bytes still unread the nudge below).
        let mut budget = PUMP_READ;
        for _ in 0..PUMP_ROUNDS {
            let read = self.read_frames(now, pool, &mut budget);
            if let Err(e) = self.flush(pool) {
                log::debug!("write to WebSocket {} failed: {e}", self.peer);
                return Flow::Close;
            }
            let pending = self.out.len();
            let Some(link) = self.link() else {
                return Flow::Close;
            };
            link.set_pending(pending);
            // The app's drain task may have queued more.
            if self.take_outgoing(now, pool) {
                continue;
            }
            if self.link().is_some_and(|link| link.done()) {
                // Due to linger (`lingers`).
                return Flow::Open;
            }
            if budget == 0 {
                break;
            }
            if !read || !self.read_ready || self.read_closed || self.output_full() {
                return Flow::Open;
            }
        }
        if let Some(link) = self.link() {
            link.nudge();
        }
        Flow::Open
    }

    /// Reads and handles frames until the socket would block, the output
    /// is over the bound (a pong counts as soon as its ping is read), the
    /// WebSocket is done, or `budget` bytes were read (what is left of it
    /// stays in `budget`); true if any step came.
    fn read_frames(&mut self, now: Instant, pool: &mut BufPool, budget: &mut usize) -> bool {
        let mut any = false;
        while *budget > 0 && self.read_ready && !self.read_closed && !self.output_full() {
            let Phase::Upgraded(link) = &mut self.phase else {
                break;
            };
            if link.done() {
                break;
            }
            let mut src = Counted {
                inner: &mut self.stream,
                n: 0,
            };
            let step = link.codec().read(&mut src, *budget);
            *budget = budget.saturating_sub(src.n);
            if src.n > 0 {
                link.heard(now);
            }
            let room = link.count_read(src.n, matches!(step, Step::Message(_)), now);
            self.held = self.stream.has_buffered_output();
            match step {
                Step::Idle => self.read_ready = self.stream.has_buffered_input(),
                Step::Gone { .. } => self.read_closed = true,
                _ => any = true,
            }
            link.on_step(step);
            if !room {
                link.over_budget();
            }
            self.queue_frames(pool);
        }
        any
    }

    /// Frames what the app queued; true if anything was queued.
    pub fn take_outgoing(&mut self, now: Instant, pool: &mut BufPool) -> bool {
        let before = self.out.len();
        if let Some(link) = self.link() {
            link.take_outgoing(now);
        }
        self.queue_frames(pool);
        self.out.len() > before
    }

    /// Starts the close handshake from the host's side (a drain's 1001).
    pub fn close_ws(&mut self, code: u16, reason: &str, now: Instant, pool: &mut BufPool) {
        if let Some(link) = self.link() {
            link.close(code, reason, now);
        }
        self.queue_frames(pool);
    }

    /// The WebSocket's deadline passed: ping a silent peer, or give up.
    pub fn expire_ws(&mut self, now: Instant, pool: &mut BufPool) -> Flow {
        let Some(link) = self.link() else {
            return Flow::Close;
        };
        match link.expire(now) {
            Expired::Pinged | Expired::TooSlow => {
                self.queue_frames(pool);
                Flow::Open
            }
            Expired::Drop => Flow::Close,
        }
    }
}

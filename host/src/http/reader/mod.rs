//! The read side of a connection, free of sockets: a buffer that bytes are
//! read into, and the parser state that turns them into requests (head,
//! then body by Content-Length or chunked). Fed from a socket by `fill`, or
//! from any `Read` in tests and fuzzing. The buffers' pool (`pool.rs`),
//! their share of the budget (`hold.rs`), the next request (`request.rs`) and
//! a body streamed to its app (`body.rs`) are beside it.

use super::chunked::ChunkedDecoder;
use super::parse::{BodyKind, Head, HeaderOffsets};
use crate::budget::Reservation;
use crate::settings::ConnParams;
use std::io::{self, Read};

mod body;
mod hold;
mod pool;
mod request;

use body::BodyFeed;
pub use pool::BufPool;
pub use request::BodyPlan;

/// First read buffer size; it grows (doubling) up to what the current
/// request needs (its head, up to `max_head`, then its body).
pub const READ_CHUNK: usize = 16 * 1024;

/// Outcome of reading from the source.
#[derive(Debug, PartialEq, Eq)]
pub enum ReadState {
    /// No more bytes for now.
    Open,
    /// The peer closed its sending side.
    Closed,
    /// The read failed (a reset connection).
    Failed,
    /// The buffer holds what the current request needs; more bytes may be
    /// waiting in the socket (read them once the request is served).
    Full,
}

/// Buffered request bytes and the parse in progress.
#[derive(Default)]
pub struct RequestReader {
    buf: Vec<u8>,
    start: usize,
    end: usize,
    head: Option<Head>,
    decoder: Option<ChunkedDecoder>,
    body: Vec<u8>,
    /// The last head's header offsets, kept for the next head.
    spare_headers: HeaderOffsets,
    continue_due: bool,
    /// This request's body limit, if not `max_body` (an app's own).
    body_limit: Option<usize>,
    continue_sent: bool,
    /// The parsed head's body is streamed (`BodyPlan::stream`), up to
    /// this limit.
    stream_body: bool,
    stream_limit: usize,
    /// The dispatched request's streamed body, until it has all come.
    feed: Option<BodyFeed>,
    /// Bytes were read since the flag was last taken.
    pub progressed: bool,
    /// Bytes read over the connection's life (for the body's minimum rate).
    taken: u64,
    /// What the buffers past their first `READ_CHUNK` hold of the budget.
    hold: Option<Reservation>,
    /// The budget had no room for the request's next bytes: it is refused.
    over_budget: bool,
}

impl RequestReader {
    /// Reads until `WouldBlock`, EOF, or the buffer holds what the current
    /// request needs (`Full`: bytes past it stay in the socket). A short
    /// read ends it early (the socket is drained) unless `to_end` asks to
    /// go on to the end of stream.
    pub fn fill(
        &mut self,
        src: &mut impl Read,
        params: &ConnParams,
        to_end: bool,
        pool: &mut BufPool,
    ) -> ReadState {
        if self.buf.is_empty() {
            self.buf = pool.take_read();
        }
        loop {
            if self.start == self.end {
                self.start = 0;
                self.end = 0;
            }
            // `need` is at least READ_CHUNK: most fills never ask.
            let buffered = self.end - self.start;
            if buffered >= READ_CHUNK && buffered >= self.need(params) {
                return ReadState::Full;
            }
            if self.end == self.buf.len() {
                if self.start > 0 {
                    self.buf.copy_within(self.start..self.end, 0);
                    self.end -= self.start;
                    self.start = 0;
                } else if self.head.is_none() && holds_head(&self.buf[..self.end]) {
                    // A whole head is here: parse it before reading on.
                    return ReadState::Full;
                } else {
                    let grown = (self.buf.len() * 2).clamp(READ_CHUNK, self.need(params));
                    if !self.hold_for(grown, self.body.capacity(), pool.budget()) {
                        // A streamed body waits for its app to take the
                        // buffer's bytes; anything else is refused.
                        self.over_budget = self.feed.is_none();
                        return ReadState::Full;
                    }
                    self.buf.resize(grown, 0);
                }
            }
            let space = self.buf.len() - self.end;
            match src.read(&mut self.buf[self.end..]) {
                Ok(0) => return ReadState::Closed,
                Ok(n) => {
                    self.end += n;
                    self.taken += n as u64;
                    self.progressed = true;
                    // A short read drained the socket: another read would
                    // only say WouldBlock (and an edge comes with new data).
                    if n < space && !to_end {
                        return ReadState::Open;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return ReadState::Open,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    log::debug!("read failed: {e}");
                    return ReadState::Failed;
                }
            }
        }
    }

    /// How many bytes from `start` the current request may occupy: up to
    /// just past `max_head` while its head is unparsed (so an overlong head
    /// is refused), then the head with its body (the chunked decoder drains
    /// the buffer as it goes, so a window suffices).
    fn need(&self, params: &ConnParams) -> usize {
        let need = match &self.head {
            None => params.max_head + 1,
            Some(head) => match head.body {
                BodyKind::None => head.len,
                BodyKind::Length(n) => head.len.saturating_add(n),
                BodyKind::Chunked => head.len + READ_CHUNK,
            },
        };
        need.max(READ_CHUNK)
    }

    /// Bytes read over the connection's life.
    pub fn taken(&self) -> u64 {
        self.taken
    }

    /// Frees a buffer grown for the request just dispatched (its app has
    /// seen the body, or has its own copy), when nothing else is in it.
    pub fn shed_grown(&mut self) {
        if self.buf.len() > READ_CHUNK && self.is_empty() {
            self.buf = Vec::new();
            self.start = 0;
            self.end = 0;
            self.rehold();
        }
    }

    /// The bytes read and not yet consumed.
    pub fn buffered_bytes(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    /// Bytes read and not yet consumed.
    pub fn buffered(&self) -> usize {
        self.end - self.start
    }

    /// True if no bytes of a next request are buffered.
    pub fn is_empty(&self) -> bool {
        self.start == self.end && self.head.is_none() && self.feed.is_none()
    }

    /// Gives the buffer back to the pool when nothing is buffered.
    pub fn release(&mut self, pool: &mut BufPool) {
        if self.is_empty() && !self.buf.is_empty() {
            self.start = 0;
            self.end = 0;
            pool.give_read(std::mem::take(&mut self.buf));
            self.rehold();
        }
    }

    /// True while a head has been parsed and its body is awaited.
    pub fn in_body(&self) -> bool {
        self.head.is_some() || self.feed.is_some()
    }

    /// Takes the bytes buffered past the last request (a protocol the
    /// connection switched to reads them first) and gives the buffer back.
    pub fn take_rest(&mut self, pool: &mut BufPool) -> Vec<u8> {
        let rest = self.buf[self.start..self.end].to_vec();
        self.start = self.end;
        self.release(pool);
        rest
    }

    /// Forgets a request that could not be read (the connection closes).
    pub fn abandon(&mut self) {
        self.head = None;
        self.feed = None;
        self.stream_body = false;
        self.over_budget = false;
        self.start = self.end;
        // A refused chunked body's decoded bytes go back at once, with
        // their share of the budget (the connection may linger for long).
        self.decoder = None;
        self.body = Vec::new();
        self.rehold();
    }
}

/// True if `bytes` hold the end of a request head (an empty line).
fn holds_head(bytes: &[u8]) -> bool {
    bytes
        .iter()
        .enumerate()
        .any(|(i, &b)| b == b'\n' && matches!(&bytes[i + 1..], [b'\n', ..] | [b'\r', b'\n', ..]))
}

#[cfg(test)]
mod tests;

//! The read side of a connection, free of sockets: a buffer that bytes are
//! read into, and the parser state that turns them into requests (head,
//! then body by Content-Length or chunked). Fed from a socket by `fill`, or
//! from any `Read` in tests and fuzzing.

use super::chunked::ChunkedDecoder;
use super::parse::{parse_head_reusing, BodyKind, Head, HeaderOffsets};
use super::HttpError;
use crate::budget::{Budget, Reservation};
use crate::settings::ConnParams;
use std::io::{self, Read};

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

/// Spare read and write buffers of one event loop. Buffers belong to busy
/// connections: an idle keep-alive connection gives its buffers back, so
/// thousands of idle connections cost little more than their slab entries.
/// A read buffer grown past `READ_CHUNK` (a body, a long head) draws the
/// growth from the host's `Budget`.
#[derive(Default)]
pub struct BufPool {
    read: Vec<Vec<u8>>,
    write: Vec<Vec<u8>>,
    budget: Budget,
}

/// Spare buffers kept per loop; more are freed.
const POOL_MAX: usize = 256;

impl BufPool {
    /// A pool whose grown buffers draw on `budget`.
    pub fn with_budget(budget: Budget) -> Self {
        BufPool {
            budget,
            ..BufPool::default()
        }
    }

    /// The budget grown buffers draw on.
    pub fn budget(&self) -> &Budget {
        &self.budget
    }

    /// A read buffer of `READ_CHUNK` initialised bytes.
    pub fn take_read(&mut self) -> Vec<u8> {
        self.read.pop().unwrap_or_else(|| vec![0; READ_CHUNK])
    }

    /// An empty write buffer.
    pub fn take_write(&mut self) -> Vec<u8> {
        self.write.pop().unwrap_or_default()
    }

    fn give_read(&mut self, buf: Vec<u8>) {
        // Only standard-size buffers are kept; a grown one is freed.
        if buf.len() == READ_CHUNK && self.read.len() < POOL_MAX {
            self.read.push(buf);
        }
    }

    /// Spare write buffers held (for tests).
    #[cfg(test)]
    pub(crate) fn spare_writes(&self) -> usize {
        self.write.len()
    }

    /// Takes back a write buffer (cleared; an oversized one is freed).
    pub fn give_write(&mut self, mut buf: Vec<u8>) {
        if buf.capacity() > 0 && buf.capacity() <= 4 * READ_CHUNK && self.write.len() < POOL_MAX {
            buf.clear();
            self.write.push(buf);
        }
    }
}

/// What the caller decides for a request once its head is parsed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BodyPlan {
    /// The body limit, if not `max_body` (an app's own).
    pub limit: Option<usize>,
    /// The app reads the body as it arrives: the request is ready with its
    /// head, and the body comes through `body_piece`.
    pub stream: bool,
}

/// A body handed over as it arrives.
struct BodyFeed {
    /// Bytes still to come by Content-Length; `None` for chunked.
    left: Option<usize>,
    decoder: ChunkedDecoder,
    limit: usize,
    received: usize,
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
                    if !self.hold_for(grown, self.body.capacity(), &pool.budget) {
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

    /// Reserves what buffers of `buf_len` and `body_cap` bytes hold past
    /// the first `READ_CHUNK`; false if the budget has no room.
    fn hold_for(&mut self, buf_len: usize, body_cap: usize, budget: &Budget) -> bool {
        hold_for(&mut self.hold, buf_len, body_cap, budget)
    }

    /// Brings the reservation down to what the buffers hold now.
    fn rehold(&mut self) {
        let bytes = beyond_first_chunk(self.buf.len(), self.body.capacity());
        if let Some(hold) = &mut self.hold {
            hold.force(bytes);
        }
    }

    /// Bytes held of the budget (for tests and status).
    pub fn held(&self) -> usize {
        self.hold.as_ref().map_or(0, Reservation::bytes)
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

    /// True while a dispatched request's body is streamed to its app and
    /// has not all come.
    pub fn feeds_body(&self) -> bool {
        self.feed.is_some()
    }

    /// Takes the streamed body's bytes buffered now into `out` (decoded);
    /// true once the body has all come. Errors: past the limit
    /// (`BodyTooLarge`) or bad chunked framing.
    pub fn body_piece(&mut self, out: &mut Vec<u8>) -> Result<bool, HttpError> {
        let Some(feed) = &mut self.feed else {
            return Ok(true);
        };
        let avail = &self.buf[self.start..self.end];
        let done = match feed.left {
            Some(left) => {
                let k = left.min(avail.len());
                out.extend_from_slice(&avail[..k]);
                self.start += k;
                feed.left = Some(left - k);
                k == left
            }
            None => {
                let room = feed.limit.saturating_sub(feed.received);
                let used = feed.decoder.decode(avail, out, room)?;
                self.start += used;
                feed.decoder.is_done()
            }
        };
        feed.received += out.len();
        if done {
            self.feed = None;
        }
        Ok(done)
    }

    /// Parses the next request. `Ok(true)`: a whole request is ready (see
    /// `parts`); `Ok(false)`: more bytes are needed.
    pub fn next_request(&mut self, params: &ConnParams) -> Result<bool, HttpError> {
        static UNLIMITED: std::sync::OnceLock<Budget> = std::sync::OnceLock::new();
        let budget = UNLIMITED.get_or_init(Budget::unlimited);
        self.next_request_with(params, budget, &|_, _| BodyPlan::default())
    }

    /// `next_request`, with `body_plan` deciding, once a head is parsed, a
    /// body limit for this request in place of `params.max_body` (which
    /// the parse itself holds as the ceiling): an app's own `max_body`;
    /// and whether the body is streamed to the app (the request is then
    /// ready with its head; see `body_piece`). A body the `budget` has no
    /// room for is refused (`OverBudget`).
    pub fn next_request_with(
        &mut self,
        params: &ConnParams,
        budget: &Budget,
        body_plan: &dyn Fn(&Head, &[u8]) -> BodyPlan,
    ) -> Result<bool, HttpError> {
        if self.over_budget {
            budget.note_refused(crate::budget::Refusal::Body);
            return Err(HttpError::OverBudget(budget.limit()));
        }
        if self.head.is_none() {
            if self.start == self.end {
                return Ok(false);
            }
            let bytes = &self.buf[self.start..self.end];
            match parse_head_reusing(bytes, params, &mut self.spare_headers)? {
                None => return Ok(false),
                Some(head) => {
                    // A request without a body has nothing to plan.
                    let plan = match head.body {
                        BodyKind::None => BodyPlan::default(),
                        _ => body_plan(&head, bytes),
                    };
                    self.body_limit = plan.limit;
                    self.stream_body = plan.stream;
                    self.stream_limit = plan.limit.unwrap_or(params.max_body);
                    if let (Some(limit), BodyKind::Length(n)) = (self.body_limit, head.body) {
                        if n > limit {
                            self.spare_headers = head.into_spare();
                            return Err(HttpError::BodyTooLarge);
                        }
                    }
                    self.decoder = (head.body == BodyKind::Chunked).then(ChunkedDecoder::default);
                    self.body.clear();
                    self.continue_sent = false;
                    self.head = Some(head);
                }
            }
        }
        let Some(head) = &self.head else {
            return Ok(false);
        };
        if self.stream_body {
            // Ready with its head; 100 Continue as its app will read.
            self.continue_due = head.expect_continue;
            return Ok(true);
        }
        let body_start = self.start + head.len;
        let complete = match (head.body, &mut self.decoder) {
            (BodyKind::None, _) => true,
            (BodyKind::Length(n), _) => self.end - body_start >= n,
            (BodyKind::Chunked, Some(decoder)) => {
                let limit = self.body_limit.unwrap_or(params.max_body);
                // The decoded body is never longer than its framing: room
                // for all of it is reserved before it is decoded.
                let need = (self.body.len() + self.end - body_start).min(limit);
                if need > self.body.capacity() {
                    let cap = need.max(self.body.capacity() * 2).min(limit.max(need));
                    if !hold_for(&mut self.hold, self.buf.len(), cap, budget) {
                        budget.note_refused(crate::budget::Refusal::Body);
                        return Err(HttpError::OverBudget(budget.limit()));
                    }
                    self.body.reserve_exact(cap - self.body.len());
                }
                let used =
                    decoder.decode(&self.buf[body_start..self.end], &mut self.body, limit)?;
                // Drop the consumed chunk framing so it never piles up.
                self.buf
                    .copy_within(body_start + used..self.end, body_start);
                self.end -= used;
                decoder.is_done()
            }
            (BodyKind::Chunked, None) => return Err(HttpError::Framing("chunked decoder missing")),
        };
        if !complete && head.expect_continue && !self.continue_sent {
            self.continue_sent = true;
            self.continue_due = true;
        }
        Ok(complete)
    }

    /// True once per request that asked `Expect: 100-continue` and whose
    /// body is now awaited: the caller sends `100 Continue`.
    pub fn take_continue(&mut self) -> bool {
        std::mem::take(&mut self.continue_due)
    }

    /// The ready request's head, its bytes (head offsets are relative to
    /// them) and its body.
    pub fn parts(&self) -> Option<(&Head, &[u8], &[u8])> {
        let head = self.head.as_ref()?;
        let buf = &self.buf[self.start..self.end];
        let body = match head.body {
            _ if self.stream_body => &[][..],
            BodyKind::None => &[][..],
            BodyKind::Length(n) => buf.get(head.len..head.len + n)?,
            BodyKind::Chunked => &self.body,
        };
        Some((head, buf, body))
    }

    /// Drops the dispatched request's bytes.
    pub fn consume(&mut self) {
        if let Some(head) = self.head.take() {
            let body = match head.body {
                _ if self.stream_body => 0,
                BodyKind::Length(n) => n,
                _ => 0,
            };
            if std::mem::take(&mut self.stream_body) {
                self.feed = Some(BodyFeed {
                    left: match head.body {
                        BodyKind::Length(n) => Some(n),
                        _ => None,
                    },
                    decoder: ChunkedDecoder::default(),
                    limit: self.stream_limit,
                    received: 0,
                });
            }
            self.start = (self.start + head.len + body).min(self.end);
            self.spare_headers = head.into_spare();
        }
        self.decoder = None;
        if self.body.capacity() > READ_CHUNK {
            self.body = Vec::new();
            self.rehold();
        } else {
            self.body.clear();
        }
    }

    /// Forgets the rest of a streamed body (the connection closes after
    /// the answer; nothing more is read as a request).
    pub fn abandon_body(&mut self) {
        if self.feed.take().is_some() {
            self.start = self.end;
        }
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

/// What a read buffer of `buf_len` bytes and a decoded body of `body_cap`
/// hold of the budget: all but the first `READ_CHUNK` every busy
/// connection has.
fn beyond_first_chunk(buf_len: usize, body_cap: usize) -> usize {
    buf_len.saturating_sub(READ_CHUNK) + body_cap
}

/// Sets `hold` to what buffers of `buf_len` and `body_cap` bytes hold past
/// the first `READ_CHUNK` (taking a reservation on `budget` the first
/// time); false if the budget has no room.
fn hold_for(
    hold: &mut Option<Reservation>,
    buf_len: usize,
    body_cap: usize,
    budget: &Budget,
) -> bool {
    let bytes = beyond_first_chunk(buf_len, body_cap);
    match hold {
        Some(hold) => hold.set(bytes),
        None if bytes == 0 => true,
        None => hold.insert(budget.reservation()).set(bytes),
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
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A source that hands out its bytes in the given chunk sizes, then
    /// says WouldBlock (like a non-blocking socket between packets).
    struct Trickle<'a> {
        data: &'a [u8],
    }

    impl Read for Trickle<'_> {
        fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
            if self.data.is_empty() {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            let n = out.len().min(self.data.len());
            out[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }

    /// What a request looked like to an app: method, target, headers, body.
    type Seen = (String, String, Vec<(String, Vec<u8>)>, Vec<u8>);

    /// Feeds `input` in pieces cut at `cuts`, collecting every request read
    /// (or the first error).
    fn run(input: &[u8], cuts: &[usize], params: &ConnParams) -> Result<Vec<Seen>, HttpError> {
        let mut reader = RequestReader::default();
        let mut seen = Vec::new();
        let mut bounds: Vec<usize> = cuts.iter().map(|c| c % (input.len() + 1)).collect();
        bounds.push(input.len());
        bounds.sort_unstable();
        let mut from = 0;
        for to in bounds {
            let mut src = Trickle {
                data: &input[from..to],
            };
            from = to;
            // A full buffer leaves bytes in the source: serve, then read on.
            loop {
                let left = src.data.len();
                let state = reader.fill(&mut src, params, false, &mut BufPool::default());
                let mut served = false;
                while reader.next_request(params)? {
                    take(&mut reader, &mut seen);
                    served = true;
                }
                if state != ReadState::Full || (src.data.len() == left && !served) {
                    break;
                }
            }
        }
        Ok(seen)
    }

    /// Records the ready request and consumes it.
    fn take(reader: &mut RequestReader, seen: &mut Vec<Seen>) {
        {
            let (head, buf, body) = reader.parts().expect("a ready request has parts");
            let text =
                |r: &std::ops::Range<usize>| String::from_utf8_lossy(&buf[r.clone()]).into_owned();
            seen.push((
                text(&head.method),
                text(&head.target),
                head.headers
                    .iter()
                    .map(|(n, v)| (text(n), buf[v.clone()].to_vec()))
                    .collect(),
                body.to_vec(),
            ));
        }
        reader.consume();
    }

    const PIPELINE: &[u8] = b"GET /a?x=1 HTTP/1.1\r\nHost: h\r\nX-Odd: \xe9t\xe9\r\n\r\n\
POST /b HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello\
POST /c HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nWiki\r\n5;e=1\r\npedia\r\n0\r\nT: 1\r\n\r\n\
GET /d HTTP/1.0\r\n\r\n";

    #[test]
    fn reads_a_pipeline_whole() {
        let seen = run(PIPELINE, &[], &ConnParams::default()).unwrap();
        let targets: Vec<&str> = seen.iter().map(|s| s.1.as_str()).collect();
        assert_eq!(targets, ["/a?x=1", "/b", "/c", "/d"]);
        assert_eq!(seen[1].3, b"hello");
        assert_eq!(seen[2].3, b"Wikipedia");
        assert_eq!(seen[0].2[1].1, b"\xe9t\xe9");
        // A pipeline longer than the read buffer is read in turns.
        let long = PIPELINE.repeat(500);
        assert!(long.len() > 4 * READ_CHUNK);
        let again = run(&long, &[], &ConnParams::default()).unwrap();
        assert_eq!(again.len(), 4 * 500);
        assert_eq!(again[4 * 499 + 2].3, b"Wikipedia");
    }

    #[test]
    fn expect_continue_is_due_once_while_the_body_is_awaited() {
        let params = ConnParams::default();
        let mut r = RequestReader::default();
        let head =
            b"PUT /x HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n";
        r.fill(
            &mut Trickle { data: head },
            &params,
            false,
            &mut BufPool::default(),
        );
        assert!(!r.next_request(&params).unwrap());
        assert!(r.take_continue());
        assert!(!r.next_request(&params).unwrap());
        assert!(!r.take_continue());
        r.fill(
            &mut Trickle { data: b"ok" },
            &params,
            false,
            &mut BufPool::default(),
        );
        assert!(r.next_request(&params).unwrap());
    }

    #[test]
    fn reads_no_further_than_the_current_request_needs() {
        let params = ConnParams::default();
        let mut pool = BufPool::default();
        // Thousands of pipelined requests: one buffer's worth is read, the
        // rest stays in the source until these are served.
        let many = b"GET /x HTTP/1.1\r\nHost: h\r\n\r\n".repeat(10_000);
        let mut src = Trickle { data: &many };
        let mut r = RequestReader::default();
        assert_eq!(r.fill(&mut src, &params, false, &mut pool), ReadState::Full);
        assert_eq!(r.buffered(), READ_CHUNK);
        assert_eq!(src.data.len(), many.len() - READ_CHUNK);
        // A body is read whole, and nothing past it.
        let body = vec![b'b'; 100_000];
        let head = format!(
            "POST /b HTTP/1.1\r\nHost: h\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        let mut input = head.clone().into_bytes();
        input.extend_from_slice(&body);
        input.extend_from_slice(&many);
        let mut src = Trickle { data: &input };
        let mut r = RequestReader::default();
        assert_eq!(r.fill(&mut src, &params, false, &mut pool), ReadState::Full);
        assert!(!r.next_request(&params).unwrap());
        assert_eq!(r.fill(&mut src, &params, false, &mut pool), ReadState::Full);
        assert_eq!(r.buffered(), head.len() + body.len());
        assert!(r.next_request(&params).unwrap());
        assert_eq!(r.parts().unwrap().2, &body[..]);
        // Once it is consumed, reading goes on.
        r.consume();
        assert_eq!(r.fill(&mut src, &params, false, &mut pool), ReadState::Full);
        assert!(r.next_request(&params).unwrap());
    }

    /// Fills and parses until a request is ready or refused.
    fn read_all(
        input: &[u8],
        budget: &Budget,
    ) -> (RequestReader, BufPool, Result<bool, HttpError>) {
        let params = ConnParams::default();
        let mut pool = BufPool::with_budget(budget.clone());
        let mut src = Trickle { data: input };
        let mut r = RequestReader::default();
        let mut got = Ok(false);
        for _ in 0..64 {
            r.fill(&mut src, &params, false, &mut pool);
            got = r.next_request_with(&params, budget, &|_, _| BodyPlan::default());
            if got != Ok(false) {
                break;
            }
        }
        (r, pool, got)
    }

    fn post(body_len: usize, chunked: bool) -> Vec<u8> {
        let framing = if chunked {
            "Transfer-Encoding: chunked".to_string()
        } else {
            format!("Content-Length: {body_len}")
        };
        let mut input = format!("POST /b HTTP/1.1\r\nHost: h\r\n{framing}\r\n\r\n").into_bytes();
        if chunked {
            for _ in 0..body_len / 1000 {
                input.extend_from_slice(b"3e8\r\n");
                input.extend_from_slice(&[b'c'; 1000]);
                input.extend_from_slice(b"\r\n");
            }
            input.extend_from_slice(b"0\r\n\r\n");
        } else {
            input.extend(std::iter::repeat_n(b'b', body_len));
        }
        input
    }

    #[test]
    fn a_body_past_the_budget_is_refused_and_its_bytes_come_back() {
        use crate::budget::Refusal;
        for chunked in [false, true] {
            let budget = Budget::new(100 << 10);
            let (r, _, got) = read_all(&post(200_000, chunked), &budget);
            assert_eq!(
                got,
                Err(HttpError::OverBudget(100 << 10)),
                "chunked: {chunked}"
            );
            assert!(budget.held() <= 100 << 10);
            assert_eq!(budget.refused(Refusal::Body), 1);
            drop(r);
            assert_eq!(budget.held(), 0, "chunked: {chunked}");
        }
    }

    #[test]
    fn a_refused_body_gives_its_bytes_back_when_abandoned() {
        // Over max_body once decoded: refused with 413 while the connection
        // stays (it lingers), so its bytes must go back then.
        let params = ConnParams {
            max_body: 100_000,
            ..ConnParams::default()
        };
        let budget = Budget::unlimited();
        let mut pool = BufPool::with_budget(budget.clone());
        let input = post(200_000, true);
        let mut src = Trickle { data: &input };
        let mut r = RequestReader::default();
        let mut got = Ok(false);
        for _ in 0..1000 {
            r.fill(&mut src, &params, false, &mut pool);
            got = r.next_request_with(&params, &budget, &|_, _| BodyPlan::default());
            if got != Ok(false) {
                break;
            }
        }
        assert_eq!(got, Err(HttpError::BodyTooLarge));
        assert!(budget.held() > 0);
        r.abandon();
        r.release(&mut pool);
        assert_eq!(budget.held(), 0);
    }

    #[test]
    fn a_held_body_counts_past_the_first_buffer_until_consumed() {
        for chunked in [false, true] {
            let budget = Budget::unlimited();
            let (mut r, mut pool, got) = read_all(&post(200_000, chunked), &budget);
            assert_eq!(got, Ok(true));
            assert_eq!(r.parts().map(|p| p.2.len()), Some(200_000));
            assert!(budget.held() >= 200_000 - READ_CHUNK, "chunked: {chunked}");
            assert_eq!(budget.held(), r.held());
            r.consume();
            r.release(&mut pool);
            assert_eq!(budget.held(), 0, "chunked: {chunked}");
        }
        // A small request never draws on the budget.
        let budget = Budget::new(0);
        let (_r, _, got) = read_all(&post(1000, false), &budget);
        assert_eq!(got, Ok(true));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Any split of valid requests reads the same requests.
        #[test]
        fn any_split_reads_the_same(cuts in proptest::collection::vec(any::<usize>(), 0..12)) {
            let whole = run(PIPELINE, &[], &ConnParams::default()).unwrap();
            prop_assert_eq!(run(PIPELINE, &cuts, &ConnParams::default()).unwrap(), whole);
        }

        /// No input, in any split, panics the reader; it either reads
        /// requests, waits for more, or reports an error.
        #[test]
        fn arbitrary_bytes_never_panic(
            input in proptest::collection::vec(any::<u8>(), 0..600),
            cuts in proptest::collection::vec(any::<usize>(), 0..8),
        ) {
            let params = ConnParams { max_body: 64, max_head: 256, ..ConnParams::default() };
            let _ = run(&input, &cuts, &params);
        }

        /// Mutations of a valid pipeline never panic either.
        #[test]
        fn mutated_requests_never_panic(
            flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..6),
            cuts in proptest::collection::vec(any::<usize>(), 0..8),
        ) {
            let mut input = PIPELINE.to_vec();
            for (at, byte) in flips {
                let i = at % input.len();
                input[i] = byte;
            }
            let _ = run(&input, &cuts, &ConnParams::default());
        }
    }
}

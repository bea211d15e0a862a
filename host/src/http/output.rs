//! A connection's pending output, free of sockets: response heads and small
//! bodies coalesced in one buffer (a batch of pipelined answers goes out in
//! one `write`), and large bodies kept in the app's own buffer, spliced in
//! at their place and written with `writev` instead of being copied, so a
//! large body is held once.

use super::framing::{chunk_size_line, Framing, Plan, LAST_CHUNK};
use super::reader::BufPool;
use super::response::{write_head, write_head_framed, Fixed, Persist};
use abi_stable::std_types::RVec;
use std::collections::VecDeque;
use std::io::{self, IoSlice, Write};
use stoa_app_api::Response;

/// Bodies at least this long are written from the app's buffer; shorter
/// ones are copied next to their head (one write for many small answers).
pub const SPLICE_MIN: usize = 16 * 1024;

/// Most slices handed to one `writev`.
const MAX_SLICES: usize = 16;

/// A large body, to be written after `buf[..at]`.
struct Spliced {
    at: usize,
    body: RVec<u8>,
    /// Bytes of `body` already written.
    sent: usize,
}

/// Bytes waiting for the socket, in order: `buf[pos..]` with the queued
/// bodies spliced in at their offsets.
#[derive(Default)]
pub struct Output {
    buf: Vec<u8>,
    /// Bytes of `buf` already written; never past the first body's `at`.
    pos: usize,
    bodies: VecDeque<Spliced>,
    /// Bytes written over the output's life (what a streamed answer's or
    /// a WebSocket's access-log line counts as sent).
    written: u64,
}

impl Output {
    /// Queues a response: its head (and a small body) into the buffer; a
    /// large body is taken out of `resp` and queued as it is. `head_only`
    /// answers HEAD (no body).
    pub fn push_response(
        &mut self,
        pool: &mut BufPool,
        resp: &mut Response,
        fixed: Fixed,
        head_only: bool,
        persist: Persist,
        date: &str,
    ) {
        let buf = self.buf_mut(pool);
        if !write_head(buf, resp, fixed, head_only, persist, date) || resp.body.is_empty() {
            return;
        }
        if resp.body.len() < SPLICE_MIN {
            buf.extend_from_slice(&resp.body);
        } else {
            let at = buf.len();
            self.bodies.push_back(Spliced {
                at,
                body: std::mem::take(&mut resp.body),
                sent: 0,
            });
        }
    }

    /// Queues the head of a streamed response, announcing its body as
    /// `plan` says, and the head's own body as the first chunk. Returns
    /// where the body begins (in `queued` terms).
    pub fn push_stream_head(
        &mut self,
        pool: &mut BufPool,
        resp: &mut Response,
        plan: Plan,
        persist: Persist,
        date: &str,
    ) -> u64 {
        write_head_framed(self.buf_mut(pool), resp, &[], plan.announce, persist, date);
        let body_from = self.queued();
        let body = std::mem::take(&mut resp.body).into_vec();
        self.push_chunk(pool, plan.framing, body);
        body_from
    }

    /// Queues one chunk of a streamed body, framed; a large chunk is
    /// spliced in as it is, not copied.
    pub fn push_chunk(&mut self, pool: &mut BufPool, framing: Framing, chunk: Vec<u8>) {
        if chunk.is_empty() || framing == Framing::Discard {
            return;
        }
        if framing == Framing::Chunked {
            let line = chunk_size_line(chunk.len());
            self.push_bytes(pool, line.as_bytes());
        }
        let buf = self.buf_mut(pool);
        if chunk.len() < SPLICE_MIN {
            buf.extend_from_slice(&chunk);
        } else {
            let at = buf.len();
            self.bodies.push_back(Spliced {
                at,
                body: RVec::from(chunk),
                sent: 0,
            });
        }
        if framing == Framing::Chunked {
            self.push_bytes(pool, b"\r\n");
        }
    }

    /// Queues what ends a streamed body (the last chunk, if chunked).
    pub fn push_stream_end(&mut self, pool: &mut BufPool, framing: Framing) {
        if framing == Framing::Chunked {
            self.push_bytes(pool, LAST_CHUNK);
        }
    }

    /// Queues bytes the host writes itself (`100 Continue`).
    pub fn push_bytes(&mut self, pool: &mut BufPool, bytes: &[u8]) {
        self.buf_mut(pool).extend_from_slice(bytes);
    }

    /// True when everything queued has been written.
    pub fn is_empty(&self) -> bool {
        self.pos == self.buf.len() && self.bodies.is_empty()
    }

    /// Bytes still to write.
    pub fn len(&self) -> usize {
        let queued = self.buf.len() - self.pos;
        if self.bodies.is_empty() {
            return queued;
        }
        queued
            + self
                .bodies
                .iter()
                .map(|b| b.body.len() - b.sent)
                .sum::<usize>()
    }

    /// Bytes written so far, over the output's life.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Bytes queued so far, over the output's life (written or waiting).
    pub fn queued(&self) -> u64 {
        self.written + self.len() as u64
    }

    /// Writes until everything is out or the writer would block; true if
    /// any byte was written.
    pub fn flush(&mut self, pool: &mut BufPool, w: &mut impl Write) -> io::Result<bool> {
        let mut wrote = false;
        while !self.is_empty() {
            let result = if self.bodies.is_empty() {
                w.write(&self.buf[self.pos..])
            } else {
                let mut slices = [IoSlice::new(&[]); MAX_SLICES];
                let n = self.slices(&mut slices);
                w.write_vectored(&slices[..n])
            };
            match result {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    self.written += n as u64;
                    if self.bodies.is_empty() {
                        self.pos += n;
                    } else {
                        self.advance(n);
                    }
                    wrote = true;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(wrote),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        self.recycle(pool);
        Ok(wrote)
    }

    /// The buffer bytes are queued in, for a writer that frames them in
    /// place (HTTP/2's).
    pub fn buf_for(&mut self, pool: &mut BufPool) -> &mut Vec<u8> {
        self.buf_mut(pool)
    }

    /// The buffer, taken from the loop's spares if there is none.
    fn buf_mut(&mut self, pool: &mut BufPool) -> &mut Vec<u8> {
        if self.buf.capacity() == 0 {
            self.buf = pool.take_write();
        }
        &mut self.buf
    }

    /// The unwritten bytes as slices, in order, as many as fit.
    fn slices<'a>(&'a self, out: &mut [IoSlice<'a>; MAX_SLICES]) -> usize {
        let mut n = 0;
        let mut pos = self.pos;
        for b in &self.bodies {
            if n + 2 > MAX_SLICES {
                return n;
            }
            if pos < b.at {
                out[n] = IoSlice::new(&self.buf[pos..b.at]);
                n += 1;
            }
            out[n] = IoSlice::new(&b.body[b.sent..]);
            n += 1;
            pos = b.at;
        }
        if n < MAX_SLICES && pos < self.buf.len() {
            out[n] = IoSlice::new(&self.buf[pos..]);
            n += 1;
        }
        n
    }

    /// Marks `n` more bytes written; a body written to its end is dropped
    /// (the app's buffer is freed as soon as it is sent).
    fn advance(&mut self, mut n: usize) {
        while n > 0 {
            match self.bodies.front_mut() {
                Some(b) if self.pos == b.at => {
                    let take = n.min(b.body.len() - b.sent);
                    b.sent += take;
                    n -= take;
                    if b.sent == b.body.len() {
                        self.bodies.pop_front();
                    }
                }
                front => {
                    let end = front.map_or(self.buf.len(), |b| b.at);
                    let take = n.min(end - self.pos);
                    if take == 0 {
                        // The writer claims more than it was given.
                        return;
                    }
                    self.pos += take;
                    n -= take;
                }
            }
        }
    }

    /// All sent: the buffer goes back to the loop's spares, so an idle
    /// connection holds none.
    fn recycle(&mut self, pool: &mut BufPool) {
        self.pos = 0;
        pool.give_write(std::mem::take(&mut self.buf));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DATE: &str = "Mon, 30 Nov 2026 06:00:00 GMT";

    /// A socket stand-in: accepts at most `room` bytes, then would block
    /// until more room is given; counts the calls that wrote.
    #[derive(Default)]
    struct Sink {
        got: Vec<u8>,
        room: usize,
        writes: usize,
    }

    impl Write for Sink {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.write_vectored(&[IoSlice::new(buf)])
        }

        fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
            if self.room == 0 {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            let mut n = 0;
            for b in bufs {
                let take = b.len().min(self.room - n);
                self.got.extend_from_slice(&b[..take]);
                n += take;
            }
            self.room -= n;
            self.writes += 1;
            Ok(n)
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// A body of `len` bytes, byte `i` being `i % 251`.
    fn body(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i % 251) as u8).collect()
    }

    /// The bytes `write_response` gives for the same answer: what goes out
    /// must not depend on how it is queued.
    fn expected(answers: &[(&Response, bool, Persist)]) -> Vec<u8> {
        let mut out = Vec::new();
        for (resp, head_only, persist) in answers {
            super::super::response::write_response(&mut out, resp, *head_only, *persist, DATE);
        }
        out
    }

    #[test]
    fn a_sent_buffer_goes_back_to_the_loops_pool_and_is_taken_again() {
        let mut out = Output::default();
        let mut pool = BufPool::default();
        let mut sink = Sink {
            room: usize::MAX,
            ..Sink::default()
        };
        out.push_response(
            &mut pool,
            &mut Response::text(200, "a"),
            &[],
            false,
            Persist::KeepAlive,
            DATE,
        );
        assert_eq!(pool.spare_writes(), 0);
        out.flush(&mut pool, &mut sink).unwrap();
        assert_eq!(pool.spare_writes(), 1, "an idle output holds no buffer");
        out.push_response(
            &mut pool,
            &mut Response::text(200, "b"),
            &[],
            false,
            Persist::KeepAlive,
            DATE,
        );
        assert_eq!(pool.spare_writes(), 0, "the spare is reused");
    }

    #[test]
    fn a_write_that_blocks_midway_through_a_large_body_resumes_in_order() {
        let big = Response::new(200).with_body(body(3 * SPLICE_MIN + 7));
        let small = Response::text(200, "after");
        let mut out = Output::default();
        let mut pool = BufPool::default();
        out.push_response(
            &mut pool,
            &mut big.clone(),
            &[],
            false,
            Persist::KeepAlive,
            DATE,
        );
        out.push_response(
            &mut pool,
            &mut small.clone(),
            &[],
            false,
            Persist::KeepAlive,
            DATE,
        );
        // The large body is not in the coalescing buffer.
        assert!(out.buf.len() < SPLICE_MIN);
        let want = expected(&[
            (&big, false, Persist::KeepAlive),
            (&small, false, Persist::KeepAlive),
        ]);
        assert_eq!(out.len(), want.len());
        let mut sink = Sink::default();
        // Room for the head and part of the body, then for odd amounts.
        for room in [100, SPLICE_MIN, 0, 5, 2 * SPLICE_MIN, usize::MAX / 2] {
            sink.room = room;
            let before = out.len();
            let wrote = out.flush(&mut pool, &mut sink).unwrap();
            assert_eq!(wrote, room > 0);
            assert_eq!(out.len(), before - (before.min(room)));
            assert_eq!(&sink.got[..], &want[..sink.got.len()]);
        }
        assert!(out.is_empty());
        assert_eq!(sink.got, want);
    }

    /// Queues a copy of `r`, keep-alive, without constant headers.
    fn push_keep_alive(out: &mut Output, pool: &mut BufPool, r: &Response) {
        out.push_response(pool, &mut r.clone(), &[], false, Persist::KeepAlive, DATE);
    }

    #[test]
    fn small_answers_are_coalesced_into_one_write() {
        let mut out = Output::default();
        let mut pool = BufPool::default();
        let r = Response::text(200, "ok");
        for _ in 0..100 {
            push_keep_alive(&mut out, &mut pool, &r);
        }
        let mut sink = Sink {
            room: usize::MAX,
            ..Sink::default()
        };
        out.flush(&mut pool, &mut sink).unwrap();
        assert_eq!(sink.writes, 1);
        assert_eq!(
            sink.got,
            expected(&[(&r, false, Persist::KeepAlive)]).repeat(100)
        );
    }

    #[test]
    fn head_of_a_large_body_sends_no_body() {
        let big = Response::new(200).with_body(body(2 * SPLICE_MIN));
        let mut out = Output::default();
        let mut pool = BufPool::default();
        out.push_response(
            &mut pool,
            &mut big.clone(),
            &[],
            true,
            Persist::KeepAlive,
            DATE,
        );
        assert!(out.bodies.is_empty());
        let mut sink = Sink {
            room: usize::MAX,
            ..Sink::default()
        };
        out.flush(&mut pool, &mut sink).unwrap();
        let text = String::from_utf8(sink.got).unwrap();
        assert!(text.contains(&format!("Content-Length: {}\r\n", 2 * SPLICE_MIN)));
        assert!(text.ends_with("\r\n\r\n"));
    }

    #[test]
    fn connection_close_comes_with_the_large_body_it_ends() {
        let big = Response::new(200).with_body(body(SPLICE_MIN));
        let mut out = Output::default();
        let mut pool = BufPool::default();
        out.push_response(
            &mut pool,
            &mut big.clone(),
            &[],
            false,
            Persist::Close,
            DATE,
        );
        let mut sink = Sink {
            room: usize::MAX,
            ..Sink::default()
        };
        out.flush(&mut pool, &mut sink).unwrap();
        assert!(out.is_empty());
        let want = expected(&[(&big, false, Persist::Close)]);
        assert_eq!(sink.got, want);
        let head_end = want.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
        assert!(String::from_utf8_lossy(&want[..head_end]).contains("Connection: close"));
    }

    #[test]
    fn many_large_bodies_go_out_in_order_past_the_slice_limit() {
        let answers: Vec<Response> = (0..3 * MAX_SLICES)
            .map(|i| Response::new(200).with_body(body(SPLICE_MIN + i)))
            .collect();
        let mut out = Output::default();
        let mut pool = BufPool::default();
        for r in &answers {
            push_keep_alive(&mut out, &mut pool, r);
        }
        let mut sink = Sink {
            room: usize::MAX,
            ..Sink::default()
        };
        out.flush(&mut pool, &mut sink).unwrap();
        let want: Vec<_> = answers
            .iter()
            .map(|r| (r, false, Persist::KeepAlive))
            .collect();
        assert_eq!(sink.got, expected(&want));
        assert!(sink.writes > 1);
    }
}

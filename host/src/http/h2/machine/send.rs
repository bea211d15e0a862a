//! Answers out: a stream's head as HEADERS (and CONTINUATION), its body
//! as DATA frames within both windows and the client's frame size, the
//! streams with bytes to send taking turns.

use super::stream::Chunk;
use super::{tally, Machine};
use crate::http::h2::frame;
use crate::http::h2::ErrorCode;

impl Machine {
    /// Queues the answer's head for stream `id`: `status`, then `fields`
    /// (lowercase names); `end`: the answer has no body. False if the
    /// stream is gone (reset, or the connection failed).
    pub fn respond<'a>(
        &mut self,
        id: u32,
        status: u16,
        fields: impl Iterator<Item = (&'a [u8], &'a [u8])>,
        end: bool,
        out: &mut Vec<u8>,
    ) -> bool {
        if self.failed() || !self.is_open(id) {
            return false;
        }
        let mut block = std::mem::take(&mut self.spare_block);
        block.clear();
        self.encoder.begin(&mut block);
        self.encoder.status(status, &mut block);
        for (name, value) in fields {
            self.encoder.field(name, value, &mut block);
        }
        frame::put_headers(out, id, &block, end, self.peer_max_frame);
        self.spare_block = block;
        if let Some(s) = self.stream_mut(id) {
            s.answered = true;
            s.sent_end = end;
        }
        if end {
            self.ended(id, out);
        }
        true
    }

    /// Queues body bytes for stream `id`'s answer (`end`: the last); they
    /// go out with `send_data`. False if the stream is gone.
    pub fn queue_data(&mut self, id: u32, chunk: Chunk, end: bool) -> bool {
        let Some(s) = self.stream_mut(id).filter(|s| s.answered && !s.sent_end) else {
            return false;
        };
        if !chunk.bytes().is_empty() {
            s.send.push_back((chunk, 0));
        }
        s.send_end |= end;
        true
    }

    /// Body bytes queued on every stream and not framed yet.
    pub fn queued_total(&self) -> usize {
        self.streams.iter().map(|s| s.queued()).sum()
    }

    /// Body bytes queued on stream `id` and not framed yet (none for a
    /// stream that is gone).
    pub fn queued(&self, id: u32) -> usize {
        self.stream(id).map_or(0, |s| s.queued())
    }

    /// Frames queued body bytes into `out` as the windows allow, the
    /// streams taking turns, until `out` holds `bound` bytes; true if
    /// any stream still has bytes it could send now (the bound stopped it).
    pub fn send_data(&mut self, out: &mut Vec<u8>, bound: usize) -> bool {
        loop {
            if self.failed() {
                return false;
            }
            let n = self.streams.len();
            let mut sent_any = false;
            for k in 0..n {
                if out.len() >= bound {
                    return self.has_sendable();
                }
                let i = (self.turn + k) % n.max(1);
                if let Some(id) = self.frame_one(i, out) {
                    sent_any = true;
                    if self.stream(id).is_some_and(|s| s.sent_end) {
                        self.ended(id, out);
                        // The table changed under the loop: start over.
                        self.turn = i;
                        break;
                    }
                }
            }
            self.turn = self.turn.wrapping_add(1);
            if !sent_any {
                return false;
            }
        }
    }

    /// True if some stream could frame DATA now.
    fn has_sendable(&self) -> bool {
        self.conn_send > 0
            && self
                .streams
                .iter()
                .any(|s| s.wants_send() && (s.send_window > 0 || s.send.is_empty()))
    }

    /// Frames one DATA frame for the stream at `i`, if it has bytes and
    /// window (or just its end); gives its id.
    fn frame_one(&mut self, i: usize, out: &mut Vec<u8>) -> Option<u32> {
        let max_frame = self.peer_max_frame;
        let conn_send = self.conn_send;
        let s = self.streams.get_mut(i)?;
        if !s.wants_send() {
            return None;
        }
        let id = s.id;
        let only_chunk = s.send.len() == 1;
        let Some((chunk, at)) = s.send.front_mut() else {
            // Only the end is left: an empty DATA frame carries it.
            frame::put_data_head(out, id, 0, true);
            s.sent_end = true;
            return Some(id);
        };
        let window = s.send_window.min(conn_send);
        if window <= 0 {
            return None;
        }
        let bytes = &chunk.bytes()[*at..];
        let n = bytes.len().min(max_frame).min(window as usize);
        let last_of_chunk = n == bytes.len();
        let end = last_of_chunk && only_chunk && s.send_end;
        frame::put_data_head(out, id, n, end);
        out.extend_from_slice(&bytes[..n]);
        *at += n;
        if last_of_chunk {
            s.send.pop_front();
        }
        s.send_window -= n as i64;
        s.sent_end = end;
        self.conn_send -= n as i64;
        Some(id)
    }

    /// The host's END_STREAM is framed on `id`: the stream goes once the
    /// client has ended its side too; one still sending its body is told
    /// to stop without error (RFC 9113 §8.1).
    fn ended(&mut self, id: u32, out: &mut Vec<u8>) {
        let Some(i) = self.streams.iter().position(|s| s.id == id) else {
            return;
        };
        if !self.streams[i].recv_closed {
            frame::put_rst(out, id, ErrorCode::NoError);
            tally(&mut self.counts.resets_sent, ErrorCode::NoError);
        }
        self.streams.swap_remove(i);
    }
}

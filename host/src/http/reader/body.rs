//! A dispatched request's body streamed to its app as it arrives.

use super::RequestReader;
use crate::http::chunked::ChunkedDecoder;
use crate::http::parse::BodyKind;
use crate::http::HttpError;

/// A body handed over as it arrives.
pub(super) struct BodyFeed {
    /// Bytes still to come by Content-Length; `None` for chunked.
    left: Option<usize>,
    decoder: ChunkedDecoder,
    limit: usize,
    received: usize,
}

impl BodyFeed {
    /// The feed of a body framed as `body` says, up to `limit` bytes.
    pub(super) fn new(body: BodyKind, limit: usize) -> Self {
        BodyFeed {
            left: match body {
                BodyKind::Length(n) => Some(n),
                _ => None,
            },
            decoder: ChunkedDecoder::default(),
            limit,
            received: 0,
        }
    }
}

impl RequestReader {
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

    /// Forgets the rest of a streamed body (the connection closes after
    /// the answer; nothing more is read as a request).
    pub fn abandon_body(&mut self) {
        if self.feed.take().is_some() {
            self.start = self.end;
        }
    }
}

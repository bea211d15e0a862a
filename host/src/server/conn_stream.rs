//! A connection's end of a streamed answer: the line to its app, the
//! framing the host picked, and how the connection goes on after it.

use crate::http::framing::Framing;
use crate::http::output::Output;
use crate::http::reader::BufPool;
use crate::http::response::Persist;
use crate::stream_line::{End, StreamLine};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Dropping it (the stream ended, or the connection went) closes the
/// line, so the app's next send answers closed, and counts the stream as
/// no longer open.
pub struct ConnStream {
    line: Arc<StreamLine>,
    framing: Framing,
    /// How the connection goes on once the body has ended well.
    persist: Persist,
    /// The worker's count of open streams.
    open: Arc<AtomicU64>,
}

impl ConnStream {
    /// A stream going out, counted in `open` until dropped.
    pub fn new(
        line: Arc<StreamLine>,
        (framing, persist): (Framing, Persist),
        open: Arc<AtomicU64>,
    ) -> Self {
        open.fetch_add(1, Ordering::Relaxed);
        ConnStream {
            line,
            framing,
            persist,
            open,
        }
    }

    /// The request this stream answers.
    pub fn request_id(&self) -> u64 {
        self.line.addr().1
    }

    /// Takes what the app sent into `out`, framed: whether any chunk came,
    /// and, once the body has ended, how the connection goes on (`close`
    /// forces closing; an abnormal end closes, with no terminating chunk).
    pub fn pull(
        &self,
        out: &mut Output,
        pool: &mut BufPool,
        close: bool,
    ) -> (bool, Option<Persist>) {
        let taken = self.line.take();
        let progressed = !taken.chunks.is_empty();
        for chunk in taken.chunks {
            out.push_chunk(pool, self.framing, chunk);
        }
        let ended = match taken.end {
            End::Open => None,
            End::Finished => {
                out.push_stream_end(pool, self.framing);
                Some(if close { Persist::Close } else { self.persist })
            }
            End::Aborted => Some(Persist::Close),
        };
        (progressed, ended)
    }

    /// Tells the app's side how much output still waits.
    pub fn report(&self, out_len: usize) {
        self.line.report(out_len);
    }
}

impl Drop for ConnStream {
    fn drop(&mut self) {
        self.line.close();
        self.open.fetch_sub(1, Ordering::Relaxed);
    }
}

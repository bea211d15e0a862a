//! A connection's streamed answer: its end of the line to the app, the
//! framing the host picked, and how the connection goes on after it.

use super::{Conn, Phase};
use crate::http::framing::{self, Framing};
use crate::http::output::Output;
use crate::http::reader::BufPool;
use crate::http::response::Persist;
use crate::server::exchange::{Pending, Terms};
use crate::stream_line::{End, StreamLine};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use stoa_app_api::Response;

/// Dropping it (the stream ended, or the connection went) closes the
/// line, so the app's next send answers closed, and counts the stream as
/// no longer open.
pub struct StreamedAnswer {
    line: Arc<StreamLine>,
    framing: Framing,
    /// How the connection goes on once the body has ended well.
    persist: Persist,
    /// The worker's count of open streams.
    open: Arc<AtomicU64>,
    /// Where its body begins in the output (`Output::queued`).
    body_from: u64,
}

impl StreamedAnswer {
    /// A stream going out, counted in `open` until dropped.
    fn new(
        line: Arc<StreamLine>,
        framing: Framing,
        persist: Persist,
        open: Arc<AtomicU64>,
        body_from: u64,
    ) -> Self {
        open.fetch_add(1, Ordering::Relaxed);
        StreamedAnswer {
            line,
            framing,
            persist,
            open,
            body_from,
        }
    }

    /// Where its body begins in the output (`Output::queued`).
    pub(super) fn body_from(&self) -> u64 {
        self.body_from
    }

    /// The request this stream answers.
    pub(super) fn request_id(&self) -> u64 {
        self.line.addr().1
    }

    /// Takes what the app sent into `out`, framed: whether any chunk came,
    /// and, once the body has ended, how the connection goes on (`close`
    /// forces closing; an abnormal end closes, with no terminating chunk).
    fn pull(&self, out: &mut Output, pool: &mut BufPool, close: bool) -> (bool, Option<Persist>) {
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
    fn report(&self, out_len: usize) {
        self.line.report(out_len);
    }
}

impl Drop for StreamedAnswer {
    fn drop(&mut self) {
        self.line.close();
        self.open.fetch_sub(1, Ordering::Relaxed);
    }
}

impl<S> Conn<S> {
    /// True if the streamed answer to request `id` is going out.
    pub fn streams_for(&self, id: u64) -> bool {
        matches!(&self.phase, Phase::Streaming { stream, .. } if stream.request_id() == id)
    }

    /// True while a streamed answer is going out.
    #[cfg(test)]
    pub fn is_streaming(&self) -> bool {
        matches!(self.phase, Phase::Streaming { .. })
    }

    /// The app started a streamed answer to the request with it: queues
    /// the head (framed as `framing::plan` picks) and moves to streaming;
    /// `open` counts the worker's open streams. Returns the request.
    pub fn start_stream(
        &mut self,
        head: &mut Response,
        line: Arc<StreamLine>,
        open: Arc<AtomicU64>,
        terms: &Terms,
        pool: &mut BufPool,
    ) -> Option<Pending> {
        let (mut pending, body_left) = self.take_dispatch()?;
        let plan = framing::plan(
            pending.head_only,
            head.status,
            line.declared(),
            pending.version_minor,
        );
        let persist = if plan.must_close {
            Persist::Close
        } else {
            self.persistence(&pending, terms.params, terms.close || body_left)
        };
        let body_from = self
            .out
            .push_stream_head(pool, head, plan, persist, terms.date);
        self.phase = Phase::Streaming {
            stream: StreamedAnswer::new(line, plan.framing, persist, open, body_from),
            gone: pending.gone.take(),
            progress: false,
            body_left,
        };
        Some(pending)
    }

    /// Takes what the stream's app sent into the output, framed. A body
    /// ended well moves the connection on (to the next request, or to
    /// closing; `close` forces closing); one ended abnormally closes it
    /// after what was queued, without a terminating chunk.
    pub fn pull_stream(&mut self, pool: &mut BufPool, close: bool) {
        let Phase::Streaming {
            stream,
            progress,
            body_left,
            ..
        } = &mut self.phase
        else {
            return;
        };
        let (progressed, ended) = stream.pull(&mut self.out, pool, close);
        *progress |= progressed;
        if let Some(persist) = ended {
            // The stream goes with its phase (closing its line).
            let unread = *body_left;
            self.answered(persist, unread);
            if let Some(tail) = &mut self.tail {
                tail.ends_at(self.out.queued());
                self.tail_written();
            }
        }
    }

    /// Tells the stream's app side how much output still waits (its
    /// queue's room, its drain task).
    pub fn report_stream(&self) {
        if let Phase::Streaming { stream, .. } = &self.phase {
            stream.report(self.out.len());
        }
    }
}

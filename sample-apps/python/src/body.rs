//! A request body streamed into `wsgi.input` instead of read whole by the
//! host: the host hands its pieces to a sink on a blocking-pool thread
//! (`read_body_on_pool`), which queues them here up to a window
//! ([`WINDOW`]) and waits while the window is full (the host reads no
//! more of the body meanwhile); the application's reads take them,
//! waiting with the interpreter released. Bodies with a Content-Length
//! stream; a chunked body is still read whole (the application is given
//! its CONTENT_LENGTH, which a chunked body has only once it is all in).

use crate::sink::{Head, Sink};
use crate::stream::Streaming;
use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use stoa_app_api::{BodyEnd, BodySink, Request, Responder};

/// Bytes queued for the application at most: past it the host's sink
/// waits, and the host reads no more from the client.
pub const WINDOW: usize = 256 << 10;

/// Longest wait for the body's next piece (or its end): past it a read
/// raises, and an answer waiting for the responder gives up (the host
/// answers 500 once the body ends). It frees the request's pool thread if
/// the pool is so busy that the body's own pool jobs cannot start.
pub const STALL: Duration = Duration::from_secs(30);

/// The body's next piece did not come within [`STALL`].
#[derive(Debug)]
pub struct Stalled;

/// The declared length of a body that streams: a Content-Length above 0
/// and no Transfer-Encoding.
pub fn streamed_length(request: &Request<'_>) -> Option<u64> {
    if request.header("transfer-encoding").is_some() {
        return None;
    }
    request
        .header_str("content-length")
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|n| *n > 0)
}

/// The pieces between the host's sink and `wsgi.input`.
pub struct Pipe {
    state: Mutex<PipeState>,
    moved: Condvar,
}

#[derive(Default)]
struct PipeState {
    pieces: VecDeque<Vec<u8>>,
    queued: usize,
    /// The body's end and the responder the host gave back with it.
    end: Option<(BodyEnd, Responder)>,
    ended: bool,
    /// The application answered: what is left of the body is dropped.
    abandoned: bool,
}

impl Pipe {
    pub fn new() -> Arc<Pipe> {
        Arc::new(Pipe {
            state: Mutex::new(PipeState::default()),
            moved: Condvar::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, PipeState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn wait<'a>(&self, state: MutexGuard<'a, PipeState>) -> MutexGuard<'a, PipeState> {
        self.moved.wait(state).unwrap_or_else(|p| p.into_inner())
    }

    /// The sink's side: queues `chunk`, first waiting while the window is
    /// full (dropped once the application has answered).
    fn push(&self, chunk: &[u8]) {
        let mut state = self.lock();
        while state.queued >= WINDOW && !state.abandoned {
            state = self.wait(state);
        }
        if !state.abandoned {
            state.queued += chunk.len();
            state.pieces.push_back(chunk.to_vec());
            self.moved.notify_all();
        }
    }

    fn end(&self, end: BodyEnd, responder: Responder) {
        let mut state = self.lock();
        state.end = Some((end, responder));
        state.ended = true;
        self.moved.notify_all();
    }

    /// Waits, at most until `deadline`, for `state` to move.
    fn wait_until<'a>(
        &self,
        state: MutexGuard<'a, PipeState>,
        deadline: Instant,
    ) -> Result<MutexGuard<'a, PipeState>, Stalled> {
        let left = deadline
            .checked_duration_since(Instant::now())
            .ok_or(Stalled)?;
        let (state, _) = self
            .moved
            .wait_timeout(state, left)
            .unwrap_or_else(|p| p.into_inner());
        Ok(state)
    }

    /// The application's side: the next piece, waiting for it (at most
    /// [`STALL`]); `None` once the body has ended (or broke: the
    /// application sees it short).
    pub fn next(&self) -> Result<Option<Vec<u8>>, Stalled> {
        let deadline = Instant::now() + STALL;
        let mut state = self.lock();
        loop {
            if let Some(piece) = state.pieces.pop_front() {
                state.queued -= piece.len();
                self.moved.notify_all();
                return Ok(Some(piece));
            }
            if state.ended {
                return Ok(None);
            }
            state = self.wait_until(state, deadline)?;
        }
    }

    /// The application has answered: the rest of the body is dropped as
    /// it comes, and the responder waited for.
    fn responder(&self) -> Option<Responder> {
        let mut state = self.lock();
        state.abandoned = true;
        state.pieces.clear();
        state.queued = 0;
        self.moved.notify_all();
        let deadline = Instant::now() + STALL;
        while !state.ended {
            state = match self.wait_until(state, deadline) {
                Ok(state) => state,
                Err(Stalled) => {
                    stoa_app_api::log::warn!(
                        "a streamed request body did not end within {}s of the answer; \
                         the answer is dropped",
                        STALL.as_secs()
                    );
                    return None;
                }
            };
        }
        state.end.take().map(|(_, responder)| responder)
    }
}

/// The host's sink, on a pool thread.
pub struct PipeSink(pub Arc<Pipe>);

impl BodySink for PipeSink {
    fn data(&mut self, chunk: &[u8]) {
        self.0.push(chunk);
    }

    fn end(self, end: BodyEnd, responder: Responder) {
        self.0.end(end, responder);
    }
}

/// The response's sink of a request whose body streams: the responder
/// comes back with the body's end, so the response waits for it (the
/// rest of a body the application did not read is dropped meanwhile).
pub struct AfterBody {
    pipe: Arc<Pipe>,
    head_only: bool,
    inner: Option<Box<dyn Sink>>,
}

impl AfterBody {
    pub fn new(pipe: Arc<Pipe>, head_only: bool) -> Self {
        AfterBody {
            pipe,
            head_only,
            inner: None,
        }
    }

    /// The response's own sink, once the body has ended (`None`: the host
    /// gave no responder back; there is nobody to answer).
    fn inner(&mut self) -> Option<&mut Box<dyn Sink>> {
        if self.inner.is_none() {
            let responder = self.pipe.responder()?;
            self.inner = Some(Box::new(Streaming::new(responder, self.head_only)));
        }
        self.inner.as_mut()
    }
}

impl Sink for AfterBody {
    fn start(&mut self, head: Head, whole: bool) {
        if let Some(inner) = self.inner() {
            inner.start(head, whole);
        }
    }

    fn write(&mut self, chunk: &[u8]) -> bool {
        self.inner().is_some_and(|inner| inner.write(chunk))
    }

    fn calls_host(&self) -> bool {
        true
    }

    fn finish(mut self: Box<Self>) {
        if self.inner().is_some() {
            if let Some(inner) = self.inner.take() {
                inner.finish();
            }
        }
    }

    fn abort(mut self: Box<Self>, why: &str) {
        if self.inner().is_some() {
            if let Some(inner) = self.inner.take() {
                inner.abort(why);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_pass_in_order_and_the_end_closes_the_pipe() {
        let pipe = Pipe::new();
        let feeder = {
            let pipe = pipe.clone();
            std::thread::spawn(move || {
                // More than the window: the pushes wait for the reads.
                for i in 0..8u8 {
                    pipe.push(&vec![i; WINDOW / 2]);
                }
                pipe.lock().ended = true;
                pipe.moved.notify_all();
            })
        };
        let mut got = Vec::new();
        while let Some(piece) = pipe.next().expect("no stall") {
            assert!(pipe.lock().queued <= WINDOW);
            got.push(piece[0]);
        }
        feeder.join().expect("the feeder");
        assert_eq!(got, (0..8).collect::<Vec<u8>>());
    }
}

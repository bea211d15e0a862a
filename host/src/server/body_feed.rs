//! A request body streamed to its app: the app's sink and the responder
//! handed back to it with the end. Fed in order from the connection's read
//! buffer, on the loop or (`read_body_on_pool`) on a blocking-pool thread;
//! the connection reads no more while a sink on the loop runs, while a
//! pool sink has a piece it has not finished, and while its buffer holds a
//! window of body bytes (the backpressure on the socket): the pieces
//! waiting for the pool are the window's bytes, not more.

use crate::apps::pool::{Job, Pool};
use crate::http::reader::RequestReader;
use crate::http::HttpError;
use crate::inbox::Inbox;
use crate::poller::Token;
use std::sync::{Arc, Mutex, MutexGuard};
use stoa_app_api::abi::{BodySinkBox, ResponderBox, BODY_BROKEN, BODY_COMPLETE, BODY_TOO_LARGE};

/// The app's end of a streamed body. Dropped before the end (the
/// connection went, a timeout), it tells the app the body broke.
pub struct BodyLink {
    side: Side,
}

enum Side {
    /// Called on the loop, as each piece is read.
    Loop(Option<(BodySinkBox, ResponderBox)>),
    /// Called on a pool thread.
    Pool(Arc<PoolSink>),
}

/// Where the connection's loop is told a pool sink took its piece.
pub struct LoopAddr {
    pub inbox: Arc<Inbox>,
    pub token: Token,
    pub id: u64,
}

/// A sink called on the blocking pool: the piece the loop handed it and
/// not yet taken, its end once known; at most one pool job drains it.
struct PoolSink {
    state: Mutex<PoolState>,
    pool: Arc<Pool>,
    addr: LoopAddr,
}

struct PoolState {
    /// Bytes handed over by the loop, not yet given to the sink.
    piece: Vec<u8>,
    /// A job is queued or running: the loop hands nothing more.
    busy: bool,
    end: Option<u8>,
    /// With the job while it runs.
    sink: Option<BodySinkBox>,
    responder: Option<ResponderBox>,
}

impl PoolSink {
    fn lock(&self) -> MutexGuard<'_, PoolState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts a job for what waits (the caller has set `busy`). A full
    /// pool does not lose the body: the piece is given here, on the loop.
    fn schedule(self: &Arc<Self>) {
        let me = self.clone();
        if self
            .pool
            .submit(Job::task(Box::new(move || me.drain())))
            .is_err()
        {
            log::debug!(
                "the blocking pool is full: a streamed body's piece goes to its sink on the loop"
            );
            self.drain();
        }
    }

    /// Gives the sink its pieces, then its end if it came; else tells the
    /// loop it may read on.
    fn drain(&self) {
        let mut state = self.lock();
        loop {
            let piece = std::mem::take(&mut state.piece);
            if !piece.is_empty() {
                let mut sink = state.sink.take();
                drop(state);
                if let Some(sink) = &mut sink {
                    sink.data(abi_stable::std_types::RSlice::from_slice(&piece));
                }
                state = self.lock();
                state.sink = sink;
                if state.piece.capacity() == 0 {
                    // The buffer goes back for the loop's next piece.
                    state.piece = piece;
                    state.piece.clear();
                }
                continue;
            }
            if let Some(outcome) = state.end {
                let sink = state.sink.take();
                let responder = state.responder.take();
                drop(state);
                if let (Some(sink), Some(responder)) = (sink, responder) {
                    sink.end(outcome, responder);
                }
                return;
            }
            state.busy = false;
            drop(state);
            let LoopAddr { inbox, token, id } = &self.addr;
            inbox.push_body_notice(*token, *id);
            return;
        }
    }

    /// Records the end (the first one) and gives it, after any piece.
    fn end(self: &Arc<Self>, outcome: u8) {
        let mut state = self.lock();
        if state.end.is_some() {
            return;
        }
        state.end = Some(outcome);
        let start = !std::mem::replace(&mut state.busy, true);
        drop(state);
        if start {
            self.schedule();
        }
    }
}

impl BodyLink {
    pub fn new(sink: BodySinkBox, responder: ResponderBox) -> Self {
        BodyLink {
            side: Side::Loop(Some((sink, responder))),
        }
    }

    /// A link whose sink is called on `pool`'s threads.
    pub fn on_pool(
        sink: BodySinkBox,
        responder: ResponderBox,
        pool: Arc<Pool>,
        addr: LoopAddr,
    ) -> Self {
        let state = PoolState {
            piece: Vec::new(),
            busy: false,
            end: None,
            sink: Some(sink),
            responder: Some(responder),
        };
        BodyLink {
            side: Side::Pool(Arc::new(PoolSink {
                state: Mutex::new(state),
                pool,
                addr,
            })),
        }
    }

    /// True while a pool sink has a piece it has not finished: the
    /// connection reads nothing more until it has (see `LoopAddr`).
    pub fn waits(&self) -> bool {
        match &self.side {
            Side::Loop(_) => false,
            Side::Pool(p) => p.lock().busy,
        }
    }

    /// Hands what `reader` holds of the body to the sink: whether any byte
    /// went, and the end (`BODY_*`) once the body has all come, broke, or
    /// the client closed (`read_closed`) before its end.
    pub fn feed(
        &mut self,
        reader: &mut RequestReader,
        read_closed: bool,
        peer: &str,
    ) -> (bool, Option<u8>) {
        match &mut self.side {
            Side::Loop(sink) => {
                let mut piece = Vec::new();
                take_body(reader, read_closed, peer, &mut piece, |piece| {
                    if let (Some((sink, _)), false) = (&mut *sink, piece.is_empty()) {
                        sink.data(abi_stable::std_types::RSlice::from_slice(piece));
                    }
                    piece.clear();
                })
            }
            Side::Pool(p) => {
                let mut state = p.lock();
                if state.busy {
                    return (false, None);
                }
                let (fed, outcome) = take_body(reader, read_closed, peer, &mut state.piece, |_| {});
                state.busy = fed;
                drop(state);
                if fed {
                    p.schedule();
                }
                (fed, outcome)
            }
        }
    }

    /// Hands `piece` (bytes of a body read whole elsewhere, an HTTP/2
    /// stream's) to the sink; false if a pool sink is still busy with the
    /// last (the piece is not taken: try again on its notice).
    pub fn give(&mut self, piece: &[u8]) -> bool {
        match &mut self.side {
            Side::Loop(sink) => {
                if let (Some((sink, _)), false) = (&mut *sink, piece.is_empty()) {
                    sink.data(abi_stable::std_types::RSlice::from_slice(piece));
                }
                true
            }
            Side::Pool(p) => {
                let mut state = p.lock();
                if state.busy {
                    return false;
                }
                if piece.is_empty() {
                    return true;
                }
                state.piece.clear();
                state.piece.extend_from_slice(piece);
                state.busy = true;
                drop(state);
                p.schedule();
                true
            }
        }
    }

    /// Ends the body (`BODY_*`); the app answers with the responder.
    pub fn end(mut self, outcome: u8) {
        self.finish(outcome);
    }

    fn finish(&mut self, outcome: u8) {
        match &mut self.side {
            Side::Loop(sink) => {
                if let Some((sink, responder)) = sink.take() {
                    sink.end(outcome, responder);
                }
            }
            Side::Pool(p) => p.end(outcome),
        }
    }

    /// Ends a body that had all come before the sink was given (a request
    /// the app did not declare, or one without a body).
    pub fn complete_now(self) {
        self.end(BODY_COMPLETE);
    }
}

/// Takes the body's buffered bytes from `reader` into `piece`, calling
/// `give` after each read of them; whether any byte came, and the end.
fn take_body(
    reader: &mut RequestReader,
    read_closed: bool,
    peer: &str,
    piece: &mut Vec<u8>,
    mut give: impl FnMut(&mut Vec<u8>),
) -> (bool, Option<u8>) {
    let mut fed = false;
    loop {
        let before = piece.len();
        match reader.body_piece(piece) {
            Ok(done) => {
                let got = piece.len() > before;
                fed |= got;
                give(piece);
                if done {
                    return (fed, Some(BODY_COMPLETE));
                }
                if !got {
                    return (fed, read_closed.then_some(BODY_BROKEN));
                }
            }
            Err(e) => {
                log::debug!("{peer}: streamed body: {e}");
                let outcome = match e {
                    HttpError::BodyTooLarge => BODY_TOO_LARGE,
                    _ => BODY_BROKEN,
                };
                return (fed, Some(outcome));
            }
        }
    }
}

impl Drop for BodyLink {
    fn drop(&mut self) {
        // A pool sink's first end wins; a loop sink's is taken once.
        self.finish(BODY_BROKEN);
    }
}

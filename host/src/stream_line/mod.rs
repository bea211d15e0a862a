//! A streamed response's line between its app and its event loop.
//!
//! The app holds a `HostStream` (the ABI's `RawStream`), usable from any
//! thread; the loop's connection holds the other end. They share one
//! `StreamLine`: a small locked queue of chunks the app sent and the loop
//! has not taken yet, plus what the connection's output still holds. A
//! send is refused (`SEND_WOULD_BLOCK`) while that total is at or over the
//! bound (`--stream-queue`), so a slow client costs the host at most the
//! bound and one chunk. The first chunk after the loop last took the queue
//! posts a notice (token, request id) to the loop's inbox, which wakes its
//! poller from another thread; the loop takes the chunks, frames and
//! writes them and reports what is left (`report`), which runs the app's
//! drain task on the loop and wakes blocking senders once under the bound.
//! When the connection goes, `close` does the same, and every later send
//! answers `SEND_CLOSED`.
//!
//! Once the loop has the stream, its queue also holds its bytes of the
//! host-wide budget (`--max-buffered`): a send that would take the budget
//! past its limit is refused as a full queue is, while the line holds
//! anything (whose draining wakes the app again); into an empty line one
//! chunk always goes, counted past the limit if need be, so an app is
//! never left waiting for a drain that cannot come.

use crate::budget::Reservation;
use crate::poller::Token;
use abi_stable::std_types::RSlice;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use stoa_app_api::abi::{RawStream, TaskBox, SEND_CLOSED, SEND_SENT, SEND_WOULD_BLOCK};

/// How the app ended its stream, as the loop sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// More may come.
    Open,
    /// `finish`ed well: the terminating chunk goes out.
    Finished,
    /// Dropped unfinished, or the declared length not kept: the connection
    /// closes after what was queued, with no terminating chunk.
    Aborted,
}

/// What the loop takes from the line at once.
pub struct Taken {
    pub chunks: Vec<Vec<u8>>,
    pub end: End,
}

#[derive(Default)]
struct LineState {
    chunks: Vec<Vec<u8>>,
    chunk_bytes: usize,
    /// Bytes the connection's output still held at the last report, plus
    /// what the loop took since.
    out_bytes: usize,
    /// The declared `Content-Length`, and the body bytes taken so far.
    declared: Option<u64>,
    sent: u64,
    end: Option<End>,
    /// The connection is gone (or ended the stream).
    closed: bool,
    drain_task: Option<TaskBox>,
    /// A notice is in the loop's inbox and not yet taken.
    posted: bool,
    /// What the queue holds of the budget, once the loop attached it.
    hold: Option<Reservation>,
    /// The last send was refused for the budget: room comes with the next
    /// report (the line holds bytes), not at once.
    over_budget: bool,
}

impl LineState {
    fn queued(&self) -> usize {
        self.chunk_bytes + self.out_bytes
    }
}

/// What a line needs of its loop's inbox (`inbox::Inbox` is the one
/// kind): a trait, so that the inbox, which carries a stream's line to the
/// loop, is not named back here.
pub trait LinePost: Send + Sync {
    /// Tells the loop that connection `token`'s request `id` has a line
    /// to take from.
    fn post_notice(&self, token: Token, id: u64);
    /// Runs `task` on the loop (at once), counted to app `slot`.
    fn post_task(&self, slot: usize, task: TaskBox);
    /// True on the thread running this inbox's loop (which cannot wait for
    /// itself to drain the line).
    fn is_current(&self) -> bool;
}

/// Where the line's notices and drain tasks go: the connection's loop.
pub struct LineAddr {
    pub token: Token,
    pub id: u64,
    pub inbox: Arc<dyn LinePost>,
    /// The app's counters slot (names it in the loop's timer accounting).
    pub slot: usize,
    /// The app's name, for logs.
    pub app: Arc<str>,
}

/// The shared queue of one streamed response (see the module's notes).
pub struct StreamLine {
    state: Mutex<LineState>,
    room: Condvar,
    bound: usize,
    send_timeout: Duration,
    addr: LineAddr,
}

impl StreamLine {
    /// A line queueing at most `bound` bytes; `declared` is the app's
    /// `Content-Length`, if it gave one, and `head_body` the bytes of the
    /// body that went with the head.
    pub fn new(
        addr: LineAddr,
        bound: usize,
        send_timeout: Duration,
        declared: Option<u64>,
        head_body: u64,
    ) -> Arc<Self> {
        Arc::new(StreamLine {
            state: Mutex::new(LineState {
                declared,
                sent: head_body,
                end: Some(End::Open),
                ..LineState::default()
            }),
            room: Condvar::new(),
            bound,
            send_timeout,
            addr,
        })
    }

    /// The connection and request this line belongs to.
    pub fn addr(&self) -> (Token, u64) {
        (self.addr.token, self.addr.id)
    }

    /// The app's declared `Content-Length`, if any.
    pub fn declared(&self) -> Option<u64> {
        self.lock().declared
    }

    fn lock(&self) -> MutexGuard<'_, LineState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Tells the loop there is something to take, unless a notice is
    /// already on its way; call with the lock released.
    fn post(&self, needed: bool) {
        if needed {
            self.addr.inbox.post_notice(self.addr.token, self.addr.id);
        }
    }

    /// Marks a notice as needed; true if one must be pushed now.
    fn mark(state: &mut LineState) -> bool {
        !std::mem::replace(&mut state.posted, true)
    }

    /// Queues `chunk` if there is room: `SEND_*`.
    fn offer(&self, state: &mut LineState, chunk: &[u8]) -> (u8, bool) {
        if state.closed || state.end != Some(End::Open) {
            return (SEND_CLOSED, false);
        }
        if let Some(declared) = state.declared {
            if state.sent + chunk.len() as u64 > declared {
                log::warn!(
                    "app {} sent more than its declared Content-Length ({declared}); ending the response",
                    self.addr.app
                );
                state.end = Some(End::Aborted);
                return (SEND_CLOSED, Self::mark(state));
            }
        }
        if chunk.is_empty() {
            return (SEND_SENT, false);
        }
        let queued = state.queued();
        if queued >= self.bound {
            return (SEND_WOULD_BLOCK, false);
        }
        if let Some(hold) = &mut state.hold {
            let want = queued.saturating_add(chunk.len());
            if queued == 0 {
                hold.force(want);
            } else if !hold.set(want) {
                state.over_budget = true;
                return (SEND_WOULD_BLOCK, false);
            }
        }
        state.chunks.push(chunk.to_vec());
        state.chunk_bytes += chunk.len();
        state.sent += chunk.len() as u64;
        (SEND_SENT, Self::mark(state))
    }

    /// `send`: queues or refuses at once.
    pub fn send(&self, chunk: &[u8]) -> u8 {
        let (code, post) = self.offer(&mut self.lock(), chunk);
        self.post(post);
        code
    }

    /// `send_blocking`: waits for room up to the send timeout. On the
    /// loop's own thread it cannot wait (the loop is what drains).
    pub fn send_blocking(&self, chunk: &[u8]) -> u8 {
        if self.on_own_loop() {
            log::warn!(
                "app {} called send_blocking on an event loop; it does not wait there (use send and on_drain)",
                self.addr.app
            );
            return self.send(chunk);
        }
        let until = Instant::now() + self.send_timeout;
        let mut state = self.lock();
        loop {
            let (code, post) = self.offer(&mut state, chunk);
            let now = Instant::now();
            if code != SEND_WOULD_BLOCK || now >= until {
                drop(state);
                self.post(post);
                return code;
            }
            state = match self.room.wait_timeout(state, until - now) {
                Ok((guard, _)) => guard,
                Err(p) => p.into_inner().0,
            };
        }
    }

    fn on_own_loop(&self) -> bool {
        self.addr.inbox.is_current()
    }

    /// `on_drain`: runs `task` on the loop once there is room (now, if
    /// there is), or once the line closes.
    pub fn on_drain(&self, task: TaskBox) {
        let mut state = self.lock();
        if state.closed || (state.queued() < self.bound && !state.over_budget) {
            drop(state);
            self.run_on_loop(task);
        } else {
            // A task set earlier and not run is replaced (and dropped).
            state.drain_task = Some(task);
        }
    }

    fn run_on_loop(&self, task: TaskBox) {
        self.addr.inbox.post_task(self.addr.slot, task);
    }

    /// `finish`: ends the body; `SEND_CLOSED` when it cannot end well.
    pub fn finish(&self) -> u8 {
        let mut state = self.lock();
        if state.closed || state.end != Some(End::Open) {
            return SEND_CLOSED;
        }
        let short = state.declared.filter(|d| *d != state.sent);
        let code = match short {
            Some(declared) => {
                log::warn!(
                    "app {} finished after {} of its declared {declared} bytes; closing the connection",
                    self.addr.app,
                    state.sent
                );
                state.end = Some(End::Aborted);
                SEND_CLOSED
            }
            None => {
                state.end = Some(End::Finished);
                SEND_SENT
            }
        };
        let post = Self::mark(&mut state);
        drop(state);
        self.post(post);
        code
    }

    /// The sender was dropped: an unfinished stream ends abnormally.
    fn abandon(&self) {
        let mut state = self.lock();
        if state.closed || state.end != Some(End::Open) {
            return;
        }
        log::debug!(
            "app {} dropped the stream of request {} unfinished; closing the connection",
            self.addr.app,
            self.addr.id
        );
        state.end = Some(End::Aborted);
        let post = Self::mark(&mut state);
        drop(state);
        self.post(post);
    }

    /// The loop takes what the app sent (its bytes now count as output).
    pub fn take(&self) -> Taken {
        let mut state = self.lock();
        state.posted = false;
        state.out_bytes += std::mem::take(&mut state.chunk_bytes);
        Taken {
            chunks: std::mem::take(&mut state.chunks),
            end: state.end.unwrap_or(End::Aborted),
        }
    }

    /// The loop attaches the budget's reservation when it takes the
    /// stream; what is queued already counts from now.
    pub fn attach(&self, mut hold: Reservation) {
        let mut state = self.lock();
        hold.force(state.queued());
        state.hold = Some(hold);
    }

    /// The loop reports the bytes its connection still has to write; under
    /// the bound, the drain task runs and blocking senders wake.
    pub fn report(&self, out_len: usize) {
        let mut state = self.lock();
        state.out_bytes = out_len;
        let queued = state.queued();
        if let Some(hold) = &mut state.hold {
            hold.force(queued);
        }
        state.over_budget = false;
        if state.queued() >= self.bound {
            return;
        }
        let task = state.drain_task.take();
        drop(state);
        self.room.notify_all();
        if let Some(task) = task {
            self.run_on_loop(task);
        }
    }

    /// The connection is gone (or ended the stream): later sends answer
    /// `SEND_CLOSED`, the drain task runs, blocking senders wake.
    pub fn close(&self) {
        let mut state = self.lock();
        state.closed = true;
        state.chunks.clear();
        // Its bytes go back (the connection's output is gone with it).
        state.hold = None;
        let task = state.drain_task.take();
        drop(state);
        self.room.notify_all();
        if let Some(task) = task {
            self.run_on_loop(task);
        }
    }
}

/// The app's end of a line (the ABI's `RawStream`).
pub struct HostStream {
    line: Arc<StreamLine>,
    finished: bool,
}

impl HostStream {
    pub fn new(line: Arc<StreamLine>) -> Self {
        HostStream {
            line,
            finished: false,
        }
    }
}

impl RawStream for HostStream {
    fn send(&mut self, chunk: RSlice<'_, u8>) -> u8 {
        self.line.send(chunk.as_slice())
    }

    fn send_blocking(&mut self, chunk: RSlice<'_, u8>) -> u8 {
        self.line.send_blocking(chunk.as_slice())
    }

    fn on_drain(&mut self, task: TaskBox) {
        self.line.on_drain(task);
    }

    fn finish(mut self) -> u8 {
        self.finished = true;
        self.line.finish()
    }
}

impl Drop for HostStream {
    fn drop(&mut self) {
        if !self.finished {
            self.line.abandon();
        }
    }
}

#[cfg(test)]
mod tests;

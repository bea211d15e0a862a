//! The host's side of the responder: how an app's answer gets back to the
//! event loop that owns the connection.
//!
//! An answer given during `handle` on the loop's own thread is taken from a
//! thread-local slot (no lock, no wake-up). An answer from elsewhere, or
//! later, goes into the loop's completion queue and wakes its poller. The
//! loop matches each completion against the connection's pending request id,
//! so an answer for a connection that has gone (or whose slab key was
//! reused) is dropped safely.

use crate::http::response::host_response;
use crate::poller::{Token, Wake};
use abi_stable::sabi_trait::TD_Opaque;
use std::cell::RefCell;
use std::sync::{Arc, Mutex};
use stoa_app_api::abi::{RawResponder, RawResponder_TO, ResponderBox};
use stoa_app_api::Response;

/// One finished request, for the loop to write out.
pub struct Completion {
    pub token: Token,
    pub id: u64,
    pub response: Response,
}

/// Completions pushed by other threads, drained by one event loop.
pub struct CompletionQueue {
    items: Mutex<Vec<Completion>>,
    waker: Arc<dyn Wake>,
}

impl CompletionQueue {
    pub fn new(waker: Arc<dyn Wake>) -> Self {
        CompletionQueue {
            items: Mutex::new(Vec::new()),
            waker,
        }
    }

    /// Queues a completion; wakes the loop when the queue was empty (a
    /// non-empty queue already has a wake-up on its way).
    pub fn push(&self, completion: Completion) {
        let was_empty = {
            let mut items = self.items.lock().unwrap_or_else(|p| p.into_inner());
            items.push(completion);
            items.len() == 1
        };
        if was_empty {
            if let Err(e) = self.waker.wake() {
                log::error!("could not wake the event loop: {e}");
            }
        }
    }

    /// Moves every queued completion into `into`.
    pub fn drain(&self, into: &mut Vec<Completion>) {
        let mut items = self.items.lock().unwrap_or_else(|p| p.into_inner());
        std::mem::swap(&mut *items, into);
    }
}

/// The request being dispatched on this thread, and its answer if given inline.
struct Inline {
    queue: usize,
    id: u64,
    response: Option<Response>,
}

thread_local! {
    static INLINE: RefCell<Inline> = const { RefCell::new(Inline { queue: 0, id: 0, response: None }) };
}

fn queue_key(queue: &Arc<CompletionQueue>) -> usize {
    Arc::as_ptr(queue) as usize
}

/// Marks request `id` of `queue` as being dispatched on this thread.
pub fn begin_inline(queue: &Arc<CompletionQueue>, id: u64) {
    INLINE.with(|s| {
        let mut s = s.borrow_mut();
        s.queue = queue_key(queue);
        s.id = id;
        s.response = None;
    });
}

/// Ends the dispatch; returns the answer if the app gave it inline.
pub fn end_inline() -> Option<Response> {
    INLINE.with(|s| {
        let mut s = s.borrow_mut();
        s.queue = 0;
        s.id = 0;
        s.response.take()
    })
}

struct HostResponder {
    token: Token,
    id: u64,
    queue: Arc<CompletionQueue>,
    answered: bool,
}

impl HostResponder {
    fn deliver(&self, response: Response) {
        let key = queue_key(&self.queue);
        let mut slot = Some(response);
        // A thread being torn down has no slot: fall through to the queue.
        let _ = INLINE.try_with(|s| {
            let mut s = s.borrow_mut();
            if s.queue == key && s.id == self.id && s.response.is_none() {
                s.response = slot.take();
            }
        });
        if let Some(response) = slot {
            self.queue.push(Completion {
                token: self.token,
                id: self.id,
                response,
            });
        }
    }
}

impl RawResponder for HostResponder {
    fn respond(mut self, response: Response) {
        self.answered = true;
        self.deliver(response);
    }
}

impl Drop for HostResponder {
    fn drop(&mut self) {
        if !self.answered {
            self.answered = true;
            log::debug!("request {} dropped its responder unanswered", self.id);
            self.deliver(host_response(500, "the app did not answer"));
        }
    }
}

/// Makes the responder handed to an app for request `id` on connection `token`.
pub fn responder(token: Token, id: u64, queue: &Arc<CompletionQueue>) -> ResponderBox {
    RawResponder_TO::from_value(
        HostResponder {
            token,
            id,
            queue: queue.clone(),
            answered: false,
        },
        TD_Opaque,
    )
}

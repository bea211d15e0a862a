//! The host's side of the responder, and the loop's inbox: how an app's
//! answer (or a new timer) gets back to the event loop that owns it.
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
use std::time::Instant;
use stoa_app_api::abi::{RawResponder, RawResponder_TO, ResponderBox, TaskBox};
use stoa_app_api::Response;

/// One finished request, for the loop to write out.
pub struct Completion {
    pub token: Token,
    pub id: u64,
    pub response: Response,
}

/// What other threads (and app callbacks) hand to one event loop.
#[derive(Default)]
pub struct InboxItems {
    pub completions: Vec<Completion>,
    /// Each with the slot of the app that set it, if known.
    pub timers: Vec<(Instant, Option<usize>, TaskBox)>,
}

impl InboxItems {
    fn is_empty(&self) -> bool {
        self.completions.is_empty() && self.timers.is_empty()
    }
}

/// An event loop's inbox: completions and new timers, pushed from any
/// thread, drained by the loop each turn.
pub struct Inbox {
    items: Mutex<InboxItems>,
    waker: Arc<dyn Wake>,
}

thread_local! {
    /// The inbox of the loop running on this thread, if any.
    static CURRENT: RefCell<Option<Arc<Inbox>>> = const { RefCell::new(None) };
}

impl Inbox {
    pub fn new(waker: Arc<dyn Wake>) -> Self {
        Inbox {
            items: Mutex::new(InboxItems::default()),
            waker,
        }
    }

    /// Marks this thread as the one running `inbox`'s loop.
    pub fn enter(inbox: &Arc<Inbox>) {
        CURRENT.with(|c| *c.borrow_mut() = Some(inbox.clone()));
    }

    /// The inbox of the loop running on this thread.
    pub fn current() -> Option<Arc<Inbox>> {
        CURRENT.try_with(|c| c.borrow().clone()).ok().flatten()
    }

    fn push(self: &Arc<Self>, add: impl FnOnce(&mut InboxItems)) {
        let was_empty = {
            let mut items = self.items.lock().unwrap_or_else(|p| p.into_inner());
            let was_empty = items.is_empty();
            add(&mut items);
            was_empty
        };
        // A non-empty inbox already has a wake-up on its way; the loop's own
        // thread drains the inbox before it waits again.
        let on_loop = CURRENT
            .try_with(|c| {
                c.borrow()
                    .as_deref()
                    .is_some_and(|i| std::ptr::eq(i, &**self))
            })
            .unwrap_or(false);
        if was_empty && !on_loop {
            if let Err(e) = self.waker.wake() {
                log::error!("could not wake the event loop: {e}");
            }
        }
    }

    /// Queues a finished request.
    pub fn push_completion(self: &Arc<Self>, completion: Completion) {
        self.push(|items| items.completions.push(completion));
    }

    /// Queues a timer.
    pub fn push_timer(self: &Arc<Self>, at: Instant, app: Option<usize>, task: TaskBox) {
        self.push(|items| items.timers.push((at, app, task)));
    }

    /// Moves everything queued into `into` (which should be empty).
    pub fn drain(&self, into: &mut InboxItems) {
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

fn queue_key(queue: &Inbox) -> usize {
    queue as *const Inbox as usize
}

/// Marks request `id` of `queue` as being dispatched on this thread.
pub fn begin_inline(queue: &Arc<Inbox>, id: u64) {
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
    queue: Arc<Inbox>,
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
            self.queue.push_completion(Completion {
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
pub fn responder(token: Token, id: u64, queue: &Arc<Inbox>) -> ResponderBox {
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

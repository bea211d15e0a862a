//! The loop's inbox: how an app's answer (or a new timer) gets back to the
//! event loop that owns the connection, from any thread. Completions and
//! timers are pushed by responders, worker threads and plugin services; the
//! loop drains them each turn. A push from another thread wakes the loop's
//! poller; a push from the loop's own thread does not need to. Streamed
//! responses post their notices here too (`stream_line`).

use crate::poller::{Token, Wake};
use crate::stream_line::StreamLine;
use std::cell::RefCell;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use stoa_app_api::abi::{BodySinkBox, ResponderBox, TaskBox, WsSessionBox};
use stoa_app_api::Response;

/// One finished request, for the loop to write out.
pub struct Completion {
    pub token: Token,
    pub id: u64,
    pub answer: Answer,
}

/// How an app answered a request.
pub enum Answer {
    Response(Response),
    /// It accepted the request's WebSocket handshake.
    Upgrade(Box<Upgrade>),
}

/// An accepted WebSocket handshake, for the loop to switch to.
pub struct Upgrade {
    /// The `Sec-WebSocket-Accept` value.
    pub accept: Box<str>,
    pub session: WsSessionBox,
    /// The app's counters slot, which names it.
    pub slot: usize,
    /// The app generation the session's code belongs to: an open
    /// WebSocket holds it, as a request in flight does.
    pub generation: Arc<dyn Send + Sync>,
}

/// A streamed response started (`start`), or its app sent more or ended it.
pub struct StreamNotice {
    pub token: Token,
    pub id: u64,
    pub start: Option<StreamStart>,
}

/// The head of a streamed response and the line its body comes through.
pub struct StreamStart {
    pub head: Response,
    pub line: Arc<StreamLine>,
}

/// An app takes a streamed request body: the sink it is handed to, and the
/// responder to give back with its end.
pub struct BodyAttach {
    pub token: Token,
    pub id: u64,
    pub sink: BodySinkBox,
    pub responder: ResponderBox,
}

/// What other threads (and app callbacks) hand to one event loop.
#[derive(Default)]
pub struct InboxItems {
    pub completions: Vec<Completion>,
    /// In the order pushed: a stream's start comes before its chunks.
    pub streams: Vec<StreamNotice>,
    pub bodies: Vec<BodyAttach>,
    /// Each with the slot of the app that set it, if known.
    pub timers: Vec<(Instant, Option<usize>, TaskBox)>,
    /// WebSockets whose app queued messages: (connection, WebSocket id).
    pub ws_notices: Vec<(Token, u64)>,
}

impl InboxItems {
    fn is_empty(&self) -> bool {
        self.completions.is_empty()
            && self.timers.is_empty()
            && self.streams.is_empty()
            && self.bodies.is_empty()
            && self.ws_notices.is_empty()
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

    /// Queues a stream notice (see `stream_line`).
    pub fn push_stream(self: &Arc<Self>, token: Token, id: u64, start: Option<StreamStart>) {
        self.push(|items| items.streams.push(StreamNotice { token, id, start }));
    }

    /// Queues an app's sink for its request's streamed body.
    pub fn push_body(self: &Arc<Self>, attach: BodyAttach) {
        self.push(|items| items.bodies.push(attach));
    }

    /// Queues a timer.
    pub fn push_timer(self: &Arc<Self>, at: Instant, app: Option<usize>, task: TaskBox) {
        self.push(|items| items.timers.push((at, app, task)));
    }

    /// True if something waits (pushed by the loop's own thread while it
    /// applied the inbox: its wait must not block then).
    pub fn has_items(&self) -> bool {
        !self
            .items
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_empty()
    }

    /// Tells the loop a WebSocket's app queued messages.
    pub fn push_ws_notice(self: &Arc<Self>, token: Token, id: u64) {
        self.push(|items| items.ws_notices.push((token, id)));
    }

    /// Moves everything queued into `into` (which should be empty).
    pub fn drain(&self, into: &mut InboxItems) {
        let mut items = self.items.lock().unwrap_or_else(|p| p.into_inner());
        std::mem::swap(&mut *items, into);
    }
}

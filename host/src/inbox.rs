//! The loop's inbox: how an app's answer (or a new timer) gets back to the
//! event loop that owns the connection, from any thread. Completions and
//! timers are pushed by responders, worker threads and plugin services; the
//! loop drains them each turn. A push from another thread wakes the loop's
//! poller; a push from the loop's own thread does not need to. Streamed
//! responses post their notices here too (`stream_line`).

use crate::poller::{Token, Wake};
use crate::stream_line::{LinePost, StreamLine};
use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
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
    /// A response, and constant headers to write after its own (always
    /// empty in a completion: an answer queued from off the loop has them
    /// copied in).
    Response(Response, crate::http::response::Fixed),
    /// It accepted the request's WebSocket handshake.
    Upgrade(Box<Upgrade>),
}

/// An accepted WebSocket handshake, for the loop to switch to.
pub struct Upgrade {
    /// The `Sec-WebSocket-Accept` value.
    pub accept: Box<str>,
    /// The app's own headers for the `101`, checked
    /// (`RawResponder::accept_websocket_with`).
    pub headers: Vec<stoa_app_api::Header>,
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
    /// The sink is called on the blocking pool (`read_body_on_pool`).
    pub on_pool: bool,
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
    /// Streamed bodies whose pool sink took its pieces: (connection,
    /// request id); the connection reads on.
    pub body_notices: Vec<(Token, u64)>,
    /// Apps' tasks for requests abandoned before their answer
    /// (`RawResponder::on_gone`), applied before the answers.
    pub gone: Vec<GoneTask>,
}

/// An app's task for request `id` on connection `token`, should it be
/// abandoned (`RawResponder::on_gone`); `slot` names the app.
pub struct GoneTask {
    pub token: Token,
    pub id: u64,
    pub slot: usize,
    pub task: TaskBox,
}

impl InboxItems {
    fn is_empty(&self) -> bool {
        self.completions.is_empty()
            && self.timers.is_empty()
            && self.streams.is_empty()
            && self.bodies.is_empty()
            && self.ws_notices.is_empty()
            && self.body_notices.is_empty()
            && self.gone.is_empty()
    }
}

/// An event loop's inbox: completions and new timers, pushed from any
/// thread, drained by the loop each turn.
///
/// **The pending flag.** Most turns find the inbox empty, so the loop
/// looks at `pending` (one atomic swap) instead of taking the lock. The
/// protocol, and why no push is left behind:
///
/// - a push adds its item under the lock, then sets `pending` (Release),
///   then wakes the poller if the inbox was empty and it is not the loop's
///   own thread;
/// - the loop clears `pending` (a swap, Acquire) *before* it takes the
///   lock and moves the items out, and skips the lock when it was clear.
///
/// Every push sets `pending` after its item is in, so a swap that reads
/// that store is followed by a lock that finds the item (or finds it
/// already moved out by an earlier drain). A swap that does not read it
/// precedes the store, which leaves `pending` set for the next turn; the
/// loop reaches that turn because the push that found the inbox empty
/// wakes it (a push that found it non-empty follows one that did, and
/// pushes from the loop's own thread happen before its next drain). The
/// two wrong orders lose an item with nothing left to wake the loop:
/// clearing `pending` after the drain (a push between the drain and the
/// clear is wiped), or setting it before the item is in (a drain between
/// the two consumes the flag and finds nothing). `tests::stress` fails on
/// either.
pub struct Inbox {
    items: Mutex<InboxItems>,
    pending: AtomicBool,
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
            pending: AtomicBool::new(false),
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

    fn push(&self, add: impl FnOnce(&mut InboxItems)) {
        let was_empty = {
            let mut items = self.items.lock().unwrap_or_else(|p| p.into_inner());
            let was_empty = items.is_empty();
            add(&mut items);
            was_empty
        };
        step();
        self.pending.store(true, Ordering::Release);
        step();
        // A non-empty inbox already has a wake-up on its way; the loop's own
        // thread drains the inbox before it waits again.
        let on_loop = CURRENT
            .try_with(|c| c.borrow().as_deref().is_some_and(|i| std::ptr::eq(i, self)))
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

    /// Queues an app's task for a request abandoned before its answer.
    pub fn push_gone(self: &Arc<Self>, gone: GoneTask) {
        self.push(|items| items.gone.push(gone));
    }

    /// Tells the loop a pool sink took the pieces queued for it.
    pub fn push_body_notice(self: &Arc<Self>, token: Token, id: u64) {
        self.push(|items| items.body_notices.push((token, id)));
    }

    /// Queues a timer.
    pub fn push_timer(self: &Arc<Self>, at: Instant, app: Option<usize>, task: TaskBox) {
        self.push(|items| items.timers.push((at, app, task)));
    }

    /// True if something waits (pushed by the loop's own thread while it
    /// applied the inbox: its wait must not block then). Reads the pending
    /// flag, which every push sets after its item is in.
    pub fn has_items(&self) -> bool {
        self.pending.load(Ordering::Acquire)
    }

    /// Tells the loop a WebSocket's app queued messages.
    pub fn push_ws_notice(self: &Arc<Self>, token: Token, id: u64) {
        self.push(|items| items.ws_notices.push((token, id)));
    }

    /// Moves everything queued into `into` (which should be empty); false,
    /// without taking the lock, when nothing was pushed since the last
    /// drain (see the pending flag above).
    pub fn drain(&self, into: &mut InboxItems) -> bool {
        if !self.pending.swap(false, Ordering::Acquire) {
            return false;
        }
        step();
        let mut items = self.items.lock().unwrap_or_else(|p| p.into_inner());
        std::mem::swap(&mut *items, into);
        true
    }
}

/// A streamed response's line posts its notices and drain tasks here.
impl LinePost for Inbox {
    fn post_notice(&self, token: Token, id: u64) {
        self.push(|items| {
            items.streams.push(StreamNotice {
                token,
                id,
                start: None,
            })
        });
    }

    fn post_task(&self, slot: usize, task: TaskBox) {
        self.push(|items| items.timers.push((Instant::now(), Some(slot), task)));
    }

    fn is_current(&self) -> bool {
        Inbox::current().is_some_and(|i| std::ptr::eq(&*i, self))
    }
}

/// Between two moves of the pending-flag protocol: nothing, except in the
/// unit tests, where a thread sometimes yields here so that the stress test
/// sees the interleavings a wrong order would lose an item in.
#[inline(always)]
fn step() {
    #[cfg(test)]
    tests::jitter();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::poller::Token;
    use std::sync::Condvar;
    use std::time::Duration;
    use stoa_app_api::Response;

    thread_local! {
        static DICE: std::cell::Cell<u32> = const { std::cell::Cell::new(0x9e37_79b9) };
    }

    /// Yields one time in eight (an xorshift per thread), so the other
    /// threads run between two moves of the protocol.
    pub(super) fn jitter() {
        let roll = DICE.with(|d| {
            let mut x = d.get();
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            d.set(x);
            x
        });
        if roll.is_multiple_of(8) {
            std::thread::yield_now();
        }
    }

    /// A poller's wake-up as a counted semaphore: `wait` returns once per
    /// `wake` (or at the timeout, which only a lost wake-up reaches).
    #[derive(Default)]
    struct Semaphore {
        wakes: Mutex<u64>,
        rung: Condvar,
    }

    impl Wake for Semaphore {
        fn wake(&self) -> std::io::Result<()> {
            *self.wakes.lock().unwrap() += 1;
            self.rung.notify_one();
            Ok(())
        }
    }

    impl Semaphore {
        /// True if woken, false at the timeout.
        fn wait(&self, timeout: Duration) -> bool {
            let wakes = self.wakes.lock().unwrap();
            let (mut wakes, result) = self
                .rung
                .wait_timeout_while(wakes, timeout, |w| *w == 0)
                .unwrap();
            if result.timed_out() {
                return false;
            }
            *wakes -= 1;
            true
        }
    }

    /// Producers on other threads push completions while a loop drains
    /// and sleeps as the server's loop does: drain, then wait for a
    /// wake-up. Every item must arrive; one that stays in the inbox with no
    /// wake-up on its way leaves the loop asleep, which the (generous)
    /// timeout turns into a failure instead of a hang. Either wrong order
    /// of the flag (see `Inbox`) fails this within a few rounds.
    #[test]
    fn stress() {
        const PRODUCERS: usize = 3;
        const PER_PRODUCER: usize = 20_000;
        let waker = Arc::new(Semaphore::default());
        let inbox = Arc::new(Inbox::new(waker.clone()));
        let producers: Vec<_> = (0..PRODUCERS)
            .map(|p| {
                let inbox = inbox.clone();
                std::thread::spawn(move || {
                    for i in 0..PER_PRODUCER {
                        inbox.push_completion(Completion {
                            token: Token(p),
                            id: i as u64,
                            answer: Answer::Response(Response::new(200), &[]),
                        });
                    }
                })
            })
            .collect();
        let mut got = 0;
        let mut items = InboxItems::default();
        while got < PRODUCERS * PER_PRODUCER {
            if inbox.drain(&mut items) {
                got += items.completions.len();
                items.completions.clear();
                continue;
            }
            assert!(
                waker.wait(Duration::from_secs(20)),
                "lost a wake-up: {got} of {} items arrived and the loop was left asleep",
                PRODUCERS * PER_PRODUCER
            );
        }
        for p in producers {
            p.join().unwrap();
        }
        // A producer's flag may land after the last item was drained: a
        // drain then finds nothing, and the flag is clear afterwards.
        inbox.drain(&mut items);
        assert!(items.completions.is_empty(), "no item twice");
        assert!(!inbox.drain(&mut items), "the flag is cleared by a drain");
    }
}

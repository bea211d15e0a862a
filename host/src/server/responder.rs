//! The host's side of the responder: how an app's answer reaches the loop.
//!
//! An answer given during `handle` on the loop's own thread is taken from a
//! thread-local slot (no lock, no wake-up). An answer from elsewhere, or
//! later, goes into the loop's completion queue and wakes its poller. The
//! loop matches each completion against the connection's pending request id,
//! so an answer for a connection that has gone (or whose slab key was
//! reused) is dropped safely.
//!
//! A streamed response (`start_stream`) posts to the same loop: the
//! sender the app holds shares a small locked queue (`StreamLine`) with its
//! connection. `send` appends a chunk there (refused while the connection's
//! queued bytes are over `--stream-queue`) and, when no notice is already
//! on its way, pushes a stream notice (token, request id) into the loop's
//! inbox, which wakes the poller from another thread (as a completion
//! does). The loop takes the chunks into the connection's output, frames
//! and writes them, updates the queued count, and runs the app's
//! `on_drain` task and wakes blocking senders once it is under the bound.
//! A connection that closes marks its line closed (later sends answer
//! `SEND_CLOSED`) and runs the drain task so the app hears of it.

use crate::apps::loader::LoadedApp;
use crate::http::answer::HostAnswer;
use crate::http::websocket::handshake::Refusal;
use crate::http::websocket::switch::Accepting;
use crate::inbox::{Answer, Completion, GoneTask, Inbox, Upgrade};
use crate::inbox::{BodyAttach, StreamStart};
use crate::poller::Token;
use crate::settings::ConnParams;
use crate::stream_line::{HostStream, LineAddr, StreamLine};
use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::std_types::{ROption, RSlice, RString, RVec};
use std::cell::RefCell;
use std::sync::Arc;
use std::time::Duration;
use stoa_app_api::abi::{
    BodySinkBox, RawResponder, RawResponder_TO, RawStream_TO, ResponderBox, StaticHeader,
    StreamBox, TaskBox, TlsSession, WsSessionBox,
};
use stoa_app_api::{Header, Response};

use crate::http::response::Fixed;

/// Which inbox a request came from, by identity: two are the same when
/// they are the same inbox (`std::ptr::eq`). Only compared, never read
/// through: the loop's inbox lives while the loop dispatches, so no other
/// inbox has its address meanwhile.
#[derive(Clone, Copy)]
struct SameInbox(*const Inbox);

impl SameInbox {
    /// No inbox: no request is being dispatched.
    const NONE: SameInbox = SameInbox(std::ptr::null());

    fn of(queue: &Inbox) -> Self {
        SameInbox(queue)
    }
}

impl PartialEq for SameInbox {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self.0, other.0)
    }
}

/// The request being dispatched on this thread, its answer if given
/// inline, and its app's task should it be abandoned (`on_gone`), if
/// registered inline.
struct Inline {
    queue: SameInbox,
    id: u64,
    answer: Option<Answer>,
    gone: Option<TaskBox>,
}

thread_local! {
    static INLINE: RefCell<Inline> = const {
        RefCell::new(Inline { queue: SameInbox::NONE, id: 0, answer: None, gone: None })
    };
}

/// Marks request `id` of `queue` as being dispatched on this thread.
pub fn begin_inline(queue: &Arc<Inbox>, id: u64) {
    INLINE.with(|s| {
        let mut s = s.borrow_mut();
        s.queue = SameInbox::of(queue);
        s.id = id;
        s.answer = None;
        s.gone = None;
    });
}

/// Ends the dispatch; returns the answer if the app gave it inline, and
/// its `on_gone` task if it registered one inline (the loop keeps it with
/// the request; it cannot have gone through the inbox, where it would
/// arrive after an inline answer had ended the request).
pub fn end_inline() -> (Option<Answer>, Option<TaskBox>) {
    INLINE.with(|s| {
        let mut s = s.borrow_mut();
        s.queue = SameInbox::NONE;
        s.id = 0;
        (s.answer.take(), s.gone.take())
    })
}

/// Where the answers to one request go: its loop's inbox, its
/// connection there and the request's number on it (an answer for another
/// number is dropped: the connection has moved on or gone).
#[derive(Clone)]
pub struct ReplyTo {
    pub queue: Arc<Inbox>,
    pub token: Token,
    pub id: u64,
}

struct HostResponder {
    reply: ReplyTo,
    /// The app's counters slot, which names it.
    slot: usize,
    /// The generation answering: a request in flight holds it, so it is
    /// retired only after its last answer is queued (or dropped).
    _generation: Arc<LoadedApp>,
    answered: bool,
    /// `--stream-queue` and `--send-timeout`, for a streamed answer.
    stream_queue: usize,
    send_timeout: Duration,
    /// The `Sec-WebSocket-Accept` value and the subprotocols offered,
    /// when the request is a valid WebSocket handshake.
    accept: Option<Accepting>,
    /// What the app sees of the connection the request came over.
    conn: ConnView,
}

/// What an app sees, through its responder, of the connection a request
/// came over beyond its `Request`: the TLS session (none on a plain
/// connection) and whether the request is a stream of an HTTP/2
/// connection.
#[derive(Clone, Default)]
pub struct ConnView {
    pub tls: Option<Arc<TlsSession>>,
    pub http2: bool,
}

impl HostResponder {
    fn deliver(&self, response: Response) {
        self.deliver_with(response, &[]);
    }

    /// Inline (on the loop, during `handle`) the answer goes to the
    /// thread's slot as it is; otherwise the constant headers are copied
    /// into the response, which goes through the loop's queue.
    fn deliver_with(&self, response: Response, fixed: Fixed) {
        self.deliver_answer(Answer::Response(response, fixed));
    }

    fn deliver_answer(&self, answer: Answer) {
        let key = SameInbox::of(&self.reply.queue);
        let mut slot = Some(answer);
        // A thread being torn down has no slot: fall through to the queue.
        let _ = INLINE.try_with(|s| {
            let mut s = s.borrow_mut();
            if s.queue == key && s.id == self.reply.id && s.answer.is_none() {
                s.answer = slot.take();
            }
        });
        if let Some(answer) = slot {
            let answer = match answer {
                Answer::Response(response, fixed) if !fixed.is_empty() => {
                    let answer = stoa_app_api::Answer { response, fixed };
                    Answer::Response(answer.into_response(), &[])
                }
                other => other,
            };
            self.reply.queue.push_completion(Completion {
                token: self.reply.token,
                id: self.reply.id,
                answer,
            });
        }
    }
}

impl RawResponder for HostResponder {
    fn respond(mut self, response: Response) {
        self.answered = true;
        self.deliver(response);
    }

    fn respond_with_static(mut self, response: Response, fixed: RSlice<'static, StaticHeader>) {
        self.answered = true;
        self.deliver_with(response, fixed.as_slice());
    }

    fn panicked(mut self, message: RString) {
        self.answered = true;
        let app = &self._generation.name;
        log::error!(
            "app {app} panicked: {message}; answering 500 to request {}",
            self.reply.id
        );
        self.deliver(HostAnswer::AppPanicked(app.clone()).response());
    }

    fn start_stream(mut self, mut head: Response, length: ROption<u64>) -> StreamBox {
        self.answered = true;
        let declared = length.into_option();
        let body = head.body.len() as u64;
        let addr = LineAddr {
            token: self.reply.token,
            id: self.reply.id,
            inbox: self.reply.queue.clone(),
            slot: self.slot,
            app: Arc::from(self._generation.name.as_str()),
        };
        let (bound, send_timeout) = (self.stream_queue, self.send_timeout);
        let line = StreamLine::new(addr, bound, send_timeout, declared, body);
        if declared.is_some_and(|d| body > d) {
            // The head's body alone overruns the declared length.
            head.body.truncate(0);
            line.finish();
        }
        self.reply.queue.push_stream(
            self.reply.token,
            self.reply.id,
            Some(StreamStart {
                head,
                line: line.clone(),
            }),
        );
        RawStream_TO::from_value(HostStream::new(line), TD_Opaque)
    }

    fn read_body(self, sink: BodySinkBox) {
        self.attach_sink(sink, false);
    }

    fn read_body_on_pool(self, sink: BodySinkBox) {
        self.attach_sink(sink, true);
    }

    fn tls(&self) -> ROption<TlsSession> {
        self.conn.tls.as_deref().cloned().into()
    }

    fn http_major(&self) -> u8 {
        match self.conn.http2 {
            true => 2,
            false => 1,
        }
    }

    fn accept_websocket(self, session: WsSessionBox) {
        self.accept_websocket_with(RVec::new(), session);
    }

    fn accept_websocket_with(mut self, headers: RVec<Header>, session: WsSessionBox) {
        self.answered = true;
        match self.accept.take() {
            Some(accepting) => {
                let headers = match headers.is_empty() {
                    true => Vec::new(),
                    false => accepting.checked(&self._generation.name, headers.into_vec()),
                };
                self.deliver_answer(Answer::Upgrade(Box::new(Upgrade {
                    accept: accepting.accept,
                    headers,
                    session,
                    slot: self.slot,
                    generation: self._generation.clone(),
                })))
            }
            // Not a WebSocket handshake: 426, the session dropped unopened.
            None => self.deliver(HostAnswer::WebSocket(Refusal::NotAsked).response()),
        }
    }

    fn on_gone(&mut self, task: TaskBox) {
        let key = SameInbox::of(&self.reply.queue);
        let mut task = Some(task);
        let mut replaced = None;
        // During its own handler on the loop, the task stays with the
        // dispatch (see `end_inline`); a thread being torn down has no
        // slot: the inbox then.
        let _ = INLINE.try_with(|s| {
            let mut s = s.borrow_mut();
            if s.queue == key && s.id == self.reply.id {
                replaced = std::mem::replace(&mut s.gone, task.take());
            }
        });
        // The replaced task is the app's: dropped outside the slot's borrow.
        drop(replaced);
        if let Some(task) = task {
            self.reply.queue.push_gone(GoneTask {
                token: self.reply.token,
                id: self.reply.id,
                slot: self.slot,
                task,
            });
        }
    }
}

impl HostResponder {
    /// Hands `sink` to the loop for the request's streamed body.
    fn attach_sink(mut self, sink: BodySinkBox, on_pool: bool) {
        self.answered = true;
        let responder = self.again();
        self.reply.queue.push_body(BodyAttach {
            token: self.reply.token,
            id: self.reply.id,
            sink,
            responder,
            on_pool,
        });
    }

    /// The same request's responder, handed back to the app with the end
    /// of its streamed body.
    fn again(&self) -> ResponderBox {
        RawResponder_TO::from_value(
            HostResponder {
                reply: self.reply.clone(),
                slot: self.slot,
                _generation: self._generation.clone(),
                answered: false,
                stream_queue: self.stream_queue,
                send_timeout: self.send_timeout,
                accept: None,
                conn: self.conn.clone(),
            },
            TD_Opaque,
        )
    }
}

impl Drop for HostResponder {
    fn drop(&mut self) {
        if !self.answered {
            self.answered = true;
            log::debug!("request {} dropped its responder unanswered", self.reply.id);
            self.deliver(HostAnswer::AppFailed.response());
        }
    }
}

/// Makes the responder handed to `app` for the request `reply` names;
/// `params` bound a streamed answer; `accept` is what accepting a valid
/// WebSocket handshake takes; `conn` what the app sees of the connection
/// the request came over.
pub fn responder(
    reply: ReplyTo,
    app: &Arc<LoadedApp>,
    params: &ConnParams,
    accept: Option<Accepting>,
    conn: ConnView,
) -> ResponderBox {
    RawResponder_TO::from_value(
        HostResponder {
            reply,
            slot: app.slot,
            _generation: app.clone(),
            answered: false,
            stream_queue: params.stream_queue,
            send_timeout: params.send_timeout,
            accept,
            conn,
        },
        TD_Opaque,
    )
}

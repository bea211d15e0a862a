//! The line between an app's WebSocket sender and its connection: a small
//! locked queue the sender appends to from any thread, and a notice in the
//! connection's loop inbox (which wakes the loop from another thread) when
//! the queue went from empty to not. The loop takes the messages into the
//! connection's framing and output, keeps the queued count, and runs the
//! app's drain task and wakes blocking senders once it is under the bound.
//! The same shape as a streamed response's line.

use crate::inbox::Inbox;
use crate::server::responder::ReplyTo;
use abi_stable::std_types::{RSlice, RStr};
use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use stoa_app_api::abi::{RawWsSender, TaskBox, SEND_CLOSED, SEND_SENT, SEND_WOULD_BLOCK, WS_TEXT};

/// What an app asked to send.
pub enum Outgoing {
    Text(String),
    Binary(Vec<u8>),
    Close(u16, String),
}

#[derive(Default)]
struct State {
    queue: VecDeque<Outgoing>,
    /// Bytes queued here plus bytes in the connection's output.
    queued: usize,
    /// Closing or closed: nothing more is taken.
    closed: bool,
    drain: Option<TaskBox>,
    /// A notice is in the loop's inbox and not yet handled.
    noticed: bool,
}

/// One WebSocket's line (see the module's doc).
pub struct Line {
    state: Mutex<State>,
    room: Condvar,
    /// The connection's loop, the connection and its WebSocket id (the
    /// upgraded request's): a notice for a connection whose slot was
    /// reused is dropped.
    reply: ReplyTo,
    /// Queued bytes at or over which a send is refused.
    bound: usize,
    /// Longest wait of a blocking send.
    send_timeout: Duration,
}

impl Line {
    pub fn new(reply: ReplyTo, bound: usize, send_timeout: Duration) -> Arc<Self> {
        Arc::new(Line {
            state: Mutex::new(State::default()),
            room: Condvar::new(),
            reply,
            bound,
            send_timeout,
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `message` if there is room (a close is taken over the bound
    /// too: it ends the queue); the answer on the wire.
    fn offer(&self, message: Outgoing, len: usize) -> u8 {
        let notify = {
            let mut s = self.lock();
            if s.closed {
                return SEND_CLOSED;
            }
            if s.queued >= self.bound && !matches!(message, Outgoing::Close(..)) {
                return SEND_WOULD_BLOCK;
            }
            s.closed = matches!(message, Outgoing::Close(..));
            s.queued += len;
            s.queue.push_back(message);
            !std::mem::replace(&mut s.noticed, true)
        };
        if notify {
            self.reply
                .queue
                .push_ws_notice(self.reply.token, self.reply.id);
        }
        SEND_SENT
    }

    /// The loop's side: takes what the app queued.
    pub fn take(&self) -> VecDeque<Outgoing> {
        let mut s = self.lock();
        s.noticed = false;
        std::mem::take(&mut s.queue)
    }

    /// The loop's side: `pending` bytes wait in the connection's output.
    /// Under the bound, the app's drain task is handed back to run (on the
    /// loop, outside the lock) and blocking senders are woken.
    pub fn set_pending(&self, pending: usize) -> Option<TaskBox> {
        let mut s = self.lock();
        s.queued = pending + s.queue.iter().map(len_of).sum::<usize>();
        if s.queued >= self.bound {
            return None;
        }
        self.room.notify_all();
        s.drain.take()
    }

    /// The loop's side: the WebSocket is closing or closed; senders get
    /// `SEND_CLOSED`, and the drain task (returned) tells the app.
    pub fn shut(&self) -> Option<TaskBox> {
        let mut s = self.lock();
        s.closed = true;
        s.queue.clear();
        self.room.notify_all();
        s.drain.take()
    }

    /// A notice without a message: the loop pumps the connection again.
    pub fn nudge(&self) {
        self.reply
            .queue
            .push_ws_notice(self.reply.token, self.reply.id);
    }

    /// The WebSocket id the line belongs to.
    pub fn id(&self) -> u64 {
        self.reply.id
    }
}

fn len_of(m: &Outgoing) -> usize {
    match m {
        Outgoing::Text(t) => t.len(),
        Outgoing::Binary(b) => b.len(),
        Outgoing::Close(_, r) => r.len(),
    }
}

/// The sender an app holds (`RawWsSender`).
pub struct HostSender(pub Arc<Line>);

impl HostSender {
    fn message(kind: u8, data: RSlice<'_, u8>) -> Option<(Outgoing, usize)> {
        let data = data.as_slice();
        let message = if kind == WS_TEXT {
            // Text must be UTF-8 (RFC 6455 §5.6): refused, not sent broken.
            Outgoing::Text(std::str::from_utf8(data).ok()?.to_string())
        } else {
            Outgoing::Binary(data.to_vec())
        };
        Some((message, data.len()))
    }
}

impl RawWsSender for HostSender {
    fn send(&self, kind: u8, data: RSlice<'_, u8>) -> u8 {
        match HostSender::message(kind, data) {
            Some((message, len)) => self.0.offer(message, len),
            None => {
                log::warn!("an app sent text that is not UTF-8 on a WebSocket; not sent");
                SEND_CLOSED
            }
        }
    }

    fn send_blocking(&self, kind: u8, data: RSlice<'_, u8>) -> u8 {
        let answer = self.send(kind, data);
        // On a loop thread waiting would stall the loop that makes room.
        if answer != SEND_WOULD_BLOCK || Inbox::current().is_some() {
            return answer;
        }
        let line = &self.0;
        let s = line.lock();
        let (s, waited) = line
            .room
            .wait_timeout_while(s, line.send_timeout, |s| {
                !s.closed && s.queued >= line.bound
            })
            .unwrap_or_else(|p| p.into_inner());
        if waited.timed_out() {
            return SEND_WOULD_BLOCK;
        }
        drop(s);
        self.send(kind, data)
    }

    fn on_drain(&self, task: TaskBox) {
        let run_now = {
            let mut s = self.0.lock();
            if s.closed || s.queued < self.0.bound {
                Some(task)
            } else {
                s.drain = Some(task);
                None
            }
        };
        // Room now: run it on the connection's loop, as promised.
        if let Some(task) = run_now {
            self.0.reply.queue.push_timer(Instant::now(), None, task);
        }
    }

    fn close(&self, code: u16, reason: RStr<'_>) -> u8 {
        let reason = reason.as_str().to_string();
        let len = reason.len();
        self.0.offer(Outgoing::Close(code, reason), len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inbox::InboxItems;
    use crate::poller::{Token, Wake};
    use abi_stable::sabi_trait::TD_Opaque;
    use std::sync::atomic::{AtomicBool, Ordering};
    use stoa_app_api::abi::{Task, Task_TO, WS_BINARY};

    struct NoWake;
    impl Wake for NoWake {
        fn wake(&self) -> std::io::Result<()> {
            Ok(())
        }
    }

    struct Flag(Arc<AtomicBool>);
    impl Task for Flag {
        fn run(self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    fn line(bound: usize) -> (Arc<Inbox>, Arc<Line>) {
        let inbox = Arc::new(Inbox::new(Arc::new(NoWake)));
        let reply = ReplyTo {
            queue: inbox.clone(),
            token: Token(7),
            id: 42,
        };
        let line = Line::new(reply, bound, Duration::ZERO);
        (inbox, line)
    }

    fn bytes(n: usize) -> Vec<u8> {
        vec![b'x'; n]
    }

    #[test]
    fn sends_past_the_bound_wait_and_the_drain_task_runs_when_it_has_room() {
        let (inbox, line) = line(100);
        let sender = HostSender(line.clone());
        let data = bytes(60);
        assert_eq!(sender.send(WS_BINARY, RSlice::from_slice(&data)), SEND_SENT);
        assert_eq!(sender.send(WS_BINARY, RSlice::from_slice(&data)), SEND_SENT);
        // 120 queued: over the bound, the next is not taken.
        assert_eq!(
            sender.send(WS_BINARY, RSlice::from_slice(&data)),
            SEND_WOULD_BLOCK
        );
        let ran = Arc::new(AtomicBool::new(false));
        sender.on_drain(Task_TO::from_value(Flag(ran.clone()), TD_Opaque));
        // One notice for the two messages.
        let mut items = InboxItems::default();
        inbox.drain(&mut items);
        assert_eq!(items.ws_notices, vec![(Token(7), 42)]);
        assert_eq!(line.take().len(), 2);
        // Still 120 bytes in the connection's output: no room yet.
        assert!(line.set_pending(120).is_none());
        let task = line.set_pending(10).expect("room: the drain task");
        task.run();
        assert!(ran.load(Ordering::SeqCst));
        assert_eq!(sender.send(WS_BINARY, RSlice::from_slice(&data)), SEND_SENT);
    }

    #[test]
    fn a_close_is_taken_over_the_bound_and_ends_the_line() {
        let (_inbox, line) = line(10);
        let sender = HostSender(line.clone());
        let data = bytes(20);
        assert_eq!(sender.send(WS_BINARY, RSlice::from_slice(&data)), SEND_SENT);
        assert_eq!(sender.close(1000, RStr::from_str("done")), SEND_SENT);
        assert_eq!(sender.close(1000, RStr::from_str("again")), SEND_CLOSED);
        assert_eq!(
            sender.send(WS_BINARY, RSlice::from_slice(&data)),
            SEND_CLOSED
        );
        assert!(matches!(line.take().back(), Some(Outgoing::Close(1000, _))));
    }

    #[test]
    fn text_that_is_not_utf8_is_refused_and_a_shut_line_takes_nothing() {
        let (_inbox, line) = line(100);
        let sender = HostSender(line.clone());
        assert_eq!(
            sender.send(WS_TEXT, RSlice::from_slice(&[0xff])),
            SEND_CLOSED
        );
        assert!(line.take().is_empty());
        assert!(line.shut().is_none());
        assert_eq!(sender.send(WS_TEXT, RSlice::from_slice(b"ok")), SEND_CLOSED);
        // A blocking send on a shut line does not wait.
        assert_eq!(
            sender.send_blocking(WS_TEXT, RSlice::from_slice(b"ok")),
            SEND_CLOSED
        );
    }
}

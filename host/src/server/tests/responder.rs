//! The responder's two ways back to the loop: an answer given during the
//! handler on the loop's thread is taken from the inline slot (nothing goes
//! through the inbox); any other goes through the inbox as a completion
//! for its connection and request.

use crate::http::answer::HostAnswer;
use crate::inbox::{Answer, Inbox, InboxItems};
use crate::poller::Token;
use crate::server::responder::{begin_inline, end_inline, responder, ConnView, ReplyTo};
use crate::server::testing::{app, NoWake};
use crate::settings::{AppLimits, ConnParams};
use abi_stable::sabi_trait::TD_Opaque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use stoa_app_api::abi::{ResponderBox, Task, TaskBox, Task_TO};
use stoa_app_api::Response;

fn inbox() -> Arc<Inbox> {
    Arc::new(Inbox::new(Arc::new(NoWake)))
}

/// The responder for request `id` on connection 3 of `queue`.
fn for_request(queue: &Arc<Inbox>, id: u64) -> ResponderBox {
    let reply = ReplyTo {
        queue: queue.clone(),
        token: Token(3),
        id,
    };
    let app = app("/app", AppLimits::default());
    responder(
        reply,
        &app,
        &ConnParams::default(),
        None,
        ConnView::default(),
    )
}

/// The completions in `queue`: (token, id, status).
fn completions(queue: &Inbox) -> Vec<(usize, u64, u16)> {
    let mut items = InboxItems::default();
    queue.drain(&mut items);
    items
        .completions
        .iter()
        .map(|c| match &c.answer {
            Answer::Response(r, _) => (c.token.0, c.id, r.status),
            Answer::Upgrade(_) => (c.token.0, c.id, 101),
        })
        .collect()
}

fn status(answer: Option<Answer>) -> Option<u16> {
    match answer? {
        Answer::Response(r, _) => Some(r.status),
        Answer::Upgrade(_) => Some(101),
    }
}

#[test]
fn an_answer_during_the_handler_is_taken_inline() {
    let queue = inbox();
    begin_inline(&queue, 7);
    for_request(&queue, 7).respond(Response::text(201, "made"));
    assert_eq!(status(end_inline().0), Some(201));
    assert!(!queue.has_items());
    assert_eq!(completions(&queue), []);
}

#[test]
fn an_answer_after_the_handler_comes_through_the_inbox() {
    let queue = inbox();
    begin_inline(&queue, 7);
    let kept = for_request(&queue, 7);
    assert_eq!(status(end_inline().0), None);
    kept.respond(Response::text(202, "later"));
    assert!(queue.has_items());
    assert_eq!(completions(&queue), [(3, 7, 202)]);
    // From another thread too.
    let other = for_request(&queue, 8);
    std::thread::spawn(move || other.respond(Response::text(200, "there")))
        .join()
        .expect("the thread answers");
    assert_eq!(completions(&queue), [(3, 8, 200)]);
}

#[test]
fn only_the_request_being_dispatched_on_its_inbox_is_answered_inline() {
    let (queue, elsewhere) = (inbox(), inbox());
    // Another request of the same loop.
    begin_inline(&queue, 8);
    for_request(&queue, 7).respond(Response::text(200, "a"));
    assert_eq!(status(end_inline().0), None);
    assert_eq!(completions(&queue), [(3, 7, 200)]);
    // The same number on another loop's inbox.
    begin_inline(&elsewhere, 7);
    for_request(&queue, 7).respond(Response::text(200, "b"));
    assert_eq!(status(end_inline().0), None);
    assert_eq!(completions(&queue), [(3, 7, 200)]);
    assert_eq!(completions(&elsewhere), []);
}

#[test]
fn a_responder_dropped_unanswered_answers_500() {
    let queue = inbox();
    begin_inline(&queue, 9);
    drop(for_request(&queue, 9));
    let failed = HostAnswer::AppFailed.response().status;
    assert_eq!(status(end_inline().0), Some(failed));
    drop(for_request(&queue, 10));
    assert_eq!(completions(&queue), [(3, 10, failed)]);
}

/// A task that counts its runs.
struct Counted(Arc<AtomicUsize>);

impl Task for Counted {
    fn run(self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

fn task(runs: &Arc<AtomicUsize>) -> TaskBox {
    Task_TO::from_value(Counted(runs.clone()), TD_Opaque)
}

#[test]
fn an_on_gone_task_during_the_handler_stays_with_the_dispatch() {
    let queue = inbox();
    let runs = Arc::new(AtomicUsize::new(0));
    begin_inline(&queue, 7);
    let mut kept = for_request(&queue, 7);
    kept.on_gone(task(&runs));
    // A later one replaces it (the first is dropped unrun).
    kept.on_gone(task(&runs));
    let (answer, gone) = end_inline();
    assert!(answer.is_none());
    assert!(!queue.has_items(), "nothing went through the inbox");
    gone.expect("the task").run();
    assert_eq!(runs.load(Ordering::Relaxed), 1);
    kept.respond(Response::text(200, "done"));
}

#[test]
fn an_on_gone_task_after_the_handler_goes_through_the_inbox_before_the_answer() {
    let queue = inbox();
    let runs = Arc::new(AtomicUsize::new(0));
    let mut kept = for_request(&queue, 8);
    kept.on_gone(task(&runs));
    kept.respond(Response::text(200, "done"));
    let mut items = InboxItems::default();
    queue.drain(&mut items);
    let gone: Vec<(usize, u64)> = items.gone.iter().map(|g| (g.token.0, g.id)).collect();
    assert_eq!(gone, [(3, 8)]);
    assert_eq!(items.completions.len(), 1);
    assert_eq!(runs.load(Ordering::Relaxed), 0);
}

/// The app hears which HTTP its request came over: 2 for a stream of an
/// HTTP/2 connection, else 1 (and `Request::version_minor` decides 1.0).
#[test]
fn the_responder_tells_http_2_from_http_1() {
    let queue = inbox();
    let app = app("/app", AppLimits::default());
    for (http2, major, protocol) in [(false, 1, "HTTP/1.1"), (true, 2, "HTTP/2")] {
        let reply = ReplyTo {
            queue: queue.clone(),
            token: Token(3),
            id: 1,
        };
        let conn = ConnView { tls: None, http2 };
        let params = ConnParams::default();
        let r = stoa_app_api::Responder::from_raw(responder(reply, &app, &params, None, conn));
        let request = stoa_app_api::Request::sample("GET", "/app", "/x", "");
        assert_eq!((r.http_major(), r.protocol(&request)), (major, protocol));
        r.respond(Response::text(200, "ok"));
    }
    assert_eq!(completions(&queue).len(), 2);
}

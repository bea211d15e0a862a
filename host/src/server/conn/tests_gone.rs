//! A client that leaves while its request is pending (`gone`): seen by a
//! read, not past pipelined bytes, and the app's task kept with the
//! request until it ends.

use super::mem::Mem;
use super::tests::{dispatched, streaming};
use super::*;
use crate::settings::ConnParams;
use abi_stable::sabi_trait::TD_Opaque;
use std::sync::atomic::{AtomicUsize, Ordering};
use stoa_app_api::abi::{Task, Task_TO};

const GET: &str = "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n";

/// A task that counts its runs in `runs`.
struct Counted(Arc<AtomicUsize>);

impl Task for Counted {
    fn run(self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

fn gone(runs: &Arc<AtomicUsize>) -> Gone {
    Gone {
        task: Task_TO::from_value(Counted(runs.clone()), TD_Opaque),
        slot: 0,
    }
}

/// The client's next bytes (and its end of stream, if `eof`) arrive.
fn client_sends(c: &mut Conn<Mem>, bytes: &str, eof: bool) {
    c.stream_mut().send(bytes.as_bytes());
    c.stream_mut().eof = eof;
    c.note_ready(true, false);
}

#[test]
fn a_pending_request_watches_its_client_and_sees_it_leave() {
    let (params, mut pool) = (ConnParams::default(), BufPool::default());
    let mut c = dispatched(GET, 1, Some(0), &mut pool);
    assert_eq!(c.interest_change(), None, "still readable while pending");
    assert!(!c.client_gone());
    client_sends(&mut c, "", true);
    assert!(c.read_due());
    c.read_some(&params, &mut pool);
    assert!(c.client_gone());
    let runs = Arc::new(AtomicUsize::new(0));
    assert!(c.set_gone(1, gone(&runs)).is_ok());
    let task = c.take_gone().expect("the task is kept with the request");
    task.task.run();
    assert_eq!(runs.load(Ordering::Relaxed), 1);
}

#[test]
fn pipelined_bytes_are_kept_and_not_taken_for_a_leave() {
    let (params, mut pool) = (ConnParams::default(), BufPool::default());
    let mut c = dispatched(GET, 1, Some(0), &mut pool);
    client_sends(&mut c, "GET /next HTTP/1.1\r\nHost: x\r\n\r\n", true);
    assert!(c.read_due());
    assert!(c.read_some(&params, &mut pool));
    // The next request waits for its turn; the end of stream behind it is
    // the end of the client's requests, not of this one.
    assert!(!c.client_gone() && !c.read_due());
    assert_eq!(c.interest_change(), Some(Interest::NONE));
    let mut r = stoa_app_api::Response::text(200, "slow");
    let terms = Terms {
        date: "Tue, 01 Dec 2026 00:00:00 GMT",
        params: &params,
        close: false,
    };
    assert!(c.answer(&mut r, &[], &terms, &mut pool).is_some());
    assert_eq!(c.next_request(&params, &mut pool), Ok(true));
}

#[test]
fn bytes_read_ahead_stop_the_watch_until_the_answer() {
    let (params, mut pool) = (ConnParams::default(), BufPool::default());
    let mut c = dispatched(GET, 1, Some(0), &mut pool);
    client_sends(&mut c, "GET /n", false);
    c.read_some(&params, &mut pool);
    client_sends(&mut c, "", true);
    assert!(!c.read_due(), "nothing more is read while a request waits");
    assert!(!c.client_gone());
}

#[test]
fn a_task_is_kept_for_its_own_request_only_and_replaced_by_a_later_one() {
    let mut pool = BufPool::default();
    let mut c = dispatched(GET, 7, Some(0), &mut pool);
    let (first, second, other) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
    );
    assert!(c.set_gone(7, gone(&first)).is_ok());
    assert!(c.set_gone(7, gone(&second)).is_ok());
    // Another request's (one already ended here): handed back to run.
    assert!(c.set_gone(6, gone(&other)).is_err());
    c.take_gone().expect("the later task").task.run();
    assert_eq!(
        (
            first.load(Ordering::Relaxed),
            second.load(Ordering::Relaxed)
        ),
        (0, 1),
        "the replaced task is dropped unrun"
    );
    assert!(c.take_gone().is_none());
}

#[test]
fn the_task_follows_a_streamed_answer_and_is_dropped_at_its_end() {
    let (params, mut pool) = (ConnParams::default(), BufPool::default());
    let mut c = dispatched(GET, 3, Some(0), &mut pool);
    let runs = Arc::new(AtomicUsize::new(0));
    assert!(c.set_gone(3, gone(&runs)).is_ok());
    let (line, _open) = streaming(&mut c, 3, &mut pool);
    // Still the request's while its answer streams; a new one replaces it.
    let again = Arc::new(AtomicUsize::new(0));
    assert!(c.set_gone(3, gone(&again)).is_ok());
    // The client leaves mid-stream: seen by the watch.
    client_sends(&mut c, "", true);
    assert!(c.read_due());
    c.read_some(&params, &mut pool);
    assert!(c.client_gone());
    // Had the stream ended first, the task would go unrun.
    assert_eq!(line.finish(), stoa_app_api::abi::SEND_SENT);
    c.pull_stream(&mut pool, false);
    assert!(c.take_gone().is_none() && !c.client_gone());
    assert_eq!(
        again.load(Ordering::Relaxed) + runs.load(Ordering::Relaxed),
        0
    );
}

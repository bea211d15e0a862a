//! The line's backpressure without a socket: sends refused over the bound,
//! the drain task run once there is room, closed lines refusing.

use super::*;
use crate::inbox::{Inbox, InboxItems};
use crate::poller::Wake;
use abi_stable::sabi_trait::TD_Opaque;
use std::sync::atomic::{AtomicUsize, Ordering};
use stoa_app_api::abi::{Task, Task_TO};

/// Counts the loop's wake-ups.
#[derive(Default)]
struct Wakes(AtomicUsize);

impl Wake for Wakes {
    fn wake(&self) -> std::io::Result<()> {
        self.0.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

/// A drain task that counts its runs.
struct Count(Arc<AtomicUsize>);

impl Task for Count {
    fn run(self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

fn line(bound: usize, declared: Option<u64>) -> (Arc<StreamLine>, Arc<Inbox>, Arc<Wakes>) {
    let wakes = Arc::new(Wakes::default());
    let inbox = Arc::new(Inbox::new(wakes.clone()));
    let addr = LineAddr {
        token: Token(7),
        id: 3,
        inbox: inbox.clone(),
        slot: 0,
        app: Arc::from("test"),
    };
    let line = StreamLine::new(addr, bound, Duration::from_millis(50), declared, 0);
    (line, inbox, wakes)
}

/// Runs the timers the line pushed (the drain tasks); how many there were.
fn run_pushed(inbox: &Inbox) -> (usize, InboxItems) {
    let mut items = InboxItems::default();
    inbox.drain(&mut items);
    let n = items.timers.len();
    for (_, _, task) in items.timers.drain(..) {
        task.run();
    }
    (n, items)
}

#[test]
fn a_full_queue_answers_would_block_and_the_drain_wakes_the_app() {
    let (line, inbox, wakes) = line(100, None);
    assert_eq!(line.send(&[1; 60]), SEND_SENT);
    // One notice for the loop, one wake-up (from this thread, not the loop's).
    assert_eq!(wakes.0.load(Ordering::Relaxed), 1);
    assert_eq!(line.send(&[2; 60]), SEND_SENT, "under the bound: taken");
    assert_eq!(line.send(&[3; 10]), SEND_WOULD_BLOCK, "120 queued of 100");
    let ran = Arc::new(AtomicUsize::new(0));
    line.on_drain(Task_TO::from_value(Count(ran.clone()), TD_Opaque));
    let (timers, items) = run_pushed(&inbox);
    assert_eq!(
        (timers, items.streams.len()),
        (0, 1),
        "one notice, no drain yet"
    );
    // The loop takes both chunks; they now wait in the output.
    let taken = line.take();
    assert_eq!((taken.chunks.len(), taken.end), (2, End::Open));
    line.report(120);
    assert_eq!(run_pushed(&inbox).0, 0, "still over the bound");
    assert_eq!(line.send(&[3; 10]), SEND_WOULD_BLOCK);
    line.report(40);
    assert_eq!(
        run_pushed(&inbox).0,
        1,
        "under the bound: the drain task is queued"
    );
    assert_eq!(ran.load(Ordering::Relaxed), 1);
    assert_eq!(line.send(&[3; 10]), SEND_SENT);
    line.report(0);
    assert_eq!(run_pushed(&inbox).0, 0, "the task ran once");
}

#[test]
fn a_closed_line_refuses_and_runs_the_pending_drain_task() {
    let (line, inbox, _) = line(10, None);
    assert_eq!(line.send(&[0; 20]), SEND_SENT);
    let ran = Arc::new(AtomicUsize::new(0));
    line.on_drain(Task_TO::from_value(Count(ran.clone()), TD_Opaque));
    line.close();
    run_pushed(&inbox);
    assert_eq!(ran.load(Ordering::Relaxed), 1, "the app hears of the close");
    assert_eq!(line.send(b"x"), SEND_CLOSED);
    assert_eq!(line.send_blocking(b"x"), SEND_CLOSED);
    assert_eq!(line.finish(), SEND_CLOSED);
}

#[test]
fn blocking_send_waits_for_room_then_gives_up_after_the_send_timeout() {
    let (line, _inbox, _) = line(10, None);
    assert_eq!(line.send(&[0; 10]), SEND_SENT);
    // Nobody drains: the wait ends at the send timeout (50 ms).
    assert_eq!(line.send_blocking(b"x"), SEND_WOULD_BLOCK);
    let drainer = {
        let line = line.clone();
        std::thread::spawn(move || {
            line.take();
            line.report(0);
        })
    };
    // Either the drain came first or the wait sees it.
    let mut code = line.send_blocking(b"y");
    while code == SEND_WOULD_BLOCK {
        code = line.send_blocking(b"y");
    }
    assert_eq!(code, SEND_SENT);
    drainer.join().expect("the drainer does not panic");
}

#[test]
fn the_declared_length_is_enforced_both_ways() {
    let (long, _i1, _) = line(1000, Some(4));
    assert_eq!(long.send(b"abc"), SEND_SENT);
    assert_eq!(long.send(b"de"), SEND_CLOSED, "past the declared length");
    assert_eq!(long.take().end, End::Aborted);
    let (short, _i2, _) = line(1000, Some(4));
    assert_eq!(short.send(b"abc"), SEND_SENT);
    assert_eq!(short.finish(), SEND_CLOSED, "short of the declared length");
    assert_eq!(short.take().end, End::Aborted);
    let (exact, _i3, _) = line(1000, Some(3));
    assert_eq!(exact.send(b"abc"), SEND_SENT);
    assert_eq!(exact.finish(), SEND_SENT);
    assert_eq!(exact.take().end, End::Finished);
}

#[test]
fn a_dropped_sender_ends_the_stream_abnormally() {
    let (line, _inbox, _) = line(1000, None);
    let mut sender = HostStream::new(line.clone());
    assert_eq!(sender.send(RSlice::from_slice(b"part")), SEND_SENT);
    drop(sender);
    let taken = line.take();
    assert_eq!((taken.chunks.len(), taken.end), (1, End::Aborted));
}

#[test]
fn the_queue_holds_its_bytes_of_the_budget_and_waits_for_room() {
    use crate::budget::Budget;
    let budget = Budget::new(100);
    let (line, inbox, _) = line(1000, None);
    line.attach(budget.reservation());
    // Into an empty line one chunk always goes, counted past the limit.
    assert_eq!(line.send(&[1; 150]), SEND_SENT);
    assert_eq!(budget.held(), 150);
    // While the line holds bytes, a send past the budget waits, and its
    // drain task waits for the next report rather than running at once.
    assert_eq!(line.send(&[1; 10]), SEND_WOULD_BLOCK);
    let runs = Arc::new(AtomicUsize::new(0));
    line.on_drain(Task_TO::from_value(Count(runs.clone()), TD_Opaque));
    assert_eq!(run_pushed(&inbox).0, 0);
    // The loop takes the chunk and writes it all: the bytes go back and
    // the app is woken.
    let _ = line.take();
    line.report(0);
    assert_eq!(budget.held(), 0);
    assert_eq!(run_pushed(&inbox).0, 1);
    assert_eq!(line.send(&[1; 60]), SEND_SENT);
    assert_eq!(budget.held(), 60);
    // A closed line gives its share back.
    line.close();
    assert_eq!(budget.held(), 0);
}

//! Completions into events: received bytes into their pipe (the buffer
//! given back at once), sends done, polls of watched fds; one event per
//! source and wait.

use super::book::{lock, End, Pipe, Recv, Shut, OUTPUT_BOUND};
use super::{parts, CompletionPoller, HANGUP, IN, OUT, WAKER_DATA};
use super::{KIND_POLL, KIND_RECV, KIND_SEND, KIND_SHUTDOWN};
use crate::poller::Event;
use io_uring::cqueue;

/// Adds `ev` to `events`, merged with the one `seen` says this source
/// already has in this wait.
fn report(events: &mut Vec<Event>, seen: &mut (u64, usize), turn: u64, ev: Event) {
    match events.get_mut(seen.1) {
        Some(e) if seen.0 == turn && e.token == ev.token => {
            e.readable |= ev.readable;
            e.writable |= ev.writable;
            e.hup |= ev.hup;
        }
        _ => {
            *seen = (turn, events.len());
            events.push(ev);
        }
    }
}

impl CompletionPoller {
    /// Turns the waiting completions into `events`.
    pub(super) fn reap(&mut self, events: &mut Vec<Event>) {
        self.turn += 1;
        let turn = self.turn;
        let book = self.book.clone();
        let mut book = lock(&book);
        let mut woken = false;
        for cqe in self.ring.completion() {
            let (data, res, flags) = (cqe.user_data(), cqe.result(), cqe.flags());
            if data == WAKER_DATA {
                woken |= res > 0;
                self.waker_armed &= cqueue::more(flags);
                continue;
            }
            let (kind, gen, fd) = parts(data);
            log::trace!("completion: kind {kind} fd {fd} gen {gen} res {res} flags {flags:#x}");
            match kind {
                KIND_POLL => {
                    let Some(Some(w)) = self.watches.get_mut(fd as usize) else {
                        continue;
                    };
                    if w.gen != gen {
                        continue;
                    }
                    if !cqueue::more(flags) {
                        w.armed = false;
                        if res >= 0 {
                            self.watches_due.push(fd);
                        }
                    }
                    let mask = if res < 0 {
                        IN | OUT | HANGUP
                    } else {
                        res as u32
                    };
                    let ev = Event {
                        token: w.token,
                        readable: mask & (IN | HANGUP) != 0,
                        writable: mask & (OUT | libc::POLLERR as u32) != 0,
                        hup: mask & HANGUP != 0,
                    };
                    report(events, &mut w.seen, turn, ev);
                }
                KIND_RECV => {
                    // The buffer goes back whoever it was for.
                    let bid = cqueue::buffer_select(flags);
                    let Some(p) = book.pipe(fd, gen) else {
                        if let Some(bid) = bid {
                            self.bufs.recycle(bid);
                        }
                        continue;
                    };
                    let more = cqueue::more(flags);
                    let n = usize::try_from(res).unwrap_or(0);
                    if let Some(bid) = bid {
                        p.take_in(self.bufs.bytes(bid, n));
                        self.bufs.recycle(bid);
                        // Bytes left in the socket: a fast sender.
                        p.fast = cqueue::sock_nonempty(flags);
                    } else if p.landing_busy {
                        // The single receive ended, whatever its result (a
                        // cancelled one's bytes, if any, go: it was closing).
                        let len = match p.recv {
                            Recv::Landing { len } => len,
                            _ => 0,
                        };
                        p.landing_done(n.min(len), len, cqueue::sock_nonempty(flags));
                    }
                    if !more {
                        p.recv = Recv::Off;
                    }
                    let news = received(p, res, more);
                    let (closing, recv, wants) = (p.closing, p.recv, p.wants_recv());
                    let over = p.unread() >= super::book::INPUT_BOUND;
                    let switch = recv == Recv::Armed && p.fast;
                    if news && !closing {
                        let ev = Event {
                            token: p.token,
                            readable: true,
                            writable: false,
                            hup: p.end.is_some(),
                        };
                        report(events, &mut p.seen, turn, ev);
                    }
                    if closing || wants || switch || (recv == Recv::Armed && over) {
                        book.mark(fd, gen);
                    }
                }
                KIND_SEND => {
                    let Some(p) = book.pipe(fd, gen) else {
                        continue;
                    };
                    let room_before = p.blocked;
                    sent(p, res);
                    p.trim();
                    let done = !p.has_output();
                    let room = room_before && p.unsent() < OUTPUT_BOUND;
                    if !p.closing && (done || room || p.send_error.is_some()) {
                        p.blocked = false;
                        let ev = Event {
                            token: p.token,
                            readable: false,
                            writable: true,
                            hup: p.send_error.is_some(),
                        };
                        report(events, &mut p.seen, turn, ev);
                    }
                    let again = p.sent < p.sending.len() || p.shut == Shut::Due || p.closing;
                    if again {
                        book.mark(fd, gen);
                    }
                }
                KIND_SHUTDOWN => {
                    let Some(p) = book.pipe(fd, gen) else {
                        continue;
                    };
                    p.shut = Shut::Done;
                    let ev = Event {
                        token: p.token,
                        readable: false,
                        writable: true,
                        hup: false,
                    };
                    if p.closing {
                        book.mark(fd, gen);
                    } else {
                        report(events, &mut p.seen, turn, ev);
                    }
                }
                _ => {} // a cancel's own completion
            }
        }
        drop(book);
        if woken {
            self.waker.drain();
            events.push(Event::woken());
        }
    }
}

/// Notes how a receive's completion `res` ends the input, if it does;
/// true if the connection has something new to read.
fn received(p: &mut Pipe, res: i32, more: bool) -> bool {
    match res {
        n if n > 0 => true,
        // The peer's FIN.
        0 => {
            p.end.get_or_insert(End::Eof);
            true
        }
        // Out of buffers (they are back now), or cancelled: armed again
        // when wanted.
        e if -e == libc::ENOBUFS || -e == libc::ECANCELED => false,
        e if -e == libc::EAGAIN || -e == libc::EINTR => false,
        e => {
            if !more {
                p.end.get_or_insert(End::Error(-e));
            }
            true
        }
    }
}

/// Notes a send's completion `res`: the bytes it took, what follows.
fn sent(p: &mut Pipe, res: i32) {
    p.in_flight = false;
    p.send_cancelled = false;
    match usize::try_from(res) {
        Ok(n) => {
            p.sent = (p.sent + n).min(p.sending.len());
            if p.sent == p.sending.len() {
                p.sending.clear();
                p.sent = 0;
                std::mem::swap(&mut p.sending, &mut p.pending);
            }
        }
        Err(_) if p.closing => {
            // Cancelled, or no room at once for the last bytes: dropped.
            p.sending.clear();
            p.pending.clear();
            p.sent = 0;
        }
        Err(_) if -res == libc::EAGAIN || -res == libc::EINTR => {}
        Err(_) => {
            p.send_error = Some(-res);
            p.sending.clear();
            p.pending.clear();
            p.sent = 0;
        }
    }
}

//! What a turn decided, put in the ring just before the wait enters the
//! kernel: receives to arm or cancel, sends, shutdowns, the polls of
//! watched fds, and the closing of connections nothing is in the ring for.

use super::book::{lock, Recv, Shut, INPUT_BOUND, LANDING};
use super::{multishot_recv, user_data, CompletionPoller, IN, KIND_CANCEL, KIND_POLL, KIND_RECV};
use super::{KIND_SEND, KIND_SHUTDOWN, OUT, RDHUP};
use io_uring::{opcode, types};
use std::io;
use std::os::fd::RawFd;

/// What to put in the ring for one pipe.
enum Op {
    /// A multishot receive, ended by the kernel after `cap` bytes in all
    /// (0: no cap).
    Recv {
        cap: u32,
    },
    /// A single receive of `len` bytes into `ptr` (a pipe's landing).
    RecvInto {
        ptr: *mut u8,
        len: u32,
    },
    CancelRecv,
    /// A send of `len` bytes from `ptr`; `last`: the connection is closing,
    /// so it must not wait for room.
    Send {
        ptr: *const u8,
        len: u32,
        last: bool,
    },
    CancelSend,
    Shutdown,
}

impl Op {
    fn name(&self) -> &'static str {
        match self {
            Op::Recv { .. } => "recv",
            Op::RecvInto { .. } => "recv into",
            Op::CancelRecv => "cancel recv",
            Op::Send { .. } => "send",
            Op::CancelSend => "cancel send",
            Op::Shutdown => "shutdown",
        }
    }
}

impl CompletionPoller {
    /// Queues what is due (see the module's comment).
    pub(super) fn submit_due(&mut self) -> io::Result<()> {
        self.bufs.publish();
        let watches = std::mem::take(&mut self.watches_due);
        for &fd in &watches {
            if let Some(Some(w)) = self.watches.get(fd as usize).copied() {
                if !w.armed {
                    let poll = opcode::PollAdd::new(types::Fd(fd), IN | OUT | RDHUP)
                        .multi(true)
                        .build()
                        .user_data(user_data(KIND_POLL, w.gen, fd));
                    self.push(&poll)?;
                    if let Some(Some(w)) = self.watches.get_mut(fd as usize) {
                        w.armed = true;
                    }
                }
            }
        }
        self.watches_due = watches;
        self.watches_due.clear();
        if !self.waker_armed {
            self.arm_waker()?;
        }
        let book = self.book.clone();
        let mut book = lock(&book);
        let due = std::mem::take(&mut book.due);
        for &(fd, gen) in &due {
            let Some(p) = book.pipe(fd, gen) else {
                continue;
            };
            p.queued = false;
            if p.closing && !p.busy() && p.owned.is_some() {
                // Nothing of it in the ring: the fd closes here.
                if let Some(slot) = book.pipes.get_mut(fd as usize) {
                    *slot = None;
                }
                continue;
            }
            let over = p.unread() >= INPUT_BOUND;
            // A multishot receive stops for a closing pipe, one over its
            // bound, and a fast sender; a single one only for a closing pipe.
            let stop = match p.recv {
                Recv::Armed => p.closing || over || p.fast,
                Recv::Landing { .. } => p.closing,
                Recv::Off | Recv::Cancelling => false,
            };
            if stop {
                p.recv = Recv::Cancelling;
                self.queue(Op::CancelRecv, fd, gen)?;
            } else if p.wants_recv() && p.fast {
                let len = LANDING.min(INPUT_BOUND - p.unread());
                p.landing.clear();
                p.landing.reserve_exact(len);
                p.recv = Recv::Landing { len };
                p.landing_busy = true;
                let op = Op::RecvInto {
                    ptr: p.landing.as_mut_ptr(),
                    len: len as u32,
                };
                self.queue(op, fd, gen)?;
            } else if p.wants_recv() {
                p.recv = Recv::Armed;
                // Capped at the room under the bound: however late the
                // loop reaps, the kernel copies no more into the pipe.
                let cap = match self.recv_cap {
                    true => (INPUT_BOUND - p.unread()) as u32,
                    false => 0,
                };
                self.queue(Op::Recv { cap }, fd, gen)?;
            }
            if p.in_flight {
                if p.closing && !p.send_cancelled {
                    p.send_cancelled = true;
                    self.queue(Op::CancelSend, fd, gen)?;
                }
            } else if p.sent < p.sending.len() && p.send_error.is_none() {
                p.in_flight = true;
                let rest = &p.sending[p.sent..];
                let op = Op::Send {
                    ptr: rest.as_ptr(),
                    len: u32::try_from(rest.len()).unwrap_or(u32::MAX),
                    last: p.closing,
                };
                self.queue(op, fd, gen)?;
            } else if p.shut == Shut::Due && !p.closing {
                p.shut = Shut::InRing;
                self.queue(Op::Shutdown, fd, gen)?;
            }
        }
        let mut due = due;
        due.clear();
        if book.due.is_empty() {
            book.due = due;
        }
        Ok(())
    }

    /// Puts `op` for pipe `fd` of generation `gen` in the ring.
    fn queue(&mut self, op: Op, fd: RawFd, gen: u32) -> io::Result<()> {
        log::trace!("submit: fd {fd} gen {gen}: {}", op.name());
        self.push(&entry(op, fd, gen))
    }
}

fn entry(op: Op, fd: RawFd, gen: u32) -> io_uring::squeue::Entry {
    let target = types::Fd(fd);
    match op {
        Op::Recv { cap } => multishot_recv(target, cap).user_data(user_data(KIND_RECV, gen, fd)),
        Op::RecvInto { ptr, len } => opcode::Recv::new(target, ptr, len)
            .build()
            .user_data(user_data(KIND_RECV, gen, fd)),
        Op::CancelRecv => opcode::AsyncCancel::new(user_data(KIND_RECV, gen, fd))
            .build()
            .user_data(user_data(KIND_CANCEL, gen, fd)),
        Op::Send { ptr, len, last } => {
            let mut flags = libc::MSG_NOSIGNAL;
            if last {
                flags |= libc::MSG_DONTWAIT;
            }
            opcode::Send::new(target, ptr, len)
                .flags(flags)
                .build()
                .user_data(user_data(KIND_SEND, gen, fd))
        }
        Op::CancelSend => opcode::AsyncCancel::new(user_data(KIND_SEND, gen, fd))
            .build()
            .user_data(user_data(KIND_CANCEL, gen, fd)),
        Op::Shutdown => opcode::Shutdown::new(target, libc::SHUT_WR)
            .build()
            .user_data(user_data(KIND_SHUTDOWN, gen, fd)),
    }
}

//! io_uring(7) in completion mode (`--poller io_uring-completion`): the
//! ring does a connection's I/O, not just tell when it could be done.
//!
//! - A connection (`attach`) gets a `Pipe` in the loop's `Book` and a
//!   `Link` the connection reads and writes through. One multishot `RECV`
//!   per connection takes buffers from a provided-buffer ring
//!   (`bufring.rs`); each completion's bytes are copied into the pipe and
//!   the buffer given back. A write copies into the pipe; the turn's wait
//!   submits one `SEND` per connection with output, straight from it.
//!   What a turn decided goes to the kernel with the wait, in one
//!   `io_uring_enter`: a keep-alive request costs no system call of its
//!   own.
//! - Completions become the events the readiness backends give
//!   (`Event`): received bytes or the end of stream make a connection
//!   readable, a send that emptied its output (or made room after a
//!   refused write) writable. So the connection code is the same for
//!   every backend: it reads and writes until `WouldBlock`.
//! - Other fds (the listeners) are watched with multishot `POLL_ADD`s, as
//!   the readiness `io_uring` backend does; accepts stay `accept4`.
//! - A connection's fd is closed by the poller, once its receive is
//!   cancelled and its last operation has completed (`Link::release`
//!   hands it over): an operation never meets a closed or reused fd, and
//!   the FIN goes as soon as the kernel lets go of the socket.
//!
//! Each operation's user data is `kind << 56 | generation << 32 | fd`.
//! A kernel without provided-buffer rings (5.19) or multishot receives
//! (6.0) gets the readiness `io_uring` backend instead, with one log line
//! naming what it lacks (`create`).

mod book;
mod bufring;
mod reap;
mod submit;
#[cfg(test)]
mod tests;

pub use book::Link;

use super::sys::{check_fd, not_registered};
use super::uring::{enter, push, setup, setup_deferred, wait_for, EventFd, WAKER_DATA};
use super::{Event, Features, Interest, Poller, Token, Wake};
use book::{lock, Pipe, Shared};
use bufring::BufRing;
use io_uring::{cqueue, opcode, squeue, types, IoUring};
use std::io;
use std::os::fd::RawFd;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

const KIND_POLL: u8 = 1;
const KIND_RECV: u8 = 2;
const KIND_SEND: u8 = 3;
const KIND_SHUTDOWN: u8 = 4;
/// Cancels, whose completions say nothing we need.
const KIND_CANCEL: u8 = 5;
/// Generations are 24 bits.
const GEN_MASK: u32 = 0x00ff_ffff;

fn user_data(kind: u8, gen: u32, fd: RawFd) -> u64 {
    (u64::from(kind) << 56) | (u64::from(gen & GEN_MASK) << 32) | u64::from(fd as u32)
}

/// (kind, generation, fd) of a user data.
fn parts(data: u64) -> (u8, u32, RawFd) {
    (
        (data >> 56) as u8,
        ((data >> 32) as u32) & GEN_MASK,
        (data & 0xffff_ffff) as u32 as RawFd,
    )
}

const IN: u32 = libc::POLLIN as u32;
const OUT: u32 = libc::POLLOUT as u32;
const RDHUP: u32 = libc::POLLRDHUP as u32;
const HANGUP: u32 = (libc::POLLHUP | libc::POLLERR) as u32 | RDHUP;

/// A watched fd that is no connection (a listener).
#[derive(Clone, Copy, Debug)]
struct Watch {
    token: Token,
    gen: u32,
    /// Its multishot poll is in the ring.
    armed: bool,
    seen: (u64, usize),
}

/// What the kernel lacks for this backend, named in the fallback's log line.
#[derive(Debug)]
pub enum Missing {
    /// `IORING_REGISTER_PBUF_RING` (5.19).
    BufferRing(io::Error),
    /// Multishot `IORING_OP_RECV` (6.0).
    MultishotRecv,
}

impl std::fmt::Display for Missing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Missing::BufferRing(e) => write!(f, "provided buffer rings (5.19): {e}"),
            Missing::MultishotRecv => f.write_str("multishot receives (6.0)"),
        }
    }
}

/// Why the backend did not start.
#[derive(Debug)]
pub enum StartError {
    /// No io_uring at all (or refused): the caller's error.
    Ring(io::Error),
    /// io_uring without a feature this backend needs: readiness mode does.
    Missing(Missing),
}

pub struct CompletionPoller {
    /// Dropped first: the kernel lets go of what it holds of ours.
    ring: IoUring,
    bufs: BufRing,
    book: Shared,
    /// Non-connection fds, by fd.
    watches: Vec<Option<Watch>>,
    /// Watches whose poll must be (re-)armed at the next submit.
    watches_due: Vec<RawFd>,
    next_gen: u32,
    waker: Arc<EventFd>,
    waker_armed: bool,
    /// Counts waits, for merging a source's completions into one event.
    turn: u64,
    /// The kernel ends a multishot receive after a total it is given
    /// (6.17): each is armed for the room under the pipe's input bound.
    recv_cap: bool,
    /// The ring is `DEFER_TASKRUN` (`setup_deferred`) ...
    deferred: bool,
    /// ... and still disabled: the first wait, on the loop's thread,
    /// enables it.
    disabled: bool,
}

impl CompletionPoller {
    /// Starts the ring and its buffers, checking the kernel has what the
    /// backend needs.
    pub fn new() -> Result<Self, StartError> {
        Self::start(false)
    }

    /// `deny_multishot_recv`: behave as a kernel without multishot
    /// receives (so the fallback is tested here too).
    ///
    /// Where the kernel has `DEFER_TASKRUN` (6.1, after multishot
    /// receives), the ring is made disabled and the loop's thread enables
    /// it at its first wait; until then entries are only queued. A
    /// disabled ring cannot run the probes: they run on a plain ring,
    /// dropped after, once per process (the kernel's answer is the same
    /// for every loop's poller).
    pub(crate) fn start(deny_multishot_recv: bool) -> Result<Self, StartError> {
        let probed = || {
            let mut p = Self::on_ring(setup().map_err(StartError::Ring)?, false)?;
            p.probe(deny_multishot_recv)?;
            Ok(p)
        };
        let deferred = (!deny_multishot_recv).then(setup_deferred).flatten();
        let mut p = match deferred {
            None => probed()?,
            Some(ring) => {
                static RECV_CAP: OnceLock<bool> = OnceLock::new();
                let recv_cap = match RECV_CAP.get() {
                    Some(&cap) => cap,
                    None => {
                        let cap = probed()?.recv_cap;
                        *RECV_CAP.get_or_init(|| cap)
                    }
                };
                let mut p = Self::on_ring(ring, true)?;
                p.recv_cap = recv_cap;
                p
            }
        };
        p.arm_waker().map_err(StartError::Ring)?;
        Ok(p)
    }

    /// The poller on `ring` (`deferred`: made by `setup_deferred`), with
    /// its buffers registered.
    fn on_ring(ring: IoUring, deferred: bool) -> Result<Self, StartError> {
        let bufs =
            BufRing::register(&ring).map_err(|e| StartError::Missing(Missing::BufferRing(e)))?;
        Ok(CompletionPoller {
            ring,
            bufs,
            book: Shared::default(),
            watches: Vec::new(),
            watches_due: Vec::new(),
            next_gen: 1,
            waker: Arc::new(EventFd::new().map_err(StartError::Ring)?),
            waker_armed: false,
            turn: 1,
            recv_cap: false,
            deferred,
            disabled: deferred,
        })
    }

    /// Checks the kernel has multishot receives, and whether it caps
    /// them (`recv_cap`).
    fn probe(&mut self, deny_multishot_recv: bool) -> Result<(), StartError> {
        if deny_multishot_recv {
            return Err(StartError::Missing(Missing::MultishotRecv));
        }
        // A multishot receive capped at 1 byte, with 2 waiting, ends at
        // its first completion (which took both: the cap ends a receive, it
        // does not shorten one): the kernel honours caps, and so has
        // multishot receives. One that refuses the cap (`EINVAL`) gets
        // the uncapped probe.
        let (res, more) = self.probe_recv(1).map_err(StartError::Ring)?;
        self.recv_cap = res > 0 && !more;
        if !self.recv_cap && !self.probe_recv(0).map_err(StartError::Ring)?.1 {
            return Err(StartError::Missing(Missing::MultishotRecv));
        }
        Ok(())
    }

    /// Arms a multishot receive (capped at `cap` bytes in all unless 0) on
    /// one end of a socket pair with two bytes waiting; returns its first
    /// completion's result and whether any completion said `MORE` (the
    /// kernel has multishot receives). A receive still armed is cancelled.
    fn probe_recv(&mut self, cap: u32) -> io::Result<(i32, bool)> {
        use std::io::Write;
        let (a, mut b) = std::os::unix::net::UnixStream::pair()?;
        b.write_all(b"xy")?;
        let fd = std::os::fd::AsRawFd::as_raw_fd(&a);
        let probe = user_data(KIND_RECV, 0, fd);
        let recv = multishot_recv(types::Fd(fd), cap).user_data(probe);
        self.push(&recv)?;
        self.ring.submit_and_wait(1)?;
        let mut first = None;
        let mut more = false;
        let mut done = false;
        for cqe in self.ring.completion() {
            first.get_or_insert(cqe.result());
            more |= cqueue::more(cqe.flags());
            done |= !cqueue::more(cqe.flags());
            if let Some(bid) = cqueue::buffer_select(cqe.flags()) {
                self.bufs.recycle(bid);
            }
        }
        self.bufs.publish();
        if more && !done {
            // Cancelled before `a` closes (the pair outlives the wait).
            let cancel =
                opcode::AsyncCancel::new(probe)
                    .build()
                    .user_data(user_data(KIND_CANCEL, 0, fd));
            self.push(&cancel)?;
            let deadline = Instant::now() + Duration::from_secs(1);
            while !done && Instant::now() < deadline {
                enter(&mut self.ring, Some(Duration::from_millis(100)), false)?;
                for cqe in self.ring.completion() {
                    if cqe.user_data() == probe && !cqueue::more(cqe.flags()) {
                        done = true;
                    }
                }
            }
        }
        Ok((first.unwrap_or(0), more))
    }

    fn arm_waker(&mut self) -> io::Result<()> {
        let poll = self.waker.poll(true);
        self.push(&poll)?;
        self.waker_armed = true;
        Ok(())
    }

    /// Queues `entry`, entering the kernel first if the ring is full.
    ///
    /// Every entry queued names an fd the poller knows is open until its
    /// completion (a pipe's is closed only once nothing of it is in the
    /// ring) and, for a send, bytes that stay put until then (a pipe's
    /// `sending`, not touched while `in_flight`); a receive names no
    /// memory but the buffer group.
    fn push(&mut self, entry: &squeue::Entry) -> io::Result<()> {
        // SAFETY: see above: what the entry points to outlives it.
        unsafe { push(&mut self.ring, entry) }
    }

    fn gen(&mut self) -> u32 {
        let gen = self.next_gen;
        self.next_gen = (gen + 1) & GEN_MASK;
        gen
    }
}

impl Poller for CompletionPoller {
    fn name(&self) -> &'static str {
        "io_uring-completion"
    }

    fn features(&self) -> Features {
        Features {
            edge_triggered: true,
            hup_flag: true,
            // A connection's receive stays armed whatever it wants.
            hup_without_interest: true,
            fd_limit: None,
        }
    }

    fn register(&mut self, fd: RawFd, token: Token, _interest: Interest) -> io::Result<()> {
        check_fd(fd)?;
        let i = fd as usize;
        if i >= self.watches.len() {
            self.watches.resize(i + 1, None);
        }
        if self.watches[i].is_some() || self.has_pipe(fd) {
            return Err(super::sys::already_registered(fd));
        }
        let gen = self.gen();
        self.watches[i] = Some(Watch {
            token,
            gen,
            armed: false,
            seen: (0, 0),
        });
        self.watches_due.push(fd);
        Ok(())
    }

    fn attach(&mut self, fd: RawFd, token: Token) -> io::Result<Option<Link>> {
        check_fd(fd)?;
        if matches!(self.watches.get(fd as usize), Some(Some(_))) || self.has_pipe(fd) {
            return Err(super::sys::already_registered(fd));
        }
        let gen = self.gen();
        let mut book = lock(&self.book);
        let i = fd as usize;
        if i >= book.pipes.len() {
            book.pipes.resize_with(i + 1, || None);
        }
        book.pipes[i] = Some(Pipe::new(gen, token));
        book.mark(fd, gen);
        Ok(Some(Link::new(self.book.clone(), fd, gen)))
    }

    fn reregister(&mut self, fd: RawFd, token: Token, _interest: Interest) -> io::Result<()> {
        check_fd(fd)?;
        // Edge-triggered both ways: only the token can change.
        if let Some(Some(w)) = self.watches.get_mut(fd as usize) {
            w.token = token;
            return Ok(());
        }
        let mut book = lock(&self.book);
        match book.pipes.get_mut(fd as usize) {
            Some(Some(p)) if !p.closing => {
                p.token = token;
                Ok(())
            }
            _ => Err(not_registered(fd)),
        }
    }

    fn deregister(&mut self, fd: RawFd) -> io::Result<()> {
        check_fd(fd)?;
        if let Some(w) = self.watches.get_mut(fd as usize).and_then(Option::take) {
            if w.armed {
                let remove = opcode::PollRemove::new(user_data(KIND_POLL, w.gen, fd))
                    .build()
                    .user_data(user_data(KIND_CANCEL, w.gen, fd));
                self.push(&remove)?;
                // Now: the poll holds the socket open until it is removed,
                // and the caller closes the fd next (a deferred ring lets
                // go of it in the work its issuer runs when asking for
                // events: asked, without waiting).
                enter(&mut self.ring, Some(Duration::ZERO), self.deferred)?;
            }
            return Ok(());
        }
        let mut book = lock(&self.book);
        let Some(Some(p)) = book.pipes.get_mut(fd as usize) else {
            return Err(not_registered(fd));
        };
        if p.closing {
            return Err(not_registered(fd));
        }
        p.closing = true;
        let gen = p.gen;
        book.mark(fd, gen);
        Ok(())
    }

    fn wait(&mut self, events: &mut Vec<Event>, timeout: Option<Duration>) -> io::Result<()> {
        events.clear();
        if self.disabled {
            // This thread becomes the ring's one issuer.
            self.ring.submitter().register_enable_rings()?;
            self.disabled = false;
        }
        let deferred = self.deferred;
        wait_for(timeout, timeout, |left| {
            self.submit_due()?;
            let completed = enter(&mut self.ring, left, deferred)?;
            self.reap(events);
            Ok(!events.is_empty() || !completed)
        })
    }

    fn waker(&self) -> Arc<dyn Wake> {
        self.waker.clone()
    }
}

impl CompletionPoller {
    fn has_pipe(&self, fd: RawFd) -> bool {
        matches!(lock(&self.book).pipes.get(fd as usize), Some(Some(_)))
    }
}

impl Drop for CompletionPoller {
    /// What the kernel may still write into (the receive buffers) or read
    /// from (a send's bytes) is leaked when operations are in the ring:
    /// the ring's teardown finishes them after its fd is closed.
    fn drop(&mut self) {
        let mut book = lock(&self.book);
        let mut busy = false;
        for p in book.pipes.iter_mut().flatten() {
            busy |= p.recv != book::Recv::Off;
            if p.in_flight {
                std::mem::forget(std::mem::take(&mut p.sending));
            }
            if p.landing_busy {
                std::mem::forget(std::mem::take(&mut p.landing));
            }
        }
        if busy {
            self.bufs.leak();
        }
    }
}

/// A multishot receive into the buffer ring's group; with a `cap` (not 0)
/// the kernel ends it once that many bytes came in all (no `MORE` on the
/// completion that reaches it, which may hold up to a buffer more). The
/// cap is the entry's `optlen` (6.17), which `RecvMulti` does not set: a
/// kernel before it refuses the entry (`EINVAL`), so `cap` is given only
/// where a probe saw it honoured.
fn multishot_recv(target: types::Fd, cap: u32) -> squeue::Entry {
    let entry = opcode::RecvMulti::new(target, bufring::GROUP).build();
    if cap == 0 {
        return entry;
    }
    // SAFETY: `Entry` is `#[repr(C)]` around the kernel's 64-byte
    // `io_uring_sqe`, plain integers and unions of integers, so its bytes
    // may be read and written as an array of that size and every pattern
    // is a valid entry; `OPTLEN` is the offset of the sqe's `optlen`
    // (the union of `splice_fd_in`/`file_index`/`optlen`, at byte 44 of
    // the kernel's layout, which `RecvMulti` leaves zero).
    let mut bytes: [u8; 64] = unsafe { std::mem::transmute(entry) };
    bytes[OPTLEN..OPTLEN + 4].copy_from_slice(&cap.to_ne_bytes());
    // SAFETY: as above, back to the entry it was.
    unsafe { std::mem::transmute::<[u8; 64], squeue::Entry>(bytes) }
}

/// Where `io_uring_sqe.optlen` sits.
const OPTLEN: usize = 44;

//! What the completion backend keeps for each connection it does the I/O
//! of (a `Pipe`: the bytes received and not yet read, the bytes written
//! and not yet sent, where its operations in the ring stand), and the
//! handle the connection reads and writes through (`Link`). The book is
//! shared between the loop's poller and its connections' links, all on
//! the loop's thread (the lock is never contended).
//!
//! No operation is put in the ring here: a link's read or write changes
//! its pipe and marks it `due`, and the poller's next wait submits what
//! is due just before it enters the kernel. So an operation never names
//! an fd that was closed (and perhaps reused) since it was decided.

use super::super::Token;
use std::io::{self, IoSlice};
use std::os::fd::{OwnedFd, RawFd};
use std::sync::{Arc, Mutex, MutexGuard};

/// Bytes received and not read above which the receive is cancelled
/// (re-armed once the connection reads under it): the kernel's socket
/// buffer and the TCP window hold the rest, as on a readiness backend.
pub const INPUT_BOUND: usize = 64 * 1024;
/// Bytes written and not sent above which a write would block, as a
/// socket's send buffer does.
pub const OUTPUT_BOUND: usize = 128 * 1024;
/// The most one receive into a pipe's own buffer takes (`Pipe::landing`).
pub const LANDING: usize = 64 * 1024;

/// A buffer's capacity kept once it is empty (a request's, an answer's);
/// a larger one (a burst's) is given back.
const KEEP: usize = 16 * 1024;

/// Where a pipe's receive stands.
///
/// A connection whose client sends a little at a time (a request, then
/// the next once answered) has a multishot receive into the ring's shared
/// buffers, armed once. One whose client sends faster than it is read (an
/// upload, a flood: a completion said the socket has more) has a single
/// receive at a time into its own buffer (`landing`), of at most the room
/// under its bound: the shared buffers cannot all go to one connection,
/// and its bytes wait in the kernel (and the TCP window) while it is not
/// read, as on a readiness backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recv {
    /// None in the ring: armed at the next wait unless the input is over
    /// its bound or has ended.
    Off,
    /// A multishot receive into the shared buffers.
    Armed,
    /// A single receive into `landing`, of `len` bytes.
    Landing { len: usize },
    /// Its cancel is submitted; its last completion has not come.
    Cancelling,
}

/// How the input ends after its bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    Eof,
    /// An errno.
    Error(i32),
}

/// Where the sending half stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shut {
    Open,
    /// `shutdown_write` asked for it: sent once the output is out.
    Due,
    /// The shutdown is in the ring.
    InRing,
    Done,
}

/// One connection's I/O state.
pub struct Pipe {
    pub gen: u32,
    pub token: Token,
    pub input: Vec<u8>,
    pub read_at: usize,
    pub end: Option<End>,
    pub recv: Recv,
    /// The last receive left bytes in the socket: the next is a single
    /// one into `landing`.
    pub fast: bool,
    /// A single receive's buffer (the kernel writes into its spare
    /// capacity while `landing_busy`: not touched then).
    pub landing: Vec<u8>,
    pub landing_busy: bool,
    /// The bytes of the send in the ring (never touched while it is in
    /// flight: the kernel reads them), from `sent` on.
    pub sending: Vec<u8>,
    pub sent: usize,
    pub in_flight: bool,
    /// Bytes written while a send was in flight.
    pub pending: Vec<u8>,
    /// A send failed (errno): writes fail with it from now on.
    pub send_error: Option<i32>,
    pub shut: Shut,
    /// A write was refused for want of room: tell the connection when
    /// there is some.
    pub blocked: bool,
    /// In the book's `due` list.
    pub queued: bool,
    /// Closing with a send in the ring: its cancel was submitted.
    pub send_cancelled: bool,
    /// Deregistered: no more events; its fd is closed once nothing of
    /// its is in the ring (`owned` holds it from the link's drop).
    pub closing: bool,
    pub owned: Option<OwnedFd>,
    /// The wait that last reported this pipe, and where in its events.
    pub seen: (u64, usize),
}

impl Pipe {
    pub fn new(gen: u32, token: Token) -> Self {
        Pipe {
            gen,
            token,
            input: Vec::new(),
            read_at: 0,
            end: None,
            recv: Recv::Off,
            fast: false,
            landing: Vec::new(),
            landing_busy: false,
            sending: Vec::new(),
            sent: 0,
            in_flight: false,
            pending: Vec::new(),
            send_error: None,
            shut: Shut::Open,
            blocked: false,
            queued: false,
            send_cancelled: false,
            closing: false,
            owned: None,
            seen: (0, 0),
        }
    }

    /// Bytes received and not read.
    pub fn unread(&self) -> usize {
        self.input.len() - self.read_at
    }

    /// Bytes written and not sent yet.
    pub fn unsent(&self) -> usize {
        self.sending.len() - self.sent + self.pending.len()
    }

    /// True while the receive should be armed.
    pub fn wants_recv(&self) -> bool {
        self.recv == Recv::Off && self.end.is_none() && !self.closing && self.unread() < INPUT_BOUND
    }

    /// True while anything of this pipe's is in the ring.
    pub fn busy(&self) -> bool {
        self.recv != Recv::Off || self.in_flight || self.shut == Shut::InRing
    }

    /// True while bytes wait to be sent (or in the ring), or a FIN.
    pub fn has_output(&self) -> bool {
        self.in_flight || self.unsent() > 0 || matches!(self.shut, Shut::Due | Shut::InRing)
    }

    /// A single receive of `len` bytes into `landing` ended with `n`
    /// bytes (0: the end, an error or a cancel); `nonempty`: the kernel
    /// said the socket has more. The sender stays fast while receives
    /// come back full.
    pub fn landing_done(&mut self, n: usize, len: usize, nonempty: bool) {
        self.landing_busy = false;
        if n > 0 {
            self.land(n);
        }
        self.fast = n > 0 && (n == len || nonempty);
    }

    /// Takes in the `n` bytes a single receive brought into `landing`.
    pub fn land(&mut self, n: usize) {
        let n = n.min(self.landing.capacity());
        // SAFETY: the kernel wrote `n` bytes (its completion's result,
        // at most the length the receive was given, which is at most the
        // capacity: `submit`) into the spare capacity, which starts at
        // length 0.
        unsafe { self.landing.set_len(n) };
        if self.unread() == 0 && !self.closing {
            // The common case: the landed bytes become the input as they are.
            self.read_at = 0;
            self.input.clear();
            std::mem::swap(&mut self.input, &mut self.landing);
        } else {
            let landing = std::mem::take(&mut self.landing);
            self.take_in(&landing);
            self.landing = landing;
        }
        self.landing.clear();
    }

    /// Takes in bytes a receive brought (dropped once closing), behind
    /// the unread ones (the read ones go first).
    pub fn take_in(&mut self, bytes: &[u8]) {
        if self.closing {
            return;
        }
        if self.read_at > 0 {
            self.input.drain(..self.read_at);
            self.read_at = 0;
        }
        self.input.extend_from_slice(bytes);
    }

    /// Gives back the memory of a burst once its buffers are empty.
    pub fn trim(&mut self) {
        if self.read_at == self.input.len() {
            self.read_at = 0;
            if self.input.capacity() > KEEP {
                self.input = Vec::new();
            } else {
                self.input.clear();
            }
        }
        if !self.landing_busy && !self.fast && self.landing.capacity() > 0 {
            self.landing = Vec::new();
        }
        if self.pending.is_empty() && self.pending.capacity() > KEEP {
            self.pending = Vec::new();
        }
        if !self.in_flight && self.sent == self.sending.len() {
            self.sent = 0;
            if self.sending.capacity() > KEEP {
                self.sending = Vec::new();
            } else {
                self.sending.clear();
            }
        }
    }
}

/// Every pipe of one loop, by fd, and the ones with something due. A
/// pipe's fd is closed by the poller, once nothing of the pipe's is in
/// the ring, and the pipe goes with it: so an fd is never reused while a
/// pipe (or an operation) still names it.
#[derive(Default)]
pub struct Book {
    pub pipes: Vec<Option<Pipe>>,
    /// (fd, generation) of pipes with something to submit.
    pub due: Vec<(RawFd, u32)>,
}

impl Book {
    pub fn pipe(&mut self, fd: RawFd, gen: u32) -> Option<&mut Pipe> {
        match self.pipes.get_mut(fd as usize) {
            Some(Some(p)) if p.gen == gen => Some(p),
            _ => None,
        }
    }

    /// Marks a pipe as having something to submit.
    pub fn mark(&mut self, fd: RawFd, gen: u32) {
        if let Some(p) = self.pipe(fd, gen) {
            if !p.queued {
                p.queued = true;
                self.due.push((fd, gen));
            }
        }
    }
}

pub type Shared = Arc<Mutex<Book>>;

pub fn lock(book: &Shared) -> MutexGuard<'_, Book> {
    // A panic while it was held left a pipe half-changed at worst; the
    // loop goes on with what it has.
    book.lock().unwrap_or_else(|e| e.into_inner())
}

fn gone() -> io::Error {
    io::Error::new(io::ErrorKind::NotConnected, "the connection was closed")
}

/// A connection's way to its pipe: what it reads comes from the bytes
/// the ring received, what it writes is queued for the ring to send.
pub struct Link {
    book: Shared,
    fd: RawFd,
    gen: u32,
}

impl Link {
    pub(super) fn new(book: Shared, fd: RawFd, gen: u32) -> Self {
        Link { book, fd, gen }
    }

    /// Reads what was received; `WouldBlock` when nothing is, `Ok(0)` at
    /// the peer's end of stream.
    pub fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        let mut book = lock(&self.book);
        let Some(p) = book.pipe(self.fd, self.gen) else {
            return Err(gone());
        };
        if p.unread() == 0 {
            return match p.end {
                Some(End::Eof) => Ok(0),
                Some(End::Error(errno)) => Err(io::Error::from_raw_os_error(errno)),
                None => Err(io::ErrorKind::WouldBlock.into()),
            };
        }
        let n = buf.len().min(p.unread());
        buf[..n].copy_from_slice(&p.input[p.read_at..p.read_at + n]);
        p.read_at += n;
        p.trim();
        if p.wants_recv() {
            book.mark(self.fd, self.gen);
        }
        Ok(n)
    }

    /// Queues `bufs` to be sent, as far as `OUTPUT_BOUND` allows.
    pub fn write_vectored(&self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        let mut book = lock(&self.book);
        let Some(p) = book.pipe(self.fd, self.gen) else {
            return Err(gone());
        };
        if let Some(errno) = p.send_error {
            return Err(io::Error::from_raw_os_error(errno));
        }
        if p.shut != Shut::Open {
            return Err(io::ErrorKind::BrokenPipe.into());
        }
        let total: usize = bufs.iter().map(|b| b.len()).sum();
        if total == 0 {
            return Ok(0);
        }
        let room = OUTPUT_BOUND.saturating_sub(p.unsent());
        if room == 0 {
            p.blocked = true;
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let into = if p.in_flight {
            &mut p.pending
        } else {
            if p.sent == p.sending.len() {
                p.sending.clear();
                p.sent = 0;
            }
            &mut p.sending
        };
        let mut left = room;
        for b in bufs {
            let k = b.len().min(left);
            into.extend_from_slice(&b[..k]);
            left -= k;
            if left == 0 {
                break;
            }
        }
        book.mark(self.fd, self.gen);
        Ok(room - left)
    }

    /// True while written bytes (or a FIN) wait for the ring.
    pub fn has_output(&self) -> bool {
        let mut book = lock(&self.book);
        book.pipe(self.fd, self.gen).is_some_and(|p| p.has_output())
    }

    /// Ends the sending half once what was written is out.
    pub fn shutdown_write(&self) -> io::Result<()> {
        let mut book = lock(&self.book);
        let Some(p) = book.pipe(self.fd, self.gen) else {
            return Err(gone());
        };
        if p.shut == Shut::Open {
            p.shut = Shut::Due;
            book.mark(self.fd, self.gen);
        }
        Ok(())
    }

    /// The error the input or a send ended with, if any.
    pub fn take_error(&self) -> Option<io::Error> {
        let mut book = lock(&self.book);
        let p = book.pipe(self.fd, self.gen)?;
        match p.end {
            Some(End::Error(errno)) => Some(io::Error::from_raw_os_error(errno)),
            _ => p.send_error.map(io::Error::from_raw_os_error),
        }
    }

    /// Hands the connection's fd over: the poller closes it once nothing
    /// of the pipe's is in the ring (what was written before goes out
    /// first, as far as the socket takes it at once).
    pub fn release(&self, fd: OwnedFd) {
        let mut book = lock(&self.book);
        if let Some(p) = book.pipe(self.fd, self.gen) {
            p.closing = true;
            p.owned = Some(fd);
            book.mark(self.fd, self.gen);
        }
        // A pipe already gone (the poller dropped): `fd` closes here.
    }

    /// The fd the pipe is for.
    pub fn fd(&self) -> RawFd {
        self.fd
    }
}

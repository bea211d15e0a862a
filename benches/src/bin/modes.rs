//! `stoa-modes`: one keep-alive HTTP/1.1 responder for a fixed `/hello/`-sized
//! answer, run over three I/O modes so they are compared on the same code
//! (issue 16's completion-mode measurement, outside the host):
//!
//! - `epoll`: edge-triggered epoll, `recv`/`send` syscalls per request;
//! - `uring-poll`: io_uring readiness (one multishot `POLL_ADD` per socket,
//!   one `io_uring_enter` per turn), `recv`/`send` syscalls per request —
//!   the shape of the host's `--poller io_uring`;
//! - `uring-completion`: io_uring completion: multishot `ACCEPT`, multishot
//!   `RECV` into a provided-buffer ring, `SEND` of each connection's output
//!   submitted from the loop, one `submit_and_wait` per turn, with
//!   `IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN`
//!   (`uring-completion-plain`: the same with `IORING_SETUP_COOP_TASKRUN`
//!   instead, as the readiness ring and the host's backend use).
//!
//! Requests are parsed with httparse (as the host does); each complete head
//! gets the fixed answer. One thread; prints `listening on http://ADDR` like
//! the host so `benches/cpu_lib.sh` can drive it. Runs until killed.
//!
//! Usage: `stoa-modes MODE [BIND]` (BIND defaults to 127.0.0.1:0).

use io_uring::{cqueue, opcode, squeue, types, IoUring};
use std::io::{self, ErrorKind, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::sync::atomic::{AtomicU16, Ordering};

/// The answer: the size of the host's `/hello/` body and a minimal head.
const RESPONSE: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n\
Content-Length: 34\r\n\r\n<h1>Hello from hello-project!</h1>";

/// A connection's unparsed input is capped (a bench peer never comes near).
const MAX_INPUT: usize = 64 * 1024;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mode = args.get(1).map(String::as_str).unwrap_or("");
    let bind = args.get(2).map(String::as_str).unwrap_or("127.0.0.1:0");
    let result = TcpListener::bind(bind).and_then(|listener| {
        listener.set_nonblocking(true)?;
        match mode {
            "epoll" => readiness(listener, Backend::epoll()?),
            "uring-poll" => readiness(listener, Backend::uring()?),
            "uring-completion" => completion(listener, true),
            "uring-completion-plain" => completion(listener, false),
            _ => {
                eprintln!(
                    "usage: stoa-modes epoll|uring-poll|uring-completion|uring-completion-plain [BIND]"
                );
                std::process::exit(2);
            }
        }
    });
    if let Err(err) = result {
        eprintln!("stoa-modes: {err}");
        std::process::exit(1);
    }
}

fn announce(listener: &TcpListener) -> io::Result<()> {
    println!("listening on http://{}", listener.local_addr()?);
    Ok(())
}

/// Parses every complete request head at the front of `input`, appends one
/// answer per request to `out`, and drops the parsed bytes. False on a
/// malformed request or oversized input (the connection is then closed).
fn serve(input: &mut Vec<u8>, out: &mut Vec<u8>) -> bool {
    let mut off = 0;
    loop {
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut req = httparse::Request::new(&mut headers);
        match req.parse(&input[off..]) {
            Ok(httparse::Status::Complete(n)) => {
                off += n;
                out.extend_from_slice(RESPONSE);
            }
            Ok(httparse::Status::Partial) => break,
            Err(_) => return false,
        }
    }
    input.drain(..off);
    input.len() <= MAX_INPUT
}

/// User data / token: `generation << 32 | slot`, plus a kind in the top bits
/// for the completion mode.
fn tag(kind: u64, gen: u32, slot: usize) -> u64 {
    kind << 62 | u64::from(gen & 0x3fff_ffff) << 32 | slot as u64
}
fn untag(data: u64) -> (u64, u32, usize) {
    (
        data >> 62,
        (data >> 32) as u32 & 0x3fff_ffff,
        (data & 0xffff_ffff) as usize,
    )
}

/// A slab of connections with generations (a completion or event for a
/// closed slot's previous occupant is recognized and ignored).
struct Slab<T> {
    slots: Vec<(u32, Option<T>)>,
    free: Vec<usize>,
}

impl<T> Slab<T> {
    fn new() -> Self {
        Slab {
            slots: Vec::new(),
            free: Vec::new(),
        }
    }
    fn insert(&mut self, value: T) -> (usize, u32) {
        let slot = match self.free.pop() {
            Some(slot) => slot,
            None => {
                self.slots.push((0, None));
                self.slots.len() - 1
            }
        };
        let entry = &mut self.slots[slot];
        entry.0 = entry.0.wrapping_add(1) & 0x3fff_ffff;
        entry.1 = Some(value);
        (slot, entry.0)
    }
    fn get(&mut self, slot: usize, gen: u32) -> Option<&mut T> {
        match self.slots.get_mut(slot) {
            Some((g, Some(value))) if *g == gen => Some(value),
            _ => None,
        }
    }
    fn remove(&mut self, slot: usize) -> Option<T> {
        let value = self.slots.get_mut(slot)?.1.take();
        if value.is_some() {
            self.free.push(slot);
        }
        value
    }
}

// ---------------------------------------------------------------- readiness

/// The two readiness backends, edge-triggered, both directions watched.
enum Backend {
    Epoll(RawFd),
    Uring(Box<IoUring>),
}

const LISTENER: u64 = u64::MAX;
const REMOVE: u64 = u64::MAX - 1;

impl Backend {
    fn epoll() -> io::Result<Backend> {
        // SAFETY: epoll_create1 takes no pointers.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Backend::Epoll(fd))
    }

    fn uring() -> io::Result<Backend> {
        // COOP_TASKRUN, as the host's readiness backend: no interrupt of the
        // loop for each poll wakeup's task work.
        let ring = IoUring::builder().setup_coop_taskrun().build(4096)?;
        Ok(Backend::Uring(Box::new(ring)))
    }

    fn add(&mut self, fd: RawFd, token: u64) -> io::Result<()> {
        match self {
            Backend::Epoll(ep) => {
                let mut ev = libc::epoll_event {
                    events: (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLRDHUP | libc::EPOLLET)
                        as u32,
                    u64: token,
                };
                // SAFETY: `ev` is a valid epoll_event for the call's duration.
                if unsafe { libc::epoll_ctl(*ep, libc::EPOLL_CTL_ADD, fd, &mut ev) } < 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            }
            Backend::Uring(ring) => {
                let mask = (libc::POLLIN | libc::POLLOUT | libc::POLLRDHUP) as u32;
                let sqe = opcode::PollAdd::new(types::Fd(fd), mask)
                    .multi(true)
                    .build()
                    .user_data(token);
                push(ring, &sqe)
            }
        }
    }

    /// Before a socket is closed: epoll forgets it by itself; an io_uring
    /// poll holds the socket until removed, so the removal enters at once.
    fn remove(&mut self, token: u64) -> io::Result<()> {
        if let Backend::Uring(ring) = self {
            push(
                ring,
                &opcode::PollRemove::new(token).build().user_data(REMOVE),
            )?;
            ring.submit()?;
        }
        Ok(())
    }

    /// Waits for events; fills `ready` with the tokens reported, each with
    /// whether its poll ended and must be added again (io_uring only).
    fn wait(&mut self, ready: &mut Vec<(u64, bool)>) -> io::Result<()> {
        ready.clear();
        match self {
            Backend::Epoll(ep) => {
                let mut events = [libc::epoll_event { events: 0, u64: 0 }; 1024];
                // SAFETY: `events` is writable for its whole length.
                let n = unsafe { libc::epoll_wait(*ep, events.as_mut_ptr(), 1024, -1) };
                if n < 0 {
                    let err = io::Error::last_os_error();
                    return if err.kind() == ErrorKind::Interrupted {
                        Ok(())
                    } else {
                        Err(err)
                    };
                }
                ready.extend(events[..n as usize].iter().map(|e| (e.u64, false)));
            }
            Backend::Uring(ring) => {
                match ring.submit_and_wait(1) {
                    Ok(_) => {}
                    Err(err) if err.kind() == ErrorKind::Interrupted => return Ok(()),
                    Err(err) => return Err(err),
                }
                for cqe in ring.completion() {
                    let data = cqe.user_data();
                    if data == REMOVE || cqe.result() < 0 {
                        continue;
                    }
                    ready.push((data, !cqueue::more(cqe.flags())));
                }
            }
        }
        Ok(())
    }
}

fn push(ring: &mut IoUring, sqe: &squeue::Entry) -> io::Result<()> {
    loop {
        // SAFETY: every entry pushed here points to nothing (polls, removes)
        // or to memory that stays valid and untouched until its completion
        // (see the completion mode's `Conn::sending` and buffer ring).
        if unsafe { ring.submission().push(sqe) }.is_ok() {
            return Ok(());
        }
        ring.submit()?;
    }
}

struct RConn {
    stream: TcpStream,
    input: Vec<u8>,
    out: Vec<u8>,
}

fn readiness(listener: TcpListener, mut backend: Backend) -> io::Result<()> {
    backend.add(listener.as_raw_fd(), LISTENER)?;
    announce(&listener)?;
    let mut conns: Slab<RConn> = Slab::new();
    let mut ready = Vec::with_capacity(1024);
    let mut scratch = vec![0u8; 16 * 1024];
    loop {
        backend.wait(&mut ready)?;
        for &(token, rearm) in &ready {
            if token == LISTENER {
                if rearm {
                    backend.add(listener.as_raw_fd(), LISTENER)?;
                }
                accept_all(&listener, &mut backend, &mut conns)?;
                continue;
            }
            let (_, gen, slot) = untag(token);
            let Some(conn) = conns.get(slot, gen) else {
                continue;
            };
            if rearm {
                backend.add(conn.stream.as_raw_fd(), token)?;
            }
            if !on_ready(conn, &mut scratch) {
                backend.remove(token)?;
                conns.remove(slot);
            }
        }
    }
}

fn accept_all(
    listener: &TcpListener,
    backend: &mut Backend,
    conns: &mut Slab<RConn>,
) -> io::Result<()> {
    loop {
        match listener.accept() {
            Ok((stream, _)) => {
                stream.set_nonblocking(true)?;
                // A peer already gone fails here; its first I/O says so.
                let _ = stream.set_nodelay(true);
                let fd = stream.as_raw_fd();
                let (slot, gen) = conns.insert(RConn {
                    stream,
                    input: Vec::new(),
                    out: Vec::new(),
                });
                backend.add(fd, tag(0, gen, slot))?;
            }
            Err(err) if err.kind() == ErrorKind::WouldBlock => return Ok(()),
            Err(err) if err.kind() == ErrorKind::Interrupted => {}
            // Out of fds, or a connection reset before it was accepted.
            Err(_) => return Ok(()),
        }
    }
}

/// One readiness event: read what is there (one `recv` unless it fills the
/// scratch buffer), answer, write. False when the connection is done.
fn on_ready(conn: &mut RConn, scratch: &mut [u8]) -> bool {
    loop {
        match conn.stream.read(scratch) {
            Ok(0) => return false,
            Ok(n) => {
                conn.input.extend_from_slice(&scratch[..n]);
                if n < scratch.len() {
                    break;
                }
            }
            Err(err) if err.kind() == ErrorKind::WouldBlock => break,
            Err(err) if err.kind() == ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
    if !serve(&mut conn.input, &mut conn.out) {
        return false;
    }
    while !conn.out.is_empty() {
        match conn.stream.write(&conn.out) {
            Ok(n) => {
                conn.out.drain(..n);
            }
            Err(err) if err.kind() == ErrorKind::WouldBlock => break,
            Err(err) if err.kind() == ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
    true
}

// --------------------------------------------------------------- completion

const ACCEPT: u64 = 1;
const RECV: u64 = 2;
const SEND: u64 = 3;

/// Provided buffers: entries and the size of each (a request head is ~100 B).
const BUF_ENTRIES: u16 = 1024;
const BUF_SIZE: usize = 4096;
const BGID: u16 = 0;

/// A provided-buffer ring: the ring of `BufRingEntry`s and the buffers it
/// hands to the kernel. Both are leaked: they must outlive every receive in
/// the ring, and this process runs until it is killed.
struct BufRing {
    entries: *mut types::BufRingEntry,
    bufs: *mut u8,
    tail: u16,
}

impl BufRing {
    fn register(ring: &IoUring) -> io::Result<BufRing> {
        let ring_bytes = usize::from(BUF_ENTRIES) * std::mem::size_of::<types::BufRingEntry>();
        let layout = std::alloc::Layout::from_size_align(ring_bytes, 4096)
            .map_err(|e| io::Error::new(ErrorKind::InvalidInput, e))?;
        // SAFETY: the layout has a non-zero size.
        let entries = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<types::BufRingEntry>();
        let bufs: &'static mut [u8] =
            Box::leak(vec![0u8; usize::from(BUF_ENTRIES) * BUF_SIZE].into_boxed_slice());
        if entries.is_null() {
            return Err(io::Error::new(ErrorKind::OutOfMemory, "buffer ring"));
        }
        let mut br = BufRing {
            entries,
            bufs: bufs.as_mut_ptr(),
            tail: 0,
        };
        for bid in 0..BUF_ENTRIES {
            br.give(bid);
        }
        br.publish();
        // SAFETY: `entries` is page-aligned, BUF_ENTRIES long, zeroed then
        // initialized above, and never freed (leaked for the process's life).
        unsafe {
            ring.submitter()
                .register_buf_ring_with_flags(entries as u64, BUF_ENTRIES, BGID, 0)
        }?;
        Ok(br)
    }

    /// Queues buffer `bid` for the kernel again (visible at `publish`).
    fn give(&mut self, bid: u16) {
        let index = usize::from(self.tail & (BUF_ENTRIES - 1));
        // SAFETY: `index` < BUF_ENTRIES, within the ring allocation; the
        // kernel reads entries only up to the published tail, which is
        // behind this one.
        let entry = unsafe { &mut *self.entries.add(index) };
        // SAFETY: `bid` < BUF_ENTRIES, so the buffer lies within `bufs`.
        entry.set_addr(unsafe { self.bufs.add(usize::from(bid) * BUF_SIZE) } as u64);
        entry.set_len(BUF_SIZE as u32);
        entry.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
    }

    /// Makes the buffers given since the last call visible to the kernel.
    fn publish(&self) {
        // SAFETY: `entries` is the ring's first entry; its `resv` field is
        // the tail the kernel reads, a u16 it only reads and we only write.
        let tail = unsafe { &*types::BufRingEntry::tail(self.entries).cast::<AtomicU16>() };
        tail.store(self.tail, Ordering::Release);
    }

    /// The first `len` bytes of buffer `bid`, which the kernel has filled.
    fn data(&self, bid: u16, len: usize) -> &[u8] {
        let len = len.min(BUF_SIZE);
        let bid = usize::from(bid % BUF_ENTRIES);
        // SAFETY: the buffer lies within `bufs`; the kernel wrote it before
        // posting the completion and does not reuse it until `give`.
        unsafe { std::slice::from_raw_parts(self.bufs.add(bid * BUF_SIZE), len) }
    }
}

struct CConn {
    stream: TcpStream,
    input: Vec<u8>,
    /// Answers not yet submitted.
    out: Vec<u8>,
    /// The answers of the `SEND` in flight, from `sent`; untouched until its
    /// completion (the kernel reads them).
    sending: Vec<u8>,
    sent: usize,
    send_in_flight: bool,
    recv_armed: bool,
    closing: bool,
    queued: bool,
}

fn completion(listener: TcpListener, defer: bool) -> io::Result<()> {
    let mut builder = IoUring::builder();
    if defer {
        builder.setup_single_issuer().setup_defer_taskrun();
    } else {
        builder.setup_coop_taskrun();
    }
    let mut ring: IoUring = builder.setup_cqsize(16384).build(4096)?;
    let mut bufs = BufRing::register(&ring)?;
    let lfd = listener.as_raw_fd();
    push(
        &mut ring,
        &opcode::AcceptMulti::new(types::Fd(lfd))
            .build()
            .user_data(tag(ACCEPT, 0, 0)),
    )?;
    announce(&listener)?;
    let mut conns: Slab<CConn> = Slab::new();
    let mut dirty: Vec<(usize, u32)> = Vec::new();
    let mut done: Vec<(u64, i32, u32)> = Vec::with_capacity(4096);
    loop {
        // Hand the answers of the last turn to the kernel.
        for (slot, gen) in dirty.drain(..) {
            let Some(conn) = conns.get(slot, gen) else {
                continue;
            };
            conn.queued = false;
            if !conn.send_in_flight && !conn.out.is_empty() && !conn.closing {
                conn.sending.clear();
                std::mem::swap(&mut conn.sending, &mut conn.out);
                conn.sent = 0;
                submit_send(&mut ring, conn, slot, gen)?;
            }
        }
        bufs.publish();
        match ring.submit_and_wait(1) {
            Ok(_) => {}
            // EBUSY: completions to reap first (they are, below).
            Err(err) if err.kind() == ErrorKind::Interrupted => continue,
            Err(err) if err.raw_os_error() == Some(libc::EBUSY) => {}
            Err(err) => {
                return Err(io::Error::new(
                    err.kind(),
                    format!("submit_and_wait: {err}"),
                ))
            }
        }
        done.clear();
        done.extend(
            ring.completion()
                .map(|c| (c.user_data(), c.result(), c.flags())),
        );
        for &(data, res, flags) in &done {
            let (kind, gen, slot) = untag(data);
            match kind {
                ACCEPT => {
                    if res >= 0 {
                        // SAFETY: the kernel's accept made this fd for us; no
                        // one else owns it.
                        let stream = unsafe { TcpStream::from_raw_fd(res) };
                        // A peer already gone fails here; its first I/O says so.
                        let _ = stream.set_nodelay(true);
                        let fd = stream.as_raw_fd();
                        let (slot, gen) = conns.insert(CConn {
                            stream,
                            input: Vec::new(),
                            out: Vec::new(),
                            sending: Vec::new(),
                            sent: 0,
                            send_in_flight: false,
                            recv_armed: true,
                            closing: false,
                            queued: false,
                        });
                        push(&mut ring, &recv_sqe(fd, slot, gen))?;
                    }
                    if !cqueue::more(flags) {
                        let sqe = opcode::AcceptMulti::new(types::Fd(lfd)).build();
                        push(&mut ring, &sqe.user_data(tag(ACCEPT, 0, 0)))?;
                    }
                }
                RECV => {
                    let bid = cqueue::buffer_select(flags);
                    let Some(conn) = conns.get(slot, gen) else {
                        if let Some(bid) = bid {
                            bufs.give(bid);
                        }
                        continue;
                    };
                    if let Some(bid) = bid {
                        if res > 0 {
                            conn.input.extend_from_slice(bufs.data(bid, res as usize));
                        }
                        bufs.give(bid);
                    }
                    if res > 0 {
                        if serve(&mut conn.input, &mut conn.out) {
                            if !conn.queued {
                                conn.queued = true;
                                dirty.push((slot, gen));
                            }
                        } else {
                            // The receive ends with 0 once the socket is shut.
                            conn.closing = true;
                            let _ = conn.stream.shutdown(Shutdown::Both);
                        }
                    }
                    if !cqueue::more(flags) {
                        if res > 0 || res == -libc::ENOBUFS {
                            push(&mut ring, &recv_sqe(conn.stream.as_raw_fd(), slot, gen))?;
                        } else {
                            conn.recv_armed = false;
                            conn.closing = true;
                        }
                    }
                    close_if_done(&mut conns, slot, gen);
                }
                SEND => {
                    let Some(conn) = conns.get(slot, gen) else {
                        continue;
                    };
                    conn.send_in_flight = false;
                    if res < 0 {
                        conn.closing = true;
                        let _ = conn.stream.shutdown(Shutdown::Both);
                    } else {
                        conn.sent += res as usize;
                        if conn.sent < conn.sending.len() {
                            submit_send(&mut ring, conn, slot, gen)?;
                        } else if !conn.out.is_empty() && !conn.queued {
                            conn.queued = true;
                            dirty.push((slot, gen));
                        }
                    }
                    close_if_done(&mut conns, slot, gen);
                }
                _ => {}
            }
        }
    }
}

fn recv_sqe(fd: RawFd, slot: usize, gen: u32) -> squeue::Entry {
    opcode::RecvMulti::new(types::Fd(fd), BGID)
        .build()
        .user_data(tag(RECV, gen, slot))
}

fn submit_send(ring: &mut IoUring, conn: &mut CConn, slot: usize, gen: u32) -> io::Result<()> {
    let rest = &conn.sending[conn.sent..];
    let sqe = opcode::Send::new(
        types::Fd(conn.stream.as_raw_fd()),
        rest.as_ptr(),
        rest.len() as u32,
    )
    .build()
    .user_data(tag(SEND, gen, slot));
    conn.send_in_flight = true;
    push(ring, &sqe)
}

/// Closes a connection once nothing of it is in the kernel any more.
fn close_if_done(conns: &mut Slab<CConn>, slot: usize, gen: u32) {
    if let Some(conn) = conns.get(slot, gen) {
        if conn.closing && !conn.send_in_flight && !conn.recv_armed {
            conns.remove(slot);
        }
    }
}

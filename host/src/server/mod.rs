//! The event loop: one poller, one listener, a slab of connections, and the
//! completion queue that deferred answers come back through.
//!
//! Each turn: wait for readiness, accept until `WouldBlock`, serve ready
//! connections, then apply completions from other threads. An error closes
//! its connection, never the loop. Dispatching a request to its app is in
//! `dispatch.rs`, the connection timeouts in `timeouts.rs`.

pub mod conn;
mod dispatch;
mod rejoin;
pub mod request;
pub mod responder;
mod timeouts;
pub mod timers;

use crate::conn::{Conn, Phase, ReadState};
use crate::http::reader::BufPool;
use crate::http::answer::HostAnswer;
use crate::http::response::{DateCache, Persist};
use crate::poller::{Event, Interest, Poller, Token, WAKER};
use crate::responder::{Inbox, InboxItems};
use crate::shared::Shared;
use crate::stats::WorkerStats;
use crate::timers::Timers;
use crate::watchdog::{Beat, Finished};
use dispatch::warn_if_blocked;
use mio::net::TcpListener;
use slab::Slab;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};
use timeouts::sweep_interval;

/// The listener's token.
const LISTENER: Token = Token(usize::MAX - 1);

/// One event loop.
pub struct Server {
    /// This worker's index (its counters in `Shared::stats`).
    worker: usize,
    poller: Box<dyn Poller>,
    /// `None` once draining has closed it.
    listener: Option<TcpListener>,
    accepting: bool,
    conns: Slab<Conn>,
    shared: Arc<Shared>,
    queue: Arc<Inbox>,
    events: Vec<Event>,
    inbox: InboxItems,
    timers: Timers,
    /// Spare read buffers for connections that have bytes to read.
    bufs: BufPool,
    date: DateCache,
    next_id: u64,
    /// When connection deadlines are next checked.
    next_sweep: Instant,
    sweep_every: Duration,
    server_name: Arc<str>,
    server_port: u16,
}

impl Server {
    /// Builds a loop over an already bound, non-blocking listener; `queue`
    /// must have been made from this poller's waker.
    pub fn new(
        worker: usize,
        mut poller: Box<dyn Poller>,
        listener: TcpListener,
        shared: Arc<Shared>,
        queue: Arc<Inbox>,
    ) -> io::Result<Self> {
        poller.register(listener.as_raw_fd(), LISTENER, Interest::READABLE)?;
        let local = listener.local_addr()?;
        let sweep_every = sweep_interval(&shared.params);
        Ok(Server {
            worker,
            poller,
            listener: Some(listener),
            accepting: true,
            conns: Slab::with_capacity(1024),
            shared,
            queue,
            events: Vec::with_capacity(1024),
            inbox: InboxItems::default(),
            timers: Timers::default(),
            bufs: BufPool::default(),
            date: DateCache::new(),
            next_id: 1,
            next_sweep: Instant::now(),
            sweep_every,
            server_name: local.ip().to_string().into(),
            server_port: local.port(),
        })
    }

    fn stats(&self) -> &WorkerStats {
        &self.shared.stats[self.worker]
    }

    /// This worker's heartbeat for the watchdog.
    fn beat(&self) -> &Beat {
        self.shared.watch.beat(self.worker)
    }

    /// Runs until drained (or the poller fails).
    pub fn run(&mut self) -> io::Result<()> {
        let shared = self.shared.clone();
        let _finished = Finished(shared.watch.beat(self.worker));
        self.run_loop()
    }

    fn run_loop(&mut self) -> io::Result<()> {
        Inbox::enter(&self.queue);
        loop {
            if self.shared.control.draining() {
                self.drain();
                if self.conns.is_empty() || self.shared.control.forced() {
                    if !self.conns.is_empty() {
                        log::warn!(
                            "worker {}: graceful timeout; closing {} connection(s)",
                            self.worker,
                            self.conns.len()
                        );
                    }
                    return Ok(());
                }
            }
            self.turn()?;
        }
    }

    /// Stops accepting and closes idle connections, once; busy ones close
    /// after their current response (it carries `Connection: close`).
    fn drain(&mut self) {
        let Some(listener) = self.listener.take() else {
            return;
        };
        self.beat().release_listener();
        if self.accepting {
            let _ = self.poller.deregister(listener.as_raw_fd());
        }
        self.accepting = false;
        log::info!(
            "worker {}: draining {} connection(s)",
            self.worker,
            self.conns.len()
        );
        let idle: Vec<usize> = self
            .conns
            .iter()
            .filter(|(_, c)| c.phase == Phase::Reading && c.buffer_empty() && !c.has_output())
            .map(|(k, _)| k)
            .collect();
        for key in idle {
            self.close(Token(key));
        }
    }

    /// One turn of the loop: completions, due timers, then wait for
    /// readiness (no longer than the next timer) and serve it.
    pub fn turn(&mut self) -> io::Result<()> {
        self.apply_inbox();
        self.run_timers();
        self.apply_inbox();
        if self.shared.control.draining() && self.conns.is_empty() {
            // Drained: let `run` return instead of waiting for nothing.
            return Ok(());
        }
        let mut events = std::mem::take(&mut self.events);
        let now = Instant::now();
        let mut timeout = self.timers.timeout(now);
        if !self.conns.is_empty() {
            let sweep = self.next_sweep.saturating_duration_since(now);
            timeout = Some(timeout.map_or(sweep, |t| t.min(sweep)));
        }
        self.beat().waiting();
        self.poller.wait(&mut events, timeout)?;
        self.beat().turned();
        if self.beat().evicted() {
            self.rejoin();
        }
        self.date.refresh(SystemTime::now());
        for ev in &events {
            match ev.token {
                LISTENER => self.accept(),
                WAKER => {}
                token => self.on_event(token, ev),
            }
        }
        self.events = events;
        let now = Instant::now();
        if now >= self.next_sweep {
            self.sweep(now);
            self.next_sweep = now + self.sweep_every;
        }
        Ok(())
    }

    fn run_timers(&mut self) {
        let now = Instant::now();
        while let Some((task, app)) = self.timers.pop_due(now) {
            let started = Instant::now();
            self.beat().enter_timer(app);
            task.run();
            self.beat().leave();
            warn_if_blocked(self.shared.loop_block_warn, started, "(timer callback)", "");
        }
    }

    fn accept(&mut self) {
        while self.accepting {
            if self.conns.len() >= self.shared.max_connections {
                self.pause_accepting();
                return;
            }
            let Some(listener) = &self.listener else {
                return;
            };
            match listener.accept() {
                Ok((stream, addr)) => {
                    if let Err(e) = stream.set_nodelay(true) {
                        log::debug!("TCP_NODELAY on {addr}: {e}");
                    }
                    let entry = self.conns.vacant_entry();
                    let token = Token(entry.key());
                    if let Err(e) =
                        self.poller
                            .register(stream.as_raw_fd(), token, Interest::READABLE)
                    {
                        log::warn!("cannot watch connection from {addr}: {e}; answering 503");
                        refuse(stream, &self.date);
                        continue;
                    }
                    let conn = entry.insert(Conn::new(stream, addr.to_string().into()));
                    // A client that never sends a byte is still timed out.
                    conn.update_deadline(&self.shared.params);
                    self.shared.stats[self.worker]
                        .accepted
                        .fetch_add(1, Relaxed);
                    log::trace!("accepted {addr} as {}", token.0);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    // EMFILE and friends: wait for a connection to close.
                    log::warn!("accept failed: {e}; pausing accepts until a connection closes");
                    self.pause_accepting();
                    return;
                }
            }
        }
    }

    fn pause_accepting(&mut self) {
        let Some(listener) = &self.listener else {
            return;
        };
        if self.accepting {
            self.accepting = false;
            if let Err(e) = self.poller.deregister(listener.as_raw_fd()) {
                log::warn!("cannot pause the listener: {e}");
            }
            log::debug!("at {} connections: accepts paused", self.conns.len());
        }
    }

    fn resume_accepting(&mut self) {
        let Some(listener) = &self.listener else {
            return;
        };
        if !self.accepting && self.conns.len() < self.shared.max_connections {
            match self
                .poller
                .register(listener.as_raw_fd(), LISTENER, Interest::READABLE)
            {
                Ok(()) => {
                    self.accepting = true;
                    // Connections may have queued in the backlog meanwhile.
                    self.accept();
                }
                Err(e) => log::warn!("cannot resume the listener: {e}"),
            }
        }
    }

    fn on_event(&mut self, token: Token, ev: &Event) {
        let params = &self.shared.params;
        let Some(conn) = self.conns.get_mut(token.0) else {
            return;
        };
        // Readiness is remembered: a connection that may not read now (its
        // output is over the bound, or a request is with an app) reads
        // when it may, without waiting for another edge.
        conn.note_ready(ev.readable, ev.hup);
        // The peer finished sending (a half-close still wants its answer)
        // or failed; only a failed socket is given up on.
        if conn.phase == Phase::Dispatched
            && ev.hup
            && conn.fill(params, &mut self.bufs) == ReadState::Failed
        {
            log::debug!("{} failed while its request was pending", conn.peer);
            self.close(token);
            return;
        }
        self.pump(token);
    }

    /// Serves the connection: reads while it may, answers every complete
    /// request in the buffer, writes. While its output is over
    /// `OUTPUT_BOUND` it stops reading and dispatching, and goes on once a
    /// write has brought it under (a batch of small answers is still
    /// written once).
    fn pump(&mut self, token: Token) {
        loop {
            let params = &self.shared.params;
            let Some(conn) = self.conns.get_mut(token.0) else {
                return;
            };
            let was_full = conn.output_full();
            let read = conn.read_due() && conn.read_some(params, &mut self.bufs);
            let (served, held_back) = self.serve(token);
            let Some(conn) = self.conns.get_mut(token.0) else {
                return;
            };
            if let Err(e) = conn.flush() {
                log::debug!("write to {} failed: {e}", conn.peer);
                self.close(token);
                return;
            }
            // Go on while this round did something and more can be done
            // now: requests the bound held back, or bytes left in the
            // socket. Output still over the bound waits for writability
            // (the write stopped at `WouldBlock`, so it will be reported).
            let more = held_back || conn.read_due();
            if !more
                || !(read || served > 0 || was_full)
                || conn.output_full()
                || conn.phase != Phase::Reading
            {
                break;
            }
        }
        self.settle(token);
    }

    /// Dispatches the complete requests in the buffer, in order, until one
    /// is deferred, more bytes are needed, or the output is over the bound;
    /// returns how many were dispatched, and whether the bound stopped it.
    fn serve(&mut self, token: Token) -> (usize, bool) {
        let mut served = 0;
        loop {
            let params = &self.shared.params;
            let Some(conn) = self.conns.get_mut(token.0) else {
                return (served, false);
            };
            if conn.phase != Phase::Reading {
                return (served, false);
            }
            if conn.output_full() {
                return (served, true);
            }
            match conn.next_request(params) {
                Ok(false) => return (served, false),
                Ok(true) => {
                    served += 1;
                    if !self.dispatch(token) {
                        return (served, false);
                    }
                }
                Err(e) => {
                    conn.fail(&e, self.date.get());
                    return (served, false);
                }
            }
        }
    }

    fn apply_inbox(&mut self) {
        let mut inbox = std::mem::take(&mut self.inbox);
        self.queue.drain(&mut inbox);
        for (at, app, task) in inbox.timers.drain(..) {
            self.timers.add(at, app, task);
        }
        for c in inbox.completions.drain(..) {
            let live = self.conns.get(c.token.0).is_some_and(|conn| {
                conn.phase == Phase::Dispatched
                    && conn.pending.as_ref().is_some_and(|p| p.id == c.id)
            });
            if !live {
                log::debug!(
                    "dropping the answer to request {}: its connection is gone",
                    c.id
                );
                continue;
            }
            self.finish(c.token, c.response);
            if let Some(conn) = self.conns.get_mut(c.token.0) {
                // Bytes may have arrived while the app worked.
                conn.note_ready(true, false);
            }
            self.pump(c.token);
        }
        self.inbox = inbox;
    }

    /// After `pump` has written: closes a finished connection, or updates
    /// its deadline and interest.
    fn settle(&mut self, token: Token) {
        let Some(conn) = self.conns.get_mut(token.0) else {
            return;
        };
        if conn.finished() {
            self.close(token);
            return;
        }
        conn.update_deadline(&self.shared.params);
        conn.release_buffers(&mut self.bufs);
        let wanted = conn.wanted_interest();
        if wanted != conn.interest {
            conn.interest = wanted;
            if let Err(e) = self
                .poller
                .reregister(conn.stream.as_raw_fd(), token, wanted)
            {
                log::warn!("cannot update interest for {}: {e}", conn.peer);
                self.close(token);
            }
        }
    }

    fn close(&mut self, token: Token) {
        if let Some(conn) = self.conns.try_remove(token.0) {
            if let Err(e) = self.poller.deregister(conn.stream.as_raw_fd()) {
                log::debug!("deregister {}: {e}", conn.peer);
            }
            self.stats().closed.fetch_add(1, Relaxed);
            log::debug!("closed {} ({} open)", conn.peer, self.conns.len());
        }
        self.resume_accepting();
    }
}

/// Answers 503 to a connection that cannot be served, best effort, and closes it.
fn refuse(mut stream: mio::net::TcpStream, date: &DateCache) {
    use std::io::Write;
    let mut out = Vec::new();
    let resp = HostAnswer::AtCapacity.response();
    crate::http::response::write_response(&mut out, &resp, false, Persist::Close, date.get());
    let _ = stream.write(&out);
}

//! The event loop: one poller, one listener, a slab of connections, and the
//! completion queue that deferred answers come back through.
//!
//! Each turn: apply completions and due timers (`apply`, one method per
//! kind of inbox item), wait for readiness, accept until `WouldBlock`,
//! serve ready connections, sweep deadlines (`sweep`, one method per kind
//! of deadline). An error closes its connection, never the loop. The loop
//! moves bytes and readiness and owns the clock (`clock`); each connection
//! decides its own protocol steps (`conn`) and yields its requests through
//! the protocol seam (`exchange`): the `Dispatcher` sees a request, never
//! a connection, and hands it to the host's endpoints or its app by its
//! route (`route`, decided once), returning an outcome the loop applies;
//! its answering half (`answering`) queues the answer on the connection.
//! The `Acceptor` owns the listener (`acceptor`); what each listener is,
//! one table built at boot (`listeners`).

mod acceptor;
mod admission;
mod answering;
mod apply;
mod body_feed;
mod clock;
pub(crate) mod conn;
mod dispatch;
pub(crate) mod exchange;
pub(crate) mod h2conn;
pub(crate) mod handles;
mod lingering;
pub mod listeners;
mod redirect;
pub(crate) mod request;
pub(crate) mod responder;
pub(crate) mod route;
mod serve_h2;
mod shed;
pub(crate) mod spares;
mod sweep;
pub(crate) mod timers;
pub(crate) mod ws_link;

#[cfg(test)]
mod testing;
#[cfg(test)]
mod tests;

use crate::http::parse::Head;
use crate::http::reader::BufPool;
use crate::http::response::DateCache;
use crate::inbox::{Inbox, InboxItems};
use crate::listen::{Accepted, Listener};
use crate::ops::watchdog::{Beat, Finished};
use crate::poller::{Event, Poller, Token, WAKER};
use crate::settings::ConnParams;
use crate::stats::bump;
use acceptor::{listener_of, Acceptor};
use clock::{warn_if_blocked, Clock, Stamp};
use conn::{Conn, Flow};
use dispatch::Dispatcher;
use exchange::Gone;
use handles::Handles;
use lingering::Lingerers;
use listeners::Listeners;
use shed::Shedder;
pub use shed::MAX_LINGERING;
use slab::Slab;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};
use stoa_app_api::abi::TaskBox;
use timers::Timers;

/// One event loop.
pub struct Server {
    /// This worker's index (its counters and its heartbeat).
    worker: usize,
    poller: Box<dyn Poller>,
    acceptor: Acceptor,
    conns: Slab<Conn<Accepted>>,
    dispatcher: Dispatcher,
    /// The loop's clock (see `clock`).
    clock: Clock,
    handles: Arc<Handles>,
    queue: Arc<Inbox>,
    events: Vec<Event>,
    inbox: InboxItems,
    timers: Timers,
    /// Spare read buffers for connections that have bytes to read.
    bufs: BufPool,
    date: DateCache,
    /// When connection deadlines are next checked.
    next_sweep: Instant,
    sweep_every: Duration,
    /// The earliest deadline sooner than the sweep's period that a sweep
    /// must not be rescheduled past (the drain's grace for idle keep-alive
    /// connections, a lingering close's end).
    sweep_due: Option<Instant>,
    /// Connections shed at the cap.
    shedder: Shedder,
    /// The connections lingering after their answer, in order.
    lingerers: Lingerers,
    /// Since when accepts are paused (at the cap or out of descriptors).
    paused_since: Option<Instant>,
    /// Accepts are paused because the host is at its cap (`--overload
    /// queue`): resumed when it has room.
    paused_at_cap: bool,
    /// When accepts paused for a failed `accept` are tried again.
    retry_accept_at: Option<Instant>,
    /// When an overload was last logged (once a minute at most).
    overload_logged: Option<Instant>,
}

impl Server {
    /// Builds a loop over already bound, non-blocking listeners (`facts`:
    /// what apps see of each, its TLS site, its redirect); `queue` must
    /// have been made from this poller's waker.
    pub fn new(
        worker: usize,
        mut poller: Box<dyn Poller>,
        listeners: Vec<Listener>,
        facts: Arc<Listeners>,
        handles: Arc<Handles>,
        queue: Arc<Inbox>,
    ) -> io::Result<Self> {
        let budget = handles.budget.clone();
        let acceptor = Acceptor::new(listeners, &mut *poller)?;
        let shedder = Shedder::new(&handles.settings.conn.linger);
        handles
            .board
            .beat(worker)
            .set_listeners(acceptor.tcp_duplicates(&handles.board.addrs)?);
        Ok(Server {
            worker,
            poller,
            acceptor,
            conns: Slab::with_capacity(1024),
            dispatcher: Dispatcher::new(worker, handles.clone(), queue.clone(), facts),
            clock: Clock::new(),
            sweep_every: sweep_interval(
                &handles.settings.conn,
                handles.settings.shortest_app_timeout,
            ),
            handles,
            queue,
            events: Vec::with_capacity(1024),
            inbox: InboxItems::default(),
            timers: Timers::default(),
            bufs: BufPool::with_budget(budget),
            date: DateCache::new(),
            next_sweep: Instant::now(),
            sweep_due: None,
            shedder,
            lingerers: Lingerers::default(),
            paused_since: None,
            paused_at_cap: false,
            retry_accept_at: None,
            overload_logged: None,
        })
    }

    /// The configuration a new session on listener `via` starts with, if
    /// it serves TLS (its site's latest load).
    fn tls_of(&self, via: usize) -> Option<Arc<rustls::ServerConfig>> {
        self.dispatcher.tls_config(via)
    }

    /// This worker's heartbeat for the watchdog.
    fn beat(&self) -> &Beat {
        self.handles.board.beat(self.worker)
    }

    /// Runs until drained (or the poller fails).
    pub fn run(&mut self) -> io::Result<()> {
        let handles = self.handles.clone();
        let _finished = Finished(handles.board.beat(self.worker));
        Inbox::enter(&self.queue);
        loop {
            if self.handles.control.draining() {
                self.drain();
                if self.conns.is_empty() || self.handles.control.forced() {
                    if !self.conns.is_empty() {
                        log::warn!(
                            "worker {}: graceful timeout; closing {} connection(s)",
                            self.worker,
                            self.conns.len()
                        );
                        self.abandon_pending();
                    }
                    return Ok(());
                }
            }
            self.turn()?;
        }
    }

    /// Stops accepting, once. Every connection closes after its next
    /// response (it carries `Connection: close`); keep-alive connections
    /// between requests close after a short grace if none arrives.
    fn drain(&mut self) {
        if !self.acceptor.close(&mut *self.poller) {
            return;
        }
        self.paused_at_cap = false;
        self.beat().release_listener();
        log::info!(
            "worker {}: draining {} connection(s)",
            self.worker,
            self.conns.len()
        );
        // Keep-alive connections between requests are not cut at once: a
        // client may be sending its next request right now, and a close
        // then resets it. They get a short grace; a request in it is
        // answered with `Connection: close`.
        let now = Instant::now();
        let by = now + DRAIN_IDLE_GRACE.min(self.handles.settings.conn.keep_alive_timeout);
        let mut websockets = Vec::new();
        for (key, conn) in self.conns.iter_mut() {
            if conn.is_between_requests() || conn.is_lingering() {
                conn.close_idle_by(by);
            }
            if conn.is_upgraded() {
                // Open WebSockets are told the host is going away (1001)
                // and get `ws_link::CLOSE_GRACE` to answer.
                conn.close_ws(1001, "the server is shutting down", now, &mut self.bufs);
                websockets.push(Token(key));
            }
        }
        for token in websockets {
            self.pump_ws(token);
        }
        self.h2_go_away();
        self.sweep_by(by);
    }

    /// One turn of the loop: completions, due timers, then wait for
    /// readiness (no longer than the next timer) and serve it.
    pub fn turn(&mut self) -> io::Result<()> {
        self.apply_inbox();
        self.run_timers();
        self.apply_inbox();
        if self.handles.control.draining() && self.conns.is_empty() {
            // Drained: let `run` return instead of waiting for nothing.
            return Ok(());
        }
        let mut events = std::mem::take(&mut self.events);
        let now = self.clock.now();
        let mut timeout = self.timers.timeout(now);
        let retry = self
            .retry_accept_at
            .map(|at| at.saturating_duration_since(now));
        let sweep =
            (!self.conns.is_empty()).then(|| self.next_sweep.saturating_duration_since(now));
        // Work pushed while the inbox was applied (a stream's drain task, a
        // WebSocket app's answer to a message read there), and lingering
        // connections with more to read, go on at the next turn, without
        // waiting.
        let pushed =
            (self.queue.has_items() || self.lingerers.reads_on()).then_some(Duration::ZERO);
        for bound in [sweep, self.shedder.timeout(), retry, pushed]
            .into_iter()
            .flatten()
        {
            timeout = Some(timeout.map_or(bound, |t| t.min(bound)));
        }
        self.beat().waiting();
        self.poller.wait(&mut events, timeout)?;
        self.clock.read();
        self.beat().turned();
        if self.beat().evicted() && !self.handles.control.draining() {
            let watch = &self.handles.board;
            let beat = watch.beat(self.worker);
            let again = self.acceptor.rejoin(
                &mut *self.poller,
                &watch.addrs,
                watch.backlog,
                beat,
                self.worker,
            );
            if again {
                for i in self.acceptor.watched() {
                    self.accept(i);
                }
            }
        }
        self.date.refresh_by(self.clock.now());
        for ev in &events {
            match ev.token {
                WAKER => {}
                token => match listener_of(token) {
                    Some(i) => self.accept(i),
                    None => self.on_event(token, ev),
                },
            }
        }
        self.events = events;
        self.linger_on();
        let now = self.clock.now();
        self.after_accepts(now);
        if now >= self.next_sweep {
            self.sweep(now);
            self.sweep_due = self.sweep_due.filter(|&at| at > now);
            let every = now + self.sweep_every;
            self.next_sweep = self.sweep_due.map_or(every, |at| at.min(every));
        }
        Ok(())
    }

    /// Makes a sweep come by `at`, however the sweeps before it are
    /// rescheduled (each one to a period later).
    fn sweep_by(&mut self, at: Instant) {
        self.next_sweep = self.next_sweep.min(at);
        self.sweep_due = Some(self.sweep_due.map_or(at, |due| due.min(at)));
    }

    /// Runs an app's task for a request abandoned before its answer
    /// (`RawResponder::on_gone`), on the loop, as a timer's callback runs.
    fn run_gone(&mut self, gone: Gone) {
        self.clock.read();
        self.run_task(gone.task, Some(gone.slot), "an on_gone task");
    }

    /// Runs an app's `task` (of the app in `slot`, if known) on the loop,
    /// the watchdog told, and warns if it held the loop long; the clock is
    /// read after it.
    fn run_task(&mut self, task: TaskBox, slot: Option<usize>, what: &str) {
        let started = self.clock.now();
        self.beat().enter_timer(slot);
        task.run();
        self.beat().leave();
        let held = self.clock.read().saturating_duration_since(started);
        warn_if_blocked(
            self.handles.settings.loop_block_warn,
            held,
            format_args!("{what}"),
            "move blocking work to Host::spawn_blocking",
        );
    }

    /// At the graceful timeout: the requests still pending are abandoned
    /// with their connections; their apps hear of it.
    fn abandon_pending(&mut self) {
        let mut gone: Vec<Gone> = self
            .conns
            .iter_mut()
            .filter_map(|(_, conn)| conn.take_gone())
            .collect();
        for (_, conn) in self.conns.iter_mut() {
            if let Some((session, _)) = conn.h2_parts() {
                gone.extend(session.take_gones());
            }
        }
        for gone in gone {
            self.run_gone(gone);
        }
    }

    /// Runs the timers due; the loop's clock is read once first and again
    /// after each callback. With no timer set, nothing is read: the wait's
    /// timeout is then counted from the clock read after the last wait (or
    /// handler), so a sweep can come that much late, well within its
    /// tenth-of-a-timeout slack.
    fn run_timers(&mut self) {
        if self.timers.is_empty() {
            return;
        }
        let due = self.clock.read();
        while let Some((task, app)) = self.timers.pop_due(due) {
            self.run_task(task, app, "a timer callback");
        }
    }

    fn on_event(&mut self, token: Token, ev: &Event) {
        let Some(conn) = self.conns.get_mut(token.0) else {
            return;
        };
        // Readiness is remembered: a connection that may not read now (its
        // output is over the bound, or a request is with an app) reads
        // when it may, without waiting for another edge.
        conn.note_ready(ev.readable, ev.hup);
        // While a request is with the app (or its answer streams out), the
        // connection reads only to see its client leave (`conn::gone`),
        // and `settle` closes it when it has. When it cannot read that
        // (pipelined bytes read ahead), a hang-up is looked at only for a
        // socket error (a reset): then the slot is freed now and the late
        // answer (or the stream) dropped; otherwise the answer's write
        // finds the peer gone.
        if ev.hup && conn.pending_unwatched() {
            if let Ok(Some(e)) = conn.stream().take_error() {
                log::debug!("{} failed while its request was pending: {e}", conn.peer());
                self.close(token);
            }
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
            let params = &self.handles.settings.conn;
            let Some(conn) = self.conns.get_mut(token.0) else {
                return;
            };
            if conn.is_upgraded() {
                return self.pump_ws(token);
            }
            if conn.is_h2() {
                return self.pump_h2(token);
            }
            let was_full = conn.output_full();
            let read = conn.read_due() && conn.read_some(params, &mut self.bufs);
            if conn.h2_due(self.handles.settings.h2c) {
                let params = self.handles.settings.h2.clone();
                let stats = self.handles.stats.worker(self.worker).h2.clone();
                let held = self.handles.budget.reservation();
                let Some(conn) = self.conns.get_mut(token.0) else {
                    return;
                };
                conn.promote_h2(params, &mut self.bufs, (stats, held));
                return self.pump_h2(token);
            }
            if conn.owes_plain_http_answer() {
                conn.answer_plain_http(self.date.get(), &mut self.bufs);
            }
            // A streamed body's bytes go to its app; what that frees in the
            // buffer is read on the next round (no new edge would come).
            let fed = conn.feed_body();
            let (served, held_back) = self.serve(token);
            let Some(conn) = self.conns.get_mut(token.0) else {
                return;
            };
            if conn.is_upgraded() {
                // Switched to WebSocket by that request's answer.
                return self.pump_ws(token);
            }
            if let Err(e) = conn.flush(&mut self.bufs) {
                log::debug!("write to {} failed: {e}", conn.peer());
                self.close(token);
                return;
            }
            // Go on while this round did something and more can be done
            // now: requests the bound held back, or bytes left in the
            // socket. Output still over the bound waits for writability
            // (the write stopped at `WouldBlock`, so it will be reported).
            let more = held_back || conn.read_due();
            let reading = conn.may_take_requests() || conn.feeds_body();
            if !more || !(read || fed || served > 0 || was_full) || !reading {
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
        let Some(conn) = self.conns.get_mut(token.0) else {
            return (served, false);
        };
        loop {
            if !conn.may_take_requests() {
                return (served, conn.output_full());
            }
            // The first bytes may yet be HTTP/2's preface: wait for more.
            if conn.may_be_h2c(self.handles.settings.h2c) {
                return (served, false);
            }
            let plan = |head: &Head, buf: &[u8], peer: &Arc<str>, via: usize| {
                self.dispatcher.body_plan(head, buf, peer, via)
            };
            let read = conn.next_request_with(&self.handles.settings.conn, &mut self.bufs, &plan);
            match read {
                Ok(false) => return (served, false),
                Ok(true) => {
                    served += 1;
                    let Some(req) = conn.incoming() else {
                        return (served, false);
                    };
                    let outcome = self.dispatcher.dispatch(req, token, self.clock.now());
                    let now = outcome.after;
                    self.clock.advance_to(now);
                    conn.begin(outcome.begun, outcome.answer.is_some());
                    let Some(answer) = outcome.answer else {
                        return (served, false);
                    };
                    let at = Stamp {
                        now,
                        date: self.date.get(),
                    };
                    self.dispatcher
                        .answer(conn, token, answer, at, &mut self.bufs);
                }
                Err(e) => {
                    conn.fail(&e, self.date.get(), &mut self.bufs);
                    return (served, false);
                }
            }
        }
    }

    /// Serves a WebSocket connection: its frames in, the app's out.
    fn pump_ws(&mut self, token: Token) {
        let Some(conn) = self.conns.get_mut(token.0) else {
            return;
        };
        match conn.pump_ws(self.clock.now(), &mut self.bufs) {
            Flow::Open => self.settle(token),
            Flow::Close => self.close(token),
        }
    }

    /// After `pump` has written: lingers a connection due to (see
    /// `Conn::linger`), closes a finished one, or updates its deadline and
    /// interest.
    fn settle(&mut self, token: Token) {
        let lingers = self.conns.get(token.0).is_some_and(Conn::lingers);
        if lingers && self.linger(token) {
            return;
        }
        let Some(conn) = self.conns.get_mut(token.0) else {
            return;
        };
        if conn.client_gone() {
            log::debug!("{} left before its answer was complete", conn.peer());
            self.close(token);
            return;
        }
        if conn.finished() {
            self.close(token);
            return;
        }
        conn.report_stream();
        conn.update_deadline(&self.handles.settings.conn, self.clock.now());
        conn.release_buffers(&mut self.bufs);
        if let Some(wanted) = conn.interest_change() {
            let fd = conn.stream().as_raw_fd();
            if let Err(e) = self.poller.reregister(fd, token, wanted) {
                log::warn!("cannot update interest for {}: {e}", conn.peer());
                self.close(token);
            }
        }
    }

    fn close(&mut self, token: Token) {
        if let Some(mut conn) = self.conns.try_remove(token.0) {
            // A request still pending is abandoned: its app hears of it.
            if let Some(gone) = conn.take_gone() {
                self.run_gone(gone);
            }
            if let Some((session, _)) = conn.h2_parts() {
                for gone in session.take_gones() {
                    self.run_gone(gone);
                }
            }
            self.lingerers.left(&conn);
            if let Err(e) = self.poller.deregister(conn.stream().as_raw_fd()) {
                log::debug!("deregister {}: {e}", conn.peer());
            }
            let stats = self.handles.stats.worker(self.worker);
            if let Some(kind) = conn.handshake_failure() {
                // Each failure once, as its connection closes; at debug,
                // as other disconnects: a scan or a flood of them cannot
                // flood the log (status and metrics count them).
                bump(&stats.tls_failures[kind.index()], 1);
                log::debug!("{}: TLS handshake failed ({})", conn.peer(), kind.name());
            }
            bump(&stats.closed, 1);
            log::debug!("closed {} ({} open)", conn.peer(), self.conns.len());
            drop(conn);
            self.give_back_slot();
            // Its descriptor is free: a spare lost to another loop's
            // accept is had back first.
            self.handles.spares.refill();
        }
        if self.handles.open.has_room() && !self.acceptor.is_accepting() {
            self.resume_accepts();
        }
    }
}

/// How long a drain leaves a keep-alive connection between requests for
/// its client's next request.
const DRAIN_IDLE_GRACE: Duration = Duration::from_millis(500);

/// How often deadlines are checked: a tenth of the shortest timeout (an
/// app's own `app_timeout` and `--lingering-timeout` included), between
/// 10 ms and 1 s.
fn sweep_interval(p: &ConnParams, shortest_app_timeout: Duration) -> Duration {
    [
        p.tls_handshake_timeout,
        p.head_timeout,
        p.body_timeout,
        p.send_timeout,
        p.keep_alive_timeout,
        p.app_timeout,
        shortest_app_timeout,
    ]
    .into_iter()
    .min()
    .unwrap_or(Duration::from_secs(1))
    .div_f32(10.0)
    .clamp(Duration::from_millis(10), Duration::from_secs(1))
}

//! The event loop: one poller, one listener, a slab of connections, and the
//! completion queue that deferred answers come back through.
//!
//! Each turn: wait for readiness, accept until `WouldBlock`, serve ready
//! connections, then apply completions from other threads. An error closes
//! its connection, never the loop.

use crate::admin;
use crate::conn::{AccessInfo, Conn, Deadline, Pending, Phase, ReadState};
use crate::http::parse::Head;
use crate::http::response::{host_response, DateCache, Persist};
use crate::http::{ConnParams, HttpError};
use crate::loader::LoadedApp;
use crate::netfilter::{forwarded_client, peer_ip};
use crate::poller::{Event, Interest, Poller, Token, WAKER};
use crate::request::{path_and_query, text, with_view, Meta, OwnedRequest};
use crate::responder::{begin_inline, end_inline, responder, Inbox, InboxItems};
use crate::services::Pool;
use crate::shared::Shared;
use crate::stats::WorkerStats;
use crate::timers::Timers;
use mio::net::TcpListener;
use slab::Slab;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};
use stoa_app_api::Response;

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

    /// Runs until drained (or the poller fails).
    pub fn run(&mut self) -> io::Result<()> {
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

    /// Stops accepting and closes idle connections; busy ones close after
    /// their current response.
    fn drain(&mut self) {
        if let Some(listener) = self.listener.take() {
            if self.accepting {
                let _ = self.poller.deregister(listener.as_raw_fd());
            }
            self.accepting = false;
            log::info!(
                "worker {}: draining {} connection(s)",
                self.worker,
                self.conns.len()
            );
        }
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
        self.poller.wait(&mut events, timeout)?;
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

    /// Applies every connection deadline that has passed.
    fn sweep(&mut self, now: Instant) {
        let expired: Vec<(usize, Deadline)> = self
            .conns
            .iter()
            .filter_map(|(k, c)| c.deadline.filter(|(at, _)| *at <= now).map(|(_, d)| (k, d)))
            .collect();
        for (key, deadline) in expired {
            let token = Token(key);
            match deadline {
                Deadline::Idle | Deadline::Send => {
                    if let Some(conn) = self.conns.get(key) {
                        log::debug!("{}: {deadline:?} timeout, closing", conn.peer);
                    }
                    self.close(token);
                }
                Deadline::Head | Deadline::Body => {
                    let error = if deadline == Deadline::Head {
                        HttpError::HeadTimeout
                    } else {
                        HttpError::BodyTimeout
                    };
                    if let Some(conn) = self.conns.get_mut(key) {
                        conn.fail(&error, self.date.get());
                    }
                    self.settle(token);
                }
                Deadline::App => self.app_timed_out(token),
            }
        }
    }

    /// The app has not answered within `app_timeout`: the client gets 504
    /// and the connection closes; the app's late answer will be dropped.
    fn app_timed_out(&mut self, token: Token) {
        let Some(pending) = self.conns.get_mut(token.0).and_then(|c| c.pending.as_mut()) else {
            return;
        };
        pending.persist = Persist::Close;
        let app = pending
            .slot
            .and_then(|s| {
                self.shared
                    .apps
                    .load()
                    .mounts
                    .apps()
                    .iter()
                    .find(|a| a.slot == s)
                    .cloned()
            })
            .map_or_else(|| "?".to_string(), |a| a.name.clone());
        log::warn!(
            "app {app} did not answer {} within app_timeout ({} s); answering 504",
            pending.path.as_deref().unwrap_or("a request"),
            self.shared.params.app_timeout.as_secs_f32()
        );
        self.finish(
            token,
            host_response(504, "the app did not answer within app_timeout"),
        );
        self.settle(token);
    }

    fn run_timers(&mut self) {
        let now = Instant::now();
        while let Some(task) = self.timers.pop_due(now) {
            let started = Instant::now();
            task.run();
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
        if conn.phase == Phase::Dispatched {
            // The peer finished sending (a half-close still wants its
            // answer) or failed; only a failed socket is given up on.
            if ev.hup && conn.fill(params, true) == ReadState::Failed {
                log::debug!("{} failed while its request was pending", conn.peer);
                self.close(token);
                return;
            }
        } else if ev.readable || ev.hup {
            // On a hang-up, read to the end: an edge-triggered backend
            // reports it only once.
            conn.fill(params, ev.hup);
        }
        self.pump(token);
    }

    /// Serves every complete request in the buffer, then writes.
    fn pump(&mut self, token: Token) {
        loop {
            let params = &self.shared.params;
            let Some(conn) = self.conns.get_mut(token.0) else {
                return;
            };
            if conn.phase != Phase::Reading {
                break;
            }
            match conn.next_request(params) {
                Ok(false) => break,
                Ok(true) => {
                    if !self.dispatch(token) {
                        break;
                    }
                }
                Err(e) => {
                    conn.fail(&e, self.date.get());
                    break;
                }
            }
        }
        self.settle(token);
    }

    /// Hands the ready request to its app; true if it was answered at once.
    fn dispatch(&mut self, token: Token) -> bool {
        let id = self.next_id;
        self.next_id += 1;
        let shared = self.shared.clone();
        let Some(conn) = self.conns.get_mut(token.0) else {
            return false;
        };
        let Some((head, buf, _)) = conn.request_parts() else {
            return false;
        };
        let (path, _) = path_and_query(head, buf);
        let host_answer = if path.starts_with(admin::PREFIX) {
            admin::answer(&shared, path, &conn.peer)
        } else {
            None
        };
        let apps = shared.apps.load();
        let route = match host_answer {
            Some(_) => None,
            None => apps.mounts.resolve(path),
        };
        let keep = head.keep_alive
            && conn.served + 1 < shared.params.max_requests_per_conn
            && !shared.control.draining();
        conn.pending = Some(Pending {
            id,
            head_only: text(buf, &head.method) == "HEAD",
            persist: match (keep, head.version_minor) {
                (false, _) => Persist::Close,
                (true, 0) => Persist::KeepAlive10,
                (true, _) => Persist::KeepAlive,
            },
            started: Instant::now(),
            slot: route.map(|(app, _)| app.slot),
            path: None,
            access: shared
                .access_log
                .as_ref()
                .map(|_| Box::new(access_info(head, buf))),
        });
        conn.phase = Phase::Dispatched;

        let answered = match (host_answer, route) {
            (Some(response), _) => Some(response),
            (None, None) => Some(host_response(404, "no app is mounted at this path")),
            (None, Some((app, split))) => {
                let Some((head, buf, body)) = conn.request_parts() else {
                    return false;
                };
                let (path, _) = path_and_query(head, buf);
                let (peer, scheme) = client_of(&shared, head, buf, &conn.peer);
                let meta = Meta {
                    server_name: self.server_name.clone(),
                    server_port: self.server_port,
                    peer,
                    scheme,
                };
                let (answer, blocking_path) = with_view(head, buf, body, split, &meta, |request| {
                    match shared.pool.as_ref().filter(|_| app.blocks(request)) {
                        Some(pool) => {
                            let owned = OwnedRequest::copy(head, buf, body, split, &meta);
                            let r = submit_blocking(
                                pool,
                                app,
                                owned,
                                responder(token, id, &self.queue),
                            );
                            (r, Some(Box::<str>::from(path)))
                        }
                        None => {
                            let started = Instant::now();
                            begin_inline(&self.queue, id);
                            app.handle(request, responder(token, id, &self.queue));
                            let inline = end_inline();
                            warn_if_blocked(shared.loop_block_warn, started, &app.name, path);
                            (inline, None)
                        }
                    }
                });
                if let Some(pending) = conn.pending.as_mut() {
                    pending.path = blocking_path;
                }
                answer
            }
        };
        conn.consume_request();
        match answered {
            Some(response) => {
                self.finish(token, response);
                true
            }
            None => false,
        }
    }

    /// Writes the pending request's answer into the connection's buffer.
    fn finish(&mut self, token: Token, response: Response) {
        let Some(conn) = self.conns.get_mut(token.0) else {
            return;
        };
        let Some(mut pending) = conn.pending.take() else {
            return;
        };
        if self.shared.control.draining() {
            pending.persist = Persist::Close;
        }
        self.shared.stats[self.worker]
            .app(pending.slot)
            .record(response.status, pending.started.elapsed());
        conn.push_response(
            &response,
            pending.head_only,
            pending.persist,
            self.date.get(),
        );
        if let (Some(log), Some(info)) = (&self.shared.access_log, &pending.access) {
            log.write(
                &conn.peer,
                &info.request_line,
                response.status,
                if pending.head_only {
                    0
                } else {
                    response.body.len()
                },
                &info.referer,
                &info.user_agent,
            );
        }
        log::trace!(
            "request {} answered {} in {:?}",
            pending.id,
            response.status,
            pending.started.elapsed()
        );
    }

    fn apply_inbox(&mut self) {
        let mut inbox = std::mem::take(&mut self.inbox);
        self.queue.drain(&mut inbox);
        for (at, task) in inbox.timers.drain(..) {
            self.timers.add(at, task);
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
                conn.fill(&self.shared.params, false);
            }
            self.pump(c.token);
        }
        self.inbox = inbox;
    }

    /// Flushes output, closes a finished connection, or updates its interest.
    fn settle(&mut self, token: Token) {
        let Some(conn) = self.conns.get_mut(token.0) else {
            return;
        };
        if let Err(e) = conn.flush() {
            log::debug!("write to {} failed: {e}", conn.peer);
            self.close(token);
            return;
        }
        if conn.finished() {
            self.close(token);
            return;
        }
        conn.update_deadline(&self.shared.params);
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
    let resp = host_response(503, "connection limit reached (max_connections)")
        .with_header("Retry-After", "1");
    crate::http::response::write_response(&mut out, &resp, false, Persist::Close, date.get());
    let _ = stream.write(&out);
}

/// How often deadlines are checked: a tenth of the shortest timeout,
/// between 10 ms and 1 s.
fn sweep_interval(p: &ConnParams) -> Duration {
    [
        p.head_timeout,
        p.body_timeout,
        p.send_timeout,
        p.keep_alive_timeout,
        p.app_timeout,
    ]
    .into_iter()
    .min()
    .unwrap_or(Duration::from_secs(1))
    .div_f32(10.0)
    .clamp(Duration::from_millis(10), Duration::from_secs(1))
}

/// Tornado's blocking log threshold: app code should never hold the loop.
fn warn_if_blocked(limit: Duration, started: Instant, who: &str, path: &str) {
    let held = started.elapsed();
    if held > limit {
        log::warn!(
            "event loop blocked for {} ms by app {who} {path}",
            held.as_millis()
        );
    }
}

/// The client's address and scheme: the peer's own, or from
/// `X-Forwarded-For`/`X-Forwarded-Proto` when the peer is a trusted proxy.
fn client_of(
    shared: &Shared,
    head: &Head,
    buf: &[u8],
    peer: &Arc<str>,
) -> (Arc<str>, &'static str) {
    let trusted = &shared.trusted_proxies;
    if trusted.is_empty() || !peer_ip(peer).is_some_and(|ip| trusted.contains(ip)) {
        return (peer.clone(), "http");
    }
    let header = |name: &str| {
        head.headers
            .iter()
            .rev()
            .find(|(n, _)| text(buf, n).eq_ignore_ascii_case(name))
            .map(|(_, v)| text(buf, v))
    };
    let client = header("x-forwarded-for")
        .and_then(|xff| forwarded_client(xff, trusted))
        .map_or_else(
            || peer.clone(),
            |ip| std::net::SocketAddr::new(ip, 0).to_string().into(),
        );
    let scheme = match header("x-forwarded-proto") {
        Some(p) if p.trim().eq_ignore_ascii_case("https") => "https",
        _ => "http",
    };
    (client, scheme)
}

/// Runs a blocking handler on the pool; answers 503 at once when the pool's
/// queue is full.
fn submit_blocking(
    pool: &Pool,
    app: &Arc<LoadedApp>,
    owned: OwnedRequest,
    responder: stoa_app_api::abi::ResponderBox,
) -> Option<Response> {
    let app = app.clone();
    let job = Box::new(move || owned.with_view(|request| app.handle(request, responder)));
    match pool.try_submit(job) {
        Ok(()) => None,
        Err(job) => {
            // Dropping the job drops its responder, whose answer (a 500) is
            // ignored: this 503 answers the request first.
            drop(job);
            Some(
                host_response(503, "the blocking pool is full (blocking_queue)")
                    .with_header("Retry-After", "1"),
            )
        }
    }
}

fn access_info(head: &Head, buf: &[u8]) -> AccessInfo {
    let header = |name: &str| {
        head.headers
            .iter()
            .find(|(n, _)| text(buf, n).eq_ignore_ascii_case(name))
            .map_or("-".to_string(), |(_, v)| {
                String::from_utf8_lossy(&buf[v.clone()]).into_owned()
            })
    };
    AccessInfo {
        request_line: format!(
            "{} {} HTTP/1.{}",
            text(buf, &head.method),
            text(buf, &head.target),
            head.version_minor
        ),
        referer: header("referer"),
        user_agent: header("user-agent"),
    }
}

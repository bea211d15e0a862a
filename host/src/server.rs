//! The event loop: one poller, one listener, a slab of connections, and the
//! completion queue that deferred answers come back through.
//!
//! Each turn: wait for readiness, accept until `WouldBlock`, serve ready
//! connections, then apply completions from other threads. An error closes
//! its connection, never the loop.

use crate::access_log::AccessLog;
use crate::conn::{AccessInfo, Conn, Pending, Phase, ReadState};
use crate::http::parse::Head;
use crate::http::response::{host_response, DateCache, Persist};
use crate::http::ConnParams;
use crate::loader::{LoadedApp, MountTable};
use crate::poller::{Event, Interest, Poller, Token, WAKER};
use crate::request::{path_and_query, text, with_view, Meta, OwnedRequest};
use crate::responder::{begin_inline, end_inline, responder, Inbox, InboxItems};
use crate::services::Pool;
use crate::timers::Timers;
use mio::net::TcpListener;
use slab::Slab;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};
use stoa_app_api::Response;

/// The listener's token.
const LISTENER: Token = Token(usize::MAX - 1);

/// What every worker shares: the apps and the settings.
pub struct Shared {
    pub mounts: MountTable,
    pub params: ConnParams,
    pub access_log: Option<AccessLog>,
    pub max_connections: usize,
    /// Runs handlers that declare they block; `None` runs them on the loop
    /// (`--blocking-on-loop`, Tornado's behaviour).
    pub pool: Option<Arc<Pool>>,
    /// Warn when app code holds the loop longer than this.
    pub loop_block_warn: Duration,
}

/// One event loop.
pub struct Server {
    poller: Box<dyn Poller>,
    listener: TcpListener,
    accepting: bool,
    conns: Slab<Conn>,
    shared: Arc<Shared>,
    queue: Arc<Inbox>,
    events: Vec<Event>,
    inbox: InboxItems,
    timers: Timers,
    date: DateCache,
    next_id: u64,
    server_name: Arc<str>,
    server_port: u16,
}

impl Server {
    /// Builds a loop over an already bound, non-blocking listener; `queue`
    /// must have been made from this poller's waker.
    pub fn new(
        mut poller: Box<dyn Poller>,
        listener: TcpListener,
        shared: Arc<Shared>,
        queue: Arc<Inbox>,
    ) -> io::Result<Self> {
        poller.register(listener.as_raw_fd(), LISTENER, Interest::READABLE)?;
        let local = listener.local_addr()?;
        Ok(Server {
            poller,
            listener,
            accepting: true,
            conns: Slab::with_capacity(1024),
            shared,
            queue,
            events: Vec::with_capacity(1024),
            inbox: InboxItems::default(),
            timers: Timers::default(),
            date: DateCache::new(),
            next_id: 1,
            server_name: local.ip().to_string().into(),
            server_port: local.port(),
        })
    }

    /// Runs until the poller fails.
    pub fn run(&mut self) -> io::Result<()> {
        Inbox::enter(&self.queue);
        loop {
            self.turn()?;
        }
    }

    /// One turn of the loop: completions, due timers, then wait for
    /// readiness (no longer than the next timer) and serve it.
    pub fn turn(&mut self) -> io::Result<()> {
        self.apply_inbox();
        self.run_timers();
        self.apply_inbox();
        let mut events = std::mem::take(&mut self.events);
        let timeout = self.timers.timeout(Instant::now());
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
        Ok(())
    }

    fn run_timers(&mut self) {
        let now = Instant::now();
        while let Some(task) = self.timers.pop_due(now) {
            let started = Instant::now();
            task.run();
            warn_if_blocked(self.shared.loop_block_warn, started, "a timer callback", "");
        }
    }

    fn accept(&mut self) {
        while self.accepting {
            if self.conns.len() >= self.shared.max_connections {
                self.pause_accepting();
                return;
            }
            match self.listener.accept() {
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
                    entry.insert(Conn::new(stream, addr.to_string().into()));
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
        if self.accepting {
            self.accepting = false;
            if let Err(e) = self.poller.deregister(self.listener.as_raw_fd()) {
                log::warn!("cannot pause the listener: {e}");
            }
            log::debug!("at {} connections: accepts paused", self.conns.len());
        }
    }

    fn resume_accepting(&mut self) {
        if !self.accepting && self.conns.len() < self.shared.max_connections {
            match self
                .poller
                .register(self.listener.as_raw_fd(), LISTENER, Interest::READABLE)
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
            if ev.hup {
                log::debug!("{} hung up while its request was pending", conn.peer);
                self.close(token);
                return;
            }
        } else if (ev.readable || ev.hup)
            && conn.fill(params) == ReadState::Closed
            && conn.buffer_empty()
        {
            log::trace!("{} closed", conn.peer);
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
        let method = text(buf, &head.method);
        let keep = head.keep_alive && conn.served + 1 < shared.params.max_requests_per_conn;
        let pending = Pending {
            id,
            head_only: method == "HEAD",
            persist: match (keep, head.version_minor) {
                (false, _) => Persist::Close,
                (true, 0) => Persist::KeepAlive10,
                (true, _) => Persist::KeepAlive,
            },
            started: Instant::now(),
            access: shared
                .access_log
                .as_ref()
                .map(|_| Box::new(access_info(head, buf))),
        };
        conn.pending = Some(pending);
        conn.phase = Phase::Dispatched;

        let Some((head, buf, body)) = conn.request_parts() else {
            return false;
        };
        let (path, _) = path_and_query(head, buf);
        let meta = Meta {
            server_name: self.server_name.clone(),
            server_port: self.server_port,
            peer: conn.peer.clone(),
            scheme: "http",
        };
        let answered = match shared.mounts.resolve(path) {
            None => Some(host_response(404, "no app is mounted at this path")),
            Some((app, split)) => with_view(head, buf, body, split, &meta, |request| {
                let blocking = shared.pool.is_some() && app.blocks(request);
                match (&shared.pool, blocking) {
                    (Some(pool), true) => {
                        let owned = OwnedRequest::copy(head, buf, body, split, &meta);
                        submit_blocking(pool, app, owned, responder(token, id, &self.queue))
                    }
                    _ => {
                        let started = Instant::now();
                        begin_inline(&self.queue, id);
                        app.handle(request, responder(token, id, &self.queue));
                        let inline = end_inline();
                        let who = format!("app {}", app.name);
                        warn_if_blocked(shared.loop_block_warn, started, &who, path);
                        inline
                    }
                }
            }),
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
        let Some(pending) = conn.pending.take() else {
            return;
        };
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
                conn.fill(&self.shared.params);
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

/// Tornado's blocking log threshold: app code should never hold the loop.
fn warn_if_blocked(limit: Duration, started: Instant, who: &str, path: &str) {
    let held = started.elapsed();
    if held > limit {
        log::warn!(
            "event loop blocked for {} ms by {who} {path}",
            held.as_millis()
        );
    }
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

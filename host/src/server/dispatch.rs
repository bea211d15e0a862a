//! Dispatching one parsed request: the host's endpoints, then the mount
//! table; the app runs inline on the loop or, when it says it blocks, on the
//! blocking pool. The answer is queued on the connection's output.

use super::conn::{Conn, Pending, Terms};
use super::handles::Handles;
use super::ws::line::Line;
use super::ws::{Link, LinkWatch};
use crate::apps::loader::LoadedApp;
use crate::apps::pool::{Fate, Job, Pool, Refused};
use crate::http::answer::HostAnswer;
use crate::http::parse::Head;
use crate::http::reader::BodyPlan;
use crate::http::reader::BufPool;
use crate::http::response::Fixed;
use crate::http::ws::handshake;
use crate::inbox::{Answer, Inbox, StreamStart, Upgrade};
use crate::listen::Stream;
use crate::ops::access_log::AccessInfo;
use crate::ops::access_log::Answered;
use crate::ops::admin;
use crate::ops::netfilter::{forwarded_client, peer_ip, Forwarded, UNKNOWN_CLIENT};
use crate::poller::Token;
use crate::server::request::{with_view, HeadText, Meta, OwnedRequest};
use crate::server::responder::{begin_inline, end_inline, responder};
use crate::settings::Settings;
use crate::stats::Stats;
use std::io::{Read, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};
use stoa_app_api::Response;

/// Hands parsed requests to the host's endpoints or to their apps, and
/// queues their answers on the connection. One per loop.
pub(super) struct Dispatcher {
    /// The loop's worker index (its counters, its heartbeat).
    worker: usize,
    shared: Arc<Handles>,
    /// The loop's inbox, where deferred answers come back.
    queue: Arc<Inbox>,
    next_id: u64,
    /// The loop's clock: read after each wait and after each app handler
    /// that runs on the loop, so a request costs one clock read.
    pub(super) now: Instant,
    /// The server name and port apps see, per listener.
    locals: Vec<(Arc<str>, u16)>,
}

impl Dispatcher {
    pub(super) fn new(
        worker: usize,
        shared: Arc<Handles>,
        queue: Arc<Inbox>,
        locals: Vec<(Arc<str>, u16)>,
    ) -> Self {
        Dispatcher {
            worker,
            shared,
            queue,
            next_id: 1,
            now: Instant::now(),
            locals,
        }
    }

    /// Hands the request ready on `conn` (reported as `token`) to the
    /// host's endpoints or its app; returns the answer if it was given at
    /// once. Either way the connection then waits for it.
    pub(super) fn dispatch<S: Read + Write>(
        &mut self,
        conn: &mut Conn<S>,
        token: Token,
    ) -> Option<Answer> {
        let id = self.next_id;
        self.next_id += 1;
        let started = self.now;
        let shared = &*self.shared;
        let (head, buf, body) = conn.request_parts()?;
        let parts = HeadText::new(head, buf);
        let path = parts.path;
        // The client the request speaks for: the peer, or the one a trusted
        // proxy names. Status rules, apps and the access log all see it.
        let (client, scheme) = client_of(&shared.settings, head, buf, conn.peer());
        // A request asking for a WebSocket is checked before any app sees
        // it: a malformed handshake is the host's to refuse.
        let (refusal, accept) = match handshake::asks_for_websocket(head) {
            false => (None, None),
            true => match handshake::check(head, buf) {
                Ok(accept) => (None, Some(Box::<str>::from(accept))),
                Err(r) => (Some(HostAnswer::WebSocket(r).response()), None),
            },
        };
        let host_answer = if refusal.is_some() {
            refusal
        } else if path.starts_with(admin::PREFIX) {
            admin::answer(&shared.sources(), path, &client)
        } else {
            None
        };
        let apps = shared.apps.load();
        let route = match host_answer {
            Some(_) => None,
            None => apps.mounts.resolve(path),
        };
        let slot = route.map(|(app, _)| app.slot);
        let access = shared
            .access_log
            .as_ref()
            .map(|_| Box::new(access_info(&parts, &client, route.map(|(app, _)| &**app))));
        // The clock read after a handler that ran on the loop.
        let mut after = None;
        let (answer, blocking_path) = match (host_answer, route) {
            (Some(response), _) => (Some(Answer::Response(response, &[])), None),
            (None, None) => (
                Some(Answer::Response(HostAnswer::NoMount.response(), &[])),
                None,
            ),
            (None, Some((app, split))) => {
                let meta = self.meta(conn.listener(), client, scheme);
                with_view(&parts, body, split, &meta, |request| {
                    match shared.pool.as_ref().filter(|_| app.blocks(request)) {
                        Some(pool) => {
                            let owned = OwnedRequest::copy(&parts, body, split, &meta)
                                .held_on(&self.shared.budget);
                            let timeout = app
                                .limits
                                .app_timeout
                                .unwrap_or(shared.settings.conn.app_timeout);
                            let deadline = self.now + timeout;
                            let r = submit_blocking(
                                pool,
                                (app, path, deadline),
                                owned,
                                responder(
                                    (token, id),
                                    app,
                                    &self.queue,
                                    (&shared.settings.conn, accept),
                                ),
                            );
                            (r, Some(Box::<str>::from(path)))
                        }
                        None => {
                            let (inline, now) =
                                self.run_inline((app, path, request), (token, id), accept, started);
                            after = Some(now);
                            (inline, None)
                        }
                    }
                })
            }
        };
        if let Some(now) = after {
            self.now = now;
        }
        let timeout = route.and_then(|(app, _)| app.limits.app_timeout);
        conn.begin_dispatch(id, started, slot, blocking_path, access);
        if let Some(timeout) = timeout {
            conn.set_app_timeout(timeout);
        }
        answer
    }

    /// Decides, once the head of a request with a body is parsed (the
    /// reader asks for no other), the body limit (its app's own
    /// `max_body`, when some app has one) and whether its app reads the
    /// body as it arrives (asked with the head only).
    pub(super) fn body_plan(
        &self,
        head: &Head,
        buf: &[u8],
        peer: &Arc<str>,
        listener: usize,
    ) -> BodyPlan {
        let shared = &*self.shared;
        let parts = HeadText::new(head, buf);
        let apps = shared.apps.load();
        let route = apps.mounts.resolve(parts.path);
        let limit = shared.settings.app_body_limits.map(|default| {
            route
                .and_then(|(a, _)| a.limits.max_body)
                .unwrap_or(default)
        });
        let stream = match route {
            Some((app, split)) if app.may_read_bodies() => {
                let (client, scheme) = client_of(&shared.settings, head, buf, peer);
                let meta = self.meta(listener, client, scheme);
                with_view(&parts, &[], split, &meta, |request| app.reads_body(request))
            }
            _ => false,
        };
        BodyPlan { limit, stream }
    }

    /// What the app sees of the listener and the client.
    fn meta(&self, listener: usize, peer: Arc<str>, scheme: &'static str) -> Meta {
        let (server_name, server_port) = self
            .locals
            .get(listener)
            .cloned()
            .unwrap_or_else(|| ("localhost".into(), 0));
        Meta {
            server_name,
            server_port,
            peer,
            scheme,
        }
    }

    /// Runs the app's handler on this loop; its answer if given at once,
    /// and the clock read after it.
    fn run_inline(
        &self,
        (app, path, request): (&Arc<LoadedApp>, &str, &stoa_app_api::abi::Request<'_>),
        (token, id): (Token, u64),
        accept: Option<Box<str>>,
        started: Instant,
    ) -> (Option<Answer>, Instant) {
        let shared = &*self.shared;
        let beat = shared.board.beat(self.worker);
        beat.enter(app.slot, path);
        begin_inline(&self.queue, id);
        app.handle(
            request,
            responder(
                (token, id),
                app,
                &self.queue,
                (&shared.settings.conn, accept),
            ),
        );
        let inline = end_inline();
        beat.leave();
        let now = Instant::now();
        let hint = if shared.pool.is_some() {
            "declare the route blocking with App::blocks so it runs on the pool"
        } else {
            "--blocking-on-loop runs even routes declared blocking here"
        };
        let held = now.saturating_duration_since(started);
        let who = format_args!("app {} {path}", app.name);
        warn_if_blocked(shared.settings.loop_block_warn, held, who, hint);
        (inline, now)
    }

    /// Queues `answer` as the answer to the request `conn` waits on,
    /// counts it and writes its access-log line. `close` closes the
    /// connection after it (a timed-out app); so does draining.
    pub(super) fn finish<S: Read + Write>(
        &self,
        conn: &mut Conn<S>,
        (response, fixed): (Response, Fixed),
        date: &str,
        close: bool,
        pool: &mut BufPool,
    ) {
        let Some(slot) = conn.pending().map(|p| p.slot) else {
            return;
        };
        let mut response = final_status(response, slot, &self.shared.stats);
        let (status, body_len) = (response.status, response.body.len());
        let close = close || self.shared.control.draining();
        // A large body is moved to the output as it is, not copied.
        let terms = Terms {
            date,
            params: &self.shared.settings.conn,
            close,
        };
        let Some(pending) = conn.answer(&mut response, fixed, &terms, pool) else {
            return;
        };
        self.record(&pending, status, body_len);
    }

    /// The app started a streamed answer to the request `conn` waits on:
    /// its head is queued, counted and logged now (the access log's size
    /// is the declared length, or 0 when the body is framed by the host).
    /// A head with a status that is not final is answered 500 instead.
    pub(super) fn start_stream<S: Read + Write>(
        &self,
        conn: &mut Conn<S>,
        start: StreamStart,
        (date, open): (&str, Arc<std::sync::atomic::AtomicU64>),
        pool: &mut BufPool,
    ) {
        let StreamStart { mut head, line } = start;
        line.attach(self.shared.budget.reservation());
        if !(200..=599).contains(&head.status) {
            line.close();
            // `finish` answers a status that is not final with a 500.
            self.finish(conn, (head, &[]), date, false, pool);
            return;
        }
        let close = self.shared.control.draining();
        let declared = line.declared().unwrap_or(0);
        let status = head.status;
        let terms = Terms {
            date,
            params: &self.shared.settings.conn,
            close,
        };
        let Some(pending) = conn.start_stream(&mut head, line, open, &terms, pool) else {
            return;
        };
        self.record(
            &pending,
            status,
            usize::try_from(declared).unwrap_or(usize::MAX),
        );
    }

    /// Queues the app's answer: a response (`finish`), or the switch to
    /// WebSocket.
    #[inline]
    pub(super) fn answer(
        &self,
        (conn, token): (&mut Conn<Stream>, Token),
        answer: Answer,
        date: &str,
        pool: &mut BufPool,
    ) {
        match answer {
            Answer::Response(response, fixed) => {
                self.finish(conn, (response, fixed), date, false, pool)
            }
            Answer::Upgrade(upgrade) => self.upgrade((conn, token), *upgrade, date, pool),
        }
    }

    /// Answers `101` and opens the app's WebSocket session on `conn`.
    #[cold]
    #[inline(never)]
    fn upgrade(
        &self,
        (conn, token): (&mut Conn<Stream>, Token),
        upgrade: Upgrade,
        date: &str,
        pool: &mut BufPool,
    ) {
        if self.shared.control.draining() {
            // A WebSocket opened now would be closed at once.
            let draining = HostAnswer::Draining.response();
            return self.finish(conn, (draining, &[]), date, true, pool);
        }
        let Some(id) = conn.pending().map(|p| p.id) else {
            return;
        };
        let params = &self.shared.settings.conn;
        let line = Line::new(
            (self.queue.clone(), token, id),
            // A WebSocket's queue is bounded as a streamed answer's is.
            params.stream_queue,
            params.send_timeout,
        );
        let accept = upgrade.accept.clone();
        let watch = LinkWatch {
            stats: self.shared.stats.clone(),
            board: self.shared.board.clone(),
            worker: self.worker,
            settings: self.shared.settings.clone(),
        };
        let now = self.now;
        let budget = self.shared.budget.clone();
        let Some(pending) = conn.upgrade(&accept, date, pool, |rest| {
            Link::new(upgrade, line, watch, rest, budget, now)
        }) else {
            return;
        };
        self.record(&pending, 101, 0);
        if let Some(link) = conn.link() {
            log::debug!("WebSocket {id} open for app {}", link.app());
            link.open();
        }
    }

    /// Counts an answer to `pending` and writes its access-log line.
    fn record(&self, pending: &Pending, status: u16, body_len: usize) {
        self.shared
            .stats
            .worker(self.worker)
            .app(pending.slot)
            .record(status, self.now.saturating_duration_since(pending.started));
        if let (Some(log), Some(info)) = (&self.shared.access_log, &pending.access) {
            let answered = Answered {
                status,
                bytes: if pending.head_only { 0 } else { body_len },
                micros: u64::try_from(
                    self.now
                        .saturating_duration_since(pending.started)
                        .as_micros(),
                )
                .unwrap_or(u64::MAX),
            };
            log.write(info, &answered);
        }
        log::trace!(
            "request {} answered {status} in {:?}",
            pending.id,
            self.now.saturating_duration_since(pending.started)
        );
    }
}

/// An app's answer must be a final status (200-599): 1xx are the host's to
/// send (a 100 or 101 sent as the answer would make the client read the
/// next response as this one's), and anything else is no status at all.
/// Such an answer becomes a 500, logged with the app's name.
fn final_status(response: Response, slot: Option<usize>, stats: &Stats) -> Response {
    if (200..=599).contains(&response.status) {
        return response;
    }
    let app = slot.map_or_else(|| "(host)".into(), |s| stats.app_name(s));
    log::error!(
        "app {app} answered status {}, which is not a final HTTP status (200-599); sending 500",
        response.status
    );
    HostAnswer::InvalidStatus.response()
}

/// Tornado's blocking log threshold: app code should never hold the loop.
/// `who` names the code, `hint` the remedy.
pub(super) fn warn_if_blocked(
    limit: Duration,
    held: Duration,
    who: std::fmt::Arguments<'_>,
    hint: &str,
) {
    if held > limit {
        log::warn!(
            "event loop blocked for {} ms by {who}; {hint}",
            held.as_millis()
        );
    }
}

/// The client's address and scheme: the peer's own, or from
/// `X-Forwarded-For`/`X-Forwarded-Proto` when the peer is a trusted proxy.
fn client_of(
    settings: &Settings,
    head: &Head,
    buf: &[u8],
    peer: &Arc<str>,
) -> (Arc<str>, &'static str) {
    let trusted = &settings.trusted_proxies;
    if trusted.is_empty() || !peer_ip(peer).is_some_and(|ip| trusted.contains(ip)) {
        return (peer.clone(), "http");
    }
    let client = match forwarded_client(head.values(buf, "x-forwarded-for"), trusted) {
        None => peer.clone(),
        Some(Forwarded::Client(addr)) => addr.to_string().into(),
        Some(Forwarded::Unknown) => UNKNOWN_CLIENT.into(),
    };
    // The last line: the one the nearest proxy added.
    let proto = head.values(buf, "x-forwarded-proto").next_back();
    let scheme = match proto {
        Some(p) if p.trim_ascii().eq_ignore_ascii_case(b"https") => "https",
        _ => "http",
    };
    (client, scheme)
}

/// Runs a blocking handler on the pool, if it starts before `deadline`
/// (else it answers 504 unrun); answers 503 at once when the pool's queue,
/// or the app's share of it, is full, or later when the room it waited in
/// past its app's share is taken back.
fn submit_blocking(
    pool: &Pool,
    (app, path, deadline): (&Arc<LoadedApp>, &str, Instant),
    owned: OwnedRequest,
    responder: stoa_app_api::abi::ResponderBox,
) -> Option<Answer> {
    let run_app = app.clone();
    let work = Box::new(move |fate: Fate| match fate {
        Fate::Run => owned.with_view(|request| run_app.handle(request, responder)),
        Fate::Expired => responder.respond(HostAnswer::AppTimeout.response()),
        Fate::Reclaimed => responder.respond(HostAnswer::ShareReclaimed.response()),
    });
    match pool.submit(Job::request(app.clone(), path.into(), deadline, work)) {
        Ok(()) => None,
        Err((job, why)) => {
            // Dropping the job drops its responder, whose answer (a 500) is
            // ignored: this 503 answers the request first.
            drop(job);
            let refusal = match why {
                Refused::QueueFull => HostAnswer::PoolFull,
                Refused::ShareFull => HostAnswer::AppShareFull,
            };
            Some(Answer::Response(refusal.response(), &[]))
        }
    }
}

fn access_info(parts: &HeadText<'_>, client: &Arc<str>, app: Option<&LoadedApp>) -> AccessInfo {
    let (head, buf) = (parts.head, parts.buf);
    let header = |name| {
        head.values(buf, name)
            .next()
            .map(|v| String::from_utf8_lossy(v).into_owned())
    };
    AccessInfo {
        client: client.clone(),
        method: parts.get(&head.method).to_string(),
        target: parts.get(&head.target).to_string(),
        protocol: format!("HTTP/1.{}", head.version_minor),
        referer: header("referer"),
        user_agent: header("user-agent"),
        app: app.map(|a| (a.name.clone(), a.generation)),
    }
}

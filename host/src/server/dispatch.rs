//! Dispatching one parsed request: the host's endpoints, then the mount
//! table; the app runs inline on the loop or, when it says it blocks, on the
//! blocking pool. The answer is queued on the connection's output.

use super::clock::warn_if_blocked;
use super::exchange::{Begun, Gone, Incoming, Outcome};
use super::handles::Handles;
use super::listeners::Listeners;
use crate::apps::loader::LoadedApp;
use crate::apps::pool::{Fate, Job, Pool, Refused};
use crate::http::answer::HostAnswer;
use crate::http::parse::Head;
use crate::http::reader::BodyPlan;
use crate::http::websocket::handshake;
use crate::http::websocket::switch::Accepting;
use crate::inbox::{Answer, Inbox};
use crate::ops::access_log::AccessInfo;
use crate::ops::admin;
use crate::ops::in_flight::{Flight, Waits};
use crate::ops::spot::Running;
use crate::poller::Token;
use crate::server::request::{with_view, HeadText, Meta, OwnedRequest};
use crate::server::responder::{begin_inline, end_inline, responder, ConnView, ReplyTo};
use crate::server::route::{Route, Target};
use std::sync::Arc;
use std::time::Instant;
use stoa_app_api::abi::TaskBox;
use stoa_app_api::Response;

/// Hands parsed requests to the host's endpoints or to their apps, and
/// queues their answers on the connection. One per loop; the loop owns
/// the clock and passes its time in.
pub(super) struct Dispatcher {
    /// The loop's worker index (its counters, its heartbeat).
    pub(super) worker: usize,
    pub(super) handles: Arc<Handles>,
    /// The loop's inbox, where deferred answers come back.
    pub(super) queue: Arc<Inbox>,
    next_id: u64,
    /// Each listener's facts: the name and port apps see, TLS, redirects.
    listeners: Arc<Listeners>,
}

impl Dispatcher {
    pub(super) fn new(
        worker: usize,
        handles: Arc<Handles>,
        queue: Arc<Inbox>,
        listeners: Arc<Listeners>,
    ) -> Self {
        Dispatcher {
            worker,
            handles,
            queue,
            next_id: 1,
            listeners,
        }
    }

    /// True if listener `via` serves TLS.
    pub(super) fn serves_tls(&self, via: usize) -> bool {
        self.listeners.serves_tls(via)
    }

    /// The TLS configuration a new session on listener `via` starts with.
    pub(super) fn tls_config(&self, via: usize) -> Option<Arc<rustls::ServerConfig>> {
        self.listeners.tls_config(via)
    }

    /// Hands `req` (of the connection reported as `token`), which starts at
    /// `now`, to the host's endpoints or its app, by its route (kept from
    /// its head, or decided now). The outcome says what its connection
    /// keeps of it until its answer, the answer if it was given at once,
    /// and the loop's time after (read again only after a handler that ran
    /// on the loop).
    pub(super) fn dispatch(&mut self, req: Incoming<'_>, token: Token, now: Instant) -> Outcome {
        let id = self.next_id;
        self.next_id += 1;
        let handles = &*self.handles;
        let Incoming {
            head,
            buf,
            body,
            route: kept,
            tls,
            peer,
            via,
        } = req;
        let parts = HeadText::new(head, buf);
        let apps;
        let route = match kept {
            Some(route) => route,
            None => {
                apps = handles.apps.load();
                Route::decide(&handles.settings, &apps.mounts, &parts, peer)
            }
        };
        let (refusal, accept) = self.refusal(&parts, via);
        let Route {
            client,
            scheme,
            target,
        } = route;
        let app = match &target {
            Target::App { app, split } if refusal.is_none() => Some((&**app, *split)),
            _ => None,
        };
        let access = handles
            .access_log
            .as_ref()
            .map(|_| Box::new(access_info(&parts, &client, app.map(|(app, _)| &**app))));
        let mut begun = Begun {
            id,
            started: now,
            slot: app.map(|(app, _)| app.slot),
            blocking_path: None,
            access,
            on_board: None,
            app_timeout: app.and_then(|(app, _)| app.limits.app_timeout),
            on_gone: None,
        };
        let Some((app, split)) = app else {
            let response =
                refusal.unwrap_or_else(|| self.host_answer(&target, parts.path, &client));
            return Outcome {
                begun,
                answer: Some(Answer::Response(response, &[])),
                after: now,
            };
        };
        let call = AppCall {
            app,
            split,
            meta: self.meta(via, client, scheme),
            reply: ReplyTo {
                queue: self.queue.clone(),
                token,
                id,
            },
            accept,
            conn: ConnView {
                tls,
                http2: head.http2,
            },
        };
        let (answer, after) = self.to_app(call, &parts, body, &mut begun);
        Outcome {
            begun,
            answer,
            after,
        }
    }

    /// What the host answers before any app sees the request, if anything:
    /// a malformed WebSocket handshake (a well-formed one gives what its
    /// app's acceptance needs), or, on a plain bind under
    /// `--https-redirect`, the redirect every request gets.
    fn refusal(&self, parts: &HeadText<'_>, via: usize) -> (Option<Response>, Option<Accepting>) {
        let (head, buf) = (parts.head, parts.buf);
        let (refusal, accept) = match handshake::asks_for_websocket(head) {
            false => (None, None),
            true => match handshake::check(head, buf) {
                Ok(accept) => (None, Some(Accepting::new(accept, head, buf))),
                Err(r) => (Some(HostAnswer::WebSocket(r).response()), None),
            },
        };
        match self.listeners.redirect_to(via) {
            Some(port) => {
                let (fallback, _) = self.listeners.local(via);
                let redirect = super::redirect::answer(parts, port, &fallback);
                (Some(redirect), accept)
            }
            None => (refusal, accept),
        }
    }

    /// The answer to a request no app takes: the host's endpoint under its
    /// prefix (every path there is the host's to answer), 503 for a mount
    /// held out of service, else 404.
    fn host_answer(&self, target: &Target<'_>, path: &str, client: &Arc<str>) -> Response {
        match target {
            Target::Host => admin::answer(&self.handles.sources(), path, client)
                .unwrap_or_else(|| HostAnswer::NoEndpoint.response()),
            Target::Held(why) => HostAnswer::OutOfService(why.clone()).response(),
            Target::App { .. } | Target::NoMount => HostAnswer::NoMount.response(),
        }
    }

    /// Hands a request to its app: on the blocking pool when the app says
    /// it blocks (and there is one), else on this loop. Notes in `begun`
    /// what its connection keeps (the board entry, the pool job's path,
    /// the `on_gone` task); the answer if given at once, and the clock
    /// after.
    fn to_app(
        &self,
        call: AppCall<'_>,
        parts: &HeadText<'_>,
        body: &[u8],
        begun: &mut Begun,
    ) -> (Option<Answer>, Instant) {
        let handles = &*self.handles;
        let now = begun.started;
        let path = parts.path;
        // A request the app did not answer in its call is on the board of
        // requests in flight until its answer (see `in_flight`).
        let board = handles.board.flights(self.worker);
        let AppCall {
            app,
            split,
            meta,
            reply,
            accept,
            conn,
        } = call;
        with_view(parts, body, split, &meta, |request| {
            match handles.pool.as_ref().filter(|_| app.blocks(request)) {
                Some(pool) => {
                    let owned =
                        OwnedRequest::copy(parts, body, split, &meta).held_on(&handles.budget);
                    let timeout = app
                        .limits
                        .app_timeout
                        .unwrap_or(handles.settings.conn.app_timeout);
                    let responder = responder(reply, app, &handles.settings.conn, accept, conn);
                    let job = BlockingJob {
                        app,
                        path,
                        deadline: now + timeout,
                    };
                    // On the board before a pool thread can run it.
                    let guard = board.enter(&flight_of(app, request, Waits::OnPool));
                    let r = submit_blocking(pool, job, owned, responder);
                    if r.is_none() {
                        begun.on_board = Some(guard);
                    }
                    begun.blocking_path = Some(Box::<str>::from(path));
                    (r, now)
                }
                None => {
                    let call = InlineCall {
                        app,
                        path,
                        request,
                        started: now,
                    };
                    let (inline, gone, read) = self.run_inline(call, reply, accept, conn);
                    if inline.is_none() {
                        begun.on_board = Some(board.enter(&flight_of(app, request, Waits::Later)));
                    }
                    begun.on_gone = gone.map(|task| Gone {
                        task,
                        slot: app.slot,
                    });
                    (inline, read)
                }
            }
        })
    }

    /// Routes a request with a body once its head is parsed (the reader
    /// asks for no other), and decides from its route the body limit (its
    /// app's own `max_body` or `max_stream_body`, when some app has one)
    /// and whether its app
    /// reads the body as it arrives (asked with the head only). The route
    /// is kept with the request for its dispatch.
    pub(super) fn body_plan(
        &self,
        head: &Head,
        buf: &[u8],
        peer: &Arc<str>,
        listener: usize,
    ) -> (BodyPlan, Route<'static>) {
        let handles = &*self.handles;
        let parts = HeadText::new(head, buf);
        let apps = handles.apps.load();
        let route = Route::decide(&handles.settings, &apps.mounts, &parts, peer);
        let stream = match route.app() {
            Some((app, split)) if app.may_read_bodies() => {
                let meta = self.meta(listener, route.client.clone(), route.scheme);
                with_view(&parts, &[], split, &meta, |request| app.reads_body(request))
            }
            _ => false,
        };
        let limit = route.body_limit(&handles.settings, stream);
        (BodyPlan { limit, stream }, route.kept())
    }

    /// What the app sees of the listener and the client.
    fn meta(&self, listener: usize, peer: Arc<str>, scheme: &'static str) -> Meta {
        let (server_name, server_port) = self.listeners.local(listener);
        // On a TLS listener the scheme is https whatever a proxy's header
        // says.
        let scheme = match self.serves_tls(listener) {
            true => "https",
            false => scheme,
        };
        Meta {
            server_name,
            server_port,
            peer,
            scheme,
        }
    }

    /// Runs the app's handler on this loop, its answer going to `reply`;
    /// its answer if given at once, its `on_gone` task if it registered
    /// one, and the clock read after it.
    fn run_inline(
        &self,
        call: InlineCall<'_>,
        reply: ReplyTo,
        accept: Option<Accepting>,
        conn: ConnView,
    ) -> (Option<Answer>, Option<TaskBox>, Instant) {
        let InlineCall {
            app,
            path,
            request,
            started,
        } = call;
        let handles = &*self.handles;
        let beat = handles.board.beat(self.worker);
        let running = Running {
            method: request.method.as_str(),
            path,
            request: Some((request.peer.as_str(), request.version_minor)),
        };
        beat.enter(app.slot, &running);
        begin_inline(&self.queue, reply.id);
        app.handle(
            request,
            responder(reply, app, &handles.settings.conn, accept, conn),
        );
        let (inline, gone) = end_inline();
        beat.leave();
        let now = Instant::now();
        let hint = if handles.pool.is_some() {
            "declare the route blocking with App::blocks so it runs on the pool"
        } else {
            "--blocking-on-loop runs even routes declared blocking here"
        };
        let held = now.saturating_duration_since(started);
        let who = format_args!("app {} {path}", app.name);
        warn_if_blocked(handles.settings.loop_block_warn, held, who, hint);
        (inline, gone, now)
    }
}

/// A request on its way to its app: the app and where its path splits,
/// what the app sees of the listener and client, where its answer goes,
/// a WebSocket handshake it may accept, and what it sees of the connection.
struct AppCall<'a> {
    app: &'a Arc<LoadedApp>,
    split: usize,
    meta: Meta,
    reply: ReplyTo,
    accept: Option<Accepting>,
    conn: ConnView,
}

/// What an app's handler is called with on the loop: the app, the path
/// (for the heartbeat and the blocked-loop warning), the request's view,
/// and when it started.
struct InlineCall<'a> {
    app: &'a Arc<LoadedApp>,
    path: &'a str,
    request: &'a stoa_app_api::abi::Request<'a>,
    started: Instant,
}

/// A blocking handler's job for the pool: its app, the path (for the
/// hung-job log), and the time by which it must start.
struct BlockingJob<'a> {
    app: &'a Arc<LoadedApp>,
    path: &'a str,
    deadline: Instant,
}

/// Runs a blocking handler on the pool, if it starts before `deadline`
/// (else it answers 504 unrun); answers 503 at once when the pool's queue,
/// or the app's share of it, is full, or later when the room it waited in
/// past its app's share is taken back.
fn submit_blocking(
    pool: &Pool,
    job: BlockingJob<'_>,
    owned: OwnedRequest,
    responder: stoa_app_api::abi::ResponderBox,
) -> Option<Answer> {
    let BlockingJob {
        app,
        path,
        deadline,
    } = job;
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

/// A request as the board of requests in flight keeps it.
fn flight_of(app: &LoadedApp, request: &stoa_app_api::abi::Request<'_>, waits: Waits) -> Flight {
    let mut target = format!("{}{}", request.script_name, request.path_info);
    if !request.query.is_empty() {
        target.push('?');
        target.push_str(request.query.as_str());
    }
    Flight {
        app: app.name.clone(),
        client: request.peer.to_string(),
        method: request.method.to_string(),
        target,
        protocol: format!("HTTP/1.{}", request.version_minor),
        waits,
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
        protocol: match head.http2 {
            true => "HTTP/2.0".into(),
            false => format!("HTTP/1.{}", head.version_minor),
        },
        referer: header("referer"),
        user_agent: header("user-agent"),
        app: app.map(|a| (a.name.clone(), Some(a.generation))),
    }
}

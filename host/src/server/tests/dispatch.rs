//! The dispatcher over an in-memory connection: a request goes to the
//! host's endpoints, its app or a 404 by one route; a body is planned by
//! the same route; an answer that is not final becomes a logged 500.

use crate::apps::registry::AppState;
use crate::http::answer::HostAnswer;
use crate::http::reader::BufPool;
use crate::http::HttpError;
use crate::inbox::{Answer, Inbox, StreamStart};
use crate::poller::Token;
use crate::server::clock::Stamp;
use crate::server::conn::mem::Mem;
use crate::server::conn::Conn;
use crate::server::dispatch::Dispatcher;
use crate::server::handles::Handles;
use crate::server::listeners::Listeners;
use crate::server::testing::{
    app, handles, kept_responder, logged, sessions_opened, settings, NoWake,
};
use crate::settings::{AppLimits, Overload, Settings};
use crate::stream_line::{LineAddr, StreamLine};
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};
use stoa_app_api::abi::SEND_CLOSED;
use stoa_app_api::Response;

const DATE: &str = "Tue, 01 Dec 2026 00:00:00 GMT";
const GET: &str = " HTTP/1.1\r\nHost: x\r\n\r\n";

/// A loop's dispatcher over `handles`, and the buffers it reads with.
struct Rig {
    dispatcher: Dispatcher,
    handles: Arc<Handles>,
    pool: BufPool,
}

fn rig(settings: Settings, limits: AppLimits) -> Rig {
    let handles = handles(settings, vec![app("/app", limits)]);
    let queue = Arc::new(Inbox::new(Arc::new(NoWake)));
    let listeners = Arc::new(Listeners::plain(vec![(Arc::from("localhost"), 8080)]));
    Rig {
        dispatcher: Dispatcher::new(0, handles.clone(), queue, listeners),
        handles,
        pool: BufPool::default(),
    }
}

fn stamp() -> Stamp<'static> {
    Stamp {
        now: Instant::now(),
        date: DATE,
    }
}

impl Rig {
    /// A connection that has read `input`, its request parsed (routed and
    /// its body planned when it has one): `Ok(true)` once it is ready.
    fn read(&mut self, input: &str) -> (Conn<Mem>, Result<bool, HttpError>) {
        let mut c = Conn::new(Mem::new(input.as_bytes()), "127.0.0.1:1".into());
        c.note_ready(true, false);
        let ready = self.parse(&mut c);
        (c, ready)
    }

    /// Reads what `c` has and parses on, as the loop's `serve` does.
    fn parse(&mut self, c: &mut Conn<Mem>) -> Result<bool, HttpError> {
        let handles = self.handles.clone();
        c.note_ready(true, false);
        c.read_some(&handles.settings.conn, &mut self.pool);
        let d = &self.dispatcher;
        let plan =
            |head: &_, buf: &[u8], peer: &Arc<str>, via: usize| d.body_plan(head, buf, peer, via);
        c.next_request_with(&handles.settings.conn, &mut self.pool, &plan)
    }

    /// Dispatches the request ready on `c`; the answer given at once.
    fn dispatch(&mut self, c: &mut Conn<Mem>) -> Option<Answer> {
        let req = c.incoming()?;
        let outcome = self.dispatcher.dispatch(req, Token(1), Instant::now());
        let answered = outcome.answer.is_some();
        c.begin(outcome.begun, answered);
        outcome.answer
    }

    /// Queues `answer` on `c` as the loop does and writes it out: all
    /// the connection has written so far.
    fn answer(&mut self, c: &mut Conn<Mem>, answer: Answer) -> String {
        match answer {
            Answer::Response(response, fixed) => {
                let pool = &mut self.pool;
                self.dispatcher
                    .finish(c, response, fixed, false, stamp(), pool)
            }
            Answer::Upgrade(_) => panic!("no upgrade was asked for"),
        }
        c.flush(&mut self.pool).expect("flush");
        c.stream().text()
    }

    /// Reads, dispatches and answers `input`'s request, which must be
    /// answered at once: what was written.
    fn serve(&mut self, input: &str) -> String {
        let (mut c, ready) = self.read(input);
        assert_eq!(ready, Ok(true), "{input:?}");
        let answer = self.dispatch(&mut c).expect("an answer at once");
        self.answer(&mut c, answer)
    }

    /// Answers counted in status class `class` (2 for 2xx) for the app
    /// (`Some(0)`) or the host (`None`).
    fn counted(&self, slot: Option<usize>, class: usize) -> u64 {
        let stats = self.handles.stats.worker(0).app(slot);
        stats.by_class[class - 1].load(Relaxed)
    }
}

fn body_of(status: u16, text: &str) -> String {
    format!("HTTP/1.1 {status} ") + text
}

#[test]
fn a_request_goes_to_the_host_its_app_or_a_404() {
    let mut r = rig(settings(16, Overload::Queue), AppLimits::default());
    let out = r.serve(&format!("GET /.well-known/stoa/health{GET}"));
    assert!(
        out.starts_with("HTTP/1.1 200") && out.ends_with("ok\n"),
        "{out}"
    );
    assert_eq!((r.counted(None, 2), r.counted(Some(0), 2)), (1, 0));

    let out = r.serve(&format!("GET /app/items?x=1{GET}"));
    assert!(out.ends_with("app saw /app|/items"), "{out}");
    assert_eq!(r.counted(Some(0), 2), 1);

    let no_mount = HostAnswer::NoMount.response();
    let text = String::from_utf8_lossy(&no_mount.body).into_owned();
    for path in ["/other", "/apple", "/"] {
        let out = r.serve(&format!("GET {path}{GET}"));
        assert!(out.starts_with(&body_of(404, "")), "{path}: {out}");
        assert!(out.ends_with(&text), "{path}: {out}");
    }
    assert_eq!(r.counted(None, 4), 3);
    assert_eq!(r.counted(Some(0), 4), 0);
}

#[test]
fn an_app_answer_that_is_not_final_becomes_a_logged_500() {
    let mut r = rig(settings(16, Overload::Queue), AppLimits::default());
    for status in [100, 101, 103, 199, 600, 999] {
        let mut out = String::new();
        let lines = logged(|| out = r.serve(&format!("GET /app/status/{status}{GET}")));
        assert!(out.starts_with("HTTP/1.1 500"), "{status}: {out}");
        let said = format!("app probe answered status {status}, which is not a final");
        assert!(
            lines.iter().any(|l| l.contains(&said)),
            "{status}: {lines:?}"
        );
    }
    assert_eq!(r.counted(Some(0), 5), 6);
    assert_eq!(r.counted(Some(0), 1), 0);
    for status in [200, 599] {
        let out = r.serve(&format!("GET /app/status/{status}{GET}"));
        assert!(out.starts_with(&body_of(status, "")), "{out}");
    }
}

#[test]
fn a_streamed_head_that_is_not_final_becomes_a_500_and_closes_its_line() {
    let mut r = rig(settings(16, Overload::Queue), AppLimits::default());
    let (mut c, ready) = r.read(&format!("GET /app/later{GET}"));
    assert_eq!(ready, Ok(true));
    assert!(r.dispatch(&mut c).is_none());
    assert!(c.is_dispatched() && kept_responder().is_some());
    let id = c.pending().map(|p| p.id).expect("pending");
    let addr = LineAddr {
        token: Token(1),
        id,
        inbox: Arc::new(Inbox::new(Arc::new(NoWake))),
        slot: 0,
        app: Arc::from("probe"),
    };
    let line = StreamLine::new(addr, 1 << 16, Duration::from_secs(1), None, 0);
    let start = StreamStart {
        head: Response::new(103),
        line: line.clone(),
    };
    let open = Arc::new(AtomicU64::new(0));
    let lines = logged(|| {
        let pool = &mut r.pool;
        r.dispatcher
            .start_stream(&mut c, start, open.clone(), stamp(), pool)
    });
    c.flush(&mut r.pool).expect("flush");
    let out = c.stream().text();
    assert!(out.starts_with("HTTP/1.1 500"), "{out}");
    assert!(
        lines.iter().any(|l| l.contains("answered status 103")),
        "{lines:?}"
    );
    assert_eq!(line.send(b"more"), SEND_CLOSED);
    assert_eq!(open.load(Relaxed), 0);
    assert!(!c.is_streaming());
}

#[test]
fn a_body_is_planned_by_its_request_s_route() {
    let mut with_limits = settings(16, Overload::Queue);
    with_limits.app_body_limits = Some(1 << 20);
    with_limits.app_stream_limits = Some(1 << 20);
    let own = AppLimits {
        max_body: Some(4),
        max_stream_body: Some(8),
        ..AppLimits::default()
    };
    let mut r = rig(with_limits, own);
    let post = |path: &str| {
        format!("POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n0123456789")
    };
    // The app's own limit.
    let (_, ready) = r.read(&post("/app/x"));
    assert_eq!(ready, Err(HttpError::BodyTooLarge));
    // The host's endpoints and no app: the server-wide one.
    for path in ["/.well-known/stoa/health", "/other"] {
        let (_, ready) = r.read(&post(path));
        assert_eq!(ready, Ok(true), "{path}");
    }
    // An app reading its body as it comes: ready with the head alone, up
    // to its own streamed-body limit (past its max_body), and refused
    // past that limit, by its name.
    let (_, ready) = r.read("POST /app/stream HTTP/1.1\r\nHost: x\r\nContent-Length: 8\r\n\r\n");
    assert_eq!(ready, Ok(true));
    let (_, ready) = r.read("POST /app/stream HTTP/1.1\r\nHost: x\r\nContent-Length: 9\r\n\r\n");
    assert_eq!(ready, Err(HttpError::StreamBodyTooLarge));
    let (_, ready) = r.read("POST /app/x HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\n");
    assert_eq!(ready, Ok(false));
}

#[test]
fn a_request_keeps_the_route_its_head_was_given() {
    let mut r = rig(settings(16, Overload::Queue), AppLimits::default());
    let (mut c, ready) = r.read("POST /app/x HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nab");
    assert_eq!(ready, Ok(false));
    // The app is unmounted while the body comes in: the request goes on
    // to the app its head was routed to.
    r.handles.apps.publish(AppState::default());
    c.stream_mut().send(b"cd");
    assert_eq!(r.parse(&mut c), Ok(true));
    let answer = r.dispatch(&mut c).expect("an answer at once");
    let out = r.answer(&mut c, answer);
    assert!(out.ends_with("app saw /app|/x"), "{out}");
    // The next request is routed afresh.
    c.stream_mut().send(format!("GET /app/x{GET}").as_bytes());
    assert_eq!(r.parse(&mut c), Ok(true));
    let answer = r.dispatch(&mut c).expect("an answer at once");
    let out = r.answer(&mut c, answer);
    assert!(out.contains("HTTP/1.1 404"), "{out}");
}

const HANDSHAKE: &str = " HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n\
     Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
     Sec-WebSocket-Version: 13\r\n\r\n";

/// The app accepts a WebSocket in its call: the dispatcher's answer is the
/// switch, which it queues as `101` with the handshake's accept value,
/// counts, and opens the app's session; the connection then speaks
/// WebSocket.
#[test]
fn an_accepted_websocket_is_switched_counted_and_opened() {
    let mut r = rig(settings(16, Overload::Queue), AppLimits::default());
    let (mut c, ready) = r.read(&format!("GET /app/ws{HANDSHAKE}"));
    assert_eq!(ready, Ok(true));
    let answer = r.dispatch(&mut c).expect("accepted in its call");
    assert!(matches!(answer, Answer::Upgrade(_)));
    let opened = sessions_opened();
    let pool = &mut r.pool;
    r.dispatcher.answer(&mut c, Token(1), answer, stamp(), pool);
    c.flush(pool).expect("flush");
    let out = c.stream().text();
    assert!(
        out.starts_with("HTTP/1.1 101 Switching Protocols\r\n"),
        "{out}"
    );
    assert!(
        out.contains("Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"),
        "{out}"
    );
    assert!(c.is_upgraded());
    assert_eq!(sessions_opened(), opened + 1);
    assert_eq!(r.counted(Some(0), 1), 1);
}

/// A switch answered while the host drains would be closed at once: it is
/// refused with 503 and the connection closes after it; the session is
/// never opened.
#[test]
fn a_websocket_accepted_while_draining_is_refused_503_and_closes() {
    let mut r = rig(settings(16, Overload::Queue), AppLimits::default());
    let (mut c, ready) = r.read(&format!("GET /app/ws{HANDSHAKE}"));
    assert_eq!(ready, Ok(true));
    let answer = r.dispatch(&mut c).expect("accepted in its call");
    r.handles.control.drain();
    let opened = sessions_opened();
    let pool = &mut r.pool;
    r.dispatcher.answer(&mut c, Token(1), answer, stamp(), pool);
    c.flush(pool).expect("flush");
    let out = c.stream().text();
    assert!(out.starts_with("HTTP/1.1 503"), "{out}");
    assert!(out.contains("Connection: close\r\n"), "{out}");
    assert!(!c.is_upgraded());
    assert!(c.finished());
    assert_eq!(sessions_opened(), opened);
    assert_eq!(r.counted(Some(0), 5), 1);
}

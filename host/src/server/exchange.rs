//! The seam between a connection's protocol and the request path.
//!
//! A protocol yields requests as `Incoming` (the head, its bytes, the body
//! read with it, the route decided with the head, the TLS session, the
//! peer and the listener) and keeps, per request, what `Begun` says until
//! its answer. The dispatcher sees an `Incoming`, never a connection, and
//! returns one `Outcome`, which the loop applies: the request begins on
//! its connection (`Conn::begin`), and an answer given at once is queued
//! as any later one is. HTTP/1.1 (`conn`) yields one request at a time per
//! connection; a protocol with many streams on one connection yields one
//! `Incoming` per stream, each with its own `Begun`.
//!
//! The other way, the dispatcher's answering half (`answering`) queues an
//! answer through `Exchange`: the request waiting, its listener, and how
//! a whole answer or a streamed one's head goes out. It counts the answer
//! and writes its access-log line whatever the protocol. What a
//! connection keeps of a request until then is the seam's too (`Pending`,
//! made from `Begun`), as are the terms an answer is queued under
//! (`Terms`).

use super::conn::tail::Tail;
use super::route::Route;
use crate::http::parse::Head;
use crate::http::reader::BufPool;
use crate::http::response::Fixed;
use crate::inbox::Answer;
use crate::ops::access_log::AccessInfo;
use crate::ops::in_flight::OnBoard;
use crate::settings::ConnParams;
use crate::stream_line::StreamLine;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::{Duration, Instant};
use stoa_app_api::abi::{TaskBox, TlsSession};
use stoa_app_api::Response;

/// A request a connection yields, ready for its app.
pub struct Incoming<'a> {
    pub head: &'a Head,
    /// The bytes `head`'s ranges index.
    pub buf: &'a [u8],
    /// The body read with the request (empty when its app reads it as it
    /// comes, or when it has none).
    pub body: &'a [u8],
    /// The route given when the head was whole (a request with a body);
    /// `None`: the dispatcher decides it now.
    pub route: Option<Route<'static>>,
    /// The TLS session apps see (none on a plain connection).
    pub tls: Option<Arc<TlsSession>>,
    /// The peer's address, as `ip:port`.
    pub peer: &'a Arc<str>,
    /// The listener it came in on (its index in the listener table).
    pub via: usize,
}

/// What a connection keeps of a request from its dispatch to its answer.
pub struct Begun {
    /// The request's number on its loop (answers come back by it).
    pub id: u64,
    pub started: Instant,
    /// The app's counters slot; `None` for the host's own answers.
    pub slot: Option<usize>,
    /// The path of a job on the blocking pool (for the hung-job log).
    pub blocking_path: Option<Box<str>>,
    /// Its access-log line, when there is an access log.
    pub access: Option<Box<AccessInfo>>,
    /// Its entry on the board of requests in flight, while its app has not
    /// answered.
    pub on_board: Option<OnBoard>,
    /// Its app's own `app_timeout`, if it has one.
    pub app_timeout: Option<Duration>,
    /// The app's task for the request abandoned before its answer.
    pub on_gone: Option<Gone>,
}

/// An app's task for a request abandoned before its answer is complete,
/// and the app's counters slot (which names it to the watchdog): a
/// connection keeps it with the request (`Begun::on_gone`, `Conn::set_gone`).
pub struct Gone {
    pub task: TaskBox,
    pub slot: usize,
}

/// What the dispatcher made of a request, for the loop to apply.
pub struct Outcome {
    pub begun: Begun,
    /// The answer, when it was given at once (the host's own, a refusal,
    /// an app that answered inside its call).
    pub answer: Option<Answer>,
    /// The loop's clock after the dispatch (read again only after a
    /// handler that ran on the loop).
    pub after: Instant,
}

/// What a connection keeps of the request with an app until its answer
/// (made from the dispatcher's `Begun` and what the protocol read of the
/// request).
pub struct Pending {
    pub id: u64,
    pub head_only: bool,
    pub started: Instant,
    /// The app's counters slot; `None` for the host's own answers.
    pub slot: Option<usize>,
    /// The path, kept for jobs on the blocking pool (for the hung-job log).
    pub path: Option<Box<str>>,
    pub access: Option<Box<AccessInfo>>,
    /// The app's own `app_timeout`, if it has one.
    pub timeout: Option<Duration>,
    /// The app's task for a request abandoned before its answer
    /// (`RawResponder::on_gone`).
    pub(super) gone: Option<Gone>,
    /// Its entry on the board of requests in flight (`ops::in_flight`),
    /// while the app has not answered.
    #[expect(
        dead_code,
        reason = "held for its drop, which takes the entry off the board"
    )]
    pub(super) on_board: Option<OnBoard>,
    /// What the request's head asked for (version, `Connection`).
    pub(super) keep_alive: bool,
    pub(super) version_minor: u8,
}

impl Pending {
    /// What a protocol keeps of a request the dispatcher began (`begun`):
    /// `head_only` answers HEAD; `answered`: its answer came at once (its
    /// app's `on_gone` task is not kept).
    pub fn begun(begun: Begun, head_only: bool, answered: bool) -> Pending {
        let Begun {
            id,
            started,
            slot,
            blocking_path,
            access,
            on_board,
            app_timeout,
            on_gone,
        } = begun;
        Pending {
            id,
            head_only,
            started,
            slot,
            path: blocking_path,
            access,
            timeout: app_timeout,
            gone: if answered { None } else { on_gone },
            on_board,
            keep_alive: true,
            version_minor: 1,
        }
    }
}

/// What an answer is queued under.
pub struct Terms<'a> {
    /// The `Date` header's value.
    pub date: &'a str,
    pub params: &'a ConnParams,
    /// The host closes the connection after the answer whatever the
    /// request wanted (draining, a timed-out app).
    pub close: bool,
}

/// Where a request's answer goes: the answering side of a protocol, for
/// the request it has waiting. HTTP/1.1's connection (`Conn`) is one, with
/// at most one request waiting; a multiplexed connection would give one
/// per stream.
pub trait Exchange {
    /// The request waiting for its answer, if any.
    fn pending(&self) -> Option<&Pending>;
    /// The listener the request came in on (its index in the table).
    fn listener(&self) -> usize;
    /// Queues `response` (and the constant headers `fixed`) as the waiting
    /// request's answer under `terms`; the request answered.
    fn answer(
        &mut self,
        response: &mut Response,
        fixed: Fixed,
        terms: &Terms,
        pool: &mut BufPool,
    ) -> Option<Pending>;
    /// Queues `head` as the start of a streamed answer whose body comes
    /// through `line` (`open` counts it while it runs); the request
    /// answered.
    fn start_stream(
        &mut self,
        head: &mut Response,
        line: Arc<StreamLine>,
        open: Arc<AtomicU64>,
        terms: &Terms,
        pool: &mut BufPool,
    ) -> Option<Pending>;
    /// Keeps `tail` (the access-log line and byte count of the streamed
    /// answer or WebSocket just begun) until its body is written.
    fn follow(&mut self, tail: Tail);
}

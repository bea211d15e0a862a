//! The plain-Rust side plugin authors write against: the `App` trait, a
//! `Responder` that answers once, and helpers on `Request` and `Response`.
//!
//! # Lifecycle
//!
//! Each load of a plugin file is a *generation* of its app. A hot replace
//! (a changed file in the apps directory) goes like this:
//!
//! 1. the new library is loaded and checked while the old generation keeps
//!    serving;
//! 2. the old generation's [`App::handover`] is called, and its bytes are
//!    handed to the new generation's constructor
//!    ([`Context::previous_state`](crate::Context::previous_state));
//! 3. the new constructor runs (the old generation still serves);
//! 4. the new generation is swapped in: new requests go to it, requests
//!    already with the old one finish there;
//! 5. once the old generation's last in-flight request is answered (or its
//!    responder dropped), its [`App::retire`] is called, once.
//!
//! **The window.** Between the handover (2) and the swap (4) the old
//! generation still serves, so whatever it changes in its memory then
//! (a request counted, a row cached) is *not* in the bytes the successor
//! got, and is lost unless the app handles it: keep state that must not be
//! lost outside the process's memory (a file, a database, as the `article`
//! sample does with SQLite), or have the old generation write what changed
//! after its snapshot somewhere the new one reads (in `retire`, say). The
//! window lasts as long as the new constructor runs. If the constructor
//! refuses, the old generation simply keeps serving with its state intact
//! (the handover only took a snapshot), and is asked again at the next
//! replace.
//!
//! **Restarts.** Nothing is handed over across a restart of the host
//! process (nor to the first load of a file, nor after an app was removed
//! and added again): `previous_state` is then `None`. At a graceful
//! shutdown every mounted generation is retired after the drain, so
//! `retire` is the place to persist what a restart must find.

use crate::abi::{Header, Request, ResponderBox, Response, StaticHeader};
use crate::stream::{BodySink, Stream};
use abi_stable::std_types::{ROption, RSlice, RStr, RString, RVec};

/// A web application hosted by Stoa. Implement `call` for an app that
/// answers at once, or `handle` for one that answers later (from a timer or
/// another thread). Shared by every worker thread, hence `Send + Sync`.
pub trait App: Send + Sync + 'static {
    /// Answers a request; the default passes `call`'s result to the responder.
    fn handle(&self, request: &Request<'_>, responder: Responder) {
        responder.respond(self.call(request));
    }

    /// True if `handle` blocks its thread for this request (sleeps, blocking
    /// I/O): the host then calls it on its blocking pool, off the event loop.
    fn blocks(&self, _request: &Request<'_>) -> bool {
        false
    }

    /// True if the app reads this request's body as it arrives (an
    /// upload of any size, processed piece by piece) instead of whole: the
    /// host then calls `handle` once the head is read (with an empty
    /// `body`), and the app takes the body with
    /// [`Responder::read_body`]. Its limit is the app's `max_stream_body`
    /// (`[apps.NAME]`, else `--max-stream-body`, 4 GiB by default), not
    /// `max_body`: the host holds only a window of it. An app that answers without
    /// reading the body has its connection closed after the answer. Asked
    /// with the head only; the default is false.
    fn reads_body(&self, _request: &Request<'_>) -> bool {
        false
    }

    /// Answers a request at once. The default answers 404.
    fn call(&self, _request: &Request<'_>) -> Response {
        Response::text(404, "Not Found")
    }

    /// Called once per generation, when it has been replaced by a newer
    /// one or removed (or the host shuts down gracefully) and its last
    /// in-flight request has been answered: a place to flush and let go.
    /// It runs on a thread of its own, never on an event loop; the host
    /// logs one that takes long and, at shutdown, waits for it only a
    /// bounded time. Requests are what the host counts: timers and pool
    /// tasks the app started itself may still run after it. The default
    /// does nothing. See [the lifecycle](crate::app#lifecycle).
    fn retire(&self) {}

    /// The state this generation hands to its successor: called on the
    /// running generation right before the next one (a hot replace of the
    /// same app from the same file) is constructed; the bytes reach the
    /// successor's constructor as [`Context::previous_state`](crate::Context::previous_state).
    /// Called on a thread of its own while this generation still serves,
    /// so it must not stop serving: take a snapshot. The default hands
    /// nothing over. See [the lifecycle](crate::app#lifecycle) for what
    /// happens to changes made after the snapshot.
    fn handover(&self) -> Option<Vec<u8>> {
        None
    }
}

/// Completes one request, now or later, from any thread. Dropping it
/// without answering makes the host answer 500 ("the app did not answer");
/// dropping it while the thread panics tells the host the app panicked
/// (500 "app NAME panicked", logged with the panic's message).
pub struct Responder {
    inner: Option<ResponderBox>,
}

impl Responder {
    /// Wraps the host's responder (used by the export macro).
    #[doc(hidden)]
    pub fn from_raw(inner: ResponderBox) -> Self {
        Responder { inner: Some(inner) }
    }

    /// Sends the response; consumes the responder.
    pub fn respond(mut self, response: Response) {
        if let Some(inner) = self.inner.take() {
            inner.respond(response);
        }
    }

    /// Starts a streamed response: `head`'s status and headers go out now
    /// (its body, if any, as the first chunk) and the rest of the body
    /// through the returned [`Stream`], as it is produced. The host frames
    /// it: chunked on HTTP/1.1, close-delimited on HTTP/1.0, nothing for
    /// HEAD. The app's deadline (`--app-timeout`) covers the time to this
    /// call; `--stream-idle-timeout` then covers each gap between chunks.
    pub fn stream(self, head: Response) -> Stream {
        self.start(head, ROption::RNone)
    }

    /// Like [`stream`](Responder::stream), with a declared body length:
    /// the host sends `Content-Length: length` and holds the app to it
    /// (a longer body is refused with [`Sent::Closed`](crate::Sent::Closed),
    /// a shorter one ends the connection).
    pub fn stream_sized(self, head: Response, length: u64) -> Stream {
        self.start(head, ROption::RSome(length))
    }

    /// Reads the request body as it arrives, for a request the app said
    /// it reads so ([`App::reads_body`]): `sink` gets each piece on the
    /// event loop, then the end and this responder back to answer with.
    pub fn read_body(mut self, sink: impl BodySink) {
        if let Some(inner) = self.inner.take() {
            inner.read_body(crate::stream::sink_box(sink));
        }
    }

    /// Like [`read_body`](Responder::read_body), with `sink` called on a
    /// thread of the host's blocking pool instead of the event loop: for a
    /// sink whose work on a piece is CPU-heavy (hashing, decompressing,
    /// parsing) or blocks (a file write), which on the loop would stall
    /// every other connection of that worker, as a handler that
    /// [`App::blocks`] runs on the pool. The pieces come one at a time, in
    /// order, and the host reads no further ahead of the sink than for a
    /// sink on the loop. A host run with `--blocking-on-loop` (no pool)
    /// calls it on the loop.
    pub fn read_body_on_pool(mut self, sink: impl BodySink) {
        if let Some(inner) = self.inner.take() {
            inner.read_body_on_pool(crate::stream::sink_box(sink));
        }
    }

    /// The TLS session the request came over (its version, cipher, the
    /// host name the client asked for and, under mutual TLS, the client
    /// certificate's subject), or `None` over plain HTTP or in a host
    /// older than app-api 0.2.7.
    pub fn tls(&self) -> Option<crate::abi::TlsSession> {
        self.inner.as_ref().and_then(|i| i.tls().into_option())
    }

    /// The major HTTP version the request came over: 2 for a stream of an
    /// HTTP/2 connection, 1 for HTTP/1.x (and in a host older than
    /// app-api 0.2.10, which speaks HTTP/1.x only).
    pub fn http_major(&self) -> u8 {
        self.inner.as_ref().map_or(1, |i| i.http_major())
    }

    /// The protocol `request` (this responder's) came over, as CGI's
    /// `SERVER_PROTOCOL` names it: `HTTP/2`, `HTTP/1.1` or `HTTP/1.0`.
    pub fn protocol(&self, request: &Request<'_>) -> &'static str {
        match (self.http_major(), request.version_minor) {
            (2, _) => "HTTP/2",
            (_, 0) => "HTTP/1.0",
            _ => "HTTP/1.1",
        }
    }

    /// Runs `f` once, on the connection's event loop, if the request is
    /// abandoned before its answer is complete: the client closed or
    /// reset the connection (a half-close counts) while the app works on
    /// it, reads its body or streams its answer, or the host answered for
    /// the app or gave up on it (504 past `--app-timeout`, a connection
    /// closed at shutdown or past `--send-timeout`). An answer that
    /// completes normally drops `f` unrun. A later call replaces an
    /// earlier `f`; the registration is the request's, so it holds across
    /// [`read_body`](Responder::read_body) (the responder handed back at
    /// the body's end) and [`stream`](Responder::stream). Registered when
    /// the request is already gone, `f` runs at once. It must not block;
    /// a panic in it is caught and logged. A host older than app-api
    /// 0.2.8 never runs it.
    ///
    /// The host notices a client that left when it can read the
    /// connection: not while a body sink has the host's whole read window
    /// (backpressure: the host reads nothing then), and not past pipelined
    /// requests it has read ahead (their answers' writes find the client
    /// gone).
    pub fn on_gone(&mut self, f: impl FnOnce() + Send + 'static) {
        if let Some(inner) = self.inner.as_mut() {
            inner.on_gone(crate::host::task(f));
        }
    }

    fn start(mut self, head: Response, length: ROption<u64>) -> Stream {
        match self.inner.take() {
            Some(inner) => Stream::from_raw(inner.start_stream(head, length)),
            None => unreachable!("a Responder holds its raw responder until consumed"),
        }
    }

    /// Sends an [`Answer`]: its fixed headers cross to the host as they
    /// are (no allocation), after the response's own.
    pub fn answer(mut self, answer: Answer) {
        if let Some(inner) = self.inner.take() {
            match answer.fixed {
                [] => inner.respond(answer.response),
                fixed => inner.respond_with_static(answer.response, fixed.into()),
            }
        }
    }

    /// The host's responder, taken out (for the other ways to answer).
    pub(crate) fn into_raw(mut self) -> Option<ResponderBox> {
        self.inner.take()
    }
}

/// A response plus headers that are string constants ([`StaticHeader`]s,
/// say a middleware's security headers): sent with
/// [`Responder::answer`], the constants are written by the host as they
/// are, where each [`Response::with_header`] allocates a name and a value.
/// The fixed headers go out after the response's own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    pub response: Response,
    pub fixed: &'static [StaticHeader],
}

impl From<Response> for Answer {
    fn from(response: Response) -> Self {
        Answer {
            response,
            fixed: &[],
        }
    }
}

/// `Content-Type: text/plain; charset=utf-8` as a constant list, the one
/// [`Answer::text`] carries (a `static`, so a middleware can tell it by
/// address with [`std::ptr::eq`]).
pub static TEXT_PLAIN: [StaticHeader; 1] = [StaticHeader::new(
    "Content-Type",
    "text/plain; charset=utf-8",
)];
/// `Content-Type: text/html; charset=utf-8`, the list [`Answer::html`] carries.
pub static TEXT_HTML: [StaticHeader; 1] = [StaticHeader::new(
    "Content-Type",
    "text/html; charset=utf-8",
)];
/// `Content-Type: application/json`, the list [`Answer::json`] carries.
pub static APPLICATION_JSON: [StaticHeader; 1] =
    [StaticHeader::new("Content-Type", "application/json")];

impl Answer {
    /// A status and a body with the constant headers `fixed` (its
    /// `Content-Type`, say): the body's copy is the only allocation, where
    /// [`Response::text`] and its kin allocate the header list, the
    /// header's name and its value as well.
    pub fn with_static(status: u16, fixed: &'static [StaticHeader], body: &[u8]) -> Self {
        Answer {
            response: Response {
                status,
                headers: RVec::new(),
                body: RVec::from(body),
            },
            fixed,
        }
    }

    /// [`Response::text`]'s answer with its `Content-Type` a constant.
    pub fn text(status: u16, body: &str) -> Self {
        Answer::with_static(status, &TEXT_PLAIN, body.as_bytes())
    }

    /// [`Response::html`]'s answer with its `Content-Type` a constant.
    pub fn html(status: u16, body: &str) -> Self {
        Answer::with_static(status, &TEXT_HTML, body.as_bytes())
    }

    /// [`Response::json`]'s answer with its `Content-Type` a constant.
    pub fn json(status: u16, body: &[u8]) -> Self {
        Answer::with_static(status, &APPLICATION_JSON, body)
    }

    /// Adds the constant headers `fixed`. An answer holds one such list:
    /// a second one is copied into the response's own headers.
    pub fn with_fixed(mut self, fixed: &'static [StaticHeader]) -> Self {
        if self.fixed.is_empty() {
            self.fixed = fixed;
        } else {
            self.response = with_copies(self.response, fixed);
        }
        self
    }

    /// The first header with this name (ASCII case-insensitive), the
    /// response's own first, then the fixed ones.
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.response.header(name).or_else(|| {
            self.fixed
                .iter()
                .find(|h| h.name.as_str().eq_ignore_ascii_case(name))
                .map(|h| h.value.as_str().as_bytes())
        })
    }

    /// The plain response, the fixed headers copied after its own (for
    /// `App::call` and tests).
    pub fn into_response(self) -> Response {
        with_copies(self.response, self.fixed)
    }
}

/// `response` with owned copies of `fixed` appended to its headers. (It
/// does not go through `with_header`, which stays inlined in the builders
/// on the hot path only if nothing else calls it.)
pub(crate) fn with_copies(mut response: Response, fixed: &[StaticHeader]) -> Response {
    response.headers.extend(fixed.iter().map(|h| Header {
        name: RString::from(h.name.as_str()),
        value: RVec::from(h.value.as_str().as_bytes()),
    }));
    response
}

impl Drop for Responder {
    fn drop(&mut self) {
        let Some(inner) = self.inner.take() else {
            return;
        };
        if std::thread::panicking() {
            inner.panicked(RString::from(crate::export::last_panic()));
        }
        // Otherwise dropping `inner` unanswered makes the host answer 500.
    }
}

impl Response {
    /// An empty response with the given status.
    pub fn new(status: u16) -> Self {
        Response {
            status,
            headers: RVec::new(),
            body: RVec::new(),
        }
    }

    /// A `text/plain; charset=utf-8` response.
    pub fn text(status: u16, body: &str) -> Self {
        Response::typed(status, "text/plain; charset=utf-8", body.as_bytes())
    }

    /// A `text/html; charset=utf-8` response.
    pub fn html(status: u16, body: &str) -> Self {
        Response::typed(status, "text/html; charset=utf-8", body.as_bytes())
    }

    /// An `application/json` response from already serialised JSON.
    pub fn json(status: u16, body: &[u8]) -> Self {
        Response::typed(status, "application/json", body)
    }

    /// A response with a `Content-Type` and a body. The header list starts
    /// with room for a few more (the size its first push would pick), so
    /// it is allocated once, not grown through abi_stable's slow path.
    fn typed(status: u16, content_type: &str, body: &[u8]) -> Self {
        Response {
            status,
            headers: RVec::with_capacity(4),
            body: RVec::new(),
        }
        .with_header("Content-Type", content_type)
        .with_body(body)
    }

    /// Appends a header.
    pub fn with_header(mut self, name: &str, value: impl AsRef<[u8]>) -> Self {
        self.headers.push(Header {
            name: RString::from(name),
            value: RVec::from(value.as_ref()),
        });
        self
    }

    /// Replaces the body.
    pub fn with_body(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.body = RVec::from(body.into());
        self
    }

    /// The first header with this name (ASCII case-insensitive).
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers
            .iter()
            .find(|h| h.name.as_str().eq_ignore_ascii_case(name))
            .map(|h| h.value.as_slice())
    }
}

impl<'a> Request<'a> {
    /// A request as the host would hand it for `method` on `script_name` +
    /// `path_info` with `query`: HTTP/1.1 from 127.0.0.1:5000 to
    /// 127.0.0.1:8000, no headers, no body. For apps' unit tests; override
    /// fields with struct update syntax (`Request { headers, ..sample }`).
    pub fn sample(
        method: &'a str,
        script_name: &'a str,
        path_info: &'a str,
        query: &'a str,
    ) -> Self {
        Request {
            method: RStr::from(method),
            version_minor: 1,
            scheme: RStr::from("http"),
            server_name: RStr::from("127.0.0.1"),
            server_port: 8000,
            peer: RStr::from("127.0.0.1:5000"),
            script_name: RStr::from(script_name),
            path_info: RStr::from(path_info),
            query: RStr::from(query),
            headers: RSlice::from_slice(&[]),
            body: RSlice::from_slice(&[]),
        }
    }

    /// The first header with this name (ASCII case-insensitive). A name
    /// sent in the case asked for (the usual one) matches on the byte
    /// comparison; only names of the same length are compared by case.
    pub fn header(&self, name: &str) -> Option<&'a [u8]> {
        let name = name.as_bytes();
        self.headers
            .as_slice()
            .iter()
            .find(|h| {
                let sent = h.name.as_str().as_bytes();
                sent.len() == name.len()
                    && (crate::helpers::same_bytes(sent, name) || sent.eq_ignore_ascii_case(name))
            })
            .map(|h| h.value.as_slice())
    }

    /// The first header with this name, if it is valid UTF-8.
    pub fn header_str(&self, name: &str) -> Option<&'a str> {
        self.header(name).and_then(|v| std::str::from_utf8(v).ok())
    }

    /// The full request path: SCRIPT_NAME followed by PATH_INFO.
    pub fn full_path(&self) -> String {
        format!("{}{}", self.script_name, self.path_info)
    }

    /// The value of one `key=value` pair of the query string, raw.
    pub fn query_param(&self, key: &str) -> Option<&'a str> {
        self.query
            .as_str()
            .split('&')
            .filter_map(|pair| pair.split_once('=').or(Some((pair, ""))))
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::HeaderRef;

    fn request<'a>(headers: &'a [HeaderRef<'a>], query: &'a str) -> Request<'a> {
        Request {
            headers: RSlice::from_slice(headers),
            ..Request::sample("GET", "/app", "/x", query)
        }
    }

    #[test]
    fn header_lookup_ignores_case() {
        let h = [HeaderRef {
            name: RStr::from("X-Thing"),
            value: RSlice::from_slice(b"v"),
        }];
        let r = request(&h, "");
        assert_eq!(r.header("x-thing"), Some(&b"v"[..]));
        assert_eq!(r.header("other"), None);
        assert_eq!(r.full_path(), "/app/x");
    }

    #[test]
    fn query_param_finds_pairs_and_bare_keys() {
        let r = request(&[], "a=1&flag&b=two");
        assert_eq!(r.query_param("a"), Some("1"));
        assert_eq!(r.query_param("b"), Some("two"));
        assert_eq!(r.query_param("flag"), Some(""));
        assert_eq!(r.query_param("c"), None);
    }

    #[test]
    fn header_lookup_takes_the_first_of_a_name_in_any_case() {
        let h = [
            HeaderRef {
                name: RStr::from("Hose"),
                value: RSlice::from_slice(b"same length, other name"),
            },
            HeaderRef {
                name: RStr::from("HOST"),
                value: RSlice::from_slice(b"a"),
            },
            HeaderRef {
                name: RStr::from("Host"),
                value: RSlice::from_slice(b"b"),
            },
        ];
        let r = request(&h, "");
        assert_eq!(r.header("Host"), Some(&b"a"[..]));
        assert_eq!(r.header("host"), Some(&b"a"[..]));
        assert_eq!(r.header("Hos"), None);
    }

    #[test]
    fn typed_answers_carry_their_content_type_as_a_constant() {
        for (answer, list, value, body) in [
            (
                Answer::text(200, "hi"),
                &TEXT_PLAIN,
                "text/plain; charset=utf-8",
                &b"hi"[..],
            ),
            (
                Answer::html(404, "<p>"),
                &TEXT_HTML,
                "text/html; charset=utf-8",
                b"<p>",
            ),
            (
                Answer::json(201, b"{}"),
                &APPLICATION_JSON,
                "application/json",
                b"{}",
            ),
        ] {
            // Nothing but the body is owned: no header was allocated.
            assert!(answer.response.headers.is_empty());
            assert!(std::ptr::eq(answer.fixed, &list[..]));
            assert_eq!(answer.header("content-type"), Some(value.as_bytes()));
            assert_eq!(answer.response.body.as_slice(), body);
            // As a plain response (App::call), the same header, copied in.
            let status = answer.response.status;
            let plain = answer.into_response();
            assert_eq!(plain.header("Content-Type"), Some(value.as_bytes()));
            assert_eq!((plain.status, plain.headers.len()), (status, 1));
        }
    }

    #[test]
    fn response_builders_set_content_type() {
        let r = Response::json(200, b"{}");
        assert_eq!(r.header("content-type"), Some(&b"application/json"[..]));
        assert_eq!(r.body.as_slice(), b"{}");
    }
}

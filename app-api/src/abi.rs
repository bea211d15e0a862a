//! The FFI types that cross the host/plugin boundary.
//!
//! Everything here derives `StableAbi`, so abi_stable compares the layout a
//! plugin was compiled against with the host's at load time and refuses a
//! mismatch instead of letting it corrupt memory. The root module, the
//! constructor's context, the host's services and the responder's vtable
//! are prefix types: later versions append fields after
//! `#[sabi(last_prefix_field)]` and stay loadable by older peers. `Request`,
//! `Response` and `Header` are plain structs and so frozen for a whole
//! 0.minor line (see the crate's COMPATIBILITY section).
#![allow(non_local_definitions, clippy::unnecessary_cast)] // abi_stable's macros expand to impls inside consts and redundant casts

use abi_stable::{
    declare_root_module_statics,
    library::RootModule,
    package_version_strings,
    prefix_type::WithMetadata,
    sabi_trait,
    sabi_types::VersionStrings,
    std_types::{RBox, ROption, RResult, RSlice, RStr, RString, RVec},
    StableAbi,
};

/// One request header as the host parsed it: a borrowed view into the
/// connection's read buffer. Values are bytes (RFC 9110 allows obs-text).
#[repr(C)]
#[derive(StableAbi, Clone, Copy, Debug)]
pub struct HeaderRef<'a> {
    pub name: RStr<'a>,
    pub value: RSlice<'a, u8>,
}

/// The request handed to an app: WSGI's environ, typed. All fields borrow
/// from the host's buffers and are valid only during `handle`; an app that
/// answers later copies what it needs.
///
/// **The path split.** The path is cut where the app's mount prefix ends:
/// `script_name` is the prefix (no trailing slash), `path_info` the rest,
/// raw. For an app mounted at `/counter`:
///
/// | request path      | `script_name` | `path_info`  |
/// |-------------------|---------------|--------------|
/// | `/counter`        | `"/counter"`  | `""`         |
/// | `/counter/`       | `"/counter"`  | `"/"`        |
/// | `/counter/items/7`| `"/counter"`  | `"/items/7"` |
///
/// so an app that treats `/counter` and `/counter/` alike matches both
/// `""` and `"/"`. For an app mounted at `/`, `script_name` is `""` and
/// `path_info` the whole path.
///
/// Helpers (plain Rust, see [`crate::helpers`]): `body_str`, `body_bytes`,
/// `header`, `header_str`, `header_values` (every value of a repeated
/// header), `query_pairs` (decoded), `query_param` (raw), `full_path`,
/// and with the `serde` feature `json::<T>()`.
#[repr(C)]
#[derive(StableAbi, Clone, Copy, Debug)]
pub struct Request<'a> {
    /// Request method as sent (`GET`, `POST`, ...).
    pub method: RStr<'a>,
    /// HTTP minor version: 0 for HTTP/1.0, 1 for HTTP/1.1.
    pub version_minor: u8,
    /// `http` or `https` (as seen by the client, see trusted proxies).
    pub scheme: RStr<'a>,
    /// The address the host's listener is bound to (SERVER_NAME).
    pub server_name: RStr<'a>,
    /// The listener's port (SERVER_PORT).
    pub server_port: u16,
    /// The client's address, `ip:port` (REMOTE_ADDR).
    pub peer: RStr<'a>,
    /// The mount prefix that selected this app, without a trailing slash;
    /// empty for an app mounted at `/` (SCRIPT_NAME).
    pub script_name: RStr<'a>,
    /// The rest of the path after the prefix, raw (not percent-decoded),
    /// empty or starting with `/` (PATH_INFO): `/counter` arrives with
    /// `""`, `/counter/` with `"/"` (see the table above).
    pub path_info: RStr<'a>,
    /// The raw query string without the `?` (QUERY_STRING).
    pub query: RStr<'a>,
    /// Headers in the order received.
    pub headers: RSlice<'a, HeaderRef<'a>>,
    /// The whole request body, already de-chunked.
    pub body: RSlice<'a, u8>,
}

/// One response header, owned.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, PartialEq, Eq)]
pub struct Header {
    pub name: RString,
    pub value: RVec<u8>,
}

/// The app's answer. The host adds `Date`, `Server`, `Content-Length` and
/// `Connection`; hop-by-hop headers set by the app are ignored.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub headers: RVec<Header>,
    pub body: RVec<u8>,
}

/// The completion handle for one request. The host implements it; an app
/// consumes it exactly once, now or later, from any thread. Dropping it
/// unanswered makes the host answer 500 ("the app did not answer").
///
/// Its vtable is a prefix type: new ways to answer (and new per-request
/// host services) are appended as methods, which keeps `Request` and
/// `Response` themselves frozen (see the crate's COMPATIBILITY section).
#[sabi_trait]
pub trait RawResponder: Send {
    fn respond(self, response: Response);

    /// The app panicked while it held this responder; `message` is the
    /// panic's. The host logs it and answers 500 "app NAME panicked".
    #[sabi(last_prefix_field)]
    fn panicked(self, message: RString);

    /// Appended in 0.2.3: answers like `respond`, with `fixed` headers
    /// sent after the response's own. Their names and values are string
    /// constants of the plugin, so answering with them allocates nothing;
    /// the host copies them only for an answer given off its loop. The
    /// default (a host without the method) copies them into the response.
    fn respond_with_static(self, response: Response, fixed: RSlice<'static, StaticHeader>)
    where
        Self: Sized,
    {
        self.respond(crate::app::with_copies(response, fixed.as_slice()));
    }

    /// Appended in 0.2.3: starts a streamed response. `head` gives the
    /// status and headers (its body, if any, is sent as the first chunk);
    /// `length` is a declared `Content-Length` the host then enforces
    /// (`None`: the host frames the body itself, chunked on HTTP/1.1 and
    /// close-delimited on HTTP/1.0). The body goes through the returned
    /// stream; see [`RawStream`].
    fn start_stream(self, head: Response, length: ROption<u64>) -> StreamBox;

    /// Appended in 0.2.3: for a request whose app `reads_body`, hands the
    /// body to `sink` as it arrives (on the connection's event loop, in
    /// order), then calls its `end` with how the body ended and a responder
    /// to answer with.
    fn read_body(self, sink: BodySinkBox);

    /// Appended in 0.2.4: accepts the request's WebSocket handshake (RFC
    /// 6455): the host answers `101 Switching Protocols` and from then on
    /// calls `session` with the connection's messages (see
    /// [`RawWsSession`]). A request that did not ask for a WebSocket is
    /// answered `426 Upgrade Required` instead, and `session` is dropped
    /// unopened.
    fn accept_websocket(self, session: WsSessionBox);

    /// Appended in 0.2.6: `read_body`, with `sink` called on a thread of
    /// the host's blocking pool instead of the event loop (for a sink
    /// whose work on each piece is CPU-heavy or blocks, as a handler that
    /// declares it blocks runs there). Pieces still come one at a time,
    /// in order; the host reads no further ahead of the sink than it does
    /// for a sink on the loop (the pieces waiting for the pool count in
    /// that window). The default (a host without the method) calls the
    /// sink on the loop.
    fn read_body_on_pool(self, sink: BodySinkBox)
    where
        Self: Sized,
    {
        self.read_body(sink);
    }

    /// Appended in 0.2.7: the TLS session the request came over (a
    /// `tls://` bind), `None` over plain HTTP. The default (a host without
    /// the method) answers `None`.
    fn tls(&self) -> ROption<TlsSession> {
        ROption::RNone
    }

    /// Appended in 0.2.8: runs `task` once, on the connection's event
    /// loop, if the request is abandoned before its answer is complete:
    /// the client closed or reset the connection (while the request is
    /// with the app, its body is read by the app, or its streamed answer
    /// is going out; a half-close counts), or the host answered for the
    /// app or gave up on it (504 past the app's deadline, a closed
    /// connection at shutdown or past `--send-timeout`). When the answer
    /// completes normally (the app's own answer, its stream finished, its
    /// WebSocket accepted) the task is dropped unrun. A later call
    /// replaces an earlier task. The registration is the request's, not
    /// this responder's: it holds when the responder is consumed by
    /// `read_body` (the one handed back with the body's end is the same
    /// request's) or `start_stream`. A registration that arrives when the
    /// request is already gone runs the task at once. The default (a host
    /// without the method) drops the task.
    fn on_gone(&mut self, task: TaskBox) {
        drop(task)
    }

    /// Appended in 0.2.8: `accept_websocket`, with `headers` added to the
    /// `101 Switching Protocols` answer (`Sec-WebSocket-Protocol`,
    /// `Set-Cookie`). The host drops, with a warning naming the app, a
    /// header it writes itself (`Upgrade`, `Connection`,
    /// `Sec-WebSocket-Accept`, `Content-Length`, `Transfer-Encoding`), an
    /// invalid one, and a `Sec-WebSocket-Protocol` the client did not
    /// offer. The default (a host without the method) accepts without the
    /// headers.
    fn accept_websocket_with(self, headers: RVec<Header>, session: WsSessionBox)
    where
        Self: Sized,
    {
        drop(headers);
        self.accept_websocket(session)
    }

    /// Appended in 0.2.10: the major HTTP version of the connection the
    /// request came over: 2 for a stream of an HTTP/2 connection (whose
    /// `Request` says `version_minor` 1, as HTTP/1.1's semantics apply to
    /// it), 1 otherwise. `Request`, frozen within the line, cannot carry
    /// it. The default (a host without the method speaks HTTP/1.x only)
    /// answers 1.
    fn http_major(&self) -> u8 {
        1
    }
}

/// What an app sees of the TLS session its request came over (appended in
/// 0.2.7, through `RawResponder::tls`): what nginx gives as `$ssl_protocol`,
/// `$ssl_cipher`, `$ssl_server_name`, `$ssl_client_s_dn` and
/// `$ssl_client_verify`.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, PartialEq, Eq)]
pub struct TlsSession {
    /// `TLSv1.3` or `TLSv1.2`.
    pub version: RString,
    /// The cipher suite's IANA name (`TLS_AES_128_GCM_SHA256`).
    pub cipher: RString,
    /// The host name the client asked for (SNI), if it named one.
    pub server_name: ROption<RString>,
    /// Under mutual TLS, the subject of the client's certificate as an
    /// RFC 4514 distinguished name (`CN=client,O=Example`), if it sent one.
    pub client_subject: ROption<RString>,
    /// True when the client sent a certificate and it verified against the
    /// bind's client CAs (a certificate that does not verify fails the
    /// handshake, so a request never sees one).
    pub client_verified: bool,
}

/// How a streamed request body ended (`RawBodySink::end`).
pub const BODY_COMPLETE: u8 = 0;
/// Past the app's streamed-body limit (`max_stream_body`): its answer closes the connection.
pub const BODY_TOO_LARGE: u8 = 1;
/// Cut short: the client left, stalled past `--body-timeout`, or broke the
/// chunked framing. An answer is sent if the client is still there, and
/// the connection closes.
pub const BODY_BROKEN: u8 = 2;

/// Takes a request body as it arrives; app-implemented (appended in 0.2.3).
/// The host calls it on the connection's event loop: `data` must not block
/// (the host reads no more from the client while it runs: that is the
/// backpressure).
#[sabi_trait]
pub trait RawBodySink: Send {
    /// The next piece of the body (de-chunked).
    fn data(&mut self, chunk: RSlice<'_, u8>);

    /// The body ended (`BODY_*`); `responder` answers the request.
    #[sabi(last_prefix_field)]
    fn end(self, outcome: u8, responder: ResponderBox);
}

/// The owned, type-erased body sink passed through the ABI.
pub type BodySinkBox = RawBodySink_TO<'static, RBox<()>>;

/// What [`RawStream::send`] answers, on the wire: the chunk was queued.
pub const SEND_SENT: u8 = 0;
/// The connection's queue is over its bound: the chunk was **not** taken;
/// send it again after the `on_drain` task runs.
pub const SEND_WOULD_BLOCK: u8 = 1;
/// The client is gone (or the stream was ended: a send timeout, a declared
/// length overrun, a shutdown): nothing more is taken.
pub const SEND_CLOSED: u8 = 2;

/// A streamed response body, host-implemented (appended in 0.2.3). It may
/// move to any thread. The host queues a chunk only while the
/// connection's queued output is under its bound (`--stream-queue`), so a
/// slow client never makes it buffer more than the bound and one chunk.
/// Dropping the stream without `finish` ends the response abnormally: no
/// terminating chunk (or a short `Content-Length`), and the connection is
/// closed, so the client sees a truncated body.
#[sabi_trait]
pub trait RawStream: Send {
    /// Queues `chunk` (copied): `SEND_SENT`, `SEND_WOULD_BLOCK` (not taken)
    /// or `SEND_CLOSED`. Never blocks.
    fn send(&mut self, chunk: RSlice<'_, u8>) -> u8;

    /// Like `send`, but waits for room while the queue is full (for pool
    /// threads; never call it on an event loop, where it acts as `send`).
    /// The wait is bounded by the host's `--send-timeout`, after which a
    /// still-full queue answers `SEND_WOULD_BLOCK`.
    fn send_blocking(&mut self, chunk: RSlice<'_, u8>) -> u8;

    /// Runs `task` once on the connection's event loop when the queue has
    /// room again (at once if it has room now), or when the stream closes
    /// (its next `send` then answers `SEND_CLOSED`). A second call replaces
    /// a task not yet run (which is dropped).
    fn on_drain(&mut self, task: TaskBox);

    /// Ends the body (the terminating chunk on a chunked response):
    /// `SEND_SENT`, or `SEND_CLOSED` when the client is gone or the body is
    /// shorter than the declared length (the host then closes the
    /// connection).
    #[sabi(last_prefix_field)]
    fn finish(self) -> u8;
}

/// The owned, type-erased stream passed through the ABI.
pub type StreamBox = RawStream_TO<'static, RBox<()>>;

/// A stream that takes nothing (every call answers `SEND_CLOSED`): what a
/// responder that cannot stream hands back (a bench's, a test's).
pub fn closed_stream() -> StreamBox {
    RawStream_TO::from_value(ClosedStream, abi_stable::sabi_trait::TD_Opaque)
}

struct ClosedStream;

impl RawStream for ClosedStream {
    fn send(&mut self, _chunk: RSlice<'_, u8>) -> u8 {
        SEND_CLOSED
    }

    fn send_blocking(&mut self, _chunk: RSlice<'_, u8>) -> u8 {
        SEND_CLOSED
    }

    fn on_drain(&mut self, task: TaskBox) {
        // Closed already: the task runs at once, so the app hears of it.
        task.run();
    }

    fn finish(self) -> u8 {
        SEND_CLOSED
    }
}

/// One response header whose name and value are string constants (see
/// `RawResponder::respond_with_static`): `StaticHeader::new("X-Frame-Options", "DENY")`
/// in a `const` list costs no allocation per response.
#[repr(C)]
#[derive(StableAbi, Clone, Copy, Debug, PartialEq, Eq)]
pub struct StaticHeader {
    pub name: RStr<'static>,
    pub value: RStr<'static>,
}

impl StaticHeader {
    /// A header from two string constants.
    pub const fn new(name: &'static str, value: &'static str) -> Self {
        StaticHeader {
            name: RStr::from_str(name),
            value: RStr::from_str(value),
        }
    }
}

/// A WebSocket message's kind, as it crosses the ABI: text (valid UTF-8).
pub const WS_TEXT: u8 = 1;
/// A WebSocket message's kind, as it crosses the ABI: binary.
pub const WS_BINARY: u8 = 2;

/// An open WebSocket, as the app sees it (app-implemented, appended in
/// 0.2.4). The host calls it on the connection's event loop, one call at a
/// time and in order: `on_open` once, `on_message` per whole message
/// (fragments joined, text checked as UTF-8), `on_close` once at the end.
/// Calls must not block.
#[sabi_trait]
pub trait RawWsSession: Send {
    /// The WebSocket is open; `sender` sends on it, from any thread.
    fn on_open(&mut self, sender: WsSenderBox);

    /// A whole message: `kind` is [`WS_TEXT`] or [`WS_BINARY`]; `data`
    /// is valid during the call only.
    fn on_message(&mut self, kind: u8, data: RSlice<'_, u8>);

    /// The WebSocket ended: the close code the peer sent (or the host's,
    /// such as 1009 for a message over the limit; 1006 when the TCP
    /// connection ended without a close frame) and its reason.
    #[sabi(last_prefix_field)]
    fn on_close(&mut self, code: u16, reason: RStr<'_>);
}

/// The owned, type-erased session passed through the ABI.
pub type WsSessionBox = RawWsSession_TO<'static, RBox<()>>;

/// The sending half of an open WebSocket, host-implemented (appended in
/// 0.2.4), shared by any number of threads. Like a response stream
/// ([`RawStream`]), a connection's queue is bounded and the calls answer
/// the same codes: a send over the bound answers [`SEND_WOULD_BLOCK`]
/// without taking the message.
#[sabi_trait]
pub trait RawWsSender: Send + Sync {
    /// Queues a message (`kind` [`WS_TEXT`], whose `data` must be UTF-8,
    /// or [`WS_BINARY`]): [`SEND_SENT`], [`SEND_WOULD_BLOCK`] or
    /// [`SEND_CLOSED`]. Never blocks.
    fn send(&self, kind: u8, data: RSlice<'_, u8>) -> u8;

    /// Like `send`, but waits for room while the queue is full (for pool
    /// threads; on an event loop it acts as `send`), at most the host's
    /// `--send-timeout`.
    fn send_blocking(&self, kind: u8, data: RSlice<'_, u8>) -> u8;

    /// Runs `task` once on the connection's event loop when the queue has
    /// room again (at once if it has room now) or the WebSocket closed. A
    /// second call replaces a task not yet run.
    fn on_drain(&self, task: TaskBox);

    /// Starts the close handshake with `code` and `reason` (cut to fit a
    /// control frame): [`SEND_SENT`], or [`SEND_CLOSED`] if it was closing.
    #[sabi(last_prefix_field)]
    fn close(&self, code: u16, reason: RStr<'_>) -> u8;
}

/// The owned, type-erased sender passed through the ABI.
pub type WsSenderBox = RawWsSender_TO<'static, RBox<()>>;

/// The owned, type-erased responder passed through the ABI.
pub type ResponderBox = RawResponder_TO<'static, RBox<()>>;

/// Log levels as they cross the ABI (`log::Level as u8`: 1 = error .. 5 = trace).
pub type LogLevel = u8;

/// Services the host offers to a plugin, handed to `init`.
#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = HostRef)))]
#[sabi(missing_field(panic))]
pub struct HostModule {
    /// The most verbose level the host will print (0 = off).
    pub log_max_level: LogLevel,
    /// Writes one record to the host's logger.
    pub log: extern "C" fn(level: LogLevel, target: RStr<'_>, message: RStr<'_>),
    /// Runs `task` after `delay_ms` on an event loop thread: the loop of the
    /// request being handled when called from a handler, blocking no thread.
    pub call_later: extern "C" fn(delay_ms: u64, task: TaskBox),
    /// Runs `task` on the host's bounded blocking pool; false (and the task
    /// dropped) when the pool's queue is full.
    #[sabi(last_prefix_field)]
    pub spawn_blocking: extern "C" fn(task: TaskBox) -> bool,
}

/// A unit of app work the host runs later (a timer or a pool job). The
/// app-side wrapper catches panics before they reach the host.
#[sabi_trait]
pub trait Task: Send {
    #[sabi(last_prefix_field)]
    fn run(self);
}

/// The owned, type-erased task passed through the ABI.
pub type TaskBox = Task_TO<'static, RBox<()>>;

/// What the host hands an app's constructor. A prefix type: later
/// versions append fields after the last prefix field, and an app built
/// against an earlier version simply does not see them.
#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = InitContextRef)))]
#[sabi(missing_field(panic))]
pub struct InitContext<'a> {
    /// The host's services (logging, timers, the blocking pool).
    pub host: HostRef,
    /// The app's `[apps.NAME] settings` table of the configuration file,
    /// as JSON text (`{}` when there is none).
    #[sabi(last_prefix_field)]
    pub settings_json: RStr<'a>,
    /// Appended in 0.2.1: bytes the app's previous generation handed over
    /// (its `App::handover`, asked right before this constructor runs), if
    /// any; `None` for a first load, after a restart of the host, and when
    /// the previous generation handed nothing over.
    #[sabi(missing_field(option))]
    pub previous_state: ROption<RSlice<'a, u8>>,
}

/// The root module every Stoa app plugin exports (see `export_app!`).
#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = AppModuleRef)))]
#[sabi(missing_field(panic))]
pub struct AppModule {
    /// The app's name (`[apps.NAME]`, `--mount NAME=...`).
    pub name: RStr<'static>,
    /// The app's own version (its crate's).
    pub version: RStr<'static>,
    /// Where the app mounts unless the operator says otherwise (`--mount`).
    pub default_mount: RStr<'static>,
    /// Creates the app. Called once, before any request; an `RErr` is the
    /// app's refusal (bad settings, say): the host logs it and does not
    /// mount the app. The context is valid only during the call.
    pub init: extern "C" fn(context: InitContextRef<'_>) -> RResult<(), RString>,
    /// Handles one request. Must not unwind (the macro catches panics).
    pub handle: extern "C" fn(request: &Request<'_>, responder: ResponderBox),
    /// True if handling this request blocks its thread; the host then runs
    /// `handle` on its blocking pool instead of the event loop.
    #[sabi(last_prefix_field)]
    pub blocks: extern "C" fn(request: &Request<'_>) -> bool,
    /// Appended in 0.2.1: tells the app its generation was replaced (or
    /// removed, or the host shut down) and has no request left
    /// (`App::retire`). Missing in plugins built against 0.2.0, for which
    /// it is a no-op.
    #[sabi(missing_field(option))]
    pub retire: extern "C" fn(),
    /// Appended in 0.2.2: asks the generation being replaced for the state
    /// to hand to its successor's constructor (`App::handover`), right
    /// before that constructor runs. Missing in plugins built against an
    /// earlier app-api, which hand nothing over.
    #[sabi(missing_field(option))]
    pub handover: extern "C" fn() -> ROption<RVec<u8>>,
    /// Appended in 0.2.3: true if the app reads this request's body as it
    /// arrives (`App::reads_body`; the request it is asked with has an
    /// empty body). The host then calls `handle` once the head is read and
    /// hands the body to the sink given to `RawResponder::read_body`.
    /// Missing in plugins built against an earlier app-api: never.
    #[sabi(missing_field(option))]
    pub reads_body: extern "C" fn(request: &Request<'_>) -> bool,
    /// Appended in 0.2.9: names the app had before (`export_app!`'s
    /// `formerly`). A configuration that still says `[apps.OLD]` or
    /// `--mount OLD=...` configures the app by its current name. Missing
    /// in plugins built against an earlier app-api: none.
    #[sabi(missing_field(option))]
    pub former_names: RSlice<'static, RStr<'static>>,
}

impl AppModuleRef {
    /// The names the app had before (none for a plugin without the field).
    pub fn formerly(self) -> Vec<&'static str> {
        self.former_names()
            .map(|names| names.iter().map(|n| n.as_str()).collect())
            .unwrap_or_default()
    }

    /// True if the app reads this request's body as it arrives (false for
    /// a plugin without the hook).
    pub fn call_reads_body(self, request: &Request<'_>) -> bool {
        self.reads_body().is_some_and(|reads| reads(request))
    }

    /// Calls the app's `retire` hook, if the plugin has one.
    pub fn call_retire(self) {
        if let Some(retire) = self.retire() {
            retire();
        }
    }

    /// The state the app hands to its successor, if the plugin has the
    /// hook and the app hands something over.
    pub fn call_handover(self) -> Option<RVec<u8>> {
        self.handover()
            .and_then(|handover| handover().into_option())
    }
}

impl AppModuleRef {
    /// Runs the app's constructor with `context`, which lives on this
    /// stack frame for the call only (no allocation, nothing leaked).
    pub fn construct(self, context: InitContext<'_>) -> RResult<(), RString> {
        let with_metadata = WithMetadata::new(context);
        // SAFETY: `as_prefix` wants the value to outlive every use of the
        // reference. The reference is handed to the plugin's `init` only,
        // whose contract (above, and `export::init`) is not to keep it past
        // the call; `with_metadata` outlives the call.
        let context = InitContextRef(unsafe { with_metadata.as_prefix() });
        (self.init())(context)
    }
}

impl RootModule for AppModuleRef {
    declare_root_module_statics! {AppModuleRef}
    const BASE_NAME: &'static str = "stoa_app";
    const NAME: &'static str = "stoa_app";
    const VERSION_STRINGS: VersionStrings = package_version_strings!();
}

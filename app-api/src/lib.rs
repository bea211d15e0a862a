//! Stoa's application ABI: the contract between the `stoa` host and the app
//! plugins it loads at run time, and the plugin author's guide.
//!
//! # Writing a Stoa app
//!
//! An app is a Rust library that implements [`App`] and exports it with
//! [`export_app!`]. The host (`stoa --apps DIR`) loads the built `.so` from
//! its apps directory, mounts it at a path prefix and calls it for every
//! request under that prefix. Every example below is a doctest: it compiles
//! and runs with `cargo test -p stoa-app-api --features serde`.
//!
//! ## Start
//!
//! `stoa new-app hello` writes a ready crate (an app with a synchronous
//! route, a deferred route and their unit tests); `cargo test` and
//! `cargo build --release` in it, then copy `target/release/libhello.so`
//! into the apps directory. By hand, the crate's `Cargo.toml` needs:
//!
//! ```toml
//! [lib]
//! # cdylib: the .so the host loads. rlib: the same code as a Rust library,
//! # so that unit tests, doctests and examples can link against it.
//! crate-type = ["cdylib", "rlib"]
//!
//! [dependencies]
//! stoa-app-api = { path = "/path/to/stoa/app-api" }  # or { git = "..." }
//! # A direct dependency: `export_app!` expands to `::abi_stable` paths.
//! abi_stable = { version = "0.11", default-features = false }
//! ```
//!
//! ## A synchronous app
//!
//! `call` answers at once, on the event loop thread that read the request:
//! it must not block (see the blocking pool below).
//!
//! ```
//! use stoa_app_api::{App, Request, Response};
//!
//! struct Hello;
//!
//! impl App for Hello {
//!     fn call(&self, request: &Request<'_>) -> Response {
//!         match (request.method.as_str(), request.path_info.as_str()) {
//!             ("GET", "" | "/") => Response::text(200, "hello\n"),
//!             _ => Response::text(404, "Not Found\n"),
//!         }
//!     }
//! }
//!
//! stoa_app_api::export_app! {
//!     name: "hello",      // the app's name: [apps.hello] in the config, logs
//!     mount: "/hello",    // its default mount prefix (--mount hello=/hi)
//!     new: |_context| Hello,
//! }
//!
//! # fn main() {
//! // A unit test: a request as the host would hand it, the app's answer.
//! let response = stoa_app_api::testing::call(&Hello, &Request::sample("GET", "/hello", "/", ""));
//! assert_eq!(response.status, 200);
//! assert_eq!(response.body_str(), Ok("hello\n"));
//! # }
//! ```
//!
//! ## Reading the request
//!
//! [`Request`] borrows the host's buffers (no copy); it is valid during the
//! call only. The path is split at the mount prefix: for an app mounted at
//! `/counter`, `/counter` arrives with `path_info` `""` and `/counter/`
//! with `"/"` (`script_name` is `"/counter"` for both; see [`Request`]).
//!
//! ```
//! use stoa_app_api::abi_stable::std_types::RSlice;
//! use stoa_app_api::{HeaderRef, Request};
//!
//! let headers = [HeaderRef::new("Accept", b"text/html"), HeaderRef::new("accept", b"*/*")];
//! let request = Request {
//!     headers: RSlice::from_slice(&headers),
//!     body: RSlice::from_slice(b"some text"),
//!     ..Request::sample("POST", "/counter", "", "name=J%C3%A9r%C3%B4me&tag=a+b")
//! };
//! assert_eq!((request.script_name.as_str(), request.path_info.as_str()), ("/counter", ""));
//! // Headers: the first value, or every value of a repeated header (names
//! // match case-insensitively).
//! assert_eq!(request.header("ACCEPT"), Some(&b"text/html"[..]));
//! let all: Vec<&[u8]> = request.header_values("accept").collect();
//! assert_eq!(all, [&b"text/html"[..], &b"*/*"[..]]);
//! // The query: decoded pairs, or one raw value.
//! let pairs: Vec<(String, String)> =
//!     request.query_pairs().map(|(k, v)| (k.into(), v.into())).collect();
//! assert_eq!(pairs[0], ("name".to_string(), "Jérôme".to_string()));
//! assert_eq!(pairs[1], ("tag".to_string(), "a b".to_string()));
//! assert_eq!(request.query_param("tag"), Some("a+b"));
//! // The body (already de-chunked): bytes or text.
//! assert_eq!(request.body_str(), Ok("some text"));
//! assert_eq!(request.body_bytes(), b"some text");
//! ```
//!
//! With the `serde` feature (`stoa-app-api = { ..., features = ["serde"] }`,
//! plus `serde` with `derive` for the derives), the body parses as JSON and
//! a value answers as JSON:
//!
//! ```
//! # #[cfg(feature = "serde")] {
//! use serde::{Deserialize, Serialize};
//! use stoa_app_api::abi_stable::std_types::RSlice;
//! use stoa_app_api::{Request, Response};
//!
//! #[derive(Deserialize, Serialize)]
//! struct Item {
//!     name: String,
//!     count: u32,
//! }
//!
//! fn create(request: &Request<'_>) -> Response {
//!     match request.json::<Item>() {
//!         Ok(item) => Response::json_of(&item).with_status(201),
//!         Err(e) => Response::text(400, &format!("bad JSON: {e}\n")),
//!     }
//! }
//!
//! let request = Request {
//!     body: RSlice::from_slice(br#"{"name":"pen","count":3}"#),
//!     ..Request::sample("POST", "/items", "", "")
//! };
//! let response = create(&request);
//! assert_eq!(response.status, 201);
//! assert_eq!(response.header("Content-Type"), Some(&b"application/json"[..]));
//! assert_eq!(response.body_str(), Ok(r#"{"name":"pen","count":3}"#));
//! assert_eq!(create(&Request::sample("POST", "/items", "", "")).status, 400);
//! # }
//! ```
//!
//! ## Answering
//!
//! A [`Response`] is a status, headers and a body. The host adds `Date`,
//! `Server`, `Content-Length` and `Connection` itself.
//!
//! ```
//! use stoa_app_api::Response;
//!
//! let created = Response::json(201, br#"{"id":7}"#)        // Content-Type: application/json
//!     .with_header("Location", "/items/7")
//!     .with_header("Set-Cookie", "a=1")
//!     .with_header("Set-Cookie", "b=2");                    // repeated headers are kept
//! assert_eq!(created.header_values("set-cookie").count(), 2);
//! let moved = Response::new(308).with_header("Location", "/items/");
//! let page = Response::html(200, "<p>hi</p>");
//! let raw = Response::new(200)
//!     .with_header("Content-Type", "image/png")
//!     .with_body(vec![0x89, b'P', b'N', b'G']);
//! assert_eq!((moved.status, page.status, raw.body.len()), (308, 200, 4));
//! ```
//!
//! **Constant headers.** Each `with_header` allocates the name and the
//! value, which the host frees after writing them. Headers that are the
//! same on every response (a middleware's security headers, say) can be
//! [`StaticHeader`] constants instead: an [`Answer`] carries a response
//! and one `&'static` list of them, and [`Responder::answer`] hands the
//! list to the host as it is (written after the response's own headers,
//! nothing allocated; an answer given off the loop has them copied).
//! [`Answer::text`], [`Answer::html`] and [`Answer::json`] are
//! `Response::text` and its kin with the `Content-Type` such a constant
//! ([`app::TEXT_PLAIN`] and its kin): the body's copy is then the only
//! allocation of the answer, where a `Response` builder makes four.
//!
//! ```
//! use stoa_app_api::{Answer, App, Request, Responder, Response, StaticHeader};
//!
//! const SECURITY: &[StaticHeader] = &[
//!     StaticHeader::new("X-Content-Type-Options", "nosniff"),
//!     StaticHeader::new("X-Frame-Options", "DENY"),
//! ];
//!
//! struct Site;
//! impl Site {
//!     fn answer(&self, _request: &Request<'_>) -> Answer {
//!         Answer::from(Response::text(200, "hi")).with_fixed(SECURITY)
//!     }
//! }
//! impl App for Site {
//!     fn handle(&self, request: &Request<'_>, responder: Responder) {
//!         responder.answer(self.answer(request));
//!     }
//!     fn call(&self, request: &Request<'_>) -> Response {
//!         self.answer(request).into_response() // the list copied in
//!     }
//! }
//! let response = Site.call(&Request::sample("GET", "", "/", ""));
//! assert_eq!(response.header("x-frame-options"), Some(&b"DENY"[..]));
//!
//! // One allocation (the body): the Content-Type is a constant too.
//! let article = Answer::json(200, br#"{"id":7}"#);
//! assert!(article.response.headers.is_empty());
//! assert_eq!(article.header("content-type"), Some(&b"application/json"[..]));
//! ```
//!
//! ## A deferred answer from a host timer
//!
//! `handle` receives a [`Responder`]: answer with it now or later, from any
//! thread, exactly once. A host timer ([`host()`]`.call_later`) waits on the
//! event loop without holding any thread. A responder dropped unanswered
//! makes the host answer 500 "the app did not answer"; an app that never
//! answers gets a 504 after `--app-timeout`.
//!
//! ```
//! use std::time::Duration;
//! use stoa_app_api::{host, App, Request, Responder, Response};
//!
//! struct Later;
//!
//! impl App for Later {
//!     fn handle(&self, _request: &Request<'_>, responder: Responder) {
//!         // The request borrows the host's buffers: copy what the answer
//!         // needs before the handler returns.
//!         match host() {
//!             Some(host) => host.call_later(Duration::from_millis(50), move || {
//!                 responder.respond(Response::text(200, "later\n"))
//!             }),
//!             None => responder.respond(Response::text(500, "no host\n")),
//!         }
//!     }
//! }
//!
//! // `testing::call` stands in for the host's timers and waits for the answer.
//! let response = stoa_app_api::testing::call(&Later, &Request::sample("GET", "/later", "", ""));
//! assert_eq!(response.body_str(), Ok("later\n"));
//! ```
//!
//! ## A streamed response
//!
//! [`Responder::stream`] sends the status and headers at once and returns a
//! [`Stream`] for the body, sent as it is produced (Server-Sent Events, a
//! large download made piece by piece). The host frames it (chunked on
//! HTTP/1.1, close-delimited on HTTP/1.0, nothing for HEAD;
//! [`Responder::stream_sized`] declares a `Content-Length` it then
//! enforces) and queues at most `--stream-queue` bytes per connection:
//! past that, [`Stream::send`] answers [`Sent::WouldBlock`] without taking
//! the chunk, and [`Stream::on_drain`] runs a callback on the event loop
//! once there is room. A client that goes away makes the next send answer
//! [`Sent::Closed`]. [`Stream::finish`] ends the body; a stream dropped
//! unfinished ends it abnormally (the connection is closed, the client
//! sees a truncated body). `--app-timeout` covers the time to the head,
//! `--stream-idle-timeout` each gap between chunks.
//!
//! A producer on the loop sends until `WouldBlock`, then waits for the
//! drain callback (no thread held):
//!
//! ```
//! use stoa_app_api::{App, Request, Responder, Response, Sent, Stream};
//!
//! /// Sends `left` zero bytes in 16 KiB chunks, pausing while the queue is full.
//! fn pump(mut stream: Stream, mut left: u64) {
//!     let chunk = [0u8; 16 * 1024];
//!     while left > 0 {
//!         let n = left.min(chunk.len() as u64) as usize;
//!         match stream.send(&chunk[..n]) {
//!             Sent::Ok => left -= n as u64,
//!             Sent::Closed => return, // the client went away
//!             // Go on from the loop once there is room (no thread held).
//!             Sent::WouldBlock => return stream.resume_on_drain(move |s| pump(s, left)),
//!         }
//!     }
//!     let _ = stream.finish();
//! }
//!
//! struct Download;
//!
//! impl App for Download {
//!     fn handle(&self, _request: &Request<'_>, responder: Responder) {
//!         let head = Response::new(200).with_header("Content-Type", "application/octet-stream");
//!         pump(responder.stream_sized(head, 100_000), 100_000);
//!     }
//! }
//!
//! // `testing::call` collects the chunks into one body.
//! let response = stoa_app_api::testing::call(&Download, &Request::sample("GET", "/d", "", ""));
//! assert_eq!(response.body.len(), 100_000);
//! ```
//!
//! Server-Sent Events from a host timer, and a producer on the blocking
//! pool with [`Stream::send_blocking`], which waits for room:
//!
//! ```
//! use std::time::Duration;
//! use stoa_app_api::{host, App, Request, Responder, Response, Sent, Stream};
//!
//! fn tick(mut stream: Stream, n: u32) {
//!     if n == 3 {
//!         let _ = stream.finish();
//!         return;
//!     }
//!     // WouldBlock drops this event (a slow reader skips a tick).
//!     if stream.send(format!("data: tick {n}\n\n").as_bytes()) == Sent::Closed {
//!         return;
//!     }
//!     if let Some(host) = host() {
//!         host.call_later(Duration::from_millis(10), move || tick(stream, n + 1));
//!     }
//! }
//!
//! struct Events;
//!
//! impl App for Events {
//!     fn handle(&self, request: &Request<'_>, responder: Responder) {
//!         let head = Response::new(200)
//!             .with_header("Content-Type", "text/event-stream")
//!             .with_header("X-Accel-Buffering", "no");
//!         if request.path_info.as_str() == "/pool" {
//!             let mut stream = responder.stream(head);
//!             let job = move || {
//!                 for line in ["a\n", "b\n"] {
//!                     if stream.send_blocking(line.as_bytes()) != Sent::Ok {
//!                         return;
//!                     }
//!                 }
//!                 let _ = stream.finish();
//!             };
//!             if let Some(host) = host() {
//!                 let _ = host.spawn_blocking(job);
//!             }
//!         } else {
//!             tick(responder.stream(head), 0);
//!         }
//!     }
//! }
//!
//! let events = stoa_app_api::testing::call(&Events, &Request::sample("GET", "/ev", "", ""));
//! assert_eq!(events.body_str(), Ok("data: tick 0\n\ndata: tick 1\n\ndata: tick 2\n\n"));
//! let pooled = stoa_app_api::testing::call(&Events, &Request::sample("GET", "/ev", "/pool", ""));
//! assert_eq!(pooled.body_str(), Ok("a\nb\n"));
//! ```
//!
//! ## A request body read as it arrives
//!
//! An app that says so for a request ([`App::reads_body`], asked with the
//! head only) is called as soon as the head is read, with an empty `body`;
//! [`Responder::read_body`] then hands the body to a [`BodySink`] piece by
//! piece, in order, de-chunked, on the event loop, and ends it with a
//! [`BodyEnd`] and the responder back. The host reads no further from the
//! client than a small window while the sink works, so an upload of any
//! size costs the host a bounded amount of memory; the limit is the app's
//! `max_stream_body` (`[apps.NAME]`, else `--max-stream-body`, 4 GiB by
//! default; `max_body` bounds only the bodies the host buffers whole),
//! past which the end is
//! [`BodyEnd::TooLarge`].
//!
//! ```
//! use stoa_app_api::abi_stable::std_types::RSlice;
//! use stoa_app_api::{App, BodyEnd, BodySink, Request, Responder, Response};
//!
//! /// Counts the bytes of an upload without keeping them.
//! #[derive(Default)]
//! struct Count(u64);
//!
//! impl BodySink for Count {
//!     fn data(&mut self, chunk: &[u8]) {
//!         self.0 += chunk.len() as u64;
//!     }
//!
//!     fn end(self, end: BodyEnd, responder: Responder) {
//!         responder.respond(match end {
//!             BodyEnd::Complete => Response::text(200, &format!("{} bytes\n", self.0)),
//!             BodyEnd::TooLarge => Response::text(413, "too large\n"),
//!             BodyEnd::Broken => Response::text(400, "cut short\n"),
//!         })
//!     }
//! }
//!
//! struct Uploads;
//!
//! impl App for Uploads {
//!     fn reads_body(&self, request: &Request<'_>) -> bool {
//!         request.method.as_str() == "POST"
//!     }
//!
//!     fn handle(&self, _request: &Request<'_>, responder: Responder) {
//!         responder.read_body(Count::default());
//!     }
//! }
//!
//! // `testing::call` hands the request's body over in pieces.
//! let request = Request {
//!     body: RSlice::from_slice(b"twelve bytes"),
//!     ..Request::sample("POST", "/up", "", "")
//! };
//! let response = stoa_app_api::testing::call(&Uploads, &request);
//! assert_eq!(response.body_str(), Ok("12 bytes\n"));
//! ```
//!
//! ## A WebSocket
//!
//! [`Responder::accept_websocket`] accepts an `Upgrade: websocket` request
//! with a [`WebSocket`] session object: the host answers `101` and calls it
//! on the connection's event loop, in order: `on_open` with a [`WsSender`],
//! `on_message` for each whole message (fragments joined, text checked as
//! UTF-8), `on_close` once with the close code. The host does the protocol
//! (handshake checks, pings, masking, the size limit `--ws-max-message`,
//! the close handshake). The sender clones and sends from any thread with
//! the same bounded queue as a [`Stream`]: [`Sent::WouldBlock`] while the
//! connection has too much queued (the message not taken; [`WsSender::on_drain`]
//! runs a callback once there is room), [`Sent::Closed`] once it is gone.
//! Session callbacks must not block; a panic in one is logged and closes
//! the WebSocket with 1011. [`testing::websocket`] plays the client in a
//! unit test:
//!
//! ```
//! use stoa_app_api::testing::{self, Received};
//! use stoa_app_api::{App, Request, Responder, Response, WebSocket, WsMessage, WsSender};
//!
//! /// Answers each text message in upper case; closes on "bye".
//! struct Shout(Option<WsSender>);
//!
//! impl WebSocket for Shout {
//!     fn on_open(&mut self, sender: WsSender) {
//!         self.0 = Some(sender);
//!     }
//!
//!     fn on_message(&mut self, message: WsMessage<'_>) {
//!         let (Some(sender), WsMessage::Text(text)) = (&self.0, message) else {
//!             return;
//!         };
//!         if text == "bye" {
//!             sender.close(1000, "bye");
//!         } else {
//!             sender.send_text(&text.to_uppercase());
//!         }
//!     }
//! }
//!
//! struct Loud;
//!
//! impl App for Loud {
//!     fn handle(&self, request: &Request<'_>, responder: Responder) {
//!         match request.path_info.as_str() {
//!             "/ws" => responder.accept_websocket(Shout(None)),
//!             _ => responder.respond(Response::text(404, "Not Found\n")),
//!         }
//!     }
//! }
//!
//! let Ok(mut ws) = testing::websocket(&Loud, &Request::sample("GET", "/loud", "/ws", "")) else {
//!     panic!("not accepted");
//! };
//! ws.send_text("hello");
//! ws.send_text("bye");
//! assert_eq!(
//!     ws.received(),
//!     [Received::Text("HELLO".into()), Received::Close(1000, "bye".into())]
//! );
//! ```
//!
//! [`Responder::accept_websocket_with`] (app-api 0.2.8) accepts with
//! headers of the app's own on the `101`: the subprotocol it picked from
//! the client's `Sec-WebSocket-Protocol` offer, a `Set-Cookie`. The host
//! drops, with a warning naming the app, a subprotocol the client did not
//! offer and the headers it writes itself. To deny a handshake, answer it
//! with an ordinary response (`403`, say): the client gets it as such.
//!
//! ```
//! use stoa_app_api::{App, Header, Request, Responder, Response, WebSocket, WsMessage};
//!
//! struct Quiet;
//!
//! impl WebSocket for Quiet {
//!     fn on_message(&mut self, _message: WsMessage<'_>) {}
//! }
//!
//! struct Chat;
//!
//! impl App for Chat {
//!     fn handle(&self, request: &Request<'_>, responder: Responder) {
//!         let offered = request.header_str("sec-websocket-protocol").unwrap_or("");
//!         if !offered.split(',').any(|p| p.trim() == "chat") {
//!             return responder.respond(Response::text(403, "chat only\n"));
//!         }
//!         let picked = Header {
//!             name: "Sec-WebSocket-Protocol".into(),
//!             value: b"chat".as_slice().into(),
//!         };
//!         responder.accept_websocket_with(vec![picked], Quiet);
//!     }
//! }
//! # let denied = stoa_app_api::testing::call(&Chat, &Request::sample("GET", "/chat", "", ""));
//! # assert_eq!(denied.status, 403);
//! ```
//!
//! ## A client that leaves
//!
//! [`Responder::on_gone`] (app-api 0.2.8) registers a callback the host
//! runs once, on the connection's event loop, if the request is abandoned
//! before its answer is complete: the client closed, half-closed or reset
//! the connection while the app worked on it, read its body or streamed
//! its answer, or the host gave up on it (a `504` past `--app-timeout`, a
//! connection closed at shutdown or past `--send-timeout`). An answer that
//! completes drops it unrun. It is the request's, not the responder's: it
//! holds across [`Responder::stream`] and [`Responder::read_body`]. Use it
//! to cancel work nobody waits for (ASGI's `http.disconnect`):
//!
//! ```
//! use std::sync::atomic::{AtomicBool, Ordering};
//! use std::sync::Arc;
//! use std::time::Duration;
//! use stoa_app_api::{App, Request, Responder, Response};
//!
//! struct Report;
//!
//! impl App for Report {
//!     fn handle(&self, _request: &Request<'_>, mut responder: Responder) {
//!         let cancelled = Arc::new(AtomicBool::new(false));
//!         let flag = cancelled.clone();
//!         responder.on_gone(move || flag.store(true, Ordering::Relaxed));
//!         std::thread::spawn(move || {
//!             for _ in 0..10 {
//!                 if cancelled.load(Ordering::Relaxed) {
//!                     return; // the client left: stop, answer nobody
//!                 }
//!                 std::thread::sleep(Duration::from_millis(1)); // a step of the work
//!             }
//!             responder.respond(Response::text(200, "report\n"));
//!         });
//!     }
//! }
//! # let r = stoa_app_api::testing::call(&Report, &Request::sample("GET", "/report", "", ""));
//! # assert_eq!(r.body_str(), Ok("report\n"));
//! ```
//!
//! The host sees a client leave by reading its connection, which it does
//! while a request is pending unless it has read bytes of a pipelined next
//! request (their answers' writes find the client gone), or a body sink
//! holds its whole read window (the backpressure: it reads nothing then).
//!
//! ## A blocking handler on the pool
//!
//! A handler that blocks its thread (a sleep, a file or database call, a
//! blocking client) says so with [`App::blocks`]: the host then calls
//! `handle` on its bounded blocking pool instead of the event loop, so other
//! connections keep being served. (From a non-blocking handler,
//! `host().spawn_blocking(...)` runs one job on the same pool.) Blocking in
//! a handler that does not say so stalls its whole event loop, and the host
//! logs a warning naming `App::blocks`.
//!
//! ```
//! use stoa_app_api::{App, Request, Response};
//!
//! struct Files;
//!
//! impl App for Files {
//!     fn blocks(&self, request: &Request<'_>) -> bool {
//!         request.path_info.as_str().starts_with("/read")
//!     }
//!
//!     fn call(&self, request: &Request<'_>) -> Response {
//!         match request.path_info.as_str() {
//!             "/read" => match std::fs::read_to_string("/proc/self/status") {
//!                 Ok(text) => Response::text(200, &text),
//!                 Err(e) => Response::text(500, &format!("{e}\n")),
//!             },
//!             _ => Response::text(200, "fast\n"),
//!         }
//!     }
//! }
//!
//! let read = Request::sample("GET", "/files", "/read", "");
//! assert!(Files.blocks(&read));
//! assert!(!Files.blocks(&Request::sample("GET", "/files", "/", "")));
//! assert_eq!(stoa_app_api::testing::call(&Files, &read).status, 200);
//! ```
//!
//! ## Shared state done right
//!
//! One app instance serves every thread of its process at once (the event
//! loop, the blocking pool; under `--worker-mode thread` every worker
//! thread), and the constructor runs once per loaded library, hence
//! `App: Send + Sync`: state lives in atomics or behind a lock, never in a
//! plain field mutated through `&self`. In the default process mode each
//! worker process has an instance of its own, so what must be shared across
//! workers (a counter, a session) belongs in a database or cache server.
//! Hold a lock briefly and never across a blocking call on the event loop.
//! State lives in memory: a hot replace starts a new instance from its
//! constructor (see [`Context`] for settings).
//!
//! ```
//! use std::collections::HashMap;
//! use std::sync::atomic::{AtomicU64, Ordering};
//! use std::sync::Mutex;
//! use stoa_app_api::{App, Request, Response};
//!
//! #[derive(Default)]
//! struct Counter {
//!     hits: AtomicU64,
//!     by_name: Mutex<HashMap<String, u64>>,
//! }
//!
//! impl App for Counter {
//!     fn call(&self, request: &Request<'_>) -> Response {
//!         let total = self.hits.fetch_add(1, Ordering::Relaxed) + 1;
//!         let name = request.query_param("name").unwrap_or("anonymous").to_string();
//!         let mine = {
//!             // A poisoned lock (a panic while held) still holds usable data.
//!             let mut map = self.by_name.lock().unwrap_or_else(|p| p.into_inner());
//!             let n = map.entry(name).or_insert(0);
//!             *n += 1;
//!             *n
//!         };
//!         Response::text(200, &format!("{total} {mine}\n"))
//!     }
//! }
//!
//! let app = Counter::default();
//! let request = Request::sample("GET", "/counter", "", "name=ann");
//! std::thread::scope(|s| {
//!     for _ in 0..4 {
//!         s.spawn(|| stoa_app_api::testing::call(&app, &request));
//!     }
//! });
//! assert_eq!(app.hits.load(Ordering::Relaxed), 4);
//! ```
//!
//! ## Settings
//!
//! The constructor receives a [`Context`]: the app's name and its
//! `[apps.NAME.settings]` table of the host's configuration file. With
//! `try_new` it may refuse (bad settings): the host logs
//! `app NAME failed to initialise: REASON` and does not mount the app.
//!
//! ```toml
//! [apps.greeter.settings]
//! greeting = "salut"
//! delay = "250ms"
//! ```
//!
//! ```
//! use std::time::Duration;
//! use stoa_app_api::{App, Context, Request, Response, Settings, SettingsError};
//!
//! struct Greeter {
//!     greeting: String,
//!     delay: Duration,
//! }
//!
//! impl Greeter {
//!     fn new(context: &Context) -> Result<Greeter, SettingsError> {
//!         let settings = context.settings();
//!         Ok(Greeter {
//!             greeting: settings.get_str("greeting")?.unwrap_or("hello").to_string(),
//!             delay: settings.get_duration("delay")?.unwrap_or(Duration::ZERO),
//!         })
//!     }
//! }
//!
//! impl App for Greeter {
//!     fn call(&self, _request: &Request<'_>) -> Response {
//!         Response::text(200, &self.greeting)
//!     }
//! }
//!
//! stoa_app_api::export_app! {
//!     name: "greeter",
//!     mount: "/greet",
//!     try_new: Greeter::new,
//! }
//!
//! # fn main() {
//! // Unit-test the constructor with the settings the configuration would give.
//! let settings = Settings::from_json(r#"{"greeting":"salut","delay":"250ms"}"#).unwrap();
//! let app = Greeter::new(&Context::new("greeter", settings, None)).unwrap();
//! assert_eq!((app.greeting.as_str(), app.delay), ("salut", Duration::from_millis(250)));
//! let bad = Settings::from_json(r#"{"greeting":7}"#).unwrap();
//! let refusal = Greeter::new(&Context::new("greeter", bad, None)).err().unwrap();
//! assert_eq!(refusal.to_string(), "setting `greeting`: expected a string, got 7");
//! # }
//! ```
//!
//! (`settings.deserialize::<MyStruct>()` reads the whole table into a
//! struct of one's own.)
//!
//! ## Logging
//!
//! This crate re-exports [`log`]: `stoa_app_api::log::info!(...)` needs no
//! dependency of its own. The app's records reach the host's log (its
//! level, its text or JSON format) with the app's name as the target.
//!
//! ```
//! use stoa_app_api::log;
//!
//! log::info!("cache warmed: {} entries", 42);
//! log::warn!(target: "audit", "a record with a target of its own");
//! ```
//!
//! ## Unit-testing an app
//!
//! [`Request::sample`] builds a request as the host would hand it
//! (`method`, `script_name`, `path_info`, `query`; override headers, body
//! and the rest with struct update syntax, as above). [`testing::call`]
//! hands it to the app and waits for the answer, deferred or not;
//! [`testing::outcome`] also tells a panic or a dropped responder. Plain
//! `#[test]`s in the app's crate run with `cargo test` (that is what the
//! `rlib` crate type is for).
//!
//! ## What a panic does
//!
//! A panic in app code (a handler, a timer or pool job, the constructor)
//! is caught on the plugin's side: the host answers that request with 500
//! "app NAME panicked", logs the panic's message and location with the
//! app's name, and keeps serving, this app included. A responder dropped
//! without a panic answers 500 "the app did not answer".
//!
//! ```
//! use std::time::Duration;
//! use stoa_app_api::testing::{outcome, Outcome};
//! use stoa_app_api::{App, Request, Responder};
//!
//! struct Fragile;
//!
//! impl App for Fragile {
//!     fn handle(&self, request: &Request<'_>, responder: Responder) {
//!         if request.path_info.as_str() == "/panic" {
//!             panic!("asked to panic");
//!         }
//!         drop(responder); // forgets to answer
//!     }
//! }
//!
//! let wait = Duration::from_secs(1);
//! let panicked = outcome(&Fragile, &Request::sample("GET", "/f", "/panic", ""), wait);
//! assert_eq!(panicked, Outcome::Panicked("asked to panic".to_string()));
//! let dropped = outcome(&Fragile, &Request::sample("GET", "/f", "/", ""), wait);
//! assert_eq!(dropped, Outcome::Dropped);
//! ```
//!
//! ## Generations: the development loop
//!
//! Copying a rebuilt `.so` over the old one in the apps directory replaces
//! the app while the host serves (within about two seconds): new requests
//! go to the new library, requests already in the old one finish there.
//! Each version loaded is a *generation*. Libraries are never unloaded, so
//! every generation stays mapped until the host exits, and each app may
//! have `--max-generations` of them (default 16): every rebuild dropped in
//! uses one. At the cap the host, by default (`--on-generation-cap
//! reexec`), re-executes itself in place (same sockets, every app loaded
//! fresh in the new process, the old one drains) to load the new version;
//! with `--on-generation-cap refuse` further replaces are refused (logged
//! and shown in `/.well-known/stoa/status`) and the running version keeps
//! serving until the host restarts or runs with a higher
//! `--max-generations`. A replaced generation's state (counters, caches)
//! is not carried over unless it hands it over: the new generation starts
//! from its constructor, which gets the bytes of the old one's
//! [`App::handover`] (see the [`app`] module's lifecycle).
//!
//! ## Compatibility
//!
//! A plugin records the `stoa-app-api` version it was built against; a host
//! loads it when it is of the same line (`0.2.x` today) and not older. See
//! the rules below.
//!
#![doc = include_str!("../COMPATIBILITY.md")]

pub mod abi;
pub mod app;
pub mod check;
pub mod context;
pub mod export;
pub mod helpers;
pub mod host;
pub mod stream;
pub mod testing;
pub mod websocket;
mod websocket_testing;

pub use abi::{Header, HeaderRef, Request, Response, StaticHeader};
pub use app::{Answer, App, Responder};
pub use context::{Context, Settings, SettingsError};
pub use host::{host, Host, PoolFull};
pub use log;
pub use stream::{BodyEnd, BodySink, Sent, Stream};
pub use websocket::{WebSocket, WsMessage, WsSender};

#[doc(hidden)]
pub use abi_stable;

/// The version of this crate a plugin is built against (and the host
/// checks): `CARGO_PKG_VERSION` of `stoa-app-api`.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The plugin example of `docs/apps.md`, compiled as a doctest so it stays
/// true.
#[cfg(doctest)]
#[doc = include_str!("../../docs/apps.md")]
pub struct AppsGuideExample;

/// The README, whose code blocks run as doctests too where they are Rust.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeExample;

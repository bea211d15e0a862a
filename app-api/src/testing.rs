//! Unit-testing an app without a host: [`call`] hands a request to the
//! app's `handle` (or `call`) with a responder that records the answer and
//! waits for it, so a deferred answer (a host timer, the blocking pool, a
//! thread of the app's own) is tested the same way as an immediate one.
//!
//! The first call installs a stand-in for the host's services, so
//! [`host()`](crate::host()) answers in tests too: `call_later` runs its
//! task on a fresh thread after the delay, `spawn_blocking` on a fresh
//! thread at once, and the app's `log` records go to stderr. (In a plugin
//! loaded by `stoa`, the real host's services are installed instead.)
//!
//! ```
//! use stoa_app_api::{testing, App, Request, Response};
//!
//! struct Hello;
//! impl App for Hello {
//!     fn call(&self, _request: &Request<'_>) -> Response {
//!         Response::text(200, "hello")
//!     }
//! }
//!
//! let response = testing::call(&Hello, &Request::sample("GET", "/hello", "", ""));
//! assert_eq!((response.status, response.body.as_slice()), (200, &b"hello"[..]));
//! ```

use crate::abi::{BodySinkBox, BODY_COMPLETE};
use crate::abi::{
    HostModule, HostRef, LogLevel, RawResponder, RawResponder_TO, RawStream, RawStream_TO, Request,
    Response, StreamBox, TaskBox, WsSessionBox, SEND_CLOSED, SEND_SENT,
};
use crate::app::{App, Responder};
use abi_stable::prefix_type::PrefixTypeTrait;
use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::std_types::{ROption, RSlice, RStr, RString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{channel, Sender};
use std::time::Duration;

/// How long [`call`] waits for a deferred answer.
pub const WAIT: Duration = Duration::from_secs(10);

/// What became of a request handed to an app.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The app answered.
    Answered(Response),
    /// The app panicked (the host answers 500 "app NAME panicked").
    Panicked(String),
    /// The responder was dropped unanswered (the host answers 500 "the
    /// app did not answer").
    Dropped,
    /// No answer within the wait (the host would answer 504 after
    /// `--app-timeout`).
    TimedOut,
}

/// Hands `request` to `app` as the host would and waits (up to [`WAIT`])
/// for its answer; panics, naming what happened, if there is none.
pub fn call(app: &dyn App, request: &Request<'_>) -> Response {
    match outcome(app, request, WAIT) {
        Outcome::Answered(response) => response,
        other => panic!("the app did not answer {}: {other:?}", request.full_path()),
    }
}

/// Hands `request` to `app` as the host would and waits up to `wait` for
/// what becomes of it: an answer, a panic, a dropped responder, or none.
pub fn outcome(app: &dyn App, request: &Request<'_>, wait: Duration) -> Outcome {
    install_host();
    let (tx, rx) = channel();
    let recorder = Recorder {
        tx: Some(tx),
        body: request.body.as_slice().to_vec(),
        ws: None,
    };
    let raw = RawResponder_TO::from_value(recorder, TD_Opaque);
    let responder = Responder::from_raw(raw);
    // (The host would call `handle` on its blocking pool when
    // `app.blocks(request)`; here every call runs on the test's thread.)
    let result = catch_unwind(AssertUnwindSafe(|| app.handle(request, responder)));
    if let Err(payload) = result {
        let message = crate::export::panic_message(&*payload);
        return Outcome::Panicked(message);
    }
    rx.recv_timeout(wait).unwrap_or(Outcome::TimedOut)
}

/// The recording responder: sends what became of the request once. It
/// keeps the request's body for an app that reads it as it arrives.
pub(crate) struct Recorder {
    pub(crate) tx: Option<Sender<Outcome>>,
    pub(crate) body: Vec<u8>,
    /// Where an accepted WebSocket's session goes (`websocket`); without
    /// it, an accept is answered 426 as the host answers a request that
    /// did not ask for one.
    pub(crate) ws: Option<Sender<WsSessionBox>>,
}

impl Recorder {
    fn send(&mut self, outcome: Outcome) {
        if let Some(tx) = self.tx.take() {
            let _ = tx.send(outcome);
        }
    }
}

impl RawResponder for Recorder {
    fn respond(mut self, response: Response) {
        self.send(Outcome::Answered(response));
    }

    fn panicked(mut self, message: RString) {
        self.send(Outcome::Panicked(message.into_string()));
    }

    /// Hands the request's body over in two pieces (so an app that
    /// joins pieces is tested doing so), then the end.
    fn read_body(mut self, mut sink: BodySinkBox) {
        let body = std::mem::take(&mut self.body);
        let (first, second) = body.split_at(body.len() / 2);
        sink.data(RSlice::from_slice(first));
        sink.data(RSlice::from_slice(second));
        let responder = Recorder {
            tx: self.tx.take(),
            body: Vec::new(),
            ws: self.ws.take(),
        };
        sink.end(
            BODY_COMPLETE,
            RawResponder_TO::from_value(responder, TD_Opaque),
        );
    }

    fn start_stream(mut self, head: Response, _length: ROption<u64>) -> StreamBox {
        RawStream_TO::from_value(
            Collector {
                tx: self.tx.take(),
                response: Some(head),
            },
            TD_Opaque,
        )
    }

    fn accept_websocket(mut self, session: WsSessionBox) {
        match self.ws.take() {
            Some(ws) => {
                self.tx = None;
                let _ = ws.send(session);
            }
            None => self.send(Outcome::Answered(Response::text(426, "Upgrade Required\n"))),
        }
    }
}

/// The recording stream: collects the chunks into the head's body and
/// records the whole response when finished (unbounded: it never answers
/// `WouldBlock`; `on_drain` runs its task at once on a fresh thread).
struct Collector {
    tx: Option<Sender<Outcome>>,
    response: Option<Response>,
}

impl RawStream for Collector {
    fn send(&mut self, chunk: RSlice<'_, u8>) -> u8 {
        match &mut self.response {
            Some(response) => {
                response.body.extend_from_slice(chunk.as_slice());
                SEND_SENT
            }
            None => SEND_CLOSED,
        }
    }

    fn send_blocking(&mut self, chunk: RSlice<'_, u8>) -> u8 {
        self.send(chunk)
    }

    fn on_drain(&mut self, task: TaskBox) {
        std::thread::spawn(move || task.run());
    }

    fn finish(mut self) -> u8 {
        match (self.tx.take(), self.response.take()) {
            (Some(tx), Some(response)) => {
                let _ = tx.send(Outcome::Answered(response));
                SEND_SENT
            }
            _ => SEND_CLOSED,
        }
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        // Dropped unfinished: the client would see a truncated body.
        if let Some(tx) = self.tx.take() {
            let _ = tx.send(Outcome::Dropped);
        }
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.send(Outcome::Dropped);
    }
}

pub use crate::websocket_testing::{websocket, Received, WsTest};

extern "C" fn log_to_stderr(level: LogLevel, target: RStr<'_>, message: RStr<'_>) {
    let level = match level {
        1 => "ERROR",
        2 => "WARN",
        3 => "INFO",
        4 => "DEBUG",
        _ => "TRACE",
    };
    eprintln!("{level} {target}: {message}");
}

extern "C" fn timer_thread(delay_ms: u64, task: TaskBox) {
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(delay_ms));
        task.run();
    });
}

extern "C" fn pool_thread(task: TaskBox) -> bool {
    std::thread::spawn(move || task.run());
    true
}

/// Installs the stand-in host services (once; [`call`] does it). After
/// this, `host()` answers `Some` in the test process.
pub fn install_host() {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        let host: HostRef = HostModule {
            log_max_level: log::Level::Info as LogLevel,
            log: log_to_stderr,
            call_later: timer_thread,
            spawn_blocking: pool_thread,
        }
        .leak_into_prefix();
        crate::export::install_services(host, "app");
        // Keep each panic's message for the responder it drops (as the
        // plugin's own hook does), then report it as the test harness does.
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            crate::export::remember_panic(crate::export::panic_message(info.payload()));
            previous(info);
        }));
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host;

    /// Answers `/timer` from a host timer, panics in one on `/timer-panic`,
    /// never answers `/never`.
    struct Deferred;

    impl App for Deferred {
        fn handle(&self, request: &Request<'_>, responder: Responder) {
            let Some(host) = host() else {
                return responder.respond(Response::text(500, "no host"));
            };
            let delay = Duration::from_millis(20);
            match request.path_info.as_str() {
                "/timer" => host.call_later(delay, move || {
                    responder.respond(Response::text(200, "timer"))
                }),
                "/timer-panic" => host.call_later(delay, move || {
                    let _held = responder;
                    panic!("in a timer");
                }),
                "/pool" => {
                    let spawned =
                        host.spawn_blocking(move || responder.respond(Response::text(200, "pool")));
                    assert!(spawned.is_ok());
                }
                _ => std::mem::forget(responder),
            }
        }
    }

    #[test]
    fn deferred_answers_panics_and_silence_are_told_apart() {
        let get = |path| Request::sample("GET", "/d", path, "");
        assert_eq!(call(&Deferred, &get("/timer")).body_str(), Ok("timer"));
        assert_eq!(call(&Deferred, &get("/pool")).body_str(), Ok("pool"));
        let wait = Duration::from_secs(2);
        assert_eq!(
            outcome(&Deferred, &get("/timer-panic"), wait),
            Outcome::Panicked("in a timer".to_string())
        );
        let short = Duration::from_millis(50);
        assert_eq!(outcome(&Deferred, &get("/never"), short), Outcome::TimedOut);
    }
}

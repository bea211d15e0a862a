//! Test-only plugin mounted at `/_test`, misbehaving on purpose:
//! - `/panic` panics in the handler;
//! - `/later` answers 50 ms later from its own thread, echoing the path and
//!   query (so concurrent answers can be told apart), and logs
//!   "answering PATH in 50 ms" when it takes the request;
//! - `/drop` drops its responder unanswered;
//! - `/ok` answers at once;
//! - `/panic-later` panics on its own thread before answering;
//! - `/big` answers a 4 MiB body (byte `i` is `i % 251`) that cannot fit in
//!   a socket buffer, so the host has to wait for writability;
//! - `/timer-panic` hands its responder to a host timer (`call_later`,
//!   10 ms) whose callback panics, so the responder is dropped unanswered;
//! - `/status?N` answers with status `N` whatever it is (100, 101, 0, 700...),
//!   with the body "status N";
//! - `/100k?n=MARK` answers a 100 KiB body that starts with `MARK:` and is
//!   `.` after it, so pipelined answers can be told apart and counted;
//! - `/64m` answers a 64 MiB body of `x` (every page written, so it counts
//!   in the host's RSS), to see how many copies of a large body the host
//!   holds.
//! - `POST /pool-sink` reads its body on a blocking-pool thread
//!   (`read_body_on_pool`); its sink holds its first piece until
//!   `/pool-sink/release`, and answers the byte count and the largest
//!   piece; `/pool-sink/state` says `in data` while the sink holds that
//!   piece (`idle` before), with the bytes it has been given so far;
//! - `/gone...`, `/ws-proto` and `/ws-deny`: see the `gone` module.

mod gone;

use std::sync::{Condvar, Mutex};
use std::time::Duration;
use stoa_app_api::{App, BodyEnd, BodySink, Request, Responder, Response};

/// The pool sink's gate: (holding its first piece, released, bytes given).
static GATE: Mutex<(bool, bool, u64)> = Mutex::new((false, false, 0));
static GATE_MOVED: Condvar = Condvar::new();

fn gate() -> std::sync::MutexGuard<'static, (bool, bool, u64)> {
    GATE.lock().unwrap_or_else(|p| p.into_inner())
}

/// Counts the body; holds its first piece until released.
#[derive(Default)]
struct GateSink {
    bytes: u64,
    largest: usize,
}

impl BodySink for GateSink {
    fn data(&mut self, chunk: &[u8]) {
        let first = self.bytes == 0;
        self.bytes += chunk.len() as u64;
        self.largest = self.largest.max(chunk.len());
        let mut g = gate();
        g.2 = self.bytes;
        if first {
            g.0 = true;
            while !g.1 {
                g = GATE_MOVED.wait(g).unwrap_or_else(|p| p.into_inner());
            }
            g.0 = false;
        }
    }

    fn end(self, end: BodyEnd, responder: Responder) {
        let text = format!(
            "{:?}: {} bytes, largest piece {}",
            end, self.bytes, self.largest
        );
        responder.respond(Response::text(200, &text));
    }
}

/// Size of the `/big` body.
pub const BIG: usize = 4 << 20;

/// Size of the `/100k` body.
pub const HUNDRED_K: usize = 100 << 10;

/// Size of the `/64m` body.
pub const HUGE: usize = 64 << 20;

struct Misbehave;

impl App for Misbehave {
    fn reads_body(&self, request: &Request<'_>) -> bool {
        matches!(request.path_info.as_str(), "/pool-sink" | "/gone-body")
    }

    fn handle(&self, request: &Request<'_>, responder: Responder) {
        let path = request.path_info.as_str();
        let Some(responder) = gone::handle(path, request, responder) else {
            return;
        };
        match path {
            "/panic" => panic!("misbehave: asked to panic"),
            "/later" => {
                let mut path = request.full_path();
                if !request.query.is_empty() {
                    path = format!("{path}?{}", request.query);
                }
                // Logged from the handler, on the host's loop: once the line
                // is out, the request is known to be with the app.
                log::info!("answering {path} in 50 ms");
                std::thread::spawn(move || {
                    std::thread::sleep(Duration::from_millis(50));
                    responder.respond(Response::text(200, &format!("later {path}")));
                });
            }
            "/drop" => {
                log::info!("dropping a responder on purpose");
                drop(responder);
            }
            "/panic-later" => {
                std::thread::spawn(move || {
                    let _owned = responder;
                    std::thread::sleep(Duration::from_millis(10));
                    panic!("misbehave: asked to panic on a thread");
                });
            }
            "/big" => {
                let body: Vec<u8> = (0..BIG).map(|i| (i % 251) as u8).collect();
                responder.respond(Response::new(200).with_body(body));
            }
            "/100k" => {
                let mut body =
                    format!("{}:", request.query_param("n").unwrap_or_default()).into_bytes();
                body.resize(HUNDRED_K, b'.');
                responder.respond(Response::new(200).with_body(body));
            }
            "/64m" => responder.respond(Response::new(200).with_body(vec![b'x'; HUGE])),
            "/ok" => responder.respond(Response::text(200, "ok")),
            "/pool-sink" => responder.read_body_on_pool(GateSink::default()),
            "/pool-sink/state" => {
                let g = gate();
                let state = if g.0 { "in data" } else { "idle" };
                responder.respond(Response::text(200, &format!("{state}, {} bytes", g.2)));
            }
            "/pool-sink/release" => {
                gate().1 = true;
                GATE_MOVED.notify_all();
                responder.respond(Response::text(200, "released"));
            }
            "/status" => {
                let code = request.query.as_str().parse().unwrap_or(0);
                responder.respond(Response::text(code, &format!("status {code}")));
            }
            "/timer-panic" => match stoa_app_api::host() {
                Some(host) => host.call_later(Duration::from_millis(10), move || {
                    let _owned = responder;
                    panic!("misbehave: asked to panic in a timer callback");
                }),
                None => responder.respond(Response::text(500, "no host timers")),
            },
            _ => responder.respond(Response::text(404, "Not Found")),
        }
    }
}

stoa_app_api::export_app! {
    name: "misbehave",
    mount: "/_test",
    new: |_| Misbehave,
}

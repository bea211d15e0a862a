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

use std::time::Duration;
use stoa_app_api::{App, Request, Responder, Response};

/// Size of the `/big` body.
pub const BIG: usize = 4 << 20;

/// Size of the `/100k` body.
pub const HUNDRED_K: usize = 100 << 10;

/// Size of the `/64m` body.
pub const HUGE: usize = 64 << 20;

struct Misbehave;

impl App for Misbehave {
    fn handle(&self, request: &Request<'_>, responder: Responder) {
        match request.path_info.as_str() {
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

//! Test-only plugin mounted at `/_stuck`, with handlers that hold their
//! thread (sleeping in short steps, so a stuck handler costs no CPU):
//! - `/spin` never returns, on the event loop (`?ms=N`: returns after N ms
//!   and answers 200 `spun`);
//! - `/timer` sets a host timer (10 ms) whose callback never returns;
//! - `/block` never returns, on the blocking pool (`App::blocks`);
//! - `/block-ms?ms=N` on the blocking pool: sleeps N ms, then answers 200;
//! - `/started` (on the loop) answers how many blocking jobs have started;
//! - `/ok` answers at once.
//!
//! `/spin`, `/block` and `/block-ms` log "stuck: PATH started" when they begin.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use stoa_app_api::{App, Request, Responder, Response};

/// One step of a handler's sleep.
const STEP: Duration = Duration::from_millis(10);

struct Stuck {
    /// Blocking jobs that have begun to run.
    started: AtomicU64,
}

/// `?ms=N`, if given and a number.
fn millis(request: &Request<'_>) -> Option<u64> {
    request.query_param("ms").and_then(|v| v.parse().ok())
}

/// Sleeps in short steps for `limit`, or forever for `None`.
fn hold(limit: Option<Duration>) {
    let start = Instant::now();
    while limit.is_none_or(|l| start.elapsed() < l) {
        std::thread::sleep(STEP);
    }
}

impl App for Stuck {
    fn blocks(&self, request: &Request<'_>) -> bool {
        matches!(request.path_info.as_str(), "/block" | "/block-ms")
    }

    fn handle(&self, request: &Request<'_>, responder: Responder) {
        let path = request.path_info.as_str();
        match path {
            "/spin" | "/block" | "/block-ms" => {
                if path != "/spin" {
                    self.started.fetch_add(1, Ordering::SeqCst);
                }
                log::info!("stuck: {path} started");
                let limit = match (path, millis(request)) {
                    ("/block", _) => None,
                    ("/block-ms", None) => {
                        return responder.respond(Response::text(400, "ms=N is required\n"));
                    }
                    (_, ms) => ms.map(Duration::from_millis),
                };
                hold(limit);
                responder.respond(Response::text(200, "spun\n"));
            }
            "/timer" => match stoa_app_api::host() {
                Some(host) => host.call_later(Duration::from_millis(10), move || {
                    log::info!("stuck: /timer callback started");
                    hold(None);
                    responder.respond(Response::text(200, "spun\n"));
                }),
                None => responder.respond(Response::text(500, "no host timers\n")),
            },
            "/started" => {
                let n = self.started.load(Ordering::SeqCst);
                responder.respond(Response::text(200, &n.to_string()));
            }
            "/ok" => responder.respond(Response::text(200, "ok\n")),
            _ => responder.respond(Response::text(404, "Not Found\n")),
        }
    }
}

stoa_app_api::export_app! {
    name: "stuck",
    mount: "/_stuck",
    new: |_| Stuck { started: AtomicU64::new(0) },
}

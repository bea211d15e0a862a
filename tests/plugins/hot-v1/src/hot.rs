// Shared by hot-v1 and hot-v2 (through `include!`): the app `hot` answers
// 200 with the including crate's `BODY` on every path under `/hot`, except:
//
// - `/hot/count` counts requests and answers `BODY N`; the count is handed
//   over to the next generation (`App::handover`) and read back by its
//   constructor, so it survives a hot replace;
// - `/hot/hold?until=FILE` (deferred, on host timers) and
//   `/hot/hold-blocking?until=FILE` (on the blocking pool) answer
//   `BODY held` once FILE exists (or after 30 s);
// - `retire` appends `retire BODY` to the file named by the environment
//   variable `STOA_TEST_RETIRE_FILE`, if set.

use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use stoa_app_api::{App, Request, Responder, Response};

/// How long a held request waits for its file at most.
const HOLD_AT_MOST: Duration = Duration::from_secs(30);

struct Hot {
    count: AtomicU64,
}

impl Hot {
    fn new(context: &stoa_app_api::Context) -> Self {
        let count = context
            .previous_state()
            .and_then(|bytes| <[u8; 8]>::try_from(bytes).ok())
            .map_or(0, u64::from_le_bytes);
        Hot {
            count: AtomicU64::new(count),
        }
    }
}

fn held(until: &str, deadline: Instant) -> bool {
    Path::new(until).exists() || Instant::now() >= deadline
}

/// Answers once `until` exists, checking every 20 ms on host timers.
fn hold_deferred(until: String, responder: Responder, deadline: Instant) {
    if held(&until, deadline) {
        responder.respond(Response::text(200, &format!("{BODY} held")));
        return;
    }
    if let Some(host) = stoa_app_api::host() {
        host.call_later(Duration::from_millis(20), move || {
            hold_deferred(until, responder, deadline)
        });
    }
}

impl App for Hot {
    fn handle(&self, request: &Request<'_>, responder: Responder) {
        let until = request.query_param("until").unwrap_or("").to_string();
        let deadline = Instant::now() + HOLD_AT_MOST;
        match request.path_info.as_str() {
            "/count" => {
                let n = self.count.fetch_add(1, Ordering::SeqCst) + 1;
                responder.respond(Response::text(200, &format!("{BODY} {n}")));
            }
            "/hold" => {
                stoa_app_api::log::info!("hot {BODY} holds /hot/hold");
                hold_deferred(until, responder, deadline);
            }
            "/hold-blocking" => {
                stoa_app_api::log::info!("hot {BODY} holds /hot/hold-blocking");
                while !held(&until, deadline) {
                    std::thread::sleep(Duration::from_millis(20));
                }
                responder.respond(Response::text(200, &format!("{BODY} held")));
            }
            _ => responder.respond(Response::text(200, BODY)),
        }
    }

    fn blocks(&self, request: &Request<'_>) -> bool {
        request.path_info.as_str() == "/hold-blocking"
    }

    fn handover(&self) -> Option<Vec<u8>> {
        Some(self.count.load(Ordering::SeqCst).to_le_bytes().to_vec())
    }

    fn retire(&self) {
        let Ok(path) = std::env::var("STOA_TEST_RETIRE_FILE") else {
            return;
        };
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path);
        if let Ok(mut file) = file {
            let _ = writeln!(file, "retire {BODY}");
        }
    }
}

stoa_app_api::export_app! {
    name: "hot",
    mount: "/hot",
    new: Hot::new,
}

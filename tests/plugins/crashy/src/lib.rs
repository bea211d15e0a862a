//! Test-only plugin mounted at `/crashy`, whose handlers end, grow or hold
//! the process they run in (for tests of worker processes):
//! - `/segv`: the process gets SIGSEGV (sent to its own pid);
//! - `/null`: writes through a null pointer (SIGSEGV from the kernel);
//! - `/abort`: `std::process::abort` (SIGABRT);
//! - `/exit?code=N`: `std::process::exit(N)`, N in 0..=255;
//! - `/alloc?mb=N`: allocates N MiB, writes every byte (so it counts in the
//!   RSS) and keeps it for good (a leak); answers the MiB held so far;
//! - `/spin?secs=N`: busy-loops on the event loop for N seconds, then
//!   answers 200 `spun`;
//! - `/slow?ms=N`: answers 200 `slow` N ms later from a thread of its own
//!   (the request is in flight meanwhile, and the event loop free);
//! - `/pid`: answers the process id, so worker processes can be told apart;
//! - `/ok` answers at once.
//!
//! `pool=1` in the query runs any of them on the host's blocking pool
//! (the app declares it blocking) instead of the event loop.
//!
//! With `[apps.crashy.settings] abort_in_constructor = true` its
//! constructor aborts the process instead (a plugin that cannot start).
//!
//! A missing or unreadable N answers 400 naming it. `/spin` and `/slow` log
//! "crashy: PATH started" when they take the request.

use rustix::process::{getpid, kill_process, Signal};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use stoa_app_api::{App, Request, Responder, Response};

/// One MiB.
const MIB: usize = 1 << 20;

/// How many times `/segv` sends SIGSEGV before it gives up.
const SEGV_TRIES: u32 = 100;

/// The pause between two SIGSEGVs.
const SEGV_PAUSE: Duration = Duration::from_millis(10);

#[derive(Default)]
struct Crashy {
    /// What `/alloc` allocated: never freed.
    leaked: Mutex<Vec<Vec<u8>>>,
}

/// What a request asks for.
#[derive(Debug)]
enum Action {
    Answer(Response),
    Segv,
    Null,
    Abort,
    Exit(i32),
    Alloc(usize),
    Spin(Duration),
    Slow(Duration),
}

/// `?key=N` as a number, or a 400 answer naming what is wrong.
fn number<T: std::str::FromStr>(request: &Request<'_>, key: &str) -> Result<T, Response> {
    let raw = request
        .query_param(key)
        .ok_or_else(|| Response::text(400, &format!("{key}=N is required\n")))?;
    raw.parse().map_err(|_| {
        Response::text(
            400,
            &format!("{key}={raw:?} is not a whole number that fits\n"),
        )
    })
}

/// The action for `request`.
fn action(request: &Request<'_>) -> Action {
    let asked = match request.path_info.as_str() {
        "/segv" => Ok(Action::Segv),
        "/null" => Ok(Action::Null),
        "/abort" => Ok(Action::Abort),
        "/exit" => number::<i32>(request, "code").and_then(|code| match code {
            0..=255 => Ok(Action::Exit(code)),
            _ => Err(Response::text(
                400,
                &format!("code={code} is not an exit status: give 0..=255\n"),
            )),
        }),
        "/alloc" => number(request, "mb").map(Action::Alloc),
        "/spin" => number(request, "secs").map(|s| Action::Spin(Duration::from_secs(s))),
        "/slow" => number(request, "ms").map(|ms| Action::Slow(Duration::from_millis(ms))),
        "/pid" => Ok(Action::Answer(Response::text(
            200,
            &std::process::id().to_string(),
        ))),
        "/ok" => Ok(Action::Answer(Response::text(200, "ok\n"))),
        _ => Ok(Action::Answer(Response::text(404, "Not Found\n"))),
    };
    asked.unwrap_or_else(Action::Answer)
}

/// Sends SIGSEGV to this process until it ends. The first one may meet a
/// handler that only puts the default action back and returns (the Rust
/// runtime's stack-overflow guard does so for a signal that is not a fault
/// on a guard page): the next one ends the process. The answer, if it
/// still lives after `SEGV_TRIES`, says so.
fn segv() -> Response {
    let me = getpid();
    for _ in 0..SEGV_TRIES {
        if let Err(e) = kill_process(me, Signal::SEGV) {
            return Response::text(500, &format!("kill(SIGSEGV) failed: {e}\n"));
        }
        std::thread::sleep(SEGV_PAUSE);
    }
    Response::text(
        500,
        &format!("still running after {SEGV_TRIES} SIGSEGVs (a handler ignores them)\n"),
    )
}

impl Crashy {
    /// Allocates `mb` MiB, every byte written, and keeps it; the MiB held
    /// now, or a 400 if `mb` MiB does not fit in an address.
    fn alloc(&self, mb: usize) -> Response {
        let Some(len) = mb.checked_mul(MIB) else {
            return Response::text(400, &format!("mb={mb} is more than an address can hold\n"));
        };
        // A non-zero fill writes every page (zeroed pages may stay unmapped).
        let block = vec![1u8; len];
        let mut leaked = self.leaked.lock().unwrap_or_else(|p| p.into_inner());
        leaked.push(block);
        let held: usize = leaked.iter().map(Vec::len).sum::<usize>() / MIB;
        Response::text(200, &format!("{held}\n"))
    }
}

impl App for Crashy {
    /// `pool=1` in the query runs the route on the host's blocking pool.
    fn blocks(&self, request: &Request<'_>) -> bool {
        request.query.as_str().split('&').any(|p| p == "pool=1")
    }

    fn handle(&self, request: &Request<'_>, responder: Responder) {
        let path = request.path_info.as_str();
        match action(request) {
            Action::Answer(response) => responder.respond(response),
            Action::Segv => responder.respond(segv()),
            Action::Null => {
                let null = std::hint::black_box(std::ptr::null_mut::<u64>());
                // SAFETY: none: writing through a null pointer is the
                // crash this route exists for (a plugin with a bug); the
                // kernel ends the process with SIGSEGV.
                #[allow(unsafe_code)]
                unsafe {
                    null.write_volatile(1)
                };
                responder.respond(Response::text(500, "wrote through NULL and lived\n"));
            }
            Action::Abort => std::process::abort(),
            Action::Exit(code) => std::process::exit(code),
            Action::Alloc(mb) => responder.respond(self.alloc(mb)),
            Action::Spin(time) => {
                log::info!("crashy: {path} started");
                let start = Instant::now();
                while start.elapsed() < time {
                    std::hint::spin_loop();
                }
                responder.respond(Response::text(200, "spun\n"));
            }
            Action::Slow(time) => {
                log::info!("crashy: {path} started");
                std::thread::spawn(move || {
                    std::thread::sleep(time);
                    responder.respond(Response::text(200, "slow\n"));
                });
            }
        }
    }
}

fn new(context: &stoa_app_api::Context) -> Result<Crashy, String> {
    let abort = context
        .settings()
        .get_bool("abort_in_constructor")
        .map_err(|e| e.to_string())?;
    if abort == Some(true) {
        log::info!("crashy: aborting in the constructor");
        std::process::abort();
    }
    Ok(Crashy::default())
}

stoa_app_api::export_app! {
    name: "crashy",
    mount: "/crashy",
    try_new: new,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn act(path: &str, query: &str) -> Action {
        action(&Request::sample("GET", "/crashy", path, query))
    }

    /// The status and body of an `Action::Answer`.
    fn answered(action: Action) -> (u16, String) {
        match action {
            Action::Answer(r) => (r.status, String::from_utf8_lossy(&r.body).into_owned()),
            other => panic!("not an answer: {other:?}"),
        }
    }

    #[test]
    fn routes_read_their_numbers() {
        assert!(matches!(act("/exit", "code=3"), Action::Exit(3)));
        assert!(matches!(act("/alloc", "mb=2"), Action::Alloc(2)));
        assert!(matches!(act("/spin", "secs=600"), Action::Spin(d) if d.as_secs() == 600));
        assert!(matches!(act("/slow", "ms=50"), Action::Slow(d) if d.as_millis() == 50));
        assert!(matches!(act("/segv", ""), Action::Segv));
        assert!(matches!(act("/abort", ""), Action::Abort));
    }

    #[test]
    fn a_missing_or_bad_number_is_refused_naming_it() {
        for (path, query, needle) in [
            ("/exit", "", "code=N is required"),
            ("/exit", "code=256", "give 0..=255"),
            ("/exit", "code=-1", "give 0..=255"),
            ("/alloc", "mb=lots", "mb=\"lots\""),
            ("/spin", "secs=", "secs=\"\""),
            ("/slow", "", "ms=N is required"),
        ] {
            let (status, body) = answered(act(path, query));
            assert_eq!(status, 400, "{path}?{query}");
            assert!(body.contains(needle), "{path}?{query}: {body}");
        }
    }

    #[test]
    fn pid_ok_and_unknown_paths() {
        assert_eq!(
            answered(act("/pid", "")),
            (200, std::process::id().to_string())
        );
        assert_eq!(answered(act("/ok", "")).0, 200);
        assert_eq!(answered(act("/nope", "")).0, 404);
    }

    #[test]
    fn alloc_keeps_what_it_allocated() {
        let app = Crashy::default();
        assert_eq!(app.alloc(1).body.as_slice(), b"1\n");
        assert_eq!(app.alloc(2).body.as_slice(), b"3\n");
        assert_eq!(app.alloc(usize::MAX).status, 400);
    }
}

//! The `demo` sample app, mounted at `/demo`: three handlers to compare a
//! blocking wait with a timer on the event loop.
//!
//! - `/demo/syncsleep-handler/` (A) sleeps its thread, and says so
//!   (`App::blocks`), so the host runs it on its blocking pool;
//! - `/demo/sleep-handler/` (B) waits on a host timer, blocking no thread;
//! - `/demo/justnow/` (C) answers at once.
//!
//! A and B answer after `?seconds=N` (0 to 10, default 1). Every answer
//! carries `Cache-Control: no-store` as a constant header (`Answer`): A's
//! from a pool thread, B's from a timer, C's at once on the loop.

use std::time::Duration;
use stoa_app_api::{host, Answer, App, Request, Responder, Response, StaticHeader};

/// What A and B answer.
pub const SLEEP_BODY: &str = "when i sleep 5s";
/// What C answers.
pub const JUSTNOW_BODY: &str = "i hope just now see you";

const SYNC: &str = "/syncsleep-handler/";
const ASYNC: &str = "/sleep-handler/";
const NOW: &str = "/justnow/";

/// The constant header on every answer.
pub const NO_STORE: &[StaticHeader] = &[StaticHeader::new("Cache-Control", "no-store")];

/// The demo app.
pub struct Demo;

/// Sends `response` with the constant header.
fn send(responder: Responder, response: Response) {
    responder.answer(Answer::from(response).with_fixed(NO_STORE));
}

/// The delay asked for: `None` for a bad value.
fn delay(request: &Request<'_>) -> Option<Duration> {
    match request.query_param("seconds") {
        None => Some(Duration::from_secs(1)),
        Some(v) => v
            .parse::<u64>()
            .ok()
            .filter(|s| *s <= 10)
            .map(Duration::from_secs),
    }
}

fn bad_delay() -> Response {
    Response::text(400, "seconds must be a whole number from 0 to 10\n")
}

impl App for Demo {
    fn blocks(&self, request: &Request<'_>) -> bool {
        request.path_info.as_str() == SYNC
    }

    fn handle(&self, request: &Request<'_>, responder: Responder) {
        match request.path_info.as_str() {
            SYNC => match delay(request) {
                Some(d) => {
                    std::thread::sleep(d);
                    send(responder, Response::text(200, SLEEP_BODY));
                }
                None => send(responder, bad_delay()),
            },
            ASYNC => match (delay(request), host()) {
                (Some(d), Some(host)) => {
                    host.call_later(d, move || send(responder, Response::text(200, SLEEP_BODY)))
                }
                (Some(_), None) => send(responder, Response::text(500, "no host timers\n")),
                (None, _) => send(responder, bad_delay()),
            },
            NOW => send(responder, Response::text(200, JUSTNOW_BODY)),
            _ => send(responder, Response::text(404, "Not Found\n")),
        }
    }
}

stoa_app_api::export_app! {
    name: "demo",
    mount: "/demo",
    new: |_| Demo,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(path: &'static str, query: &'static str) -> Request<'static> {
        Request::sample("GET", "/demo", path, query)
    }

    #[test]
    fn only_the_sync_handler_blocks() {
        assert!(Demo.blocks(&request(SYNC, "")));
        assert!(!Demo.blocks(&request(ASYNC, "")));
        assert!(!Demo.blocks(&request(NOW, "")));
    }

    #[test]
    fn delay_is_bounded() {
        assert_eq!(delay(&request(SYNC, "")), Some(Duration::from_secs(1)));
        assert_eq!(delay(&request(SYNC, "seconds=0")), Some(Duration::ZERO));
        assert_eq!(
            delay(&request(SYNC, "seconds=10")),
            Some(Duration::from_secs(10))
        );
        assert_eq!(delay(&request(SYNC, "seconds=11")), None);
        assert_eq!(delay(&request(SYNC, "seconds=-1")), None);
        assert_eq!(delay(&request(SYNC, "seconds=x")), None);
    }

    #[test]
    fn bodies_are_the_seed_bodies() {
        assert_eq!(SLEEP_BODY.len(), 15);
        assert_eq!(JUSTNOW_BODY, "i hope just now see you");
    }
}

//! Requests whose client may leave (`Responder::on_gone`), and WebSocket
//! handshakes answered with headers or denied:
//! - `/gone` registers a task that logs "client gone: request PATH" and
//!   holds its responder for a minute (a host timer), logging "holding
//!   PATH" when it takes the request, so the client
//!   leaves, or the host answers 504 past `--app-timeout`, first;
//! - `/gone-now` registers the same task and answers at once, and
//!   `/gone-later` answers 50 ms later from its own thread (the task is
//!   dropped unrun);
//! - `/gone-stream` registers it, then streams `tick` and holds the
//!   stream open for a minute;
//! - `POST /gone-body` registers it, then reads its body as it arrives
//!   (logging "gone-body got N bytes" for each piece) and answers at its
//!   end;
//! - `/ws-proto?P` accepts a WebSocket with `Sec-WebSocket-Protocol: P`
//!   and `X-Extra: yes` on its `101` (and an `Upgrade: h2c` the host must
//!   drop), then echoes;
//! - `/ws-deny` answers a WebSocket handshake 403 "denied".

use std::time::Duration;
use stoa_app_api::{BodyEnd, BodySink, Header, Request, Responder, Response};
use stoa_app_api::{WebSocket, WsMessage, WsSender};

/// How long the held answers are held.
const HOLD: Duration = Duration::from_secs(60);

/// Handles `path` if it is one of this module's; gives the responder back
/// otherwise.
pub fn handle(path: &str, request: &Request<'_>, mut responder: Responder) -> Option<Responder> {
    let mut full = request.full_path();
    if !request.query.is_empty() {
        full = format!("{full}?{}", request.query);
    }
    match path {
        "/gone" | "/gone-now" | "/gone-later" | "/gone-stream" | "/gone-body" => {
            let logged = full.clone();
            responder.on_gone(move || log::info!("client gone: request {logged}"));
        }
        _ => {}
    }
    match path {
        "/gone" => {
            // Logged from the handler: once the line is out, the request
            // is known to be with the app.
            log::info!("holding {full}");
            hold(move || responder.respond(Response::text(200, "held")));
        }
        "/gone-now" => responder.respond(Response::text(200, &format!("now {full}"))),
        "/gone-later" => {
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(50));
                responder.respond(Response::text(200, &format!("later {full}")));
            });
        }
        "/gone-stream" => {
            let mut stream = responder.stream(Response::text(200, ""));
            stream.send(b"tick\n");
            hold(move || {
                let _ = stream.finish();
            });
        }
        "/gone-body" => responder.read_body(Counter),
        "/ws-proto" => {
            let protocol = request.query.as_str().as_bytes();
            let headers = vec![
                header("Sec-WebSocket-Protocol", protocol),
                header("X-Extra", b"yes"),
                header("Upgrade", b"h2c"),
            ];
            responder.accept_websocket_with(headers, Echo(None));
        }
        "/ws-deny" => responder.respond(Response::text(403, "denied")),
        _ => return Some(responder),
    }
    None
}

/// Runs `f` after `HOLD` on a host timer (at once without a host).
fn hold(f: impl FnOnce() + Send + 'static) {
    match stoa_app_api::host() {
        Some(host) => host.call_later(HOLD, f),
        None => f(),
    }
}

fn header(name: &str, value: &[u8]) -> Header {
    Header {
        name: name.into(),
        value: value.into(),
    }
}

/// Logs each piece of the body, and answers its size at the end.
struct Counter;

impl BodySink for Counter {
    fn data(&mut self, chunk: &[u8]) {
        log::info!("gone-body got {} bytes", chunk.len());
    }

    fn end(self, end: BodyEnd, responder: Responder) {
        responder.respond(Response::text(200, &format!("{end:?}")));
    }
}

/// Echoes each message.
struct Echo(Option<WsSender>);

impl WebSocket for Echo {
    fn on_open(&mut self, sender: WsSender) {
        self.0 = Some(sender);
    }

    fn on_message(&mut self, message: WsMessage<'_>) {
        if let (Some(sender), WsMessage::Text(text)) = (&self.0, message) {
            sender.send_text(text);
        }
    }
}

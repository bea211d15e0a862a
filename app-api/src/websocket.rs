//! WebSocket, the plain-Rust side: [`Responder::accept_websocket`] accepts
//! a handshake with a [`WebSocket`] session object, which the host then
//! calls with the connection's messages; the session's [`WsSender`] sends
//! from the event loop or any thread.
//!
//! The host does the protocol (RFC 6455): the handshake's checks (a bad
//! one never reaches the app: 400, or 426 for a version other than 13),
//! pings answered with pongs, fragments joined, masking and UTF-8 of text
//! checked, the message size limit (`--ws-max-message`, 1009 past it), the
//! close handshake. Like a streamed response, each connection's queue is
//! bounded: [`WsSender::send_text`] answers [`Sent::WouldBlock`] while it
//! is full, and [`WsSender::on_drain`] runs a callback once it has room
//! (the same [`Sent`] answers as a streamed response's [`Stream`](crate::Stream)).

use crate::abi::{Header, RawWsSession, RawWsSession_TO, WsSenderBox, WS_BINARY, WS_TEXT};
use crate::app::Responder;
use crate::stream::Sent;
use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::std_types::{RSlice, RStr, RVec};
use std::sync::Arc;

/// One whole message, as received.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WsMessage<'a> {
    Text(&'a str),
    Binary(&'a [u8]),
}

/// An app's side of one open WebSocket. The host calls it on the
/// connection's event loop, in order: `on_open` once, `on_message` for
/// each message, `on_close` once. None of them may block (hand slow work to
/// [`Host::spawn_blocking`](crate::Host::spawn_blocking) with a clone of
/// the sender). A panic in one is caught: it is logged and the WebSocket is
/// closed with 1011.
pub trait WebSocket: Send + 'static {
    /// The WebSocket is open; keep `sender` (it clones) to send on it.
    fn on_open(&mut self, sender: WsSender) {
        let _ = sender;
    }

    /// A whole message arrived.
    fn on_message(&mut self, message: WsMessage<'_>);

    /// The WebSocket ended, with the peer's close code (or the host's:
    /// 1001 at shutdown, 1002/1007/1009 for a broken protocol, 1006 when
    /// the connection dropped without a close frame) and reason.
    fn on_close(&mut self, code: u16, reason: &str) {
        let _ = (code, reason);
    }
}

/// Sends on one WebSocket, from any thread; clones share the connection.
#[derive(Clone)]
pub struct WsSender {
    inner: Arc<WsSenderBox>,
}

impl std::fmt::Debug for WsSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WsSender")
    }
}

impl WsSender {
    /// Wraps the host's sender (the host, or a test double, makes it).
    pub fn from_raw(inner: WsSenderBox) -> Self {
        WsSender {
            inner: Arc::new(inner),
        }
    }

    /// Queues a text message without blocking (see [`Sent`]).
    pub fn send_text(&self, text: &str) -> Sent {
        Sent::from_wire(
            self.inner
                .send(WS_TEXT, RSlice::from_slice(text.as_bytes())),
        )
    }

    /// Queues a binary message without blocking (see [`Sent`]).
    pub fn send_binary(&self, data: &[u8]) -> Sent {
        Sent::from_wire(self.inner.send(WS_BINARY, RSlice::from_slice(data)))
    }

    /// Queues a message, waiting while the queue is full (for a producer on
    /// a pool thread; at most `--send-timeout`, then
    /// [`Sent::WouldBlock`]). On an event loop it does not wait.
    pub fn send_blocking(&self, message: WsMessage<'_>) -> Sent {
        let (kind, data) = match message {
            WsMessage::Text(t) => (WS_TEXT, t.as_bytes()),
            WsMessage::Binary(b) => (WS_BINARY, b),
        };
        Sent::from_wire(self.inner.send_blocking(kind, RSlice::from_slice(data)))
    }

    /// Runs `f` once on the connection's event loop when its queue has
    /// room (at once if it has room now), or when the WebSocket closed.
    pub fn on_drain(&self, f: impl FnOnce() + Send + 'static) {
        self.inner.on_drain(crate::host::task(f));
    }

    /// Starts the close handshake (`code` 1000 for a normal close); the
    /// session's `on_close` follows when the peer answers.
    pub fn close(&self, code: u16, reason: &str) -> Sent {
        Sent::from_wire(self.inner.close(code, RStr::from_str(reason)))
    }
}

/// The app's session behind the ABI: each call guarded against panics.
struct Session<W> {
    app: W,
    sender: Option<WsSender>,
}

impl<W: WebSocket> Session<W> {
    /// Runs `f`; a panic is logged by the plugin's hook and closes the
    /// WebSocket with 1011 (internal error).
    fn guarded(&mut self, f: impl FnOnce(&mut W)) {
        let app = &mut self.app;
        if !crate::export::guard(|| f(app)) {
            if let Some(sender) = &self.sender {
                sender.close(1011, "the app failed");
            }
        }
    }
}

impl<W: WebSocket> RawWsSession for Session<W> {
    fn on_open(&mut self, sender: WsSenderBox) {
        let sender = WsSender::from_raw(sender);
        self.sender = Some(sender.clone());
        self.guarded(|app| app.on_open(sender));
    }

    fn on_message(&mut self, kind: u8, data: RSlice<'_, u8>) {
        let data = data.as_slice();
        let message = match kind {
            WS_TEXT => match std::str::from_utf8(data) {
                Ok(text) => WsMessage::Text(text),
                // The host checks text; this is never seen.
                Err(_) => WsMessage::Binary(data),
            },
            _ => WsMessage::Binary(data),
        };
        self.guarded(|app| app.on_message(message));
    }

    fn on_close(&mut self, code: u16, reason: RStr<'_>) {
        self.sender = None;
        self.guarded(|app| app.on_close(code, reason.as_str()));
    }
}

impl Responder {
    /// Accepts the request's WebSocket handshake: the host answers `101`
    /// and calls `session` with the connection's messages. A request that
    /// did not ask for a WebSocket gets `426 Upgrade Required` instead (a
    /// malformed handshake never reaches the app).
    pub fn accept_websocket(self, session: impl WebSocket) {
        if let Some(raw) = self.into_raw() {
            let session = Session {
                app: session,
                sender: None,
            };
            raw.accept_websocket(RawWsSession_TO::from_value(session, TD_Opaque));
        }
    }

    /// Like [`accept_websocket`](Responder::accept_websocket), with
    /// `headers` added to the `101` answer: the subprotocol picked from
    /// the client's `Sec-WebSocket-Protocol` offer, a `Set-Cookie`. The
    /// host drops (with a warning naming the app) a header it writes
    /// itself (`Upgrade`, `Connection`, `Sec-WebSocket-Accept`,
    /// `Content-Length`, `Transfer-Encoding`), an invalid one, and a
    /// subprotocol the client did not offer (RFC 6455 4.1: its client
    /// would fail the connection). A host older than app-api 0.2.8 sends
    /// the `101` without them.
    pub fn accept_websocket_with(self, headers: Vec<Header>, session: impl WebSocket) {
        if let Some(raw) = self.into_raw() {
            let session = Session {
                app: session,
                sender: None,
            };
            let session = RawWsSession_TO::from_value(session, TD_Opaque);
            raw.accept_websocket_with(RVec::from(headers), session);
        }
    }
}

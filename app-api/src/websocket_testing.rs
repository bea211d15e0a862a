//! Unit-testing a WebSocket app without a host ([`testing::websocket`](crate::testing::websocket)):
//! the app accepts the handshake, the test plays the client by handing the
//! session messages, and reads back what the app sent.

use crate::abi::{
    RawResponder_TO, RawWsSender, RawWsSender_TO, Request, TaskBox, WsSenderBox, WsSessionBox,
    SEND_CLOSED, SEND_SENT, WS_TEXT,
};
use crate::app::{App, Responder};
use crate::testing::{install_host, Outcome, Recorder, WAIT};
use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::std_types::{RSlice, RStr};
use std::sync::mpsc::channel;
use std::sync::{Arc, Mutex};

/// What the app sent on a test WebSocket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Received {
    Text(String),
    Binary(Vec<u8>),
    /// The app closed with this code and reason.
    Close(u16, String),
}

#[derive(Default)]
struct Wire {
    sent: Vec<Received>,
    closed: bool,
}

/// The test's sender: records what the app sends.
struct TestSender(Arc<Mutex<Wire>>);

impl TestSender {
    fn wire(&self) -> std::sync::MutexGuard<'_, Wire> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl RawWsSender for TestSender {
    fn send(&self, kind: u8, data: RSlice<'_, u8>) -> u8 {
        let mut wire = self.wire();
        if wire.closed {
            return SEND_CLOSED;
        }
        let data = data.as_slice();
        wire.sent.push(match kind {
            WS_TEXT => Received::Text(String::from_utf8_lossy(data).into_owned()),
            _ => Received::Binary(data.to_vec()),
        });
        SEND_SENT
    }

    fn send_blocking(&self, kind: u8, data: RSlice<'_, u8>) -> u8 {
        self.send(kind, data)
    }

    fn on_drain(&self, task: TaskBox) {
        task.run();
    }

    fn close(&self, code: u16, reason: RStr<'_>) -> u8 {
        let mut wire = self.wire();
        if std::mem::replace(&mut wire.closed, true) {
            return SEND_CLOSED;
        }
        wire.sent
            .push(Received::Close(code, reason.as_str().to_string()));
        SEND_SENT
    }
}

/// An open test WebSocket: the client's side of an app's session.
pub struct WsTest {
    session: WsSessionBox,
    wire: Arc<Mutex<Wire>>,
}

impl WsTest {
    /// The client sends a text message.
    pub fn send_text(&mut self, text: &str) {
        self.session
            .on_message(WS_TEXT, RSlice::from_slice(text.as_bytes()));
    }

    /// The client sends a binary message.
    pub fn send_binary(&mut self, data: &[u8]) {
        self.session
            .on_message(crate::abi::WS_BINARY, RSlice::from_slice(data));
    }

    /// The client closes (the session's `on_close` runs).
    pub fn close(mut self, code: u16, reason: &str) {
        self.session.on_close(code, RStr::from_str(reason));
    }

    /// Takes what the app has sent so far.
    pub fn received(&self) -> Vec<Received> {
        std::mem::take(&mut self.wire.lock().unwrap_or_else(|p| p.into_inner()).sent)
    }

    /// A sender on this test WebSocket, as the app's `on_open` got.
    pub fn sender(&self) -> crate::WsSender {
        crate::WsSender::from_raw(raw_sender(&self.wire))
    }
}

fn raw_sender(wire: &Arc<Mutex<Wire>>) -> WsSenderBox {
    RawWsSender_TO::from_value(TestSender(wire.clone()), TD_Opaque)
}

/// Hands `request` to `app` as the host would; if the app accepts a
/// WebSocket (within [`WAIT`]), opens it and returns the client's side.
/// Otherwise, what became of the request.
pub fn websocket(app: &dyn App, request: &Request<'_>) -> Result<WsTest, Outcome> {
    install_host();
    let (tx, rx) = channel();
    let (ws_tx, ws_rx) = channel();
    let recorder = Recorder {
        tx: Some(tx),
        body: request.body.as_slice().to_vec(),
        ws: Some(ws_tx),
    };
    let responder = Responder::from_raw(RawResponder_TO::from_value(recorder, TD_Opaque));
    let handled = crate::export::guard(|| app.handle(request, responder));
    let until = std::time::Instant::now() + WAIT;
    loop {
        if let Ok(mut session) = ws_rx.try_recv() {
            let wire = Arc::new(Mutex::new(Wire::default()));
            session.on_open(raw_sender(&wire));
            return Ok(WsTest { session, wire });
        }
        if let Ok(outcome) = rx.try_recv() {
            return Err(outcome);
        }
        if !handled || std::time::Instant::now() >= until {
            return Err(Outcome::TimedOut);
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

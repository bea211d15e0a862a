//! One WebSocket between the host and an ASGI application: the handshake
//! (`websocket.connect`, then `websocket.accept` with a subprotocol and
//! headers, `websocket.close` before it for a 403, or the denial response
//! extension's own answer), then messages both ways and the close.
//!
//! The host calls the session on its loop; each message is queued here
//! for the application's `receive`. The queue is bounded
//! ([`MAX_QUEUED`] bytes): an application that reads none while a client
//! floods it has the WebSocket closed with 1013 (try again later) rather
//! than the host's memory grow.

use super::exchange::bytes_pair;
use super::log_failure;
use super::runner::Runner;
use super::scope::Head;
use super::wake::Waiters;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::pybacked::{PyBackedBytes, PyBackedStr};
use pyo3::types::{PyBytes, PyDict, PyIterator};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use stoa_app_api::{log, Header, Responder, Response, Sent, WebSocket, WsMessage, WsSender};

/// Bytes of received messages queued for the application at most.
pub const MAX_QUEUED: usize = 4 << 20;

const SENT: u8 = 0;
const WAIT: u8 = 1;
const CLOSED: u8 = 2;

enum Phase {
    /// Before the application's answer to the handshake.
    Connecting(Option<Responder>),
    /// The denial response's head, its body so far.
    Denying(Option<Responder>, Response),
    /// Accepted; the host has not opened it yet.
    Accepted,
    Open(WsSender),
    /// Closed (by either side), or answered without a WebSocket.
    Over,
}

enum Inbound {
    Text(String),
    Bytes(Vec<u8>),
}

struct State {
    phase: Phase,
    connect_given: bool,
    inbound: VecDeque<Inbound>,
    queued: usize,
    /// The close code and reason once the WebSocket ended.
    closed: Option<(u16, String)>,
    disconnect_given: bool,
    waiters: Waiters,
}

pub struct WsCore {
    pub head: Head,
    runner: Arc<Runner>,
    state: Mutex<State>,
}

impl WsCore {
    pub fn new(runner: Arc<Runner>, head: Head) -> Arc<WsCore> {
        Arc::new(WsCore {
            head,
            state: Mutex::new(State {
                phase: Phase::Connecting(None),
                connect_given: false,
                inbound: VecDeque::new(),
                queued: 0,
                closed: None,
                disconnect_given: false,
                waiters: Waiters::default(),
            }),
            runner,
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn wake(&self, futures: impl IntoIterator<Item = Option<Py<PyAny>>>) {
        for f in futures.into_iter().flatten() {
            self.runner.resolve(f);
        }
    }

    /// The responder that answers the handshake.
    pub fn give_responder(&self, responder: Responder) {
        self.lock().phase = Phase::Connecting(Some(responder));
    }

    /// The handshake's client went before an answer.
    pub fn client_gone(&self) {
        let mut state = self.lock();
        if state.closed.is_none() {
            state.closed = Some((1006, String::new()));
        }
        if matches!(state.phase, Phase::Connecting(_) | Phase::Denying(..)) {
            state.phase = Phase::Over;
        }
        let Some(task) = state.waiters.tell_gone() else {
            return;
        };
        let [r, s] = state.waiters.for_both();
        drop(state);
        self.wake([s]);
        self.runner.gone(task, r);
    }
}

/// The host's calls on the open WebSocket.
struct Session(Arc<WsCore>);

impl WebSocket for Session {
    fn on_open(&mut self, sender: WsSender) {
        let mut state = self.0.lock();
        match state.phase {
            Phase::Accepted => state.phase = Phase::Open(sender),
            // The application ended before the host opened it.
            _ => {
                sender.close(1000, "");
            }
        }
        let s = state.waiters.for_send();
        drop(state);
        self.0.wake([s]);
    }

    fn on_message(&mut self, message: WsMessage<'_>) {
        let mut state = self.0.lock();
        let (item, len) = match message {
            WsMessage::Text(t) => (Inbound::Text(t.to_string()), t.len()),
            WsMessage::Binary(b) => (Inbound::Bytes(b.to_vec()), b.len()),
        };
        if state.queued + len > MAX_QUEUED {
            if let Phase::Open(sender) = &state.phase {
                log::warn!(
                    "{}: the ASGI application left {} bytes of messages unread: closing the \
                     WebSocket with 1013",
                    self.0.head.describe(),
                    state.queued
                );
                sender.close(1013, "too many unread messages");
            }
            return;
        }
        state.queued += len;
        state.inbound.push_back(item);
        let r = state.waiters.for_receive();
        drop(state);
        self.0.wake([r]);
    }

    fn on_close(&mut self, code: u16, reason: &str) {
        let mut state = self.0.lock();
        state.closed = Some((code, reason.to_string()));
        state.phase = Phase::Over;
        let both = state.waiters.for_both();
        drop(state);
        self.0.wake(both);
    }
}

#[pyclass(module = "stoa_asgi_bridge", name = "WsExchange")]
pub struct WsExchange {
    core: Arc<WsCore>,
}

impl WsExchange {
    pub fn new(core: Arc<WsCore>) -> Self {
        WsExchange { core }
    }
}

#[pymethods]
impl WsExchange {
    /// Keeps the application's task, to cancel once the client is gone;
    /// true if it is gone already (the driver schedules the cancel).
    fn watch(&self, task: Py<PyAny>) -> bool {
        self.core.lock().waiters.watch(task)
    }

    fn describe(&self) -> String {
        self.core.head.describe()
    }

    fn scope<'py>(
        &self,
        py: Python<'py>,
        state: Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyDict>> {
        self.core.head.scope(py, "websocket", &state)
    }

    /// The next message for the application, or `None` to wait.
    fn receive<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let mut state = self.core.lock();
        let m = PyDict::new(py);
        if !state.connect_given {
            state.connect_given = true;
            m.set_item("type", "websocket.connect")?;
            return Ok(Some(m));
        }
        if let Some(item) = state.inbound.pop_front() {
            m.set_item("type", "websocket.receive")?;
            match item {
                Inbound::Text(t) => {
                    state.queued -= t.len();
                    m.set_item("text", t)?;
                }
                Inbound::Bytes(b) => {
                    state.queued -= b.len();
                    m.set_item("bytes", PyBytes::new(py, &b))?;
                }
            }
            return Ok(Some(m));
        }
        if let Some((code, reason)) = &state.closed {
            m.set_item("type", "websocket.disconnect")?;
            m.set_item("code", *code)?;
            m.set_item("reason", reason.as_str())?;
            state.disconnect_given = true;
            return Ok(Some(m));
        }
        Ok(None)
    }

    fn wait_receive(&self, future: Py<PyAny>) -> bool {
        self.core.lock().waiters.park_receive(future)
    }

    fn wait_send(&self, future: Py<PyAny>) -> bool {
        self.core.lock().waiters.park_send(future)
    }

    /// One message from the application: 0 done, 1 wait (then again), 2
    /// the WebSocket is closed.
    fn send(&self, message: &Bound<'_, PyDict>) -> PyResult<u8> {
        let kind: String = message
            .get_item("type")?
            .ok_or_else(|| PyRuntimeError::new_err("an ASGI message needs a `type`"))?
            .extract()?;
        match kind.as_str() {
            "websocket.accept" => self.accept(message),
            "websocket.send" => self.send_message(message),
            "websocket.close" => self.close(message),
            "websocket.http.response.start" => self.deny_start(message),
            "websocket.http.response.body" => self.deny_body(message),
            other => Err(PyRuntimeError::new_err(format!(
                "unexpected ASGI message {other:?} on a WebSocket"
            ))),
        }
    }

    fn returned(&self) {
        self.end("returned");
    }

    fn cancelled(&self) {
        self.end("was cancelled");
    }

    fn failed(&self, py: Python<'_>, trace: String, os_error: bool) {
        let closed = self.core.lock().closed.is_some();
        let quiet = (closed && os_error).then_some("the WebSocket is closed");
        log_failure(py, &self.core.head.describe(), &trace, quiet);
        self.end("raised an exception (see the log)");
    }
}

impl WsExchange {
    fn accept(&self, message: &Bound<'_, PyDict>) -> PyResult<u8> {
        let mut state = self.core.lock();
        let responder = match &mut state.phase {
            Phase::Connecting(r) => r.take(),
            Phase::Over => return Ok(CLOSED),
            _ => return Err(PyRuntimeError::new_err("websocket.accept sent twice")),
        };
        let mut headers = Vec::new();
        if let Some(protocol) = message.get_item("subprotocol")? {
            if !protocol.is_none() {
                let protocol: String = protocol.extract()?;
                headers.push(Header {
                    name: "Sec-WebSocket-Protocol".into(),
                    value: protocol.into_bytes().into(),
                });
            }
        }
        if let Some(extra) = message.get_item("headers")? {
            for item in PyIterator::from_object(&extra)? {
                let (name, value) = bytes_pair(&item?).ok_or_else(|| {
                    PyRuntimeError::new_err("websocket.accept: a header must be a pair of bytes")
                })?;
                headers.push(Header {
                    name: String::from_utf8_lossy(&name).into_owned().into(),
                    value: value.to_vec().into(),
                });
            }
        }
        state.phase = Phase::Accepted;
        drop(state);
        if let Some(responder) = responder {
            responder.accept_websocket_with(headers, Session(self.core.clone()));
        }
        Ok(SENT)
    }

    fn send_message(&self, message: &Bound<'_, PyDict>) -> PyResult<u8> {
        let text: Option<PyBackedStr> = match message.get_item("text")? {
            Some(t) if !t.is_none() => Some(t.extract()?),
            _ => None,
        };
        let bytes: Option<PyBackedBytes> = match message.get_item("bytes")? {
            Some(b) if !b.is_none() && text.is_none() => Some(b.extract()?),
            _ => None,
        };
        let mut state = self.core.lock();
        let sender = match &state.phase {
            Phase::Open(sender) => sender.clone(),
            Phase::Accepted => {
                state.waiters.send_blocked();
                return Ok(WAIT);
            }
            Phase::Over => return Ok(CLOSED),
            _ => {
                return Err(PyRuntimeError::new_err(
                    "websocket.send before websocket.accept",
                ))
            }
        };
        let sent = match (&text, &bytes) {
            (Some(t), _) => sender.send_text(t),
            (None, Some(b)) => sender.send_binary(b),
            (None, None) => {
                return Err(PyRuntimeError::new_err(
                    "websocket.send needs `text` or `bytes`",
                ))
            }
        };
        match sent {
            Sent::Ok => Ok(SENT),
            Sent::Closed => Ok(CLOSED),
            Sent::WouldBlock => {
                state.waiters.send_blocked();
                drop(state);
                let core = self.core.clone();
                sender.on_drain(move || {
                    let s = core.lock().waiters.for_send();
                    core.wake([s]);
                });
                Ok(WAIT)
            }
        }
    }

    fn close(&self, message: &Bound<'_, PyDict>) -> PyResult<u8> {
        let code: u16 = match message.get_item("code")? {
            Some(c) if !c.is_none() => c.extract()?,
            _ => 1000,
        };
        let reason: String = match message.get_item("reason")? {
            Some(r) if !r.is_none() => r.extract()?,
            _ => String::new(),
        };
        let mut state = self.core.lock();
        match std::mem::replace(&mut state.phase, Phase::Over) {
            Phase::Connecting(Some(responder)) | Phase::Denying(Some(responder), _) => {
                state.closed.get_or_insert((code, reason));
                drop(state);
                responder.respond(Response::text(403, "Forbidden"));
                Ok(SENT)
            }
            Phase::Open(sender) => {
                state.phase = Phase::Open(sender.clone());
                drop(state);
                sender.close(code, &reason);
                Ok(SENT)
            }
            Phase::Accepted => {
                state.phase = Phase::Accepted;
                state.waiters.send_blocked();
                Ok(WAIT)
            }
            _ => Ok(CLOSED),
        }
    }

    fn deny_start(&self, message: &Bound<'_, PyDict>) -> PyResult<u8> {
        let status: u16 = message
            .get_item("status")?
            .ok_or_else(|| PyRuntimeError::new_err("websocket.http.response.start needs `status`"))?
            .extract()?;
        let mut response = Response::new(status);
        if let Some(extra) = message.get_item("headers")? {
            for item in PyIterator::from_object(&extra)? {
                let (name, value) = bytes_pair(&item?).ok_or_else(|| {
                    PyRuntimeError::new_err(
                        "websocket.http.response.start: a header must be a pair of bytes",
                    )
                })?;
                response.headers.push(Header {
                    name: String::from_utf8_lossy(&name).into_owned().into(),
                    value: value.to_vec().into(),
                });
            }
        }
        let mut state = self.core.lock();
        match std::mem::replace(&mut state.phase, Phase::Over) {
            Phase::Connecting(r) => {
                state.phase = Phase::Denying(r, response);
                Ok(SENT)
            }
            Phase::Over => Ok(CLOSED),
            other => {
                state.phase = other;
                Err(PyRuntimeError::new_err(
                    "websocket.http.response.start after websocket.accept",
                ))
            }
        }
    }

    fn deny_body(&self, message: &Bound<'_, PyDict>) -> PyResult<u8> {
        let body: Option<PyBackedBytes> = match message.get_item("body")? {
            Some(b) => Some(b.extract()?),
            None => None,
        };
        let more: bool = match message.get_item("more_body")? {
            Some(m) => m.extract()?,
            None => false,
        };
        let mut state = self.core.lock();
        match std::mem::replace(&mut state.phase, Phase::Over) {
            Phase::Denying(mut r, mut response) => {
                if let Some(body) = body {
                    response.body.extend_from_slice(&body);
                }
                if more {
                    state.phase = Phase::Denying(r, response);
                    return Ok(SENT);
                }
                state.closed.get_or_insert((1000, String::new()));
                drop(state);
                if let Some(r) = r.take() {
                    r.respond(response);
                }
                Ok(SENT)
            }
            Phase::Over => Ok(CLOSED),
            other => {
                state.phase = other;
                Err(PyRuntimeError::new_err(
                    "websocket.http.response.body before websocket.http.response.start",
                ))
            }
        }
    }

    /// The application ended: a handshake never answered is a 500 (403 if
    /// it returned quietly, as uvicorn answers), an open WebSocket is
    /// closed (1000 after a return, 1011 after a failure).
    fn end(&self, why: &str) {
        let mut state = self.core.lock();
        // The task holds this exchange: let go of it.
        drop(state.waiters.release_task());
        let failed = why != "returned";
        match std::mem::replace(&mut state.phase, Phase::Over) {
            Phase::Connecting(Some(r)) | Phase::Denying(Some(r), _) => {
                drop(state);
                let status = if failed { 500 } else { 403 };
                r.respond(Response::text(
                    status,
                    if failed {
                        "Internal Server Error"
                    } else {
                        "Forbidden"
                    },
                ));
            }
            Phase::Open(sender) => {
                drop(state);
                sender.close(if failed { 1011 } else { 1000 }, "");
            }
            _ => {}
        }
    }
}

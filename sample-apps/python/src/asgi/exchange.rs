//! One HTTP request's exchange between the host and an ASGI application:
//! the body as it arrives (`receive`), the answer as the application
//! sends it (`send`), and the futures the loop awaits meanwhile.
//!
//! Shared by three sides: the host's loop thread (the request, the
//! client-gone notice, the stream's drain), a blocking-pool thread (the
//! body's pieces, which wait while [`WINDOW`] bytes are queued: the host
//! then reads no more of the body) and the ASGI loop (the application).
//! A `receive` or `send` that must wait hands a future to
//! [`HttpExchange::wait_receive`]/[`wait_send`](HttpExchange::wait_send);
//! whichever thread makes progress queues it for the loop to resolve.

use super::log_failure;
use super::runner::Runner;
use super::scope::Head;
use super::wake::Waiters;
use crate::sink::server_error;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::{PyDict, PyIterator};
use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;
use stoa_app_api::{log, BodyEnd, BodySink, Header, Responder, Response, Sent, Stream};

/// Body bytes queued for the application at most.
pub const WINDOW: usize = 256 << 10;
/// Longest wait of the body's pool thread for the application to read.
const STALL: Duration = Duration::from_secs(30);

/// What `body` did with a chunk (the driver's numbers).
const SENT: u8 = 0;
const WAIT: u8 = 1;
const CLOSED: u8 = 2;
/// A whole answer held for [`flush`]: the driver schedules one.
const HELD_CODE: u8 = 3;

thread_local! {
    /// Whole answers given during one turn of the ASGI loop, handed to the
    /// host together at its end ([`flush`]): one wake-up of the host's
    /// loop for a turn's answers instead of one each (on a shared core,
    /// each wake-up was a switch of threads).
    static HELD: std::cell::RefCell<Vec<(Responder, Response)>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// Hands the answers held this turn to the host.
#[pyfunction]
pub fn flush(py: Python<'_>) {
    let held = HELD.with(|held| std::mem::take(&mut *held.borrow_mut()));
    py.allow_threads(move || {
        for (responder, response) in held {
            responder.respond(response);
        }
    });
}

/// The answer's progress.
enum Answer {
    /// Nothing sent yet (`head` once `http.response.start` came).
    Waiting {
        head: Option<Response>,
        length: Option<u64>,
    },
    /// A whole answer waiting for the responder (the body is still read).
    Held(Response),
    Streaming(Stream),
    Complete,
}

struct State {
    /// The host's responder; with the body's sink while the body streams.
    responder: Option<Responder>,
    answer: Answer,
    /// The body given whole by the host, not yet received.
    whole: Option<Vec<u8>>,
    pieces: VecDeque<Vec<u8>>,
    queued: usize,
    /// The streamed body ended (or none streams).
    body_done: bool,
    /// The application answered or went: the rest of the body is dropped.
    discard: bool,
    gone: bool,
    /// The message with `more_body` false was received.
    body_given: bool,
    waiters: Waiters,
}

/// The exchange's shared part.
pub struct HttpCore {
    pub head: Head,
    runner: Arc<Runner>,
    state: Mutex<State>,
    moved: Condvar,
}

impl HttpCore {
    /// An exchange for `head`; `body` is the body the host read whole
    /// (its responder then comes through [`HttpCore::give_responder`]),
    /// or `None` when it streams (see [`HttpCore::sink`]).
    pub fn new(runner: Arc<Runner>, head: Head, body: Option<Vec<u8>>) -> Arc<HttpCore> {
        Arc::new(HttpCore {
            head,
            state: Mutex::new(State {
                responder: None,
                answer: Answer::Waiting {
                    head: None,
                    length: None,
                },
                body_done: body.is_some(),
                whole: body,
                pieces: VecDeque::new(),
                queued: 0,
                discard: false,
                gone: false,
                body_given: false,
                waiters: Waiters::default(),
            }),
            runner,
            moved: Condvar::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The responder, for a body the host read whole.
    pub fn give_responder(&self, responder: Responder) {
        self.lock().responder = Some(responder);
    }

    /// The client went, or the host answered for the application.
    pub fn client_gone(&self) {
        let mut state = self.lock();
        let Some(task) = state.waiters.tell_gone() else {
            return;
        };
        state.gone = true;
        state.discard = true;
        let [r, s] = state.waiters.for_both();
        drop(state);
        self.moved.notify_all();
        if let Some(s) = s {
            self.runner.resolve(s);
        }
        self.runner.gone(task, r);
    }

    /// The sink the host feeds a streamed body to.
    pub fn sink(self: &Arc<Self>) -> CoreSink {
        CoreSink(self.clone())
    }
}

/// The body's pieces into the exchange, on a pool thread.
pub struct CoreSink(Arc<HttpCore>);

impl BodySink for CoreSink {
    fn data(&mut self, chunk: &[u8]) {
        let core = &self.0;
        let mut state = core.lock();
        if state.discard {
            return;
        }
        state.queued += chunk.len();
        state.pieces.push_back(chunk.to_vec());
        if let Some(f) = state.waiters.for_receive() {
            core.runner.resolve(f);
        }
        while state.queued > WINDOW && !state.discard {
            let (next, timeout) = core
                .moved
                .wait_timeout(state, STALL)
                .unwrap_or_else(|p| p.into_inner());
            state = next;
            if timeout.timed_out() && state.queued > WINDOW {
                log::warn!(
                    "{}: the ASGI application read none of its body for {} s: the rest is \
                     dropped",
                    core.head.describe(),
                    STALL.as_secs()
                );
                state.discard = true;
            }
        }
    }

    fn end(self, end: BodyEnd, responder: Responder) {
        let core = &self.0;
        let mut state = core.lock();
        state.body_done = true;
        if end != BodyEnd::Complete && !state.discard {
            log::debug!(
                "{}: the request body ended early ({end:?})",
                core.head.describe()
            );
            state.gone = true;
        }
        let held = match std::mem::replace(&mut state.answer, Answer::Complete) {
            Answer::Held(response) => Some(response),
            // Past the limit before any answer: the host's 413, and the
            // application hears the client is gone.
            Answer::Waiting { .. } if end == BodyEnd::TooLarge => {
                log::warn!(
                    "{}: the request body is over max_stream_body: answered 413",
                    core.head.describe()
                );
                state.gone = true;
                Some(Response::text(
                    413,
                    "Payload Too Large: the request body is over max_stream_body\n",
                ))
            }
            other => {
                state.answer = other;
                None
            }
        };
        let [r, s] = state.waiters.for_both();
        match held {
            Some(response) => {
                drop(state);
                responder.respond(response);
            }
            None => {
                state.responder = Some(responder);
                drop(state);
            }
        }
        for f in [r, s].into_iter().flatten() {
            core.runner.resolve(f);
        }
    }
}

/// The exchange as the driver sees it.
#[pyclass(module = "stoa_asgi_bridge", name = "HttpExchange")]
pub struct HttpExchange {
    core: Arc<HttpCore>,
}

impl HttpExchange {
    pub fn new(core: Arc<HttpCore>) -> Self {
        HttpExchange { core }
    }
}

#[pymethods]
impl HttpExchange {
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
        self.core.head.scope(py, "http", &state)
    }

    /// The next `http.request` or `http.disconnect` message, or `None`
    /// when the application must wait.
    fn receive<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let mut state = self.core.lock();
        let message = |body: &[u8], more: bool| -> PyResult<Bound<'py, PyDict>> {
            let m = PyDict::new(py);
            m.set_item("type", "http.request")?;
            m.set_item("body", pyo3::types::PyBytes::new(py, body))?;
            m.set_item("more_body", more)?;
            Ok(m)
        };
        if let Some(body) = state.whole.take() {
            state.body_given = true;
            return message(&body, false).map(Some);
        }
        if let Some(piece) = state.pieces.pop_front() {
            let was_full = state.queued > WINDOW;
            state.queued -= piece.len();
            let more = !(state.body_done && state.pieces.is_empty());
            state.body_given = !more;
            if was_full && state.queued <= WINDOW {
                self.core.moved.notify_all();
            }
            return message(&piece, more).map(Some);
        }
        if state.body_done && !state.body_given && !state.gone {
            // A streamed body whose last piece came with more_body true.
            state.body_given = true;
            return message(b"", false).map(Some);
        }
        if state.gone || matches!(state.answer, Answer::Complete | Answer::Held(_)) {
            let m = PyDict::new(py);
            m.set_item("type", "http.disconnect")?;
            return Ok(Some(m));
        }
        Ok(None)
    }

    /// Keeps `future` to resolve when `receive` has news; false if it has
    /// news already (the driver then asks again at once).
    fn wait_receive(&self, future: Py<PyAny>) -> bool {
        self.core.lock().waiters.park_receive(future)
    }

    /// As `wait_receive`, for room to send.
    fn wait_send(&self, future: Py<PyAny>) -> bool {
        self.core.lock().waiters.park_send(future)
    }

    /// `http.response.start`.
    fn start(&self, status: &Bound<'_, PyAny>, headers: &Bound<'_, PyAny>) -> PyResult<()> {
        let status: u16 = status
            .extract()
            .ok()
            .filter(|s| (100..=999).contains(s))
            .ok_or_else(|| {
                PyRuntimeError::new_err(format!(
                    "http.response.start: status must be an int 100-999, got {status}"
                ))
            })?;
        let (headers, length) = response_headers(headers)?;
        let mut state = self.core.lock();
        match &mut state.answer {
            Answer::Waiting {
                head: h @ None,
                length: l,
            } => {
                let mut response = Response::new(status);
                response.headers = headers.into();
                *h = Some(response);
                *l = length;
                Ok(())
            }
            _ => Err(PyRuntimeError::new_err(
                "http.response.start sent twice (the response has started)",
            )),
        }
    }

    /// The length of a body about to be sent (a file's).
    fn sized(&self, length: u64) {
        if let Answer::Waiting { length: l, .. } = &mut self.core.lock().answer {
            *l = Some(length);
        }
    }

    /// `http.response.body`: 0 sent, 1 wait for room (then again), 2 the
    /// client is gone.
    fn body(&self, body: PyBackedBytes, more: bool) -> PyResult<u8> {
        let core = &self.core;
        let mut state = core.lock();
        match std::mem::replace(&mut state.answer, Answer::Complete) {
            done @ (Answer::Complete | Answer::Held(_)) => {
                state.answer = done;
                Err(PyRuntimeError::new_err(
                    "http.response.body after the response completed",
                ))
            }
            Answer::Waiting { head: None, .. } => Err(PyRuntimeError::new_err(
                "http.response.body before http.response.start",
            )),
            Answer::Waiting {
                head: Some(head), ..
            } if !more => {
                // Whole: the host writes the body's own length.
                let response = head.with_body(body.to_vec());
                let receiver = state.waiters.for_receive();
                let code = match state.responder.take() {
                    Some(responder) => {
                        drop(state);
                        HELD.with(|held| held.borrow_mut().push((responder, response)));
                        HELD_CODE
                    }
                    None => {
                        // The body still streams: answered at its end.
                        state.answer = Answer::Held(response);
                        state.discard = true;
                        drop(state);
                        SENT
                    }
                };
                core.moved.notify_all();
                if let Some(f) = receiver {
                    core.runner.resolve(f);
                }
                Ok(code)
            }
            Answer::Waiting {
                head: Some(head),
                length,
            } => {
                let Some(responder) = state.responder.take() else {
                    // The body still streams: the head goes at its end.
                    state.answer = Answer::Waiting {
                        head: Some(head),
                        length,
                    };
                    state.waiters.send_blocked();
                    return Ok(WAIT);
                };
                let response = head.with_body(body.to_vec());
                let stream = match length {
                    Some(l) => responder.stream_sized(response, l),
                    None => responder.stream(response),
                };
                state.answer = Answer::Streaming(stream);
                Ok(SENT)
            }
            Answer::Streaming(mut stream) => {
                let sent = if body.is_empty() {
                    Sent::Ok
                } else {
                    stream.send(&body)
                };
                match sent {
                    Sent::Ok if !more => {
                        let receiver = state.waiters.for_receive();
                        drop(state);
                        let _ = stream.finish();
                        if let Some(f) = receiver {
                            core.runner.resolve(f);
                        }
                        Ok(SENT)
                    }
                    Sent::Ok => {
                        state.answer = Answer::Streaming(stream);
                        Ok(SENT)
                    }
                    Sent::WouldBlock => {
                        state.waiters.send_blocked();
                        let waker = core.clone();
                        stream.on_drain(move || waker.send_room());
                        state.answer = Answer::Streaming(stream);
                        Ok(WAIT)
                    }
                    Sent::Closed => {
                        state.gone = true;
                        Ok(CLOSED)
                    }
                }
            }
        }
    }

    /// The application returned.
    fn returned(&self) {
        self.end("returned without completing its response", false);
    }

    /// The application's task was cancelled (its client went, or the host
    /// answered for it).
    fn cancelled(&self) {
        let gone = self.core.lock().gone;
        if !gone {
            log::warn!(
                "{}: the ASGI application's task was cancelled",
                self.core.head.describe()
            );
        }
        self.end("was cancelled", true);
    }

    /// The application raised (`trace`); `os_error` when it is the
    /// driver's own "client gone".
    fn failed(&self, py: Python<'_>, trace: String, os_error: bool) {
        let quiet = (self.core.lock().gone && os_error).then_some("its client is gone");
        log_failure(py, &self.core.head.describe(), &trace, quiet);
        self.end("raised an exception (see the log)", true);
    }
}

impl HttpExchange {
    /// Ends the exchange: a response never started is a 500, one never
    /// finished is cut short.
    fn end(&self, why: &str, quiet: bool) {
        let mut state = self.core.lock();
        state.discard = true;
        // The task holds this exchange: let go of it.
        let task = state.waiters.release_task();
        let gone = state.gone;
        let describe = self.core.head.describe();
        let error = || server_error(&format!("the application {why}"));
        match std::mem::replace(&mut state.answer, Answer::Complete) {
            Answer::Complete => {}
            held @ Answer::Held(_) => state.answer = held,
            Answer::Waiting { .. } => {
                if !quiet && !gone {
                    log::error!("{describe}: the ASGI application {why}");
                }
                match state.responder.take() {
                    Some(r) => {
                        drop(state);
                        r.respond(error());
                    }
                    // The body still streams: a 500 at its end.
                    None => state.answer = Answer::Held(error()),
                }
            }
            Answer::Streaming(stream) => {
                drop(state);
                if !quiet && !gone {
                    log::error!(
                        "{describe}: the ASGI application {why}: its response is cut short"
                    );
                }
                drop(stream);
            }
        }
        self.core.moved.notify_all();
        drop(task);
    }
}

impl HttpCore {
    /// The stream has room again (or closed).
    fn send_room(&self) {
        let waiter = self.lock().waiters.for_send();
        if let Some(f) = waiter {
            self.runner.resolve(f);
        }
    }
}

/// The response headers: pairs of bytes, checked; the declared length.
fn response_headers(headers: &Bound<'_, PyAny>) -> PyResult<(Vec<Header>, Option<u64>)> {
    let mut out = Vec::new();
    let mut length = None;
    for item in PyIterator::from_object(headers)? {
        let (name, value) = bytes_pair(&item?).ok_or_else(|| {
            PyRuntimeError::new_err("http.response.start: a header must be a pair of bytes")
        })?;
        let name = std::str::from_utf8(&name)
            .ok()
            .filter(|n| !n.is_empty() && n.bytes().all(is_token))
            .ok_or_else(|| {
                PyRuntimeError::new_err(format!(
                    "http.response.start: header name {:?} is not an HTTP token",
                    String::from_utf8_lossy(&name)
                ))
            })?;
        if value.iter().any(|&b| (b < 0x20 && b != b'\t') || b == 0x7f) {
            return Err(PyRuntimeError::new_err(format!(
                "http.response.start: header {name} holds a control character"
            )));
        }
        if name.eq_ignore_ascii_case("content-length") {
            length = std::str::from_utf8(&value)
                .ok()
                .and_then(|v| v.trim().parse().ok());
            continue;
        }
        out.push(Header {
            name: name.into(),
            value: value.to_vec().into(),
        });
    }
    Ok((out, length))
}

fn is_token(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// A `(name, value)` pair (tuple or list) of bytes.
pub fn bytes_pair(item: &Bound<'_, PyAny>) -> Option<(PyBackedBytes, PyBackedBytes)> {
    if item.len().ok()? != 2 {
        return None;
    }
    Some((
        item.get_item(0).ok()?.extract().ok()?,
        item.get_item(1).ok()?.extract().ok()?,
    ))
}

//! ASGI 3.0 applications (FastAPI, Starlette, Django's `asgi.py`): HTTP,
//! WebSocket and lifespan, on the process's one asyncio loop
//! ([`runner`]).
//!
//! A request reaches the application without a thread of its own: the
//! host calls [`Asgi::serve`] on its loop thread, which copies the request
//! and queues it for the ASGI loop; the application's `send` goes back
//! through the host's responder and streams (bounded by
//! `--stream-queue`: a full queue makes `send` wait for the host's drain
//! callback); its `receive` gets the body as the host reads it (a body
//! over [`WHOLE_BODY`] or chunked streams through a blocking-pool thread
//! with a bounded window). The host tells the exchange when the client
//! goes (or the app deadline passes: the host has answered 504): `receive`
//! then says `http.disconnect`, `send` raises an `OSError`, and a task
//! still running 1 s later is cancelled.

mod exchange;
mod lifespan;
mod runner;
mod scope;
mod wake;
mod ws;

use crate::environ::Link;
use crate::settings::{AppEntry, Lifespan};
use exchange::HttpCore;
use pyo3::prelude::*;
use runner::{Job, Runner};
use scope::Head;
use std::sync::Arc;
use stoa_app_api::{log, Request, Responder};
use ws::WsCore;

/// A body with a Content-Length at most this long is read whole by the
/// host and received in one message; a longer or chunked one streams.
pub const WHOLE_BODY: u64 = 64 * 1024;

/// A loaded ASGI application.
pub struct Asgi {
    runner: Arc<Runner>,
    index: usize,
    target: String,
    lifespan: Lifespan,
}

impl Asgi {
    /// Registers `app` (imported, checked ASGI 3) with the loop and runs
    /// its lifespan startup. Called with the interpreter's lock, which is
    /// released while startup runs on the loop.
    pub fn load(py: Python<'_>, app: Py<PyAny>, entry: &AppEntry) -> Result<Asgi, String> {
        let runner = runner::runner(py)?;
        let target = entry.target();
        let index: usize = runner
            .driver(py)
            .call_method1("add", (app, target.as_str()))
            .and_then(|i| i.extract())
            .map_err(|e| crate::python::traceback(py, &e))?;
        let lifespan = entry.lifespan;
        let r = runner.clone();
        let t = target.clone();
        py.allow_threads(move || lifespan::startup(&r, index, &t, lifespan))?;
        Ok(Asgi {
            runner,
            index,
            target,
            lifespan,
        })
    }

    /// Hands `request` (its application mounted at `root_path`, raw) to
    /// the loop.
    pub fn serve(&self, request: &Request<'_>, mut responder: Responder, root_path: String) {
        let head = Head::of(request, root_path, Link::of(request, &responder));
        if is_websocket(request) {
            let mut responder = responder;
            let core = WsCore::new(self.runner.clone(), head);
            // The handshake's client may go before the application answers.
            let watched = core.clone();
            responder.on_gone(move || watched.client_gone());
            core.give_responder(responder);
            self.runner.submit(Job::Ws(self.index, core));
            return;
        }
        let streams = reads_body(request) && request.body.is_empty();
        let body = (!streams).then(|| request.body.as_slice().to_vec());
        let core = HttpCore::new(self.runner.clone(), head, body);
        let watched = core.clone();
        responder.on_gone(move || watched.client_gone());
        if streams {
            responder.read_body_on_pool(core.sink());
        } else {
            core.give_responder(responder);
        }
        self.runner.submit(Job::Http(self.index, core));
    }

    /// Runs the lifespan shutdown (the host retires the application).
    pub fn retire(&self) {
        lifespan::shutdown(&self.runner, self.index, &self.target, self.lifespan);
    }
}

/// The request is a WebSocket handshake.
pub fn is_websocket(request: &Request<'_>) -> bool {
    request
        .header("upgrade")
        .is_some_and(|v| v.eq_ignore_ascii_case(b"websocket"))
}

/// The body streams to the application (chunked, or longer than
/// [`WHOLE_BODY`]).
pub fn reads_body(request: &Request<'_>) -> bool {
    if request.header("transfer-encoding").is_some() {
        return true;
    }
    request
        .header_str("content-length")
        .and_then(|v| v.trim().parse::<u64>().ok())
        .is_some_and(|n| n > WHOLE_BODY)
}

/// Checks that `app` is an ASGI 3 application (a coroutine function, or
/// an object whose `__call__` is one); the error names the setting.
pub fn check_interface(py: Python<'_>, app: &Bound<'_, PyAny>, target: &str) -> Result<(), String> {
    match is_coroutine_app(py, app) {
        Ok(true) => Ok(()),
        Ok(false) => Err(format!(
            "setting `interface` is \"asgi\" but {target} is not an ASGI 3 application (an async \
             callable taking scope, receive, send); a WSGI application needs interface = \"wsgi\""
        )),
        Err(e) => Err(e.to_string()),
    }
}

/// Whether `app` is called as a coroutine function.
pub fn is_coroutine_app(py: Python<'_>, app: &Bound<'_, PyAny>) -> PyResult<bool> {
    let inspect = py.import("inspect")?;
    let check = |f: &Bound<'_, PyAny>| -> PyResult<bool> {
        inspect.call_method1("iscoroutinefunction", (f,))?.extract()
    };
    if check(app)? {
        return Ok(true);
    }
    // An instance whose __call__ is `async def` (FastAPI, Starlette,
    // Django's ASGIHandler); not a class (ASGI 2's double callable).
    if app.is_instance_of::<pyo3::types::PyType>() {
        return Ok(false);
    }
    match app.getattr("__call__") {
        Ok(call) => check(&call),
        Err(_) => Ok(false),
    }
}

/// Logs an application's exception for the request `describe` names: at
/// debug when it only says what `quiet` says (the client is gone), else as
/// an error with its traceback.
fn log_failure(py: Python<'_>, describe: &str, trace: &str, quiet: Option<&str>) {
    py.allow_threads(|| match quiet {
        Some(why) => log::debug!("{describe}: the ASGI application stopped: {why}"),
        None => log::error!(
            "{describe}: the ASGI application raised:\n{}",
            trace.trim_end()
        ),
    });
}

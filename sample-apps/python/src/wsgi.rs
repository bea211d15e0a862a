//! The PEP 3333 driver: builds the environ, calls the application, sends
//! what its iterable yields, closes it, and turns an exception into a 500
//! with the traceback in the host's log.

use crate::body::Pipe;
use crate::environ;
use crate::environ::Link;
use crate::io::Errors;
use crate::python::traceback;
use crate::respond::{self, lock, lock_released, Shared, StartResponse};
use crate::sink::Sink;
use pyo3::exceptions::PyTypeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use std::sync::Arc;
use stoa_app_api::{log, Request};

/// A loaded WSGI application.
pub struct Wsgi {
    app: Py<PyAny>,
    base: Py<PyDict>,
    errors: Py<Errors>,
}

impl Wsgi {
    /// Serves `app`, imported and checked (a WSGI callable).
    pub fn new(py: Python<'_>, app: Py<PyAny>) -> Result<Wsgi, String> {
        let base = environ::base(py).map_err(|e| e.to_string())?;
        let errors = Py::new(py, Errors::new()).map_err(|e| e.to_string())?;
        Ok(Wsgi { app, base, errors })
    }

    /// Answers `request` (which came over `link`) through `sink`; its body
    /// comes through `pipe` when it streams.
    pub fn serve(
        &self,
        request: &Request<'_>,
        sink: Box<dyn Sink>,
        pipe: Option<Arc<Pipe>>,
        link: &Link,
    ) {
        let exchange = respond::shared(sink);
        crate::thread_state::keep();
        let outcome = Python::with_gil(|py| {
            let called = self.call(py, request, &exchange, (pipe, link));
            let errors = self.errors.bind(py);
            errors.borrow().flush(py);
            called.map_err(|e| traceback(py, &e))
        });
        let Some(sink) = lock_released(&exchange).take_sink() else {
            return;
        };
        match outcome {
            Ok(()) => sink.finish(),
            Err(trace) => {
                log::error!(
                    "{} {}{}: the WSGI application raised:\n{trace}",
                    request.method,
                    request.script_name,
                    request.path_info
                );
                sink.abort("the application raised an exception (see the log)");
            }
        }
    }

    fn call(
        &self,
        py: Python<'_>,
        request: &Request<'_>,
        exchange: &Shared,
        (pipe, link): (Option<Arc<Pipe>>, &Link),
    ) -> PyResult<()> {
        let errors = self.errors.bind(py).clone();
        let environ = environ::environ(py, &self.base, request, errors, pipe)?;
        environ::link(py, &environ, link)?;
        let start = Bound::new(
            py,
            StartResponse {
                exchange: exchange.clone(),
            },
        )?;
        let result = self.app.bind(py).call1((environ, start))?;
        // A list of one item (a framework's usual answer) is the whole body.
        let whole = result
            .downcast::<PyList>()
            .is_ok_and(|list| list.len() <= 1);
        lock(exchange)?.whole = whole;
        let sent = send_all(py, &result, exchange);
        // close() is called whatever happened (PEP 3333), its error after
        // the iteration's.
        let closed = match result.hasattr(intern!(py, "close"))? {
            true => result.call_method0(intern!(py, "close")).map(drop),
            false => Ok(()),
        };
        sent?;
        closed?;
        lock(exchange)?.send_head()
    }
}

/// Sends each chunk of the response iterable as it comes; stops early if
/// the client is gone.
fn send_all(py: Python<'_>, result: &Bound<'_, PyAny>, exchange: &Shared) -> PyResult<()> {
    for item in result.try_iter()? {
        let item = item?;
        let chunk = item.downcast::<PyBytes>().map_err(|_| {
            PyTypeError::new_err(format!(
                "the response iterable yielded {}, not bytes",
                respond::type_name(&item)
            ))
        })?;
        if !lock(exchange)?.send(py, chunk.as_bytes())? {
            break;
        }
    }
    Ok(())
}

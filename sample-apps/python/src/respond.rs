//! `start_response`, the `write()` callable it returns, and the checks
//! PEP 3333 asks of the status and headers. Both objects share one
//! [`Exchange`] with the driver: the head the application set, whether it
//! has gone out, and the sink the response goes to.

use crate::sink::{Head, Sink};
use pyo3::exceptions::{PyAssertionError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};

/// The state of one response.
pub struct Exchange {
    /// The head from the last `start_response`.
    head: Option<Head>,
    /// True once the head has gone to the sink (the first non-empty chunk).
    sent: bool,
    /// The application returned a list of at most one item.
    pub whole: bool,
    /// `None` once the driver has taken it back (the call is over).
    sink: Option<Box<dyn Sink>>,
}

/// The exchange, shared by the driver, `start_response` and `write`.
pub type Shared = Arc<Mutex<Exchange>>;

pub fn shared(sink: Box<dyn Sink>) -> Shared {
    Arc::new(Mutex::new(Exchange {
        head: None,
        sent: false,
        whole: false,
        sink: Some(sink),
    }))
}

/// The exchange, from Python code (the GIL held). Never waits: a sink
/// write releases the GIL while holding the exchange, so a second Python
/// thread waiting here with the GIL would deadlock with it. PEP 3333 gives
/// `start_response` and `write()` to the thread that called the
/// application; another thread using them at the same moment gets an error.
pub fn lock(shared: &Shared) -> PyResult<MutexGuard<'_, Exchange>> {
    match shared.try_lock() {
        Ok(exchange) => Ok(exchange),
        Err(TryLockError::Poisoned(p)) => Ok(p.into_inner()),
        Err(TryLockError::WouldBlock) => Err(PyRuntimeError::new_err(
            "start_response or write() called from two threads at once",
        )),
    }
}

/// The exchange, from Rust with the GIL released: waits its turn.
pub fn lock_released(shared: &Shared) -> MutexGuard<'_, Exchange> {
    shared.lock().unwrap_or_else(|p| p.into_inner())
}

impl Exchange {
    /// Sends `chunk` (the head first if it has not gone yet). Empty
    /// chunks are skipped: PEP 3333 has the head wait for real body bytes.
    /// A sink that calls the host releases the interpreter meanwhile.
    pub fn send(&mut self, py: Python<'_>, chunk: &[u8]) -> PyResult<bool> {
        if chunk.is_empty() {
            return Ok(true);
        }
        self.send_head()?;
        let sink = self.sink_mut()?;
        Ok(if sink.calls_host() {
            py.allow_threads(|| sink.write(chunk))
        } else {
            sink.write(chunk)
        })
    }

    /// Sends the head if it has not gone yet; an error if the application
    /// never called `start_response`.
    pub fn send_head(&mut self) -> PyResult<()> {
        if self.sent {
            return Ok(());
        }
        let head = self.head.clone().ok_or_else(|| {
            PyAssertionError::new_err(
                "the application returned or sent body bytes without calling start_response",
            )
        })?;
        let whole = self.whole;
        self.sink_mut()?.start(head, whole);
        self.sent = true;
        Ok(())
    }

    fn sink_mut(&mut self) -> PyResult<&mut Box<dyn Sink>> {
        self.sink
            .as_mut()
            .ok_or_else(|| PyRuntimeError::new_err("this response is already complete"))
    }

    /// Takes the sink back at the end of the call.
    pub fn take_sink(&mut self) -> Option<Box<dyn Sink>> {
        self.sink.take()
    }
}

/// The `start_response` callable of one request.
#[pyclass(module = "stoa_python")]
pub struct StartResponse {
    pub exchange: Shared,
}

#[pymethods]
impl StartResponse {
    #[pyo3(signature = (status, headers, exc_info = None))]
    fn __call__(
        &self,
        py: Python<'_>,
        status: &Bound<'_, PyAny>,
        headers: &Bound<'_, PyAny>,
        exc_info: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Write> {
        let exc_info = exc_info.filter(|e| !e.is_none());
        let mut exchange = lock(&self.exchange)?;
        match exc_info {
            // Too late to change the head: re-raise the application's error.
            Some(info) if exchange.sent => return Err(reraise(py, info)),
            Some(_) => {}
            None if exchange.head.is_some() => {
                return Err(PyAssertionError::new_err(
                    "start_response called a second time without exc_info",
                ))
            }
            None => {}
        }
        exchange.head = Some(Head {
            status: check_status(status)?,
            headers: check_headers(headers)?,
        });
        Ok(Write {
            exchange: self.exchange.clone(),
        })
    }
}

/// The exception of `exc_info` (`(type, value, traceback)`), to raise again.
fn reraise(py: Python<'_>, info: &Bound<'_, PyAny>) -> PyErr {
    match info.get_item(1) {
        Ok(value) => PyErr::from_value(value),
        Err(e) => {
            let _ = py;
            e
        }
    }
}

/// The `write()` callable `start_response` returns (PEP 3333's imperative
/// body, for older frameworks).
#[pyclass(module = "stoa_python")]
pub struct Write {
    exchange: Shared,
}

#[pymethods]
impl Write {
    fn __call__(&self, py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<()> {
        let bytes = data.downcast::<PyBytes>().map_err(|_| {
            PyTypeError::new_err(format!("write() takes bytes, got {}", type_name(data)))
        })?;
        lock(&self.exchange)?.send(py, bytes.as_bytes())?;
        Ok(())
    }
}

pub fn type_name(value: &Bound<'_, PyAny>) -> String {
    value
        .get_type()
        .name()
        .map_or_else(|_| "?".to_string(), |n| n.to_string())
}

/// `"200 OK"`: three digits (100 to 999), a space, a reason without
/// control characters. Returns the code.
pub fn check_status(status: &Bound<'_, PyAny>) -> PyResult<u16> {
    let text = status
        .downcast::<PyString>()
        .map_err(|_| {
            PyTypeError::new_err(format!("status must be a str, got {}", type_name(status)))
        })?
        .to_cow()?;
    parse_status(&text).map_err(PyValueError::new_err)
}

fn parse_status(text: &str) -> Result<u16, String> {
    let bad = || format!("status {text:?} is not a three-digit code, a space and a reason phrase");
    let (code, reason) = text.split_at_checked(3).ok_or_else(bad)?;
    let code: u16 = code
        .parse()
        .ok()
        .filter(|c| (100..=999).contains(c) && code.bytes().all(|b| b.is_ascii_digit()))
        .ok_or_else(bad)?;
    let reason = reason.strip_prefix(' ').ok_or_else(bad)?;
    if reason.trim().is_empty() || reason.chars().any(|c| c.is_control()) {
        return Err(bad());
    }
    Ok(code)
}

/// A list of `(name, value)` tuples of `str`: names HTTP tokens, values
/// latin-1 without control characters, no hop-by-hop header.
pub fn check_headers(headers: &Bound<'_, PyAny>) -> PyResult<Vec<(String, String)>> {
    let list = headers.downcast::<PyList>().map_err(|_| {
        PyTypeError::new_err(format!(
            "headers must be a list, got {}",
            type_name(headers)
        ))
    })?;
    let mut out = Vec::with_capacity(list.len());
    for item in list.iter() {
        let pair = item
            .downcast::<PyTuple>()
            .ok()
            .filter(|t| t.len() == 2)
            .ok_or_else(|| {
                PyTypeError::new_err(format!(
                    "a header must be a (name, value) tuple, got {item}"
                ))
            })?;
        let text = |i: usize| -> PyResult<String> {
            let v = pair.get_item(i)?;
            let s = v.downcast::<PyString>().map_err(|_| {
                PyTypeError::new_err(format!("header {pair}: name and value must be str"))
            })?;
            Ok(s.to_cow()?.into_owned())
        };
        let (name, value) = (text(0)?, text(1)?);
        check_header(&name, &value).map_err(PyValueError::new_err)?;
        out.push((name, value));
    }
    Ok(out)
}

/// Hop-by-hop headers: the server's business, never the application's.
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailers",
    "transfer-encoding",
    "upgrade",
];

fn check_header(name: &str, value: &str) -> Result<(), String> {
    let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    if name.is_empty() || !name.chars().all(token) {
        return Err(format!("header name {name:?} is not an HTTP token"));
    }
    if HOP_BY_HOP.iter().any(|h| name.eq_ignore_ascii_case(h)) {
        return Err(format!(
            "header {name:?} is hop-by-hop: a WSGI application must not set it"
        ));
    }
    if value
        .chars()
        .any(|c| (c.is_control() && c != '\t') || u32::from(c) > 0xff)
    {
        return Err(format!(
            "header {name}: value {value:?} holds a control character or one past latin-1"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses() {
        assert_eq!(parse_status("200 OK"), Ok(200));
        assert_eq!(parse_status("404 Not Found"), Ok(404));
        for bad in [
            "200", "200OK", "20 OK", "2000 OK", "099 Low", "200 ", "abc OK", "200 O\nK", "+20 OK",
        ] {
            assert!(parse_status(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn headers() {
        assert!(check_header("Content-Type", "text/plain; charset=utf-8").is_ok());
        assert!(check_header("X-Latin", "caf\u{e9}\tok").is_ok());
        assert!(check_header("Bad Name", "v").is_err());
        assert!(check_header("", "v").is_err());
        assert!(check_header("X-Split", "a\r\nSet-Cookie: x").is_err());
        assert!(check_header("X-Wide", "\u{20ac}").is_err());
        let e = check_header("Transfer-Encoding", "chunked").unwrap_err();
        assert!(e.contains("hop-by-hop"), "{e}");
    }
}

//! `wsgi.input`, a file-like object over the request body (the host has
//! read and de-chunked it already), and `wsgi.errors`, a text stream whose
//! lines go to the host's log.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};
use std::sync::Mutex;

/// `wsgi.input`: `read`, `readline`, `readlines` and iteration.
#[pyclass(module = "stoa_wsgi")]
pub struct Input {
    body: Vec<u8>,
    at: usize,
}

impl Input {
    pub fn new(body: &[u8]) -> Self {
        Input {
            body: body.to_vec(),
            at: 0,
        }
    }

    /// The rest of the body, at most `size` bytes (all for `None` or a
    /// negative size).
    fn take(&mut self, size: Option<isize>) -> &[u8] {
        self.advance(self.body.len() - self.at, size)
    }

    /// The next line (with its `\n`), at most `size` bytes.
    fn line(&mut self, size: Option<isize>) -> &[u8] {
        let rest = &self.body[self.at..];
        let end = rest
            .iter()
            .position(|&b| b == b'\n')
            .map_or(rest.len(), |i| i + 1);
        self.advance(end, size)
    }

    /// The next `n` bytes, at most `size` (when it is not negative).
    fn advance(&mut self, n: usize, size: Option<isize>) -> &[u8] {
        let n = match size {
            Some(s) if s >= 0 => n.min(s.unsigned_abs()),
            _ => n,
        };
        let start = self.at;
        self.at += n;
        &self.body[start..self.at]
    }
}

#[pymethods]
impl Input {
    #[pyo3(signature = (size = None))]
    fn read<'py>(&mut self, py: Python<'py>, size: Option<isize>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, self.take(size))
    }

    #[pyo3(signature = (size = None))]
    fn readline<'py>(&mut self, py: Python<'py>, size: Option<isize>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, self.line(size))
    }

    /// Lines until the body ends, or until they total `hint` bytes.
    #[pyo3(signature = (hint = None))]
    fn readlines<'py>(
        &mut self,
        py: Python<'py>,
        hint: Option<isize>,
    ) -> PyResult<Bound<'py, PyList>> {
        let lines = PyList::empty(py);
        let limit = hint.filter(|h| *h > 0).map(isize::unsigned_abs);
        let mut total = 0;
        while self.at < self.body.len() && !limit.is_some_and(|l| total >= l) {
            let line = self.line(None);
            total += line.len();
            lines.append(PyBytes::new(py, line))?;
        }
        Ok(lines)
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&mut self, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        (self.at < self.body.len()).then(|| PyBytes::new(py, self.line(None)))
    }
}

/// `wsgi.errors`: text written here reaches the host's log, a line at a
/// time, as warnings of the app.
#[pyclass(module = "stoa_wsgi")]
pub struct Errors {
    pending: Mutex<String>,
}

impl Errors {
    pub fn new() -> Self {
        Errors {
            pending: Mutex::new(String::new()),
        }
    }

    /// Takes the complete lines written so far (all of it with `all`).
    fn lines(&self, all: bool) -> Vec<String> {
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        let cut = if all {
            pending.len()
        } else {
            pending.rfind('\n').map_or(0, |i| i + 1)
        };
        let done: String = pending.drain(..cut).collect();
        done.lines()
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect()
    }

    /// Logs the lines, with the interpreter released (a host call).
    fn emit(py: Python<'_>, lines: Vec<String>) {
        if lines.is_empty() {
            return;
        }
        py.allow_threads(|| {
            for line in lines {
                stoa_app_api::log::warn!("wsgi.errors: {line}");
            }
        });
    }
}

#[pymethods]
impl Errors {
    fn write(&self, py: Python<'_>, text: &str) -> usize {
        self.pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push_str(text);
        Errors::emit(py, self.lines(false));
        text.chars().count()
    }

    fn writelines(&self, py: Python<'_>, lines: Vec<String>) {
        for line in lines {
            self.write(py, &line);
        }
    }

    pub fn flush(&self, py: Python<'_>) {
        Errors::emit(py, self.lines(true));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_by_size_and_by_line() {
        let mut input = Input::new(b"one\ntwo\nthree");
        assert_eq!(input.take(Some(2)), b"on");
        assert_eq!(input.line(None), b"e\n");
        assert_eq!(input.line(Some(2)), b"tw");
        assert_eq!(input.line(Some(-1)), b"o\n");
        assert_eq!(input.take(None), b"three");
        assert_eq!(input.take(None), b"");
        assert_eq!(input.line(None), b"");
    }

    #[test]
    fn errors_keep_a_partial_line_until_flushed() {
        let errors = Errors::new();
        errors.pending.lock().unwrap().push_str("a\nb\npart");
        assert_eq!(errors.lines(false), ["a", "b"]);
        assert_eq!(errors.lines(true), ["part"]);
        assert!(errors.lines(true).is_empty());
    }
}

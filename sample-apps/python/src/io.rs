//! `wsgi.input`, a file-like object over the request body (read whole and
//! de-chunked by the host, or streamed to it piece by piece: `body.rs`), and `wsgi.errors`, a text stream whose
//! lines go to the host's log.

use crate::body::{Pipe, Stalled, STALL};
use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};
use std::sync::{Arc, Mutex};

/// `wsgi.input`: `read`, `readline`, `readlines` and iteration. Over the
/// body the host read whole, or over a body streamed to it (`pipe`): then
/// `body` holds what has come and not been read, at most a piece more than
/// asked for, and a read waits for pieces with the interpreter released.
#[pyclass(module = "stoa_python")]
pub struct Input {
    body: Vec<u8>,
    at: usize,
    pipe: Option<Arc<Pipe>>,
}

impl Input {
    pub fn new(body: &[u8]) -> Self {
        Input {
            body: body.to_vec(),
            at: 0,
            pipe: None,
        }
    }

    /// `wsgi.input` over a body streamed through `pipe`.
    pub fn streamed(pipe: Arc<Pipe>) -> Self {
        Input {
            body: Vec::new(),
            at: 0,
            pipe: Some(pipe),
        }
    }

    /// Takes the next piece of a streamed body (dropping what was read);
    /// false once the body has ended. A body stalled past `body::STALL`
    /// raises `OSError`.
    fn pull(&mut self, py: Python<'_>) -> PyResult<bool> {
        let Some(pipe) = self.pipe.clone() else {
            return Ok(false);
        };
        match py.allow_threads(move || pipe.next()) {
            Ok(Some(piece)) => {
                self.body.drain(..self.at);
                self.at = 0;
                self.body.extend_from_slice(&piece);
                Ok(true)
            }
            Ok(None) => {
                self.pipe = None;
                Ok(false)
            }
            Err(Stalled) => Err(PyOSError::new_err(format!(
                "the request body stalled: no piece for {}s",
                STALL.as_secs()
            ))),
        }
    }

    /// Pulls until `n` unread bytes are here (all, for `None`) or the body
    /// has ended.
    fn fill(&mut self, py: Python<'_>, n: Option<usize>) -> PyResult<()> {
        while n.map_or(true, |n| self.body.len() - self.at < n) && self.pull(py)? {}
        Ok(())
    }

    /// Pulls until a whole line (or `size` bytes) is here, or the end.
    fn fill_line(&mut self, py: Python<'_>, size: Option<isize>) -> PyResult<()> {
        let cap = size.filter(|s| *s >= 0).map(isize::unsigned_abs);
        while !self.body[self.at..].contains(&b'\n')
            && cap.map_or(true, |c| self.body.len() - self.at < c)
            && self.pull(py)?
        {}
        Ok(())
    }

    /// True if an unread byte is here, pulling for one if need be.
    fn more(&mut self, py: Python<'_>) -> PyResult<bool> {
        self.fill(py, Some(1))?;
        Ok(self.at < self.body.len())
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
    fn read<'py>(&mut self, py: Python<'py>, size: Option<isize>) -> PyResult<Bound<'py, PyBytes>> {
        let want = size.filter(|s| *s >= 0).map(isize::unsigned_abs);
        self.fill(py, want)?;
        Ok(PyBytes::new(py, self.take(size)))
    }

    #[pyo3(signature = (size = None))]
    fn readline<'py>(
        &mut self,
        py: Python<'py>,
        size: Option<isize>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        self.fill_line(py, size)?;
        Ok(PyBytes::new(py, self.line(size)))
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
        while !limit.is_some_and(|l| total >= l) && self.more(py)? {
            self.fill_line(py, None)?;
            let line = self.line(None);
            total += line.len();
            lines.append(PyBytes::new(py, line))?;
        }
        Ok(lines)
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyBytes>>> {
        if !self.more(py)? {
            return Ok(None);
        }
        self.fill_line(py, None)?;
        Ok(Some(PyBytes::new(py, self.line(None))))
    }
}

/// The longest line `wsgi.errors` passes to the log; the rest of a longer
/// one is dropped (the logged part says so).
pub const LINE_CAP: usize = 8 * 1024;

/// `wsgi.errors`: text written here reaches the host's log, a line at a
/// time, as warnings of the app. Each write is looked at once (the partial
/// line kept is never rescanned), and a line is cut at [`LINE_CAP`] bytes.
#[pyclass(module = "stoa_python")]
pub struct Errors {
    pending: Mutex<Lines>,
}

/// The partial line written so far, and whether the rest of a cut line is
/// being dropped.
#[derive(Default)]
struct Lines {
    partial: String,
    dropping: bool,
}

impl Lines {
    /// Adds `text`; returns the lines it completed (or cut).
    fn push(&mut self, text: &str) -> Vec<String> {
        let mut done = Vec::new();
        for (i, piece) in text.split('\n').enumerate() {
            if i > 0 {
                // A newline ended the line before this piece.
                if !std::mem::take(&mut self.dropping) {
                    done.push(std::mem::take(&mut self.partial));
                }
            }
            if self.dropping || piece.is_empty() {
                continue;
            }
            let room = LINE_CAP - self.partial.len();
            if piece.len() <= room {
                self.partial.push_str(piece);
                continue;
            }
            let mut cut = room;
            while !piece.is_char_boundary(cut) {
                cut -= 1;
            }
            self.partial.push_str(&piece[..cut]);
            let line = std::mem::take(&mut self.partial);
            done.push(format!("{line} [line cut at {LINE_CAP} bytes]"));
            self.dropping = true;
        }
        done.retain(|l| !l.trim_end_matches('\r').is_empty());
        for line in &mut done {
            if line.ends_with('\r') {
                line.pop();
            }
        }
        done
    }

    /// Takes the partial line (a flush); the next write starts a new one.
    fn take(&mut self) -> Vec<String> {
        self.dropping = false;
        let line = std::mem::take(&mut self.partial);
        match line.trim_end_matches('\r') {
            "" => Vec::new(),
            text => vec![text.to_string()],
        }
    }
}

impl Errors {
    pub fn new() -> Self {
        Errors {
            pending: Mutex::new(Lines::default()),
        }
    }

    fn lines(&self) -> std::sync::MutexGuard<'_, Lines> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
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
        let done = self.lines().push(text);
        Errors::emit(py, done);
        text.chars().count()
    }

    fn writelines(&self, py: Python<'_>, lines: Vec<String>) {
        for line in lines {
            self.write(py, &line);
        }
    }

    pub fn flush(&self, py: Python<'_>) {
        let done = self.lines().take();
        Errors::emit(py, done);
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
        let mut lines = Lines::default();
        assert_eq!(lines.push("a\nb\r\n\npart"), ["a", "b"]);
        assert_eq!(lines.push("ial"), Vec::<String>::new());
        assert_eq!(lines.take(), ["partial"]);
        assert!(lines.take().is_empty());
    }

    #[test]
    fn a_long_line_is_cut_and_its_rest_dropped() {
        let mut lines = Lines::default();
        let mut logged = Vec::new();
        // Written a little at a time, as a stream of print()s would.
        for _ in 0..(3 * LINE_CAP / 100) {
            logged.extend(lines.push(&"\u{e9}".repeat(50)));
        }
        logged.extend(lines.push("still the long line\nnext\n"));
        assert_eq!(
            logged.len(),
            2,
            "{:?}",
            logged.iter().map(String::len).collect::<Vec<_>>()
        );
        let suffix = format!(" [line cut at {LINE_CAP} bytes]");
        let cut = logged[0].strip_suffix(&suffix).unwrap_or_default();
        assert_eq!(cut.len(), LINE_CAP, "two-byte characters fill it exactly");
        assert_eq!(logged[1], "next");
    }
}

//! One Python thread state per host thread that runs WSGI requests, kept
//! from its first request to the thread's end.
//!
//! `Python::with_gil` on a thread Python did not start makes a thread
//! state when the thread has none and deletes it when the GIL is let go:
//! on a pool thread that is a new thread state for every request (an
//! `mmap` and `munmap` of its frame stack, a `gettid`, the interpreter's
//! bookkeeping), and the request starts with an empty `contextvars`
//! context and empty `threading.local` data where every other WSGI server
//! keeps them per thread. [`keep`] makes the thread's state once and keeps
//! it (its count held at one), so `with_gil` only takes and lets go of the
//! GIL; the thread's end deletes it.

#![allow(unsafe_code)] // the CPython thread-state calls pyo3 does not wrap

use pyo3::ffi;
use std::cell::Cell;

/// This thread's kept state: the `PyGILState_Ensure` answer to hand back
/// at the end, and the state as `PyEval_SaveThread` left it.
struct Kept {
    ensured: ffi::PyGILState_STATE,
    saved: *mut ffi::PyThreadState,
}

impl Drop for Kept {
    fn drop(&mut self) {
        // SAFETY: reads a flag; callable at any time, with or without the GIL.
        if unsafe { ffi::Py_IsInitialized() } == 0 {
            return;
        }
        // SAFETY: `saved` is this thread's own state, made by `keep` and let
        // go by `PyEval_SaveThread` on this thread; nothing on this thread
        // holds the GIL at its end (every `with_gil` has returned), so
        // taking it back with that state is the documented pairing, and the
        // release that follows drops the count `keep` held to zero, which
        // deletes the state and lets the GIL go.
        unsafe {
            ffi::PyEval_RestoreThread(self.saved);
            ffi::PyGILState_Release(self.ensured);
        }
    }
}

thread_local! {
    static KEPT: Cell<Option<Kept>> = const { Cell::new(None) };
}

/// Makes this thread's Python thread state if it has none kept, and keeps
/// it. Call outside `with_gil` (the GIL not held by this thread).
pub fn keep() {
    KEPT.with(|kept| {
        let current = kept.take();
        if current.is_some() {
            return kept.set(current);
        }
        // SAFETY: the interpreter runs (`python::start` came first: the
        // app exists) and this thread does not hold the GIL (the caller's
        // contract), so `PyGILState_Ensure` makes this thread's state (it
        // has none kept) and takes the GIL; `PyEval_SaveThread` lets the
        // GIL go at once and hands back that state, which stays alive
        // because the ensure count stays at one until `Kept` drops.
        let (ensured, saved) = unsafe {
            let ensured = ffi::PyGILState_Ensure();
            (ensured, ffi::PyEval_SaveThread())
        };
        kept.set(Some(Kept { ensured, saved }));
    });
}

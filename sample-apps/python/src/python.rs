//! The interpreter: started once per process, shared by every generation
//! of this plugin, and the import of the application.
//!
//! One interpreter per process: a hot replace of the plugin's file loads a
//! new library whose constructor finds the interpreter already running and
//! uses it as it is (`Py_IsInitialized`); it never initialises or
//! finalises it again. Python modules already imported stay in
//! `sys.modules`, so a change to the Python code needs a re-exec of the
//! host (`stoa upgrade` / SIGUSR2), not a plugin replace.

use pyo3::prelude::*;
use pyo3::types::{PyList, PyModule};
use std::ffi::CStr;

/// Starts the interpreter if no generation has, with libpython's symbols
/// made global first.
pub fn start() -> Result<(), String> {
    share_libpython_symbols()?;
    // Initialises only when `Py_IsInitialized` says no, without Python's
    // signal handlers (the host owns the signals), then releases the GIL.
    pyo3::prepare_freethreaded_python();
    Ok(())
}

/// Makes libpython's symbols global.
///
/// The host loads a plugin with local symbol visibility (`RTLD_LOCAL`), and
/// so the libpython this plugin links against: its symbols then resolve
/// for this plugin only. A C extension module (`_json`, `_ssl`, the
/// `.so` files of packages) is not linked against libpython and expects
/// the interpreter's symbols in the global scope; `import` of one fails
/// with "undefined symbol: PyExc_...". Opening libpython again with
/// `RTLD_NOLOAD | RTLD_GLOBAL` adds the already-loaded library to the
/// global scope without loading anything.
#[allow(unsafe_code)] // dladdr and dlopen through libc: the crate's one FFI outside pyo3
fn share_libpython_symbols() -> Result<(), String> {
    let symbol = pyo3::ffi::Py_IsInitialized as *const libc::c_void;
    // SAFETY: `Dl_info` is plain pointers and integers, for which all
    // zeroes is a valid value; it lives on this stack for the call.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr reads the dynamic loader's tables for an address of
    // a function linked into this plugin and writes `info` only.
    let found = unsafe { libc::dladdr(symbol, &mut info) };
    if found == 0 || info.dli_fname.is_null() {
        return Err("cannot find the library that holds the Python interpreter".to_string());
    }
    // SAFETY: `dli_fname` is the loader's NUL-terminated name of an object
    // that stays loaded (this plugin's own dependency, and plugins are
    // never unloaded). With RTLD_NOLOAD, dlopen loads nothing and runs no
    // initialiser: it only widens the symbol scope of the loaded object.
    // The handle is kept (never closed), so the object stays loaded.
    let handle = unsafe {
        libc::dlopen(
            info.dli_fname,
            libc::RTLD_NOW | libc::RTLD_NOLOAD | libc::RTLD_GLOBAL,
        )
    };
    if handle.is_null() {
        // SAFETY: dlerror returns NULL or the loader's NUL-terminated
        // message for this thread's last dl* failure, read at once.
        let why = unsafe { libc::dlerror() };
        let why = if why.is_null() {
            "unknown error".into()
        } else {
            // SAFETY: non-null, NUL-terminated (above).
            unsafe { CStr::from_ptr(why) }.to_string_lossy()
        };
        // SAFETY: same pointer and lifetime as above.
        let name = unsafe { CStr::from_ptr(info.dli_fname) }.to_string_lossy();
        return Err(format!("cannot make the symbols of {name} global: {why}"));
    }
    Ok(())
}

/// Puts `dirs` in front of `sys.path` (each once), imports `module` and
/// returns its attribute `callable`, checked callable.
pub fn import_app(
    py: Python<'_>,
    dirs: &[String],
    module: &str,
    callable: &str,
) -> PyResult<Py<PyAny>> {
    let path = py.import("sys")?.getattr("path")?;
    let path = path.downcast::<PyList>()?;
    for (i, dir) in dirs.iter().enumerate() {
        if !path.contains(dir)? {
            path.insert(i, dir)?;
        }
    }
    let module = PyModule::import(py, module)?;
    let app = callable
        .split('.')
        .try_fold(module.into_any(), |object, name| object.getattr(name))?;
    if !app.is_callable() {
        return Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "{callable} is not callable (a {})",
            crate::respond::type_name(&app)
        )));
    }
    Ok(app.unbind())
}

/// An exception with its traceback, as Python prints it.
pub fn traceback(py: Python<'_>, err: &PyErr) -> String {
    let formatted = py.import("traceback").and_then(|tb| {
        tb.call_method1(
            "format_exception",
            (err.get_type(py), err.value(py), err.traceback(py)),
        )
    });
    match formatted.and_then(|lines| lines.extract::<Vec<String>>()) {
        Ok(lines) => lines.concat().trim_end().to_string(),
        Err(_) => err.to_string(),
    }
}

//! Test-only shared library that is a perfectly good `cdylib` but not a
//! Stoa app: it exports a plain C function and no abi_stable root module,
//! so the host's loader must refuse it with one log line.

/// An exported symbol, so the library is not empty.
#[no_mangle]
pub extern "C" fn hello() {}

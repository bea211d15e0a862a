//! Stoa's application ABI: the contract between the `stoa` host and the app
//! plugins it loads at run time.
//!
//! An app is a `cdylib` that implements [`App`] and exports it with
//! [`export_app!`]. The host checks the plugin's ABI (this crate's version,
//! then the type layouts) before calling anything in it, so a plugin built
//! against an incompatible `stoa-app-api` is refused with a message naming
//! both versions instead of crashing the host.
//!
//! FROZEN: this is stoa-app-api 0.2.0 as released, kept unchanged so the
//! test suite can check that a plugin built against it loads in the
//! current host (see the main crate's COMPATIBILITY.md). Do not edit.

pub mod abi;
pub mod app;
pub mod context;
pub mod export;
pub mod host;

pub use abi::{Header, HeaderRef, Request, Response};
pub use app::{App, Responder};
pub use context::{Context, Settings, SettingsError};
pub use host::{host, Host, PoolFull};
pub use log;

#[doc(hidden)]
pub use abi_stable;

/// The version of this crate a plugin is built against (and the host
/// checks): `CARGO_PKG_VERSION` of `stoa-app-api`.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

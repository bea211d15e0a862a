//! Stoa's host. The folders are the architecture. `boot` builds everything;
//! `server` uses `apps`, `ops`, `shared` and `inbox`; every wing uses `http`
//! and `poller`, which use nothing above them. `apps` and `ops` touch in three
//! places only: the apps thread publishes into `shared`, the watchdog names
//! the app a stuck loop is in, and status reads the registry and the pool.
//!
//! - `boot`, `cli`, `listen`: flags -> listeners, pollers, workers, signals.
//! - `server/`: the event loop, one connection's state machine (`conn`),
//!   dispatching a request to its app, the request view, timeouts, timers and
//!   the host's side of the responder.
//! - `http/`: bytes on the wire (parse, chunked, reader, output, response,
//!   the host's own answers): no
//!   sockets, unit- and fuzz-tested.
//! - `poller/`: the readiness trait and one file per backend; the only home
//!   of `unsafe`.
//! - `apps/`: plugins over time (private copy, ELF check, load probe, loader,
//!   registry and its watcher thread, services, the blocking pool).
//! - `ops/`: what operators see and steer (endpoints, stats, the logs and
//!   their writer threads, address rules, run state).
//! - `budget`: the host-wide budget of buffered bodies and WebSocket
//!   messages (`--max-buffered`).
//! - `shared`, `inbox`, `stream_line`: what every worker shares; the loop's
//!   completion inbox; a streamed response's queue between app and loop.
//!
//! The `stoa` binary (main.rs) is a thin shell over `boot::run`; `http` and
//! a few others are public so the benches and the fuzz target can drive the
//! HTTP layer directly.

#![deny(unsafe_code)]

pub mod apps;
pub mod boot;
pub mod budget;
pub(crate) mod checks;
pub mod cli;
pub mod http;
pub(crate) mod inbox;
pub mod listen;
pub(crate) mod ops;
pub use ops::error_log;
#[allow(unsafe_code)] // the system calls of epoll, poll, select and io_uring
pub(crate) mod poller;
pub(crate) mod server;
pub(crate) mod shared;
pub(crate) mod signals;
pub(crate) mod stream_line;

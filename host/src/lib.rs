//! Stoa's host. The folders are the architecture: `docs/architecture.md`
//! lists the wings top to bottom, and a module may import only from wings
//! below its own (the `architecture` test reads that list and every
//! `crate::` and `super::` path, and fails on an arrow up it).
//!
//! - `boot`, `checks`, `signals`: start-up, `stoa check`, the control
//!   thread (signals and the apps thread's requests).
//! - `cli`: flags and the config file -> `settings`.
//! - `server/`: the event loop, one connection's state machine (`conn`),
//!   dispatching a request to its app, the request view, timers and the
//!   host's side of the responder.
//! - `ops/`: what operators see and steer (endpoints, the logs and their
//!   writer threads, address rules, the watchdog, upgrades, notify).
//! - `apps/`: plugins over time (private copy, ELF check, load probe,
//!   loader, registry and its watcher thread, services, the blocking pool).
//! - `inbox`, `stream_line`: the loop's completion inbox; a streamed
//!   response's queue between app and loop.
//! - `listen/`: binding, adopting and owning the listening sockets.
//! - `http/`: bytes on the wire (parse, chunked, reader, output, response,
//!   the host's own answers, WebSocket frames): no sockets, unit- and
//!   fuzz-tested.
//! - `control`, `budget`, `stats`: the run state, the host-wide budget of
//!   buffered bytes (`--max-buffered`), the counters and the app names
//!   they are kept under.
//! - `poller/`: the readiness trait and one file per backend; the only home
//!   of `unsafe` in the host.
//! - `settings/`: every fixed value from the command line and config file;
//!   a leaf.
//! - `error`: `BootError`, why start-up or an edge's operation failed.
//!
//! The `stoa` binary (main.rs) is a thin shell over `boot::run`; `http`,
//! `settings` and a few others are public so the benches and the fuzz
//! target can drive the HTTP layer directly.

#![deny(unsafe_code)]

pub mod apps;
#[cfg(test)]
mod architecture;
pub mod boot;
pub mod budget;
pub(crate) mod checks;
pub mod cli;
pub(crate) mod control;
pub mod error;
pub mod http;
pub(crate) mod inbox;
pub mod listen;
pub mod ops;
#[allow(unsafe_code)] // the system calls of epoll, poll, select and io_uring
pub(crate) mod poller;
pub(crate) mod server;
pub mod settings;
#[allow(unsafe_code)] // mapping the shared area of process mode
pub(crate) mod shm;
pub(crate) mod signals;
pub(crate) mod stats;
pub(crate) mod stream_line;
pub mod supervisor;

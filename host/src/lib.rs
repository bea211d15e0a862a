//! Stoa's host. The folders are the architecture: `docs/architecture.md`
//! lists the wings top to bottom, and a module may import only from wings
//! below its own (the `architecture` test, a unit test only, reads that
//! list and every path the sources name, and fails on an arrow up it or
//! on a loop between files the document does not list).
//!
//! - `boot`, `checks`, `signals`: start-up and shutdown, `stoa check` and
//!   the start-up checks, the control thread (signals and the apps
//!   thread's requests).
//! - `supervisor/`: process mode's supervisor, which starts, watches and
//!   replaces the worker processes (each one runs `boot::run_worker`).
//! - `cli/`: flags, the config file and `new-app` -> `settings`.
//! - `server/`: the event loop: accepting and admission, one connection's
//!   state machine (`conn`), dispatching a request to the host's endpoints
//!   or its app, the request view, timers, lingering closes, WebSocket
//!   links and the host's side of the responder.
//! - `ops/`: what operators see and steer (endpoints, the logs and their
//!   writer threads, address rules, the watchdog, upgrades, notify, the
//!   pid file, and process mode's rows of the shared area).
//! - `apps/`: plugins over time (private copy, ELF check, load probe,
//!   loader, registry and its watcher thread, services, the blocking pool).
//! - `inbox`, `stream_line`: the loop's completion inbox; a streamed
//!   response's queue between app and loop.
//! - `listen/`: binding, adopting and owning the listening sockets, and
//!   the TLS sessions over them (`listen::tls`).
//! - `http/`: bytes on the wire (parse, chunked, reader, output, response,
//!   the host's own answers, WebSocket handshakes and frames): no sockets,
//!   unit- and fuzz-tested.
//! - `control`, `budget`, `open_count`, `stats`: the run state, the
//!   host-wide budget of buffered bytes (`--max-buffered`), the host-wide
//!   count of open connections (`--max-connections`), the counters and
//!   the app names they are kept under.
//! - `poller/`, `shm`: the readiness trait and one file per backend, and
//!   the mapping of process mode's shared area; the only homes of `unsafe`
//!   in the host (allowed on these two modules below, denied elsewhere).
//! - `settings/`: every fixed value from the command line and config file;
//!   a leaf.
//! - `error`: `BootError`, why start-up or an edge's operation failed, and
//!   `TlsError`, why a TLS site did not load.
//!
//! The `stoa` binary (main.rs) is a thin shell: the load probe's and
//! `new-app`'s subcommands, the flags, the error log, then `boot::run`,
//! `checks::command::check` (`stoa check`, and `--print-config`),
//! `supervisor::run` (process mode) or, in a worker process,
//! `boot::run_worker`. It is a crate of its own, so what it calls is
//! public (`apps`, `boot`, `checks`, `cli`, `listen`, `ops`, `settings`,
//! `supervisor`); so are `http` and `settings` for the benches and the
//! fuzz target, which drive the HTTP layer directly, and `budget`,
//! `error` and `open_count`.

#![deny(unsafe_code)]

pub mod apps;
#[cfg(test)]
mod architecture;
pub mod boot;
pub mod budget;
pub mod checks;
pub mod cli;
pub(crate) mod control;
pub mod error;
pub mod http;
pub(crate) mod inbox;
pub mod listen;
pub mod open_count;
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

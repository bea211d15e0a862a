//! Process mode (`--worker-mode process`): the supervisor. It is the
//! process the user starts (PID 1 in a container, systemd's main PID) and
//! never loads or runs app code. It binds the listening sockets once (or
//! adopts the service manager's), makes the shared area, and runs one
//! worker process per `--workers`: the `stoa` binary again with a hidden
//! subcommand (`handoff`), one event loop each, every app loaded, all
//! accepting on the same listening sockets: one socket per bind, one
//! backlog, so connections queued in the kernel while a worker is stuck
//! (not waiting, so not accepting) or dead are accepted by the others or
//! by its replacement.
//!
//! It replaces a worker that dies (at once if it had served, with a
//! growing pause if it died starting), one whose loop has not turned for
//! `--worker-timeout`, and, one at a time (start the new one, wait until
//! it serves, drain the old), one that asks for it (`--max-generations`
//! reached, `--worker-max-requests`) or passes `--worker-max-memory`.
//! The pid file, `READY=1`, `STATUS=` and `WATCHDOG=1` are its alone.
//! Signals: SIGTERM and SIGINT drain every worker (a second one kills
//! them), SIGHUP and SIGUSR1 go on to every worker (rescan the apps,
//! reopen the log files), SIGUSR2 replaces every worker, one at a time,
//! with the binary now at the path it was started from. As PID 1 it reaps
//! every child, adopted ones too.

mod binary;
mod death;
mod decide;
pub mod handoff;
mod procs;
mod quarantine;
mod resume;
mod run;
mod store;
mod tally;

pub use run::run;

//! The operations wing: what an operator sees and steers. The host's own
//! endpoints (`admin`, with the TLS certificates' expiry: `certificates`,
//! and the label escaping both metrics writers share: `prometheus`), the
//! access log and the error log with the writer threads behind both
//! (`log_writer`),
//! the pid file, the memory limit behind `--max-buffered` (`memory`),
//! address rules for status and proxies (`netfilter`), the run state
//! that signals change (`control`), and the loop watchdog with what it
//! reports (`watchdog`, `spot`, `stuck`, `survival`), what a worker runs for the
//! supervisor to name after a crash (`in_flight`).

pub(crate) mod access_log;
pub(crate) mod admin;
pub(crate) mod certificates;
pub mod error_log;
pub(crate) mod in_flight;
pub(crate) mod log_target;
pub mod log_writer;
pub(crate) mod memory;
pub(crate) mod netfilter;
pub(crate) mod notify;
pub(crate) mod peers;
pub(crate) mod pid_file;
pub(crate) mod prometheus;
pub(crate) mod spot;
pub(crate) mod stuck;
pub(crate) mod survival;
pub(crate) mod upgrade;
pub(crate) mod watchdog;
pub(crate) mod worker_row;

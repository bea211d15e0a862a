//! The operations wing: what an operator sees and steers. The host's own
//! endpoints (`admin`), the counters behind them (`stats`), the access log,
//! address rules for status and proxies (`netfilter`), the run state
//! that signals change (`control`), and the loop watchdog with what it
//! reports (`watchdog`, `survival`).

pub mod access_log;
pub mod admin;
pub mod control;
pub mod netfilter;
pub mod stats;
pub mod survival;
pub mod watchdog;

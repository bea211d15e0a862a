//! Stoa's host: the event loop, the pollers, HTTP/1.1, the plugin loader
//! and the host's own endpoints. The `stoa` binary (main.rs) is a thin
//! shell over `boot::run`; the modules are public so benches and fuzz
//! targets can drive the HTTP layer directly.

pub mod access_log;
pub mod admin;
pub mod boot;
pub mod cli;
pub mod conn;
pub mod control;
pub mod http;
pub mod listen;
pub mod loader;
pub mod netfilter;
pub mod poller;
pub mod pool;
pub mod registry;
pub mod request;
pub mod responder;
pub mod server;
pub mod services;
pub mod shared;
pub mod stats;
pub mod survival;
pub mod timers;
pub mod watchdog;

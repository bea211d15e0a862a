//! End-to-end tests of the `stoa` binary: each test starts the real host
//! with real plugin libraries on an ephemeral port and speaks raw HTTP/1.1
//! to it. Every behaviour is checked on each poller backend (see `matrix!`
//! in `harness.rs`).

#[macro_use]
mod harness;
mod client;
mod common;
mod plugins;

mod abi;
mod apps_dir;
mod article;
mod article_items;
mod async_apps;
mod backpressure;
mod balancer_answers;
mod balancers;
mod capacity;
mod cli;
mod config;
mod deploy;
mod environ;
mod hardening;
mod hello;
mod hot;
mod lifecycle;
mod limits;
mod linger;
mod loader;
mod logs;
mod misbehave;
mod new_app;
mod operator;
mod overload;
mod plugin_files;
mod protocol;
mod rfc9112;
mod security;
mod status;
mod streaming;
mod survival;
mod unix_socket;
mod upload;
mod websocket;
mod workers_and_drain;

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
mod activation;
mod apps_dir;
mod article;
mod article_items;
mod async_apps;
mod backpressure;
mod balancer_answers;
mod balancers;
mod budget;
mod capacity;
mod check_live;
mod cli;
mod config;
pub(crate) mod deploy;
mod deploy_files;
mod deploy_tls;
mod environ;
mod forwarded;
mod gone;
mod h2;
mod h2_client;
mod h2_ops;
mod hardening;
mod hello;
mod hot;
mod lifecycle;
mod limits;
mod linger;
mod loader;
mod logs;
mod logs_survive;
mod misbehave;
mod new_app;
mod operator;
mod overload;
mod plugin_files;
mod process_mode;
mod process_upgrade;
mod protocol;
mod renamed;
mod rfc9112;
mod security;
mod status;
mod streaming;
mod supervisor;
mod survival;
mod test_command;
pub(crate) mod tls;
mod tls_certs;
mod tls_check;
mod tls_hardening;
mod tls_rotate;
mod tls_sites;
mod unix_socket;
mod unix_socket_file;
mod upload;
mod websocket;
mod websocket_flood;
mod workers_and_drain;

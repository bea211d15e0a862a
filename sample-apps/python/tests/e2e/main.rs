//! End-to-end tests of the WSGI bridge: the real `stoa` binary of the main
//! workspace, started on `--bind 127.0.0.1:0` on every poller backend with
//! this plugin and a Python application, spoken to in raw HTTP/1.1. The
//! harness and the client are the main suite's own files.

#[macro_use]
#[allow(dead_code)] // the main suite's harness: this suite uses part of it
#[path = "../../../../tests/e2e/harness.rs"]
mod harness;
mod bridge;
#[allow(dead_code)] // the main suite's client: this suite uses part of it
#[path = "../../../../tests/e2e/client.rs"]
mod client;
mod plugins;

mod asgi;
mod asgi_failures;
mod asgi_host;
mod asgi_lifespan;
mod asgi_mount;
mod asgi_stream;
mod asgi_tls;
mod asgi_ws;
mod crash;
mod declared;
mod django;
mod loading;
mod pep3333;

//! Many connections at once (issue 3): select serves 1500 concurrent
//! clients under its FD_SETSIZE cap (the excess waits in the backlog), poll,
//! epoll and io_uring serve 5000. Every request is answered and the host lives.

use crate::client::{get, Client};
use crate::harness::Server;

/// Opens `n` connections, sends one request on each before reading any,
/// then reads every answer (closing each connection once answered, which
/// lets a capped server accept the next waiting client).
fn serve_concurrently(poller: &str, n: usize) -> Server {
    let server = Server::samples(poller);
    let mut clients: Vec<Client> = (0..n).map(|_| server.connect()).collect();
    for c in clients.iter_mut() {
        c.send(&get("/hello/"));
    }
    for (i, mut c) in clients.into_iter().enumerate() {
        let r = c.read_response();
        assert_eq!((r.status, r.text()), (200, "Hello World!"), "client {i}");
    }
    assert_eq!(server.get("/article").status, 200, "the host lives on");
    server
}

#[test]
fn select_serves_1500_concurrent_clients() {
    let server = serve_concurrently("select", 1500);
    assert!(
        server.log_contains("poller=select fd_cap=") && server.log_contains("FD_SETSIZE=1024"),
        "{}",
        server.log()
    );
    assert!(!server.log_contains("503"), "{}", server.log());
}

#[test]
fn poll_serves_5000_concurrent_clients() {
    serve_concurrently("poll", 5000);
}

#[test]
fn epoll_serves_5000_concurrent_clients() {
    serve_concurrently("epoll", 5000);
}

#[test]
fn io_uring_serves_5000_concurrent_clients() {
    if !crate::harness::skip_io_uring() {
        serve_concurrently("io_uring", 5000);
    }
}

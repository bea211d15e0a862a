//! Many connections at once (issues 3 and 15): select serves 3000
//! keep-alive clients open at once (its fd sets grow past FD_SETSIZE), poll,
//! epoll and io_uring serve 5000. Every request is answered and the host
//! lives.

use crate::client::{get, Client};
use crate::common::status;
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
    let r = server.get("/article");
    assert_eq!(r.status, 200, "the host lives on: {r:?}\n{}", server.log());
    server
}

/// `n` keep-alive clients open at once, each answered twice while all
/// stay connected: every one holds a slot, none waits for another to go.
fn serve_keep_alive_at_once(poller: &str, n: usize) -> Server {
    // The test process holds the n clients: raise its own descriptor limit.
    rlimit::increase_nofile_limit(u64::MAX).expect("raise RLIMIT_NOFILE");
    let server = Server::samples(poller);
    let mut clients: Vec<Client> = (0..n).map(|_| server.connect()).collect();
    for round in 0..2 {
        for c in clients.iter_mut() {
            c.send(&get("/hello/"));
        }
        for (i, c) in clients.iter_mut().enumerate() {
            let r = c.read_response();
            assert_eq!(
                (r.status, r.text()),
                (200, "Hello World!"),
                "client {i}, round {round}"
            );
        }
    }
    let open = status(&server)["connections"]["open"].as_u64();
    assert!(open > Some(n as u64), "{open:?} open");
    drop(clients);
    server
}

#[test]
fn select_serves_3000_concurrent_keep_alive_clients() {
    let server = serve_keep_alive_at_once("select", 3000);
    assert!(
        !server.log_contains("at the connection cap"),
        "{}",
        server.log()
    );
    let r = server.get("/article");
    assert_eq!(r.status, 200, "the host lives on: {r:?}\n{}", server.log());
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

//! Admission at the cap, over real sockets and a loop with one worker's
//! share of one connection: past it, `--overload shed` answers each new
//! client 503 at once; `--overload queue` leaves it in the backlog with
//! the listener paused, and admits it when a connection closes, on this
//! loop or (the cap is the host's) on another.

use crate::inbox::Inbox;
use crate::listen::Listener;
use crate::poller::create;
use crate::poller::Wake;
use crate::server::listeners::Listeners;
use crate::server::testing::{handles, handles_for, settings};
use crate::server::Server;
use crate::settings::Overload;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A loop with a cap of one connection and `overload` past it, on a
/// listener of its own; its address.
fn server(overload: Overload) -> (Server, SocketAddr) {
    let any = SocketAddr::from(([127, 0, 0, 1], 0));
    let listener = crate::listen::bind(any, 16).expect("bind");
    let addr = listener.local_addr().expect("its address");
    let poller = create("poll").expect("a poller");
    let queue = Arc::new(Inbox::new(poller.waker()));
    let shared = handles(settings(1, overload), Vec::new());
    let locals = Arc::new(Listeners::plain(vec![(
        Arc::from("localhost"),
        addr.port(),
    )]));
    let listeners = vec![Listener::Tcp(listener)];
    let server = Server::new(0, poller, listeners, locals, shared, queue).expect("a loop");
    (server, addr)
}

fn client(addr: SocketAddr) -> TcpStream {
    let c = TcpStream::connect(addr).expect("connect");
    c.set_read_timeout(Some(Duration::from_millis(200)))
        .expect("a read timeout");
    c
}

/// Turns the loop until `done` holds (at most five seconds).
fn turn_until(server: &mut Server, done: impl Fn(&Server) -> bool) {
    let by = Instant::now() + Duration::from_secs(5);
    while !done(server) {
        assert!(Instant::now() < by, "the loop did not get there");
        server.turn().expect("a turn");
    }
}

/// What `c` has been sent within its read timeout.
fn heard(c: &mut TcpStream) -> String {
    let mut got = Vec::new();
    let mut buf = [0; 4096];
    loop {
        match c.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => break,
            Err(_) => break,
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

/// Sends a request on `c`, turns the loop until it is answered: the answer.
fn ask(server: &mut Server, c: &mut TcpStream) -> String {
    c.write_all(b"GET /x HTTP/1.1\r\nHost: x\r\n\r\n")
        .expect("send");
    let before = answered(server);
    turn_until(server, |s| answered(s) > before);
    heard(c)
}

fn answered(server: &Server) -> u64 {
    server.handles.stats.worker(0).requests()
}

fn counter(server: &Server, pick: fn(&crate::stats::WorkerStats) -> u64) -> u64 {
    pick(server.handles.stats.worker(0))
}

#[test]
fn past_the_cap_shed_answers_503_at_once() {
    let (mut server, addr) = server(Overload::Shed);
    let mut first = client(addr);
    let mut second = client(addr);
    turn_until(&mut server, |s| {
        s.conns.len() == 1 && counter(s, |w| w.shed.load(Relaxed)) == 1
    });
    let shed = heard(&mut second);
    assert!(shed.starts_with("HTTP/1.1 503"), "{shed}");
    assert!(shed.contains("Retry-After: 1\r\n"), "{shed}");
    assert!(server.acceptor.is_accepting());
    assert_eq!(counter(&server, |w| w.accepted.load(Relaxed)), 1);
    // The one admitted is served.
    assert!(ask(&mut server, &mut first).starts_with("HTTP/1.1 404"));
}

#[test]
fn past_the_cap_queue_pauses_accepts_until_a_connection_closes() {
    let (mut server, addr) = server(Overload::Queue);
    let first = client(addr);
    let mut second = client(addr);
    turn_until(&mut server, |s| !s.acceptor.is_accepting());
    assert_eq!(server.conns.len(), 1);
    assert_ne!(counter(&server, |w| w.paused_since.load(Relaxed)), 0);
    assert_eq!(counter(&server, |w| w.shed.load(Relaxed)), 0);
    assert_eq!(heard(&mut second), "", "the second waits in the backlog");
    drop(first);
    turn_until(&mut server, |s| {
        counter(s, |w| w.accepted.load(Relaxed)) == 2
    });
    // The pause is counted; at the cap again, accepts pause again.
    assert!(counter(&server, |w| w.paused_us.load(Relaxed)) >= 100_000);
    assert_eq!(server.conns.len(), 1);
    assert!(!server.acceptor.is_accepting());
    assert!(ask(&mut server, &mut second).starts_with("HTTP/1.1 404"));
}

/// A loop's waker that counts its wake-ups.
struct Counted {
    inner: Arc<dyn Wake>,
    wakes: AtomicUsize,
}

impl Wake for Counted {
    fn wake(&self) -> std::io::Result<()> {
        self.wakes.fetch_add(1, Relaxed);
        self.inner.wake()
    }
}

/// Two loops under one cap of one connection (`--overload queue`), each on
/// a listener of its own (its address), with their wakers counted.
type Loops = (Vec<(Server, SocketAddr)>, Vec<Arc<Counted>>);

fn two_loops() -> Loops {
    let shared = handles_for(2, settings(1, Overload::Queue), Vec::new());
    let mut loops = Vec::new();
    let mut wakers = Vec::new();
    for worker in 0..2 {
        let any = SocketAddr::from(([127, 0, 0, 1], 0));
        let listener = crate::listen::bind(any, 16).expect("bind");
        let addr = listener.local_addr().expect("its address");
        let poller = create("poll").expect("a poller");
        let counted = Arc::new(Counted {
            inner: poller.waker(),
            wakes: AtomicUsize::new(0),
        });
        shared.control.add_waker(counted.clone());
        wakers.push(counted);
        let queue = Arc::new(Inbox::new(poller.waker()));
        let locals = Arc::new(Listeners::plain(vec![(
            Arc::from("localhost"),
            addr.port(),
        )]));
        let listeners = vec![Listener::Tcp(listener)];
        let server =
            Server::new(worker, poller, listeners, locals, shared.clone(), queue).expect("a loop");
        loops.push((server, addr));
    }
    (loops, wakers)
}

fn accepted(s: &Server, worker: usize) -> u64 {
    s.handles.stats.worker(worker).accepted.load(Relaxed)
}

#[test]
fn the_cap_is_the_hosts_and_a_close_on_one_loop_resumes_another() {
    let (mut loops, wakers) = two_loops();
    let shared = loops[0].0.handles.clone();
    let first = client(loops[0].1);
    turn_until(&mut loops[0].0, |s| accepted(s, 0) == 1);
    // The other loop has no connection of its own, yet the host is full.
    let mut second = client(loops[1].1);
    turn_until(&mut loops[1].0, |s| !s.acceptor.is_accepting());
    assert_eq!((loops[1].0.conns.len(), shared.open.open()), (0, 1));
    assert_eq!(heard(&mut second), "", "the second waits in the backlog");
    drop(first);
    turn_until(&mut loops[0].0, |s| s.conns.is_empty());
    assert_eq!(wakers[1].wakes.load(Relaxed), 1, "the paused loop is woken");
    assert_eq!(wakers[0].wakes.load(Relaxed), 0, "the closing one is not");
    let (other, _) = &mut loops[1];
    turn_until(other, |s| accepted(s, 1) == 1);
    let answer = {
        second
            .write_all(b"GET /x HTTP/1.1\r\nHost: x\r\n\r\n")
            .expect("send");
        turn_until(other, |s| s.handles.stats.worker(1).requests() == 1);
        heard(&mut second)
    };
    assert!(answer.starts_with("HTTP/1.1 404"), "{answer}");
}

/// The loop a close wakes may find the slot taken again (by the closing
/// loop's own waiting client): it waits again, and the next close wakes it.
#[test]
fn a_loop_woken_too_late_is_woken_by_the_next_close() {
    let (mut loops, wakers) = two_loops();
    let first = client(loops[0].1);
    turn_until(&mut loops[0].0, |s| accepted(s, 0) == 1);
    let second = client(loops[0].1);
    turn_until(&mut loops[0].0, |s| !s.acceptor.is_accepting());
    let mut third = client(loops[1].1);
    turn_until(&mut loops[1].0, |s| !s.acceptor.is_accepting());
    drop(first);
    // The closing loop admits its own waiting client at once.
    turn_until(&mut loops[0].0, |s| accepted(s, 0) == 2);
    assert_eq!(wakers[1].wakes.load(Relaxed), 1);
    // Woken, the other finds no room: one turn, still paused.
    loops[1].0.turn().expect("a turn");
    assert!(!loops[1].0.acceptor.is_accepting());
    assert_eq!(accepted(&loops[1].0, 1), 0);
    drop(second);
    turn_until(&mut loops[0].0, |s| s.conns.is_empty());
    assert_eq!(wakers[1].wakes.load(Relaxed), 2, "woken again");
    let (other, _) = &mut loops[1];
    turn_until(other, |s| accepted(s, 1) == 1);
    third
        .write_all(b"GET /x HTTP/1.1\r\nHost: x\r\n\r\n")
        .expect("send");
    turn_until(other, |s| s.handles.stats.worker(1).requests() == 1);
    assert!(heard(&mut third).starts_with("HTTP/1.1 404"));
}

//! A drain closes an idle keep-alive connection at the end of its short
//! grace: a periodic sweep that comes before the grace ends must not put
//! the next sweep a whole period later (an idle server then took up to a
//! second more to exit).

use crate::inbox::Inbox;
use crate::listen::Listener;
use crate::poller::create;
use crate::server::listeners::Listeners;
use crate::server::testing::{handles, settings};
use crate::server::Server;
use crate::settings::Overload;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[test]
fn a_sweep_before_the_drains_grace_ends_keeps_the_next_one_by_it() {
    let any = SocketAddr::from(([127, 0, 0, 1], 0));
    let listener = crate::listen::bind(any, 16).expect("bind");
    let addr = listener.local_addr().expect("its address");
    let poller = create("poll").expect("a poller");
    let queue = Arc::new(Inbox::new(poller.waker()));
    let shared = handles(settings(8, Overload::Shed), Vec::new());
    let locals = Arc::new(Listeners::plain(vec![(
        Arc::from("localhost"),
        addr.port(),
    )]));
    let mut server = Server::new(
        0,
        poller,
        vec![Listener::Tcp(listener)],
        locals,
        shared,
        queue,
    )
    .expect("a loop");
    // One keep-alive connection, answered and now between requests.
    let mut c = TcpStream::connect(addr).expect("connect");
    c.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("a read timeout");
    c.write_all(b"GET /x HTTP/1.1\r\nHost: x\r\n\r\n")
        .expect("send");
    let by = Instant::now() + Duration::from_secs(5);
    while server.handles.stats.worker(0).requests() == 0 {
        assert!(Instant::now() < by, "never answered");
        server.turn().expect("a turn");
    }
    let mut buf = [0; 4096];
    assert!(c.read(&mut buf).expect("the answer") > 0);
    // The period of the default timeouts (a tenth of the shortest, at
    // most a second): longer than the grace.
    server.sweep_every = Duration::from_secs(1);
    // The drain starts with a periodic sweep already due.
    server.next_sweep = Instant::now();
    server.handles.control.drain();
    server.drain();
    let grace_end = server
        .conns
        .iter()
        .next()
        .and_then(|(_, conn)| conn.deadline())
        .map(|(at, _)| at)
        .expect("the idle connection's deadline");
    server.turn().expect("the due sweep");
    assert_eq!(server.conns.len(), 1, "still in its grace");
    assert!(
        server.next_sweep <= grace_end,
        "the next sweep is {:?} after the grace ends",
        server.next_sweep - grace_end
    );
}

//! WebSocket floods from peers that never read: pings (each owed a pong)
//! and unsolicited pongs (owed nothing). The host answers pings only
//! while its output bound has room, then stops reading that connection
//! (the kernel's buffers and the TCP window hold the rest), so its memory
//! stays flat; and one connection's reading yields to the loop after a
//! bounded amount of work, so with a single worker a plain request during
//! the flood is still answered.

use crate::client::Client;
use crate::common::{assert_serves, rss_kib, status, try_get};
use crate::harness::{wait_until, Server, WAIT};
use crate::websocket::{masked, silent_websocket};
use std::io::{ErrorKind, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

matrix!(a_ping_flood_keeps_memory_flat_and_the_loop_turning);

const PING: u8 = 0x9;
const PONG: u8 = 0xA;
/// Connections sending pings, and connections sending pongs.
const PINGERS: usize = 4;
const PONGERS: usize = 2;
/// What the host's RSS may grow by over idle during the flood: its
/// per-connection buffers and output bound, with room for the allocator.
const GROWTH_KIB: u64 = 6 * 1024;
/// Bytes each flooder sends before the flood counts as under way: more
/// than the host reads of pings before its output bound is full.
const UNDER_WAY: u64 = 128 * 1024;
/// How long each stage of the flood goes on once under way (RSS is
/// sampled meanwhile).
const FLOOD: Duration = Duration::from_millis(500);

/// Flooders writing the same masked control frame over and over, never
/// reading; stopped and joined on drop (a failing test leaves none).
struct Flood {
    stop: Arc<AtomicBool>,
    sent: Vec<Arc<AtomicU64>>,
    threads: Vec<JoinHandle<()>>,
}

impl Flood {
    fn new() -> Self {
        Flood {
            stop: Arc::new(AtomicBool::new(false)),
            sent: Vec::new(),
            threads: Vec::new(),
        }
    }

    /// Starts writing `opcode` frames of 125 bytes (the most a control
    /// frame holds) on `client`'s connection.
    fn start(&mut self, client: Client, opcode: u8) {
        let frame = masked(opcode, &[b'p'; 125]);
        // A whole number of frames: writing it round and round keeps
        // the framing whatever each write takes.
        let burst: Vec<u8> = frame
            .iter()
            .copied()
            .cycle()
            .take(frame.len() * 500)
            .collect();
        let (stop, sent) = (self.stop.clone(), Arc::new(AtomicU64::new(0)));
        self.sent.push(sent.clone());
        let thread = std::thread::spawn(move || {
            let mut stream = client.stream();
            stream
                .set_write_timeout(Some(Duration::from_millis(50)))
                .expect("set a write timeout");
            let mut at = 0;
            while !stop.load(Ordering::Relaxed) {
                match stream.write(&burst[at..]) {
                    Ok(n) => {
                        at = (at + n) % burst.len();
                        sent.fetch_add(n as u64, Ordering::Relaxed);
                    }
                    Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    // The host closed it: the test says what it saw.
                    Err(_) => return,
                }
            }
        });
        self.threads.push(thread);
    }

    /// The least any flooder has sent.
    fn least_sent(&self) -> u64 {
        let each = self.sent.iter().map(|s| s.load(Ordering::Relaxed));
        each.min().unwrap_or(0)
    }
}

impl Drop for Flood {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// The host's RSS under a flood, checked as it goes.
struct Rss<'a> {
    idle: u64,
    peak: u64,
    poller: &'a str,
}

impl Rss<'_> {
    /// Samples the host's RSS until every flooder has sent `UNDER_WAY`
    /// bytes and `FLOOD` more has passed; fails the test as soon as it is
    /// over `GROWTH_KIB` above idle.
    fn watch(&mut self, server: &Server, flood: &Flood) {
        let mut sample = || {
            self.peak = self.peak.max(rss_kib(server, "VmRSS"));
            assert!(
                self.peak <= self.idle + GROWTH_KIB,
                "{}: the host's RSS rose from {} KiB to {} KiB under the flood \
                 (each flooder sent at least {} bytes)",
                self.poller,
                self.idle,
                self.peak,
                flood.least_sent()
            );
        };
        let under_way = wait_until(WAIT, || {
            sample();
            flood.least_sent() >= UNDER_WAY
        });
        assert!(
            under_way,
            "{}: a flooder sent only {} bytes",
            self.poller,
            flood.least_sent()
        );
        let until = Instant::now() + FLOOD;
        wait_until(FLOOD * 2, || {
            sample();
            Instant::now() >= until
        });
    }
}

fn a_ping_flood_keeps_memory_flat_and_the_loop_turning(poller: &str) {
    let server = Server::start(poller, &["demo"], &["--workers", "1"]);
    // Warm up: a request and a ping answered, so idle includes the
    // one-time costs of both paths.
    assert_serves(&server);
    let mut warm = silent_websocket(&server);
    warm.send(&masked(PING, b"warm"));
    assert_eq!(warm.read_bytes(6), b"\x8a\x04warm", "a pong");
    let idle = rss_kib(&server, "VmRSS");

    // Every WebSocket opens before any floods.
    let open = |n: usize| -> Vec<Client> { (0..n).map(|_| silent_websocket(&server)).collect() };
    let (ping_clients, pong_clients) = (open(PINGERS), open(PONGERS));
    // Clones hold each connection open past its flooder.
    let clone = |c: &Client| c.stream().try_clone().expect("clone a stream");
    let pingers: Vec<_> = ping_clients.iter().map(clone).collect();
    let pongers: Vec<_> = pong_clients.iter().map(clone).collect();
    let mut rss = Rss {
        idle,
        peak: idle,
        poller,
    };
    // The pings first: their pongs fill the output bound, and the host
    // stops reading them.
    let mut flood = Flood::new();
    for c in ping_clients {
        flood.start(c, PING);
    }
    rss.watch(&server, &flood);
    // Then pongs, which nothing answers: only the read budget makes
    // their connections yield to the loop.
    for c in pong_clients {
        flood.start(c, PONG);
    }
    rss.watch(&server, &flood);
    // A plain request on a new connection while the flood goes on.
    let answer = try_get(server.port, "/demo/justnow/");
    assert_eq!(
        answer,
        Ok(200),
        "{poller}: a plain request during the flood (one worker); log:\n{}",
        server.log()
    );
    rss.watch(&server, &flood);
    let sent: Vec<u64> = flood
        .sent
        .iter()
        .map(|s| s.load(Ordering::Relaxed))
        .collect();
    drop(flood);
    eprintln!(
        "{poller}: host RSS idle {idle} KiB, peak during the flood {} KiB; bytes sent {sent:?}",
        rss.peak
    );
    // The pings read were answered: each pinger's first bytes are pongs
    // of its payload.
    let mut pong = vec![0x80 | PONG, 125];
    pong.extend_from_slice(&[b'p'; 125]);
    let mut pingers: Vec<Client> = pingers.into_iter().map(Client::from_stream).collect();
    for c in &mut pingers {
        assert_eq!(c.read_bytes(pong.len()), pong, "{poller}: a pong");
    }
    assert_eq!(
        status(&server)["websockets"]["open"],
        1 + PINGERS + PONGERS,
        "{poller}: every WebSocket stays open"
    );
    drop((pingers, pongers));
}

//! Backpressure: a client that pipelines many requests and does not read
//! costs the host a bounded amount of memory (the host stops reading and
//! dispatching on that connection while its output waits for the socket),
//! and every request is still answered, complete and in order, once the
//! client reads. A large body is held once (the app's buffer is written
//! out as it is), not copied into a write buffer.

use crate::client::{request, Client};
use crate::harness::Server;
use std::time::Duration;

matrix!(
    unread_pipelined_answers_keep_memory_bounded,
    large_body_is_held_once
);

/// Connections in the pipelining case, and requests each sends at once.
const CONNS: usize = 10;
const PIPELINED: usize = 1000;

/// The `/_test/100k` and `/_test/64m` body sizes (the misbehave plugin).
const HUNDRED_K: usize = 100 << 10;
const HUGE: usize = 64 << 20;

/// How far the host's peak RSS may rise over its idle peak while the
/// pipelining clients do not read (10 x 1,000 x 100 KiB would be ~1 GiB
/// if every answer were kept).
const PIPELINE_GROWTH_KIB: u64 = 16 << 10;

/// The host's peak resident set (`VmHWM`), in KiB.
fn peak_rss_kib(server: &Server) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", server.pid()))
        .expect("read the server's /proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no VmHWM in {status}"))
}

fn start(poller: &str) -> Server {
    // Past 1,000 requests per connection, so only the half-closed client's
    // connection is closed by the host; the clients are read one after the
    // other (100 MB each), which on a loaded machine may leave the last ones
    // without sending progress for longer than the default send timeout.
    let args = ["--max-requests-per-conn", "5000", "--send-timeout", "10m"];
    let server = Server::start(poller, &["misbehave"], &args);
    // Warm up the route, so the idle figure includes the first request's
    // one-time costs.
    let r = server.get("/_test/100k?n=0");
    assert_eq!((r.status, r.body.len()), (200, HUNDRED_K));
    server
}

fn unread_pipelined_answers_keep_memory_bounded(poller: &str) {
    let server = start(poller);
    let idle = peak_rss_kib(&server);
    let mut clients: Vec<Client> = (0..CONNS)
        .map(|c| {
            let mut client = server.connect();
            let batch: Vec<u8> = (0..PIPELINED)
                .flat_map(|i| request("GET", &format!("/_test/100k?n={c}.{i}"), &[]))
                .collect();
            client.send(&batch);
            if c == 0 {
                // This one has said all it will say: it still gets every
                // answer, then the host's close.
                client
                    .stream()
                    .shutdown(std::net::Shutdown::Write)
                    .expect("shut down the write half");
            }
            client
        })
        .collect();
    // Nobody reads for a while: an unbounded host would answer everything
    // into its own memory meanwhile.
    std::thread::sleep(Duration::from_secs(2));
    let peak = peak_rss_kib(&server);
    eprintln!(
        "{poller}: VmHWM idle {idle} KiB, with {CONNS} x {PIPELINED} unread: {peak} KiB (+{} KiB)",
        peak - idle
    );
    for (c, client) in clients.iter_mut().enumerate() {
        for i in 0..PIPELINED {
            let r = client.read_response();
            let mark = format!("{c}.{i}:");
            assert_eq!(r.status, 200, "connection {c}, request {i}");
            assert_eq!(r.body.len(), HUNDRED_K, "connection {c}, request {i}");
            assert!(
                r.body.starts_with(mark.as_bytes()),
                "connection {c}: answer {i} out of order: {:?}",
                String::from_utf8_lossy(&r.body[..16])
            );
        }
    }
    clients[0].assert_closed();
    assert!(
        peak - idle <= PIPELINE_GROWTH_KIB,
        "peak RSS rose by {} KiB (from {idle} KiB) while {CONNS} clients left \
         {PIPELINED} pipelined answers each unread; bound {PIPELINE_GROWTH_KIB} KiB",
        peak - idle
    );
}

fn large_body_is_held_once(poller: &str) {
    let server = start(poller);
    let idle = peak_rss_kib(&server);
    let mut client = server.connect();
    client.send(&request("GET", "/_test/64m", &["Connection: close"]));
    let r = client.read_response();
    assert_eq!((r.status, r.body.len()), (200, HUGE));
    assert!(r.body.iter().all(|&b| b == b'x'), "a damaged body");
    client.assert_closed();
    let peak = peak_rss_kib(&server);
    let body_kib = (HUGE >> 10) as u64;
    eprintln!(
        "{poller}: VmHWM idle {idle} KiB, after a {body_kib} KiB body: {peak} KiB (+{} KiB)",
        peak - idle
    );
    // The app's body is necessarily in memory once; a second copy would
    // double the rise.
    assert!(
        peak - idle < body_kib * 3 / 2,
        "peak RSS rose by {} KiB for one {body_kib} KiB body: held more than once",
        peak - idle
    );
}

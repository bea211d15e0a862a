//! The load generator against a tiny in-test HTTP server: pipelined
//! batches arrive in one write, responses are framed across reads, a
//! `Connection: close` in the middle of a batch sends the rest again, and a
//! server that hangs up mid-batch fails each request it did not answer.

use super::*;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::Arc;
use std::thread::JoinHandle;

const ANSWER: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
const LAST: &[u8] = b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 5\r\n\r\nhello";

/// How the server treats each connection.
#[derive(Clone, Copy)]
pub(super) struct Script {
    /// Requests answered on one connection before the server closes it.
    answers: usize,
    /// Whether the last of them says `Connection: close` (else it just hangs up).
    announce: bool,
}

impl Script {
    pub(super) const fn ending(answers: usize, announce: bool) -> Script {
        Script { answers, announce }
    }
}

/// What the server saw.
#[derive(Default)]
pub(super) struct Seen {
    pub(super) requests: AtomicUsize,
    /// The most requests one read brought.
    max_per_read: AtomicUsize,
    pub(super) connections: AtomicUsize,
}

/// A blocking server, one thread per connection, that answers every whole
/// request a read brings in one write split in two (so responses reach the
/// client cut across reads).
pub(super) struct TestServer {
    pub(super) addr: SocketAddr,
    seen: Arc<Seen>,
    stop: Arc<AtomicBool>,
    acceptor: Option<JoinHandle<()>>,
}

impl TestServer {
    pub(super) fn start(script: Script) -> TestServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Seen::default());
        let stop = Arc::new(AtomicBool::new(false));
        let s = seen.clone();
        let acceptor = accept_until(&stop, listener, move |stream| {
            s.connections.fetch_add(1, Ordering::Relaxed);
            let s = s.clone();
            std::thread::spawn(move || serve(stream, script, &s));
        });
        TestServer {
            addr,
            seen,
            stop,
            acceptor: Some(acceptor),
        }
    }

    fn config(&self, mode: Mode, connections: usize, requests: u64) -> Config {
        Config {
            target: Target::parse(&format!("http://{}/x", self.addr)).unwrap(),
            mode,
            connections,
            requests,
            max_time: Duration::from_secs(20),
            threads: 1,
            timeout: Duration::from_secs(10),
            tls: None,
        }
    }

    pub(super) fn seen(&self, counter: fn(&Seen) -> &AtomicUsize) -> usize {
        counter(&self.seen).load(Ordering::Relaxed)
    }
}

/// Accepts on `listener` (non-blocking) until `stop`, handing each
/// connection, made blocking, to `serve`.
pub(super) fn accept_until(
    stop: &Arc<AtomicBool>,
    listener: TcpListener,
    mut serve: impl FnMut(TcpStream) + Send + 'static,
) -> JoinHandle<()> {
    let stop = stop.clone();
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            match listener.accept() {
                Ok((stream, _)) => {
                    stream.set_nonblocking(false).unwrap();
                    serve(stream);
                }
                Err(_) => std::thread::sleep(Duration::from_millis(1)),
            }
        }
    })
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.acceptor.take() {
            let _ = t.join();
        }
    }
}

fn serve(mut stream: TcpStream, script: Script, seen: &Seen) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let mut answered = 0;
    while answered < script.answers {
        let n = match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        buf.extend_from_slice(&chunk[..n]);
        let mut out = Vec::new();
        let mut this_read = 0;
        while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            buf.drain(..end + 4);
            this_read += 1;
            if answered < script.answers {
                answered += 1;
                let last = answered == script.answers && script.announce;
                out.extend_from_slice(if last { LAST } else { ANSWER });
            }
        }
        seen.requests.fetch_add(this_read, Ordering::Relaxed);
        seen.max_per_read.fetch_max(this_read, Ordering::Relaxed);
        let (a, b) = out.split_at(out.len() / 2);
        for part in [a, b] {
            if stream.write_all(part).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

pub(super) const FOREVER: Script = Script::ending(usize::MAX, false);

/// Runs `requests` in `mode` on `connections` against a server playing
/// `script`; the server stays up for its counters.
fn load(script: Script, mode: Mode, connections: usize, requests: u64) -> (TestServer, Report) {
    let server = TestServer::start(script);
    let report = run(&server.config(mode, connections, requests)).unwrap();
    (server, report)
}

#[test]
fn a_pipelined_batch_goes_in_one_write_and_every_answer_counts() {
    let (server, r) = load(FOREVER, Mode::Pipelined(4), 2, 64);
    assert_eq!((r.completed, r.failed, r.error_count()), (64, 0, 0));
    assert!(r.is_complete());
    assert_eq!(r.bytes, 64 * ANSWER.len() as u64);
    assert_eq!(server.seen(|s| &s.requests), 64);
    assert_eq!(server.seen(|s| &s.max_per_read), 4, "4 requests per write");
}

#[test]
fn keep_alive_sends_one_request_at_a_time() {
    let (server, r) = load(FOREVER, Mode::KeepAlive, 2, 20);
    assert_eq!((r.completed, r.error_count()), (20, 0));
    assert_eq!(server.seen(|s| &s.max_per_read), 1);
}

#[test]
fn a_close_in_mid_batch_sends_the_rest_again() {
    // Three answers per connection, the third saying `Connection: close`:
    // each batch of 4 loses one request, which goes out again on a new one.
    let (server, r) = load(Script::ending(3, true), Mode::Pipelined(4), 1, 20);
    assert_eq!((r.completed, r.failed, r.error_count()), (20, 0, 0));
    assert!(r.is_complete());
    assert_eq!(
        server.seen(|s| &s.connections),
        7,
        "20 answers, 3 per connection"
    );
}

#[test]
fn a_hang_up_in_mid_batch_fails_each_unanswered_request() {
    // Two answers, then the connection closes without a word: the other
    // two requests of every batch of 4 fail as resets.
    let (_server, r) = load(Script::ending(2, false), Mode::Pipelined(4), 1, 16);
    assert_eq!((r.completed, r.failed), (8, 8));
    assert_eq!(r.errors[ErrorKind::Reset as usize], 8);
    assert!(r.is_complete());
}

#[test]
fn the_budget_is_never_overdrawn() {
    let shared = Shared {
        issued: AtomicU64::new(0),
        budget: 10,
        expected_len: AtomicU64::new(u64::MAX),
        deadline: Instant::now(),
    };
    assert_eq!(shared.claim(4), 4);
    assert_eq!(shared.claim(4), 4);
    assert_eq!(shared.claim(4), 2);
    assert_eq!(shared.claim(4), 0);
    shared.give_back(3);
    assert_eq!(shared.claim(16), 3);
    assert_eq!(shared.claim(1), 0);
}

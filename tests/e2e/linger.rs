//! Error answers sent while the client is still sending its request reach
//! the client: the host answers, half-closes and reads on (discarding)
//! until the client's EOF or the `--lingering-*` bounds, instead of closing
//! with unread bytes (a reset, which destroys the answer in flight).

use crate::common::wait_for_open;
use crate::harness::Server;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

matrix!(a_client_that_sends_its_whole_body_first_reads_its_413);

/// The kind of client that writes its whole body before reading anything:
/// Python's `http.client` posting 20 MB over `--max-body 8M` (the
/// default) prints the status it read, or the exception it got.
fn a_client_that_sends_its_whole_body_first_reads_its_413(poller: &str) {
    let server = Server::launch(poller).apps(&["article"]).start();
    let script = r#"
import http.client, sys
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=20)
try:
    c.request("POST", "/article", body=b"x" * (20 << 20))
    r = c.getresponse()
    print(r.status, r.getheader("Connection"))
except Exception as e:
    print("failed:", type(e).__name__, e)
"#;
    for round in 0..3 {
        let out = Command::new("python3")
            .args(["-c", script, &server.port.to_string()])
            .output()
            .expect("python3 is needed for this test (apt-get install -y python3)");
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            text.trim(),
            "413 close",
            "round {round}: {}\nstoa:\n{}",
            String::from_utf8_lossy(&out.stderr),
            server.log()
        );
    }
    assert_eq!(server.get("/article").status, 200, "after the 413s");
}

matrix!(lingering_ends_at_each_of_its_bounds);

/// A body over `--max-body` announced, its first 256 KiB sent: the 413
/// must come whole, followed by the host's FIN (not a reset).
fn refused_post(server: &Server) -> TcpStream {
    let mut s = TcpStream::connect(("127.0.0.1", server.port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("a read timeout");
    let head = "POST /article HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\n";
    s.write_all(head.as_bytes()).expect("send the head");
    s.write_all(&vec![b'x'; 256 << 10]).expect("send some body");
    let mut answer = Vec::new();
    let read = (&s).read_to_end(&mut answer);
    let text = String::from_utf8_lossy(&answer);
    assert!(
        read.is_ok() && text.starts_with("HTTP/1.1 413 "),
        "{read:?}: {text:?}\n{}",
        server.log()
    );
    s
}

/// Each bound closes a lingering connection by itself: a client silent
/// after its answer (`--lingering-timeout`), one that floods
/// (`--lingering-bytes`), one that trickles a byte now and then
/// (`--lingering-time`); the others are set far off each time.
fn lingering_ends_at_each_of_its_bounds(poller: &str) {
    let launch = |args: &[&str]| {
        let base = ["--max-body", "64K", "--no-watch", "--workers", "1"];
        Server::launch(poller)
            .apps(&["article"])
            .args(&base)
            .args(args)
            .start()
    };
    let server = launch(&["--lingering-timeout", "1s", "--lingering-bytes", "1M"]);
    let quiet = refused_post(&server);
    assert_eq!(wait_for_open(&server, 0), 0, "silent: still lingering");
    drop(quiet);

    let mut flood = refused_post(&server);
    let t0 = Instant::now();
    let chunk = vec![b'x'; 64 << 10];
    let mut sent = 0usize;
    let cut = loop {
        if let Err(e) = flood.write_all(&chunk) {
            break Some(e);
        }
        sent += chunk.len();
        if t0.elapsed() > Duration::from_secs(15) {
            break None;
        }
    };
    assert!(cut.is_some(), "flooding: {sent} bytes taken, never cut");
    assert_eq!(wait_for_open(&server, 0), 0, "flooding: still lingering");
    drop(server);

    let server = launch(&["--lingering-time", "2s"]);
    let mut trickle = refused_post(&server);
    let cut = (0..60).find_map(|_| {
        std::thread::sleep(Duration::from_millis(250));
        trickle.write_all(b"x").err()
    });
    assert!(cut.is_some(), "trickling: never cut");
    assert_eq!(wait_for_open(&server, 0), 0, "trickling: still lingering");
}

//! A WSGI application held to its declared `Content-Length`, as gunicorn
//! holds it: past it, the declared bytes go out, the rest is dropped and
//! logged, and the connection closes (collecting a small declared body
//! stops there: the iterable is not drained); short of it, the connection
//! closes so the client sees a short body. And `wsgi.errors` cuts a line
//! at 8 KiB (written a little at a time, as a loop of prints would).

use crate::bridge::{require_python, test_apps, Bridge};
use crate::client::get;

fn start(poller: &str) -> Bridge {
    require_python(&["wsgiref.validate"]);
    Bridge::start(poller, "pep3333:application", &test_apps(), "/pep", &[])
}

/// The head (lower case) and body of the one response on a connection the
/// server then closes (the test fails if it stays open).
fn until_closed(bridge: &Bridge, path: &str) -> (String, Vec<u8>) {
    let mut c = bridge.server.connect();
    c.send(&get(path));
    let all = c.read_until_closed();
    let at = all
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("{path}: no head in {:?}", String::from_utf8_lossy(&all)));
    let head = String::from_utf8_lossy(&all[..at]).to_ascii_lowercase();
    (head, all[at + 4..].to_vec())
}

/// The chunks the test application has produced so far.
fn pulled(bridge: &Bridge) -> u64 {
    let r = bridge.server.get("/pep/raw/pulled");
    r.text().parse().unwrap_or_else(|_| panic!("{r:?}"))
}

fn a_declared_content_length_is_held_to(poller: &str) {
    let bridge = start(poller);
    let server = &bridge.server;
    // 10 declared, 100 chunks of 64 KiB produced: 10 bytes, then the end.
    let before = pulled(&bridge);
    let (head, body) = until_closed(&bridge, "/pep/raw/declared/10/65536/100");
    assert!(head.contains("\r\ncontent-length: 10\r\n"), "{head}");
    assert_eq!(body, b"aaaaaaaaaa", "{head}");
    assert!(
        pulled(&bridge) - before <= 2,
        "the iterable was drained past the declared length"
    );
    assert!(
        server.wait_log(&[
            "more than its declared Content-Length (10 bytes)",
            "connection closed"
        ]),
        "{}",
        server.log()
    );

    // Streamed (over the collect limit): the declared bytes exactly, even
    // when the chunk that passes the length holds some of them.
    let (head, body) = until_closed(&bridge, "/pep/raw/declared/100000/30000/4");
    assert!(head.contains("\r\ncontent-length: 100000\r\n"), "{head}");
    assert_eq!(body.len(), 100_000, "{head}");
    assert!(body[90_000..].iter().all(|b| *b == b'd'));
    assert!(server.wait_log(&["more than its declared Content-Length (100000 bytes)"]));

    // Short of the declared length, collected or streamed: the head
    // declares it, the client sees fewer bytes and the end of the
    // connection.
    for (path, declared, sent) in [
        ("/pep/raw/declared/10/4/1", 10, 4),
        ("/pep/raw/declared/100000/30000/2", 100_000, 60_000),
    ] {
        let (head, body) = until_closed(&bridge, path);
        assert!(
            head.contains(&format!("\r\ncontent-length: {declared}\r\n")),
            "{path}: {head}"
        );
        assert_eq!(body.len(), sent, "{path}: {head}");
        let logged =
            format!("ended after {sent} of its declared Content-Length ({declared} bytes)");
        assert!(server.wait_log(&[&logged]), "{path}: {}", server.log());
    }

    // Exactly the declared length: a whole answer, the connection kept;
    // so for a 304, whose Content-Length is not its own body's.
    let mut c = server.connect();
    for _ in 0..2 {
        let r = c.request(&get("/pep/raw/declared/10/5/2"));
        assert_eq!((r.status, r.text()), (200, "aaaaabbbbb"), "{r:?}");
        let r = c.request(&get("/pep/raw/not-modified"));
        assert_eq!((r.status, r.text()), (304, ""), "{r:?}");
    }
    assert_eq!(
        server
            .log_lines(&["its declared Content-Length (1234"])
            .len(),
        0
    );
}

matrix!(a_declared_content_length_is_held_to);

/// Backend-free: one backend.
#[test]
fn wsgi_errors_cuts_a_long_line() {
    let bridge = start("epoll");
    let server = &bridge.server;
    let r = server.get("/pep/raw/long-error-line");
    assert_eq!((r.status, r.text()), (200, "logged"), "{r:?}");
    assert!(
        server.wait_log(&["wsgi.errors: after the long line"]),
        "{}",
        server.log()
    );
    let cut = server.log_lines(&["wsgi.errors: xxx", "[line cut at 8192 bytes]"]);
    assert_eq!(cut.len(), 1, "{}", server.log().len());
    let longest = server
        .log_lines(&["wsgi.errors:"])
        .iter()
        .map(String::len)
        .max()
        .unwrap_or(0);
    assert!(
        longest < 8192 + 200,
        "a wsgi.errors line of {longest} bytes"
    );
}

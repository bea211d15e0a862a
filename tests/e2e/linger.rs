//! Error answers sent while the client is still sending its request reach
//! the client: the host answers, half-closes and reads on (discarding)
//! until the client's EOF or the `--lingering-*` bounds, instead of closing
//! with unread bytes (a reset, which destroys the answer in flight).

use crate::harness::Server;
use std::process::Command;

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

//! Apps that misbehave (the test-only `misbehave` plugin at `/_test`): a
//! panic is a 500 and one log line, a deferred answer from another thread
//! arrives, a dropped responder is a 500, and a late answer for a client
//! that has gone never reaches another client.

use crate::client::request;
use crate::client::{get, Client};
use crate::harness::Server;

matrix!(
    panic_is_500_and_the_host_lives_on,
    panic_on_a_thread_is_500,
    later_answers_from_another_thread,
    dropped_responder_is_500,
    twenty_concurrent_deferred_requests,
    pipelined_deferred_answers_stay_in_order,
    request_sent_while_another_is_deferred,
    late_answer_for_a_gone_client_is_dropped,
    big_response_is_written_whole,
    deferred_answers_follow_head_and_http_1_0_rules,
);

/// The misbehave plugin with hello-project beside it.
fn start(poller: &str) -> Server {
    Server::start(poller, &["misbehave", "hello-project"], &[])
}

fn panic_is_500_and_the_host_lives_on(poller: &str) {
    let server = start(poller);
    let r = server.get("/_test/panic");
    assert_eq!(
        (r.status, r.reason.as_str()),
        (500, "Internal Server Error")
    );
    let r = server.get("/_test/ok");
    assert_eq!((r.status, r.text()), (200, "ok"));
    // The host's line, naming the app (the plugin's own names the place);
    // the log is read by another thread, so wait for that line itself.
    assert!(
        server.wait_log(&["app misbehave panicked"]),
        "no panic line in the log"
    );
    let lines = server.log_lines(&["app misbehave panicked"]);
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert!(lines[0].contains("misbehave: asked to panic"), "{lines:#?}");
    assert!(lines[0].contains("ERROR"), "{lines:#?}");
    // The connection that saw the 500 is still usable too.
    let mut c = server.connect();
    assert_eq!(c.request(&get("/_test/panic")).status, 500);
    assert_eq!(c.request(&get("/hello/")).status, 200);
}

fn panic_on_a_thread_is_500(poller: &str) {
    let server = start(poller);
    let mut c = server.connect();
    assert_eq!(c.request(&get("/_test/panic-later")).status, 500);
    assert_eq!(c.request(&get("/_test/ok")).text(), "ok");
}

fn later_answers_from_another_thread(poller: &str) {
    let server = start(poller);
    let mut c = server.connect();
    let r = c.request(&get("/_test/later"));
    assert_eq!((r.status, r.text()), (200, "later /_test/later"));
    // Twice on the same connection: the loop was woken both times.
    let r = c.request(&get("/_test/later?again"));
    assert_eq!((r.status, r.text()), (200, "later /_test/later?again"));
}

fn dropped_responder_is_500(poller: &str) {
    let server = start(poller);
    let mut c = server.connect();
    let r = c.request(&get("/_test/drop"));
    assert_eq!(
        (r.status, r.reason.as_str()),
        (500, "Internal Server Error")
    );
    assert_eq!(c.request(&get("/_test/ok")).text(), "ok");
}

fn twenty_concurrent_deferred_requests(poller: &str) {
    let server = start(poller);
    let mut clients: Vec<Client> = (0..20).map(|_| server.connect()).collect();
    for (i, c) in clients.iter_mut().enumerate() {
        c.send(&get(&format!("/_test/later?n={i}")));
    }
    for (i, c) in clients.iter_mut().enumerate() {
        let r = c.read_response();
        assert_eq!(r.status, 200, "client {i}");
        assert_eq!(r.text(), format!("later /_test/later?n={i}"), "client {i}");
    }
}

fn pipelined_deferred_answers_stay_in_order(poller: &str) {
    let server = start(poller);
    let mut c = server.connect();
    let mut bytes = get("/_test/later?first");
    bytes.extend(get("/_test/ok"));
    bytes.extend(get("/_test/drop"));
    bytes.extend(get("/_test/later?last"));
    bytes.extend(get("/hello/"));
    c.send(&bytes);
    assert_eq!(c.read_response().text(), "later /_test/later?first");
    assert_eq!(c.read_response().text(), "ok");
    assert_eq!(c.read_response().status, 500);
    assert_eq!(c.read_response().text(), "later /_test/later?last");
    assert_eq!(c.read_response().text(), "Hello World!");
}

fn request_sent_while_another_is_deferred(poller: &str) {
    let server = start(poller);
    let mut c = server.connect();
    for round in 0..3 {
        // The second request most likely arrives while the first is with
        // the app (50 ms): the host must read it once the first is answered.
        c.send(&get(&format!("/_test/later?round={round}")));
        c.send(&get("/_test/ok"));
        let r = c.read_response();
        assert_eq!(r.text(), format!("later /_test/later?round={round}"));
        assert_eq!(c.read_response().text(), "ok", "round {round}");
    }
}

fn late_answer_for_a_gone_client_is_dropped(poller: &str) {
    let server = start(poller);
    for round in 0..5 {
        // The client leaves before its answer is ready; the next client,
        // likely given the same connection slot, must get only its own.
        let mut gone = server.connect();
        gone.send(&get(&format!("/_test/later?gone={round}")));
        drop(gone);
        let mut c = server.connect();
        let r = c.request(&get(&format!("/_test/later?mine={round}")));
        assert_eq!(r.text(), format!("later /_test/later?mine={round}"));
        assert_eq!(c.request(&get("/_test/ok")).text(), "ok", "round {round}");
    }
    assert_eq!(server.get("/hello/").status, 200);
}

fn big_response_is_written_whole(poller: &str) {
    let server = start(poller);
    let mut c = server.connect();
    let mut bytes = get("/_test/big");
    bytes.extend(get("/_test/ok"));
    c.send(&bytes);
    let r = c.read_response();
    assert_eq!(r.status, 200);
    assert_eq!(r.body.len(), 4 << 20);
    let first_bad = r
        .body
        .iter()
        .enumerate()
        .position(|(i, &b)| b != (i % 251) as u8);
    assert_eq!(first_bad, None, "body corrupted");
    assert_eq!(c.read_response().text(), "ok");
}

fn deferred_answers_follow_head_and_http_1_0_rules(poller: &str) {
    let server = start(poller);
    let mut c = server.connect();
    c.send(&request("HEAD", "/_test/later", &[]));
    let r = c.read_head_response();
    assert_eq!(r.status, 200);
    assert_eq!(r.header("Content-Length"), Some("18"));
    // No body bytes followed the HEAD answer.
    assert_eq!(c.request(&get("/_test/ok")).text(), "ok");
    // HTTP/1.0: closed after the deferred answer, unless keep-alive.
    let mut c = server.connect();
    let r = c.request(b"GET /_test/later HTTP/1.0\r\n\r\n");
    assert_eq!(r.text(), "later /_test/later");
    c.assert_closed();
    let mut c = server.connect();
    let r = c.request(b"GET /_test/later HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    assert_eq!(r.header("Connection"), Some("keep-alive"));
    assert_eq!(c.request(b"GET /_test/ok HTTP/1.0\r\n\r\n").text(), "ok");
    c.assert_closed();
}

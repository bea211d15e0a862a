//! `Conn` over an in-memory stream: the protocol steps without a socket.

use super::mem::Mem;
use super::*;
use crate::http::ConnParams;
use std::time::Instant;
use stoa_app_api::Response;

const DATE: &str = "Tue, 01 Dec 2026 00:00:00 GMT";

fn conn(input: &str) -> Conn<Mem> {
    let mut c = Conn::new(Mem::new(input.as_bytes()), "127.0.0.1:1".into());
    c.note_ready(true, false);
    c
}

/// Reads, then answers every ready request at once with its path, the
/// way the loop does; returns how many were answered.
fn serve(c: &mut Conn<Mem>, params: &ConnParams, pool: &mut BufPool) -> usize {
    let mut answered = 0;
    while c.read_due() && c.read_some(params, pool) {}
    while c.may_take_requests() {
        match c.next_request(params, pool) {
            Ok(true) => {
                let (head, buf, _) = c.request_parts().expect("a ready request");
                let path = String::from_utf8_lossy(&buf[head.target.clone()]).into_owned();
                c.begin_dispatch(answered as u64 + 1, Instant::now(), None, None, None);
                let mut r = Response::text(200, &path);
                c.answer(&mut r, &[], &terms(params, false), pool)
                    .expect("a pending request");
                answered += 1;
            }
            Ok(false) => break,
            Err(e) => {
                c.fail(&e, DATE, pool);
                break;
            }
        }
    }
    c.flush(pool).expect("flush");
    answered
}

fn written(c: &Conn<Mem>) -> String {
    c.stream().text()
}

fn terms(params: &ConnParams, close: bool) -> Terms<'_> {
    Terms {
        date: DATE,
        params,
        close,
    }
}

#[test]
fn pipelined_requests_are_answered_in_order() {
    let mut c = conn("GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n");
    let n = serve(&mut c, &ConnParams::default(), &mut BufPool::default());
    assert_eq!(n, 2);
    let out = written(&c);
    let (a, b) = (out.find("\r\n\r\n/a"), out.find("\r\n\r\n/b"));
    assert!(a.is_some() && b.is_some() && a < b, "{out}");
    assert!(!out.contains("Connection:"), "{out}");
    assert!(!c.finished() && c.is_idle());
}

#[test]
fn keep_alive_rules_for_1_0_and_1_1() {
    let params = ConnParams::default();
    for (request, connection, closes) in [
        ("GET / HTTP/1.0\r\n\r\n", Some("close"), true),
        (
            "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
            Some("keep-alive"),
            false,
        ),
        ("GET / HTTP/1.1\r\nHost: x\r\n\r\n", None, false),
        (
            "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            Some("close"),
            true,
        ),
    ] {
        let mut c = conn(request);
        assert_eq!(serve(&mut c, &params, &mut BufPool::default()), 1);
        let out = written(&c);
        match connection {
            Some(v) => assert!(out.contains(&format!("Connection: {v}\r\n")), "{out}"),
            None => assert!(!out.contains("Connection:"), "{out}"),
        }
        assert_eq!(c.finished(), closes, "{request:?}");
    }
}

#[test]
fn the_last_request_allowed_closes() {
    let params = ConnParams {
        max_requests_per_conn: 2,
        ..ConnParams::default()
    };
    let get = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    let mut c = conn(&get.repeat(3));
    assert_eq!(serve(&mut c, &params, &mut BufPool::default()), 2);
    let out = written(&c);
    assert_eq!(out.matches("Connection: close").count(), 1, "{out}");
    assert!(out.rfind("Connection: close") > out.find("HTTP/1.1 200"));
    // The third request is left unread: the connection lingers.
    assert!(!c.finished() && c.lingers());
}

#[test]
fn the_host_may_close_whatever_the_request_wanted() {
    let params = ConnParams::default();
    let mut pool = BufPool::default();
    let mut c = conn("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    c.read_some(&params, &mut pool);
    assert_eq!(c.next_request(&params, &mut pool), Ok(true));
    c.begin_dispatch(1, Instant::now(), None, None, None);
    assert!(c.is_dispatched() && !c.may_take_requests());
    let mut r = Response::text(504, "late");
    c.answer(&mut r, &[], &terms(&params, true), &mut pool)
        .expect("pending");
    c.flush(&mut pool).expect("flush");
    assert!(written(&c).contains("Connection: close"));
    assert!(c.finished());
}

#[test]
fn head_gets_the_length_but_no_body() {
    let mut c = conn("HEAD /x HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(
        serve(&mut c, &ConnParams::default(), &mut BufPool::default()),
        1
    );
    let out = written(&c);
    assert!(out.contains("Content-Length: 2\r\n"), "{out}");
    assert!(out.ends_with("\r\n\r\n"), "{out}");
}

#[test]
fn a_half_closed_client_still_gets_its_answer() {
    let params = ConnParams::default();
    let mut pool = BufPool::default();
    let mut c = conn("GET /late HTTP/1.1\r\nHost: x\r\n\r\n");
    c.stream.eof = true;
    c.read_some(&params, &mut pool);
    assert_eq!(c.next_request(&params, &mut pool), Ok(true));
    c.begin_dispatch(7, Instant::now(), Some(0), None, None);
    // The end of stream came with the request: the connection waits for
    // the app's answer instead of closing.
    assert!(c.waits_for(7) && !c.finished());
    assert_eq!(c.interest_change(), Some(Interest::NONE));
    let mut r = Response::text(200, "done");
    let pending = c
        .answer(&mut r, &[], &terms(&params, false), &mut pool)
        .expect("pending");
    assert_eq!((pending.id, pending.slot), (7, Some(0)));
    c.flush(&mut pool).expect("flush");
    assert!(written(&c).ends_with("done"));
    // The loop reads again after an answer: the end of stream is found.
    c.note_ready(true, false);
    assert!(c.read_due());
    assert!(!c.read_some(&params, &mut pool));
    assert!(c.finished(), "answered, and the peer has finished sending");
}

#[test]
fn a_write_that_blocks_midway_resumes() {
    let params = ConnParams::default();
    let mut pool = BufPool::default();
    let mut c = conn("GET /0123456789 HTTP/1.1\r\nHost: x\r\n\r\n");
    c.stream.window = 10;
    assert_eq!(serve(&mut c, &params, &mut pool), 1);
    assert_eq!(c.stream().written.len(), 10);
    assert!(c.has_output());
    assert_eq!(c.interest_change(), Some(Interest::BOTH));
    c.update_deadline(&params, Instant::now());
    assert_eq!(c.deadline().map(|(_, d)| d), Some(Deadline::Send));
    c.stream.window = usize::MAX;
    c.flush(&mut pool).expect("flush");
    assert!(!c.has_output());
    assert!(written(&c).ends_with("/0123456789"));
    assert_eq!(c.interest_change(), Some(Interest::READABLE));
}

#[test]
fn a_framing_error_is_answered_and_closes() {
    let mut c = conn("GET / HTTP/1.1\r\n\r\n");
    assert_eq!(
        serve(&mut c, &ConnParams::default(), &mut BufPool::default()),
        0
    );
    assert!(written(&c).starts_with("HTTP/1.1 400 Bad Request"));
    // The client may still be sending: it lingers, then closes.
    assert!(!c.finished() && c.lingers());
}

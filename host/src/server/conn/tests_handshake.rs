//! `Conn` over an in-memory transport whose handshake is scripted: the
//! handshake's deadline, its timeout, and plain HTTP where it was due.

use super::mem::Mem;
use super::*;
use crate::settings::{ConnParams, LingerLimits};
use crate::stats::HandshakeFailure;
use std::time::Duration;

/// A connection whose transport is handshaking.
fn handshaking() -> Conn<Mem> {
    let mut stream = Mem::new(b"");
    stream.handshaking = true;
    Conn::new(stream, "127.0.0.1:1".into())
}

#[test]
fn the_handshake_deadline_runs_from_the_accept_and_the_idle_one_follows() {
    let params = ConnParams {
        tls_handshake_timeout: Duration::from_secs(3),
        ..ConnParams::default()
    };
    let mut pool = BufPool::default();
    let mut c = handshaking();
    let start = Instant::now();
    c.update_deadline(&params, start);
    let at = start + Duration::from_secs(3);
    assert_eq!(c.deadline(), Some((at, Deadline::Handshake)));
    // Reads that give no plaintext (a ClientHello in pieces) extend
    // nothing.
    c.note_ready(true, false);
    assert!(!c.read_some(&params, &mut pool));
    c.update_deadline(&params, start + Duration::from_secs(2));
    assert_eq!(c.deadline(), Some((at, Deadline::Handshake)));
    // Done: the wait for the first request starts then.
    c.stream_mut().handshaking = false;
    c.note_ready(true, false);
    c.read_some(&params, &mut pool);
    let later = start + Duration::from_secs(2);
    c.update_deadline(&params, later);
    assert_eq!(
        c.deadline(),
        Some((later + params.keep_alive_timeout, Deadline::Idle))
    );
}

#[test]
fn a_handshake_out_of_time_is_counted_as_a_timeout() {
    let mut c = handshaking();
    c.handshake_timed_out();
    assert_eq!(c.handshake_failure(), Some(HandshakeFailure::Timeout));
    c.update_deadline(&ConnParams::default(), Instant::now());
    assert_ne!(c.deadline().map(|(_, d)| d), Some(Deadline::Handshake));
}

#[test]
fn plain_http_where_the_handshake_was_due_is_answered_400_and_lingers() {
    let mut pool = BufPool::default();
    let mut c = handshaking();
    assert!(!c.owes_plain_http_answer());
    // The transport told plain HTTP, and passes its bytes through now.
    c.stream_mut().failure = Some(HandshakeFailure::PlainHttp);
    c.stream_mut().send(b"/ HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(c.owes_plain_http_answer());
    c.answer_plain_http("Tue, 01 Dec 2026 00:00:00 GMT", &mut pool);
    assert!(!c.owes_plain_http_answer(), "answered once");
    c.flush(&mut pool).expect("flush");
    let out = c.stream().text();
    assert!(out.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{out}");
    assert!(out.contains("\r\nConnection: close\r\n"), "{out}");
    assert!(
        out.ends_with("The plain HTTP request was sent to HTTPS port\n"),
        "{out}"
    );
    // The rest of the request is read and dropped after the FIN.
    assert!(c.lingers());
    let now = Instant::now();
    assert_eq!(c.linger(now, &LingerLimits::default()), Flow::Open);
    assert!(c.stream().shut_at.is_some());
    assert!(c.stream().input.is_empty());
}

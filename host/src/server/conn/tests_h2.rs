//! An HTTP/2 connection's end over an in-memory stream: after its GOAWAY
//! the connection lingers half-closed (the GOAWAY and the answers before it
//! are out before the FIN), dropping what the client still sends, so the
//! client reads them rather than a reset.

use super::mem::Mem;
use super::*;
use crate::budget::Budget;
use crate::http::h2::frame::{kind, Head, HEAD_LEN};
use crate::http::h2::params::H2Params;
use crate::http::h2::PREFACE;
use crate::settings::LingerLimits;

/// A connection switched to HTTP/2 that has read `input` (after the
/// preface and an empty SETTINGS) and written what the machine answered.
fn h2(input: &[u8]) -> (Conn<Mem>, BufPool) {
    let mut hello = PREFACE.to_vec();
    hello.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]);
    hello.extend_from_slice(input);
    let mut c = Conn::new(Mem::new(&hello), "127.0.0.1:1".into());
    c.note_ready(true, false);
    let mut pool = BufPool::default();
    let held = Budget::unlimited().reservation();
    c.promote_h2(H2Params::default(), &mut pool, (Default::default(), held));
    c.h2_read();
    c.h2_recv(Instant::now(), &mut pool);
    c.flush(&mut pool).expect("flush");
    (c, pool)
}

/// The kind of the last whole frame in `bytes`.
fn last_kind(mut bytes: &[u8]) -> Option<u8> {
    let mut last = None;
    while let Some(head) = Head::parse(bytes) {
        last = Some(head.kind);
        bytes = bytes.get(HEAD_LEN + head.len..)?;
    }
    last
}

#[test]
fn a_connection_error_lingers_after_its_goaway() {
    // HEADERS on an even stream: a connection error, PROTOCOL_ERROR.
    let (mut c, _pool) = h2(&[0, 0, 0, 1, 5, 0, 0, 0, 2]);
    // Done with HTTP/2, and to linger (the loop asks `lingers` first).
    assert!(c.finished() && c.lingers());
    let out = c.stream().written.len();
    let now = Instant::now();
    let limits = LingerLimits::default();
    assert_eq!(c.linger(now, &limits), Flow::Open);
    // The FIN comes after the GOAWAY; what the client sends then is dropped.
    assert_eq!(c.stream().shut_at, Some(out));
    assert_eq!(last_kind(&c.stream().written), Some(kind::GOAWAY));
    c.stream.send(&[0, 0, 4, 8, 0, 0, 0, 0, 0, 0, 0, 1, 0]);
    assert_eq!(c.linger(now, &limits), Flow::Open);
    assert!(c.stream().input.is_empty());
    c.stream.eof = true;
    assert_eq!(c.linger(now, &limits), Flow::Close);
}

#[test]
fn an_idle_connection_after_a_drain_lingers_too() {
    let (mut c, mut pool) = h2(&[]);
    assert!(!c.lingers(), "an open connection does not linger");
    if let Some((session, out)) = c.h2_parts() {
        session.machine.go_away(out.buf_for(&mut pool));
    }
    c.flush(&mut pool).expect("flush");
    assert!(c.finished() && c.lingers());
    let out = c.stream().written.len();
    assert_eq!(last_kind(&c.stream().written), Some(kind::GOAWAY));
    assert_eq!(
        c.linger(Instant::now(), &LingerLimits::default()),
        Flow::Open
    );
    assert_eq!(c.stream().shut_at, Some(out));
}

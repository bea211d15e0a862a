//! `Conn` over an in-memory stream: the protocol steps without a socket.

use super::mem::Mem;
use super::*;
use crate::http::answer::HostAnswer;
use crate::settings::{ConnParams, LingerLimits};
use crate::stream_line::{HostStream, LineAddr, StreamLine};
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use stoa_app_api::Response;

const DATE: &str = "Tue, 01 Dec 2026 00:00:00 GMT";

pub(super) fn conn(input: &str) -> Conn<Mem> {
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

/// A connection that has read `input` and handed its first request, as
/// `id`, to the app in `slot`.
pub(super) fn dispatched(
    input: &str,
    id: u64,
    slot: Option<usize>,
    pool: &mut BufPool,
) -> Conn<Mem> {
    let params = ConnParams::default();
    let mut c = conn(input);
    c.read_some(&params, pool);
    assert_eq!(c.next_request(&params, pool), Ok(true));
    c.begin_dispatch(id, Instant::now(), slot, None, None);
    c
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
    let mut c = dispatched("GET / HTTP/1.1\r\nHost: x\r\n\r\n", 1, None, &mut pool);
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
fn a_client_that_half_closes_with_its_request_has_left() {
    let params = ConnParams::default();
    let mut pool = BufPool::default();
    let mut c = conn("GET /late HTTP/1.1\r\nHost: x\r\n\r\n");
    c.stream.eof = true;
    c.read_some(&params, &mut pool);
    assert_eq!(c.next_request(&params, &mut pool), Ok(true));
    c.begin_dispatch(7, Instant::now(), Some(0), None, None);
    // The end of stream came with the request, before its answer: the
    // connection still reads (the socket stays readable), finds it, and
    // the client has left (as for nginx and ASGI servers): the loop
    // closes the connection.
    assert!(c.waits_for(7) && !c.client_gone());
    assert_eq!(c.interest_change(), None, "still readable");
    c.note_ready(true, false);
    assert!(c.read_due());
    assert!(!c.read_some(&params, &mut pool));
    assert!(c.client_gone());
    // Answered at once instead (as an app answering inline is), the
    // answer goes out and the connection ends after it.
    let mut r = Response::text(200, "done");
    let pending = c
        .answer(&mut r, &[], &terms(&params, false), &mut pool)
        .expect("pending");
    assert_eq!((pending.id, pending.slot), (7, Some(0)));
    assert!(!c.client_gone());
    c.flush(&mut pool).expect("flush");
    assert!(written(&c).ends_with("done"));
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

#[test]
fn keep_alive_waits_idle_then_serves_the_next_request() {
    let params = ConnParams::default();
    let mut pool = BufPool::default();
    let mut c = conn("GET /one HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(serve(&mut c, &params, &mut pool), 1);
    assert!(c.is_between_requests() && !c.finished());
    c.update_deadline(&params, Instant::now());
    assert_eq!(c.deadline().map(|(_, d)| d), Some(Deadline::Idle));
    assert_eq!(c.interest_change(), None, "still reading");
    c.stream.send(b"GET /two HTTP/1.1\r\nHost: x\r\n\r\n");
    c.note_ready(true, false);
    assert_eq!(serve(&mut c, &params, &mut pool), 1);
    let out = written(&c);
    assert_eq!(out.matches("HTTP/1.1 200").count(), 2, "{out}");
    assert!(out.ends_with("/two"), "{out}");
    assert!(c.is_between_requests());
}

#[test]
fn a_dispatched_request_holds_pipelined_bytes_until_its_answer() {
    let params = ConnParams::default();
    let mut pool = BufPool::default();
    let mut c = dispatched(
        "GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n",
        1,
        Some(2),
        &mut pool,
    );
    c.set_app_timeout(Duration::from_secs(3));
    let pending = c.pending().expect("pending");
    assert_eq!((pending.id, pending.slot), (1, Some(2)));
    assert!(c.waits_for(1) && !c.waits_for(2));
    // No request is read or parsed meanwhile, and the app's own timeout runs.
    assert!(!c.may_take_requests() && !c.read_due());
    let now = Instant::now();
    c.update_deadline(&params, now);
    assert_eq!(
        c.deadline(),
        Some((now + Duration::from_secs(3), Deadline::App))
    );
    let mut r = Response::text(200, "a");
    c.answer(&mut r, &[], &terms(&params, false), &mut pool)
        .expect("pending");
    // A second answer finds nothing waiting.
    let mut again = Response::text(200, "x");
    assert!(c
        .answer(&mut again, &[], &terms(&params, false), &mut pool)
        .is_none());
    assert!(c.may_take_requests() && c.pending().is_none());
    assert_eq!(c.next_request(&params, &mut pool), Ok(true));
    let (head, buf, _) = c.request_parts().expect("the pipelined request");
    assert_eq!(&buf[head.target.clone()], b"/b");
}

#[test]
fn a_close_with_bytes_unread_lingers_half_closed_until_the_clients_eof() {
    let params = ConnParams::default();
    let mut pool = BufPool::default();
    let limits = LingerLimits::default();
    let mut c =
        conn("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\nGET /more HTTP/1.1\r\n");
    assert_eq!(serve(&mut c, &params, &mut pool), 1);
    assert!(c.lingers() && !c.is_lingering() && !c.finished());
    let answer = c.stream().written.len();
    let now = Instant::now();
    assert_eq!(c.linger(now, &limits), Flow::Open);
    assert!(c.is_lingering() && !c.lingers_on());
    // The FIN comes after the whole answer; what follows is dropped.
    assert_eq!(c.stream().shut_at, Some(answer));
    assert_eq!(c.deadline_of_linger(), Some(now + limits.timeout));
    c.update_deadline(&params, now);
    assert_eq!(c.deadline(), Some((now + limits.timeout, Deadline::Linger)));
    assert_eq!(c.interest_change(), None, "reading, to drop");
    c.stream.send(&[b'x'; 10_000]);
    assert_eq!(c.linger(now, &limits), Flow::Open);
    assert!(c.stream().input.is_empty());
    assert_eq!(c.stream().written.len(), answer, "nothing more written");
    c.stream.eof = true;
    assert_eq!(c.linger(now, &limits), Flow::Close);
}

#[test]
fn a_close_with_nothing_unread_closes_at_once() {
    let mut c = conn("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    assert_eq!(
        serve(&mut c, &ConnParams::default(), &mut BufPool::default()),
        1
    );
    assert!(c.finished() && !c.lingers());
    assert_eq!(c.stream().shut_at, None);
}

#[test]
fn a_refusal_drops_the_request_with_the_app_and_lingers() {
    let mut pool = BufPool::default();
    let mut c = dispatched("GET / HTTP/1.1\r\nHost: x\r\n\r\n", 1, None, &mut pool);
    c.refuse(HostAnswer::AtCapacity, DATE, &mut pool);
    assert!(c.pending().is_none() && !c.is_dispatched());
    c.flush(&mut pool).expect("flush");
    assert!(written(&c).starts_with("HTTP/1.1 503"));
    assert!(c.lingers());
}

/// A streamed answer's line for request `id`, and the worker's count of
/// open streams.
fn stream_line(id: u64) -> (Arc<StreamLine>, Arc<AtomicU64>) {
    struct NoWake;
    impl crate::poller::Wake for NoWake {
        fn wake(&self) -> io::Result<()> {
            Ok(())
        }
    }
    let addr = LineAddr {
        token: crate::poller::Token(1),
        id,
        inbox: Arc::new(crate::inbox::Inbox::new(Arc::new(NoWake))),
        slot: 0,
        app: Arc::from("test"),
    };
    let line = StreamLine::new(addr, 1 << 16, Duration::from_secs(1), None, 0);
    (line, Arc::new(AtomicU64::new(0)))
}

/// Starts a streamed answer to the request `id` that `c` waits on: its
/// line and the count of open streams.
pub(super) fn streaming(
    c: &mut Conn<Mem>,
    id: u64,
    pool: &mut BufPool,
) -> (Arc<StreamLine>, Arc<AtomicU64>) {
    let (line, open) = stream_line(id);
    let mut head = Response::text(200, "");
    let params = ConnParams::default();
    let pending = c.start_stream(
        &mut head,
        line.clone(),
        open.clone(),
        &terms(&params, false),
        pool,
    );
    assert_eq!(pending.map(|p| p.id), Some(id));
    (line, open)
}

#[test]
fn a_streamed_answer_goes_out_chunked_then_the_next_request_is_served() {
    let params = ConnParams::default();
    let mut pool = BufPool::default();
    let mut c = dispatched(
        "GET /s HTTP/1.1\r\nHost: x\r\n\r\nGET /next HTTP/1.1\r\nHost: x\r\n\r\n",
        5,
        None,
        &mut pool,
    );
    let (line, open) = streaming(&mut c, 5, &mut pool);
    assert!(c.is_streaming() && c.streams_for(5) && !c.streams_for(4));
    assert_eq!(open.load(Ordering::Relaxed), 1);
    // Nothing is read while it streams; the app's silence is timed.
    assert!(!c.may_take_requests() && c.pending().is_none());
    assert_eq!(line.send(b"abc"), stoa_app_api::abi::SEND_SENT);
    c.pull_stream(&mut pool, false);
    c.flush(&mut pool).expect("flush");
    let now = Instant::now();
    c.update_deadline(&params, now);
    assert_eq!(
        c.deadline(),
        Some((now + params.stream_idle_timeout, Deadline::StreamIdle))
    );
    let out = written(&c);
    assert!(out.contains("Transfer-Encoding: chunked\r\n"), "{out}");
    assert!(out.ends_with("\r\n\r\n3\r\nabc\r\n"), "{out}");
    assert_eq!(line.finish(), stoa_app_api::abi::SEND_SENT);
    c.pull_stream(&mut pool, false);
    assert!(!c.is_streaming() && c.may_take_requests());
    assert_eq!(open.load(Ordering::Relaxed), 0, "the stream is counted out");
    // The pipelined request waited behind it.
    assert_eq!(serve(&mut c, &params, &mut pool), 1);
    let out = written(&c);
    assert!(out.contains("abc\r\n0\r\n\r\nHTTP/1.1 200"), "{out}");
    assert!(out.ends_with("/next"), "{out}");
}

#[test]
fn a_stream_ended_abnormally_closes_without_its_last_chunk() {
    let mut pool = BufPool::default();
    let mut c = dispatched("GET /s HTTP/1.1\r\nHost: x\r\n\r\n", 1, None, &mut pool);
    let (line, _open) = streaming(&mut c, 1, &mut pool);
    line.send(b"part");
    drop(HostStream::new(line));
    c.pull_stream(&mut pool, false);
    c.flush(&mut pool).expect("flush");
    assert!(!written(&c).ends_with("0\r\n\r\n"));
    assert!(c.finished());
}

#[test]
fn input_held_inside_the_transport_keeps_the_connection_reading() {
    let params = ConnParams::default();
    let mut pool = BufPool::default();
    let get = "GET /held HTTP/1.1\r\nHost: x\r\n\r\n";
    let mut c = conn(get);
    // Each read gives 8 bytes, a short read: without the transport's word
    // the connection would wait for an edge the socket never gives.
    c.stream.record = Some(8);
    assert!(c.read_some(&params, &mut pool));
    assert!(c.read_due(), "the transport still holds input");
    assert_eq!(serve(&mut c, &params, &mut pool), 1);
    assert!(written(&c).ends_with("/held"));
    assert!(!c.read_due(), "all read");
}

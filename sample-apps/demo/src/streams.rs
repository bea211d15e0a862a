//! The demo's streamed answers: `/demo/clock` (Server-Sent Events, one a
//! second) and `/demo/bytes?n=N` (a generated download of N bytes, sent as
//! fast as the client reads and no faster).

use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use stoa_app_api::{host, log, Request, Responder, Response, Sent, Stream};

/// Size of each chunk `/demo/bytes` sends.
pub const CHUNK: usize = 64 * 1024;

/// Most events `?count=` may ask of `/demo/clock` (a day's worth).
const MAX_EVENTS: u64 = 86_400;

/// The byte at offset `i` of a `/demo/bytes` body: the alphabet, repeated.
pub fn byte_at(i: u64) -> u8 {
    b'a' + (i % 26) as u8
}

/// `CHUNK + 26` bytes of `byte_at` from 0: any chunk of the body is a
/// slice of it, from its offset modulo 26.
fn pattern() -> &'static [u8] {
    static PATTERN: OnceLock<Vec<u8>> = OnceLock::new();
    PATTERN.get_or_init(|| (0..(CHUNK + 26) as u64).map(byte_at).collect())
}

/// `/demo/clock?count=N`: an event a second (`id`, then `data` the Unix
/// time), N of them then the end (without `count`, until the client goes).
pub fn clock(request: &Request<'_>, responder: Responder) {
    let count = match request.query_param("count") {
        None => u64::MAX,
        Some(v) => match v.parse::<u64>() {
            Ok(n) if (1..=MAX_EVENTS).contains(&n) => n,
            _ => {
                let why =
                    format!("count must be a whole number from 1 to {MAX_EVENTS}, got {v:?}\n");
                return responder.respond(Response::text(400, &why));
            }
        },
    };
    let head = Response::new(200)
        .with_header("Content-Type", "text/event-stream")
        .with_header("Cache-Control", "no-cache")
        // Tells nginx not to buffer the events (deploy/ turns it off too).
        .with_header("X-Accel-Buffering", "no");
    tick(responder.stream(head), 0, count);
}

/// Sends event `n` and sets the timer for the next.
fn tick(mut stream: Stream, n: u64, count: u64) {
    if n == count {
        let _ = stream.finish();
        return;
    }
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    match stream.send(format!("id: {n}\ndata: {now}\n\n").as_bytes()) {
        Sent::Closed => return,
        // A client this far behind misses a tick rather than growing a queue.
        Sent::Ok | Sent::WouldBlock => {}
    }
    match host() {
        Some(host) => host.call_later(Duration::from_secs(1), move || tick(stream, n + 1, count)),
        None => drop(stream),
    }
}

/// `/demo/bytes?n=N`: N bytes (`byte_at`), with their `Content-Length`,
/// produced on the loop (or on the pool with `&from=pool`).
pub fn bytes(request: &Request<'_>, responder: Responder) {
    let n = match request.query_param("n").map(|v| (v, v.parse::<u64>())) {
        Some((_, Ok(n))) => n,
        Some((v, Err(_))) => {
            let why = format!("n must be a whole number of bytes, got {v:?}\n");
            return responder.respond(Response::text(400, &why));
        }
        None => {
            return responder.respond(Response::text(400, "n is missing: /demo/bytes?n=BYTES\n"))
        }
    };
    let head = Response::new(200).with_header("Content-Type", "application/octet-stream");
    let stream = responder.stream_sized(head, n);
    // `?from=pool`: a blocking producer on the host's pool (send_blocking
    // waits for room) instead of the loop's drain callbacks.
    match (request.query_param("from"), host()) {
        (Some("pool"), Some(host)) => {
            if host
                .spawn_blocking(move || produce_blocking(stream, n))
                .is_err()
            {
                log::warn!("the blocking pool is full; /demo/bytes?from=pool dropped");
            }
        }
        _ => pump(stream, 0, n),
    }
}

/// Sends bytes `0..to` from a pool thread, waiting for room as needed.
fn produce_blocking(mut stream: Stream, to: u64) {
    let pattern = pattern();
    let mut from = 0;
    while from < to {
        let len = (to - from).min(CHUNK as u64);
        let at = (from % 26) as usize;
        match stream.send_blocking(&pattern[at..at + len as usize]) {
            Sent::Ok => from += len,
            // Still full after --send-timeout: the client stalled; try again
            // (the host closes a stalled connection, and then it is Closed).
            Sent::WouldBlock => {}
            Sent::Closed => return,
        }
    }
    let _ = stream.finish();
}

/// Sends bytes `from..to` until the queue is full, then goes on from the
/// drain callback (no thread waits).
fn pump(mut stream: Stream, mut from: u64, to: u64) {
    let pattern = pattern();
    while from < to {
        let len = (to - from).min(CHUNK as u64);
        let at = (from % 26) as usize;
        match stream.send(&pattern[at..at + len as usize]) {
            Sent::Ok => from += len,
            Sent::Closed => return,
            Sent::WouldBlock => return stream.resume_on_drain(move |s| pump(s, from, to)),
        }
    }
    let _ = stream.finish();
}

#[cfg(test)]
mod tests {
    use super::*;
    use stoa_app_api::testing::call;

    fn get(path: &'static str, query: &'static str) -> Response {
        call(
            &crate::Demo::default(),
            &Request::sample("GET", "/demo", path, query),
        )
    }

    #[test]
    fn bytes_sends_n_bytes_and_refuses_a_bad_n() {
        let body = get("/bytes", "n=100000").body;
        assert_eq!(body.len(), 100_000);
        assert!(body
            .iter()
            .enumerate()
            .all(|(i, b)| *b == byte_at(i as u64)));
        assert_eq!(get("/bytes", "n=0").body.len(), 0);
        let bad = get("/bytes", "n=ten");
        assert_eq!(
            (bad.status, bad.body_str()),
            (400, Ok("n must be a whole number of bytes, got \"ten\"\n"))
        );
        assert_eq!(get("/bytes", "").status, 400);
    }

    #[test]
    fn clock_sends_count_events_in_order() {
        let events = get("/clock", "count=2");
        assert_eq!(
            events.header("content-type"),
            Some(&b"text/event-stream"[..])
        );
        let text = events.body_str().unwrap_or_default().to_string();
        let ids: Vec<&str> = text.lines().filter(|l| l.starts_with("id: ")).collect();
        assert_eq!(ids, ["id: 0", "id: 1"]);
        assert_eq!(get("/clock", "count=0").status, 400);
    }
}

//! Response bytes: status line, the host's headers, the app's headers, the
//! body; and the `Date` value, formatted once a second.

use std::cell::RefCell;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use stoa_app_api::{Response, StaticHeader};

/// An app's constant headers (`respond_with_static`), written after the
/// response's own. They point into the plugin's image, which stays mapped
/// for the life of the process (plugins are never unloaded).
pub type Fixed = &'static [StaticHeader];

/// The `Server` header value.
pub const SERVER: &str = concat!("stoa/", env!("CARGO_PKG_VERSION"));

/// How the response ends the exchange.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Persist {
    /// HTTP/1.1 keep-alive: no `Connection` header needed.
    KeepAlive,
    /// HTTP/1.0 keep-alive: says `Connection: keep-alive`.
    KeepAlive10,
    /// The connection closes after this response.
    Close,
}

/// The `Date` header value, refreshed at most once a second.
pub struct DateCache {
    second: u64,
    value: String,
    /// Until when (on the loop's clock) `value` is the current second's:
    /// the wall clock is read only past it, not once per turn.
    until: Option<Instant>,
}

impl DateCache {
    pub fn new() -> Self {
        let mut d = DateCache {
            second: u64::MAX,
            value: String::new(),
            until: None,
        };
        d.refresh(SystemTime::now());
        d
    }

    /// Brings the date up to the loop's clock reading `now`: the wall
    /// clock is read (and the value re-formatted if the second changed)
    /// only once `now` has passed the end of the second it last showed,
    /// so a loop turning 100,000 times a second reads it about once. The
    /// end is counted from a loop reading taken before the wall clock
    /// read, so it is never later than the real end of that second; a
    /// wall clock that is set (not just ticking) shows within a second.
    pub fn refresh_by(&mut self, now: Instant) {
        if self.until.is_some_and(|until| now < until) {
            return;
        }
        let wall = SystemTime::now();
        self.refresh(wall);
        let into_second = wall.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO);
        let left =
            Duration::from_secs(1) - Duration::from_nanos(u64::from(into_second.subsec_nanos()));
        self.until = Some(now + left);
    }

    /// Re-formats the date if the second changed.
    pub fn refresh(&mut self, now: SystemTime) {
        let secs = now
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO)
            .as_secs();
        if secs != self.second {
            self.second = secs;
            self.value = httpdate::fmt_http_date(now);
        }
    }

    pub fn get(&self) -> &str {
        &self.value
    }
}

impl Default for DateCache {
    fn default() -> Self {
        Self::new()
    }
}

/// The reason phrase for a status code: the common ones from this table,
/// any other registered one from the `http` crate's copy of the IANA
/// registry, and the class's name (RFC 9110 §15) for an unregistered code.
pub fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        204 => "No Content",
        206 => "Partial Content",
        301 => "Moved Permanently",
        302 => "Found",
        303 => "See Other",
        304 => "Not Modified",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        411 => "Length Required",
        413 => "Content Too Large",
        414 => "URI Too Long",
        415 => "Unsupported Media Type",
        417 => "Expectation Failed",
        422 => "Unprocessable Content",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        505 => "HTTP Version Not Supported",
        _ => registered_reason(status),
    }
}

/// The registered reason phrase of a status missing from `reason`'s
/// table, or its class's name.
#[cold]
fn registered_reason(status: u16) -> &'static str {
    let registered = http::StatusCode::from_u16(status)
        .ok()
        .and_then(|code| code.canonical_reason());
    registered.unwrap_or(match status / 100 {
        1 => "Informational",
        2 => "Successful",
        3 => "Redirection",
        4 => "Client Error",
        _ => "Server Error",
    })
}

/// Headers the host owns; an app's copies of them are dropped.
pub(crate) fn host_owned(name: &str) -> bool {
    [
        "content-length",
        "transfer-encoding",
        "connection",
        "date",
        "server",
        "keep-alive",
    ]
    .iter()
    .any(|h| name.eq_ignore_ascii_case(h))
}

/// True if a header name holds a control byte, a space, `:` or a byte
/// past ASCII (it would split or corrupt the head).
pub(crate) fn bad_name(name: &[u8]) -> bool {
    let word = |w| any_below(w, b'!') || any_above(w, b'~') || any_byte(w, b':');
    any_in(name, word)
}

/// True if a header value holds CR, LF or NUL.
pub(crate) fn bad_value(value: &[u8]) -> bool {
    let word = |w| any_zero(w) || any_byte(w, b'\r') || any_byte(w, b'\n');
    any_in(value, word)
}

/// A byte 1 in each lane of a word, and each lane's high bit.
const ONES: u64 = u64::from_ne_bytes([1; 8]);
const HIGHS: u64 = ONES * 0x80;

// Tests on eight bytes at once (exact for "is there such a byte", from the
// bit-twiddling classics): a zero byte, the byte `b`, a byte under `n`
// (n <= 128), a byte over `n` (n <= 127).
fn any_zero(w: u64) -> bool {
    w.wrapping_sub(ONES) & !w & HIGHS != 0
}

fn any_byte(w: u64, b: u8) -> bool {
    any_zero(w ^ (ONES * u64::from(b)))
}

fn any_below(w: u64, n: u8) -> bool {
    w.wrapping_sub(ONES * u64::from(n)) & !w & HIGHS != 0
}

fn any_above(w: u64, n: u8) -> bool {
    (w.wrapping_add(ONES * u64::from(127 - n)) | w) & HIGHS != 0
}

/// True if `word` holds for a byte of `bytes`, tested eight bytes at a
/// time; the tail is tested as the last eight bytes (overlapping), or
/// padded with `a` (which no check rejects) in a shorter slice.
fn any_in(bytes: &[u8], word: impl Fn(u64) -> bool) -> bool {
    let load = |c: &[u8]| u64::from_le_bytes(c.try_into().unwrap_or([b'a'; 8]));
    let mut chunks = bytes.chunks_exact(8);
    if chunks.any(|c| word(load(c))) {
        return true;
    }
    match bytes.len() {
        n if n % 8 == 0 => false,
        n if n > 8 => word(load(&bytes[n - 8..])),
        n => {
            let mut padded = [b'a'; 8];
            padded[..n].copy_from_slice(bytes);
            word(u64::from_le_bytes(padded))
        }
    }
}

/// True for statuses that never carry a body (RFC 9110 §6.4.1).
fn bodiless(status: u16) -> bool {
    status < 200 || status == 204 || status == 304
}

/// Appends one serialised response to `out`, body included. `head_only`
/// answers HEAD: the headers (with the body's length) but no body.
pub fn write_response(
    out: &mut Vec<u8>,
    resp: &Response,
    head_only: bool,
    persist: Persist,
    date: &str,
) {
    if write_head(out, resp, &[], head_only, persist, date) {
        out.extend_from_slice(&resp.body);
    }
}

/// Appends the status line and headers of a response to `out`, then the
/// app's constant headers `fixed`; true if its body goes out after them
/// (not for HEAD, nor for a status without a body).
pub fn write_head(
    out: &mut Vec<u8>,
    resp: &Response,
    fixed: Fixed,
    head_only: bool,
    persist: Persist,
    date: &str,
) -> bool {
    let length = BodyLength::Length(resp.body.len() as u64);
    write_head_framed(out, resp, fixed, length, persist, date);
    !head_only && !bodiless(written_status(resp.status))
}

/// The status written for `status`: itself if final, else 500.
fn written_status(status: u16) -> u16 {
    if (200..600).contains(&status) {
        status
    } else {
        500
    }
}

/// How a response head announces its body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyLength {
    /// `Content-Length: n`.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
    /// Neither: the body ends when the connection closes (or a HEAD
    /// answer without a declared length).
    Unframed,
}

/// True for statuses whose response never carries a body (the framing
/// headers are left out).
pub fn never_has_body(status: u16) -> bool {
    bodiless(written_status(status))
}

/// Appends the status line and headers, then the app's constant headers
/// `fixed`, announcing the body as `length` says (nothing for a status
/// without a body).
pub fn write_head_framed(
    out: &mut Vec<u8>,
    resp: &Response,
    fixed: Fixed,
    length: BodyLength,
    persist: Persist,
    date: &str,
) {
    // Only final statuses are written here (the interim 100 Continue is
    // written by the connection itself).
    let status = written_status(resp.status);
    // Formatting through core::fmt costs more than the parse: the status
    // line's digits and the length go through itoa, the rest is static.
    let mut digits = itoa::Buffer::new();
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(digits.format(status).as_bytes());
    out.push(b' ');
    out.extend_from_slice(reason(status).as_bytes());
    out.extend_from_slice(
        concat!("\r\nServer: stoa/", env!("CARGO_PKG_VERSION"), "\r\nDate: ").as_bytes(),
    );
    out.extend_from_slice(date.as_bytes());
    out.extend_from_slice(b"\r\n");
    match length {
        _ if bodiless(status) => {}
        BodyLength::Length(n) => {
            out.extend_from_slice(b"Content-Length: ");
            out.extend_from_slice(digits.format(n).as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        BodyLength::Chunked => out.extend_from_slice(b"Transfer-Encoding: chunked\r\n"),
        BodyLength::Unframed => {}
    }
    match persist {
        Persist::KeepAlive => {}
        Persist::KeepAlive10 => out.extend_from_slice(b"Connection: keep-alive\r\n"),
        Persist::Close => out.extend_from_slice(b"Connection: close\r\n"),
    }
    for h in resp.headers.iter() {
        write_header(out, h.name.as_str(), &h.value);
    }
    write_fixed(out, fixed);
    out.extend_from_slice(b"\r\n");
}

/// Appends one app header, unless the host owns it or it would split or
/// corrupt the head (a name or value with CR/LF, say): that one is dropped.
pub(crate) fn write_header(out: &mut Vec<u8>, name: &str, value: &[u8]) {
    if host_owned(name) || name.is_empty() || bad_name(name.as_bytes()) || bad_value(value) {
        return;
    }
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

/// A list of constant headers by identity: two are the same when they are
/// the same `&'static` list (its address and length, `std::ptr::eq`),
/// whatever they hold. A `&'static` list is never freed nor changed
/// (plugins are never unloaded), so the list it is names its content.
#[derive(Clone, Copy)]
struct SameList(Fixed);

impl PartialEq for SameList {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self.0, other.0)
    }
}

thread_local! {
    /// The list of constant headers last written on this thread, and its
    /// lines as written (serialised and checked): an app that answers
    /// with the same list each time has it written with one copy.
    static FIXED: RefCell<(Option<SameList>, Vec<u8>)> = const { RefCell::new((None, Vec::new())) };
}

/// Appends an app's constant headers, as `write_header` would one by one.
fn write_fixed(out: &mut Vec<u8>, fixed: Fixed) {
    if fixed.is_empty() {
        return;
    }
    let key = Some(SameList(fixed));
    let cached = FIXED.try_with(|cache| {
        let mut cache = cache.borrow_mut();
        let (last, bytes) = &mut *cache;
        if *last != key {
            bytes.clear();
            for h in fixed {
                write_header(bytes, h.name.as_str(), h.value.as_str().as_bytes());
            }
            *last = key;
        }
        out.extend_from_slice(bytes);
    });
    // A thread being torn down has no cache: one by one.
    if cached.is_err() {
        for h in fixed {
            write_header(out, h.name.as_str(), h.value.as_str().as_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_has_a_reason_phrase() {
        assert_eq!(reason(404), "Not Found");
        // RFC 9110's names, where the registry's older ones differ.
        assert_eq!(reason(413), "Content Too Large");
        assert_eq!(reason(426), "Upgrade Required");
        assert_eq!(reason(308), "Permanent Redirect");
        assert_eq!(reason(452), "Client Error");
        for status in 100..600 {
            let phrase = reason(status);
            assert!(!phrase.is_empty() && phrase != "Unknown", "{status}");
        }
    }

    fn text(resp: &Response, head_only: bool, persist: Persist) -> String {
        let mut out = Vec::new();
        write_response(
            &mut out,
            resp,
            head_only,
            persist,
            "Mon, 30 Nov 2026 06:00:00 GMT",
        );
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn serialises_with_host_headers() {
        let r = Response::text(200, "hi")
            .with_header("X-A", "b")
            .with_header("Content-Length", "99");
        let s = text(&r, false, Persist::KeepAlive);
        assert!(s.starts_with("HTTP/1.1 200 OK\r\nServer: stoa/"));
        assert!(s.contains("\r\nContent-Length: 2\r\n"));
        assert!(!s.contains("99"));
        assert!(s.contains("\r\nX-A: b\r\n"));
        assert!(s.ends_with("\r\n\r\nhi"));
        assert!(!s.contains("Connection"));
    }

    #[test]
    fn host_owned_names_in_any_case_and_only_those() {
        for name in [
            "Content-Length",
            "TRANSFER-ENCODING",
            "connection",
            "Date",
            "Server",
            "Keep-Alive",
        ] {
            assert!(host_owned(name), "{name}");
        }
        for name in ["Content-Type", "Dates", "X-Server", "Connections", ""] {
            assert!(!host_owned(name), "{name}");
        }
    }

    proptest::proptest! {
        /// The word-at-a-time checks agree with the byte-by-byte rules.
        #[test]
        fn word_checks_agree_with_byte_rules(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..40)) {
            let name = bytes.iter().any(|&b| b <= b' ' || b == b':' || b >= 0x7f);
            let value = bytes.iter().any(|&b| b == b'\r' || b == b'\n' || b == 0);
            proptest::prop_assert_eq!(bad_name(&bytes), name);
            proptest::prop_assert_eq!(bad_value(&bytes), value);
        }
    }

    #[test]
    fn every_single_byte_in_every_lane_is_judged_as_bytes_are() {
        for b in 0..=255u8 {
            for at in 0..9 {
                let mut bytes = *b"Abcdefghi";
                bytes[at] = b;
                let name = bytes.iter().any(|&b| b <= b' ' || b == b':' || b >= 0x7f);
                let value = bytes.iter().any(|&b| b == b'\r' || b == b'\n' || b == 0);
                assert_eq!(bad_name(&bytes), name, "{bytes:?}");
                assert_eq!(bad_value(&bytes), value, "{bytes:?}");
            }
        }
    }

    #[test]
    fn constant_headers_follow_the_apps_own_and_are_checked_like_them() {
        static FIRST: [StaticHeader; 3] = [
            StaticHeader::new("X-Frame-Options", "DENY"),
            StaticHeader::new("Content-Length", "99"),
            StaticHeader::new("X-Bad", "a\r\nInjected: 1"),
        ];
        static SECOND: [StaticHeader; 1] = [StaticHeader::new("Referrer-Policy", "same-origin")];
        let r = Response::text(200, "hi");
        let head = |fixed: &'static [StaticHeader]| {
            let mut out = Vec::new();
            write_head(&mut out, &r, fixed, false, Persist::KeepAlive, "D");
            String::from_utf8(out).unwrap()
        };
        // Twice each, alternating: a list written from the cache reads the
        // same as the first time, and another list replaces it there.
        for _ in 0..2 {
            let s = head(&FIRST);
            assert!(
                s.ends_with(
                    "Content-Type: text/plain; charset=utf-8\r\nX-Frame-Options: DENY\r\n\r\n"
                ),
                "{s}"
            );
            assert!(!s.contains("99") && !s.contains("Injected"), "{s}");
            let s = head(&SECOND);
            assert!(
                s.ends_with("charset=utf-8\r\nReferrer-Policy: same-origin\r\n\r\n"),
                "{s}"
            );
            assert!(!s.contains("X-Frame-Options"), "{s}");
        }
    }

    #[test]
    fn the_date_is_read_again_only_past_the_second_it_shows() {
        let mut d = DateCache::new();
        let now = Instant::now();
        d.refresh_by(now);
        let until = d.until.expect("set by a refresh");
        assert!(until > now && until <= now + Duration::from_secs(1));
        // Before the end: nothing read, nothing changed.
        d.second = 0;
        d.refresh_by(until - Duration::from_nanos(1));
        assert_eq!((d.second, d.until), (0, Some(until)));
        // At the end: read again, the current second shown.
        d.refresh_by(until);
        assert_ne!(d.second, 0);
        assert_eq!(
            d.get(),
            httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(d.second))
        );
        assert!(d.until.is_some_and(|u| u > until));
    }

    #[test]
    fn head_and_close() {
        let r = Response::text(200, "hello");
        let s = text(&r, true, Persist::Close);
        assert!(s.contains("Content-Length: 5\r\n"));
        assert!(s.contains("Connection: close\r\n"));
        assert!(s.ends_with("\r\n\r\n"));
    }

    #[test]
    fn drops_header_injection() {
        let r = Response::new(204).with_header("X-Bad", "a\r\nInjected: 1");
        let s = text(&r, false, Persist::KeepAlive10);
        assert!(!s.contains("Injected"));
        assert!(!s.contains("Content-Length"));
        assert!(s.contains("Connection: keep-alive"));
    }
}

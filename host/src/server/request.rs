//! Building the ABI's `Request` view from a parsed head, and an owned copy
//! of a request for handlers that run off the event loop.

use crate::http::parse::{after_authority, Head};
use abi_stable::std_types::{RSlice, RStr};
use smallvec::SmallVec;
use std::ops::Range;
use std::sync::Arc;
use stoa_app_api::{HeaderRef, Request};

/// What the loop knows of a request besides its bytes.
#[derive(Clone)]
pub struct Meta {
    pub server_name: Arc<str>,
    pub server_port: u16,
    pub peer: Arc<str>,
    pub scheme: &'static str,
}

/// A part of the head as text; httparse has checked it is a token or
/// visible ASCII, so the fallback never shows.
fn text<'a>(buf: &'a [u8], range: &Range<usize>) -> &'a str {
    std::str::from_utf8(&buf[range.clone()]).unwrap_or("")
}

/// The path (for routing) and the raw query of a request-target:
/// origin-form split at its `?`; absolute-form split after its authority,
/// its empty path read as `/` (`http://h?/x` has the path `/` and the
/// query `/x`, RFC 9112 §3.2.1); other forms (`*`, authority-form) are
/// their own path.
pub fn path_and_query(target: &str) -> (&str, &str) {
    let rest = match target.as_bytes().first() {
        Some(b'/') => target,
        _ => after_authority(target).unwrap_or(target),
    };
    // A byte loop: a request path is too short for memchr to pay.
    let (path, query) = match rest.bytes().position(|b| b == b'?') {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => (rest, ""),
    };
    (if path.is_empty() { "/" } else { path }, query)
}

/// The text of a parsed head, checked as UTF-8 once: its parts are then
/// sliced from it, and its path and query split once.
pub struct HeadText<'a> {
    pub head: &'a Head,
    pub buf: &'a [u8],
    /// The whole head, when it is valid UTF-8 (it is unless a header value
    /// carries obs-text; then each part is checked on its own).
    whole: Option<&'a str>,
    /// The request's path (for routing) and raw query.
    pub path: &'a str,
    pub query: &'a str,
}

impl<'a> HeadText<'a> {
    pub fn new(head: &'a Head, buf: &'a [u8]) -> Self {
        let whole = buf
            .get(..head.len)
            .and_then(|h| std::str::from_utf8(h).ok());
        let mut parsed = HeadText {
            head,
            buf,
            whole,
            path: "",
            query: "",
        };
        (parsed.path, parsed.query) = path_and_query(parsed.get(&head.target));
        parsed
    }

    /// A part of the head (method, target, a header name) as text.
    pub fn get(&self, range: &Range<usize>) -> &'a str {
        match self.whole {
            // Parts are ASCII, so their bounds are character boundaries.
            Some(whole) => whole.get(range.clone()).unwrap_or(""),
            None => text(self.buf, range),
        }
    }
}

/// Calls `f` with the request's ABI view; `split` is the mount prefix's
/// length in the path (SCRIPT_NAME | PATH_INFO).
pub fn with_view<R>(
    parts: &HeadText<'_>,
    body: &[u8],
    split: usize,
    meta: &Meta,
    f: impl FnOnce(&Request<'_>) -> R,
) -> R {
    let (head, buf, path) = (parts.head, parts.buf, parts.path);
    let split = split.min(path.len());
    // On the stack for typical requests: no allocation per request.
    let mut headers: SmallVec<[HeaderRef<'_>; 24]> = SmallVec::new();
    for (n, v) in &head.headers {
        headers.push(HeaderRef {
            name: RStr::from(parts.get(n)),
            value: RSlice::from_slice(&buf[v.clone()]),
        });
    }
    let request = Request {
        method: RStr::from(parts.get(&head.method)),
        version_minor: head.version_minor,
        scheme: RStr::from(meta.scheme),
        server_name: RStr::from(&*meta.server_name),
        server_port: meta.server_port,
        peer: RStr::from(&*meta.peer),
        script_name: RStr::from(path.get(..split).unwrap_or("")),
        path_info: RStr::from(path.get(split..).unwrap_or("")),
        query: RStr::from(parts.query),
        headers: RSlice::from_slice(&headers),
        body: RSlice::from_slice(body),
    };
    f(&request)
}

/// A request copied out of the connection's buffer, for the blocking pool.
pub struct OwnedRequest {
    head: Head,
    buf: Vec<u8>,
    body: Vec<u8>,
    split: usize,
    meta: Meta,
    /// The copied body's share of the budget, held until the job ends.
    _hold: Option<crate::budget::Reservation>,
}

impl OwnedRequest {
    pub fn copy(parts: &HeadText<'_>, body: &[u8], split: usize, meta: &Meta) -> Self {
        let (head, buf) = (parts.head, parts.buf);
        OwnedRequest {
            head: head.clone(),
            buf: buf[..head.len.min(buf.len())].to_vec(),
            body: body.to_vec(),
            split,
            meta: meta.clone(),
            _hold: None,
        }
    }

    /// Counts the copied body on `budget` (its original in the connection's
    /// buffer is given back as the request is dispatched, so it counts
    /// once; forced, as the two are never held long together).
    pub fn held_on(mut self, budget: &crate::budget::Budget) -> Self {
        if self.body.len() > crate::http::reader::READ_CHUNK {
            let mut hold = budget.reservation();
            hold.force(self.body.len());
            self._hold = Some(hold);
        }
        self
    }

    pub fn with_view<R>(&self, f: impl FnOnce(&Request<'_>) -> R) -> R {
        let parts = HeadText::new(&self.head, &self.buf);
        with_view(&parts, &self.body, self.split, &self.meta, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::parse::parse_head;
    use crate::settings::ConnParams;

    #[test]
    fn absolute_form_is_split_after_its_authority() {
        assert_eq!(path_and_query("http://h:1/a?b"), ("/a", "b"));
        assert_eq!(path_and_query("HTTP://h/a"), ("/a", ""));
        assert_eq!(path_and_query("http://h"), ("/", ""));
        assert_eq!(path_and_query("http://h?/x/y"), ("/", "/x/y"));
        assert_eq!(path_and_query("https://h#/x"), ("/", ""));
        assert_eq!(path_and_query("/x?q=/y"), ("/x", "q=/y"));
        assert_eq!(path_and_query("*"), ("*", ""));
    }

    #[test]
    fn head_text_is_the_same_with_or_without_obs_text() {
        let params = ConnParams::default();
        for raw in [
            &b"GET /p/q?x=1&y HTTP/1.1\r\nHost: h\r\nX-Odd: ok\r\n\r\n"[..],
            b"GET /p/q?x=1&y HTTP/1.1\r\nHost: h\r\nX-Odd: \xe9t\xe9\r\n\r\n",
        ] {
            let head = parse_head(raw, &params).unwrap().unwrap();
            let parts = HeadText::new(&head, raw);
            assert_eq!(parts.whole.is_some(), raw.is_ascii());
            assert_eq!((parts.path, parts.query), ("/p/q", "x=1&y"));
            assert_eq!(parts.get(&head.method), "GET");
            let names: Vec<&str> = head.headers.iter().map(|(n, _)| parts.get(n)).collect();
            assert_eq!(names, ["Host", "X-Odd"]);
        }
    }

    #[test]
    fn owned_copy_gives_the_same_view() {
        let raw = b"POST /app/x?q=1 HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\nhi";
        let head = parse_head(raw, &ConnParams::default()).unwrap().unwrap();
        let meta = Meta {
            server_name: "127.0.0.1".into(),
            server_port: 80,
            peer: "1.2.3.4:5".into(),
            scheme: "http",
        };
        let owned = OwnedRequest::copy(&HeadText::new(&head, raw), b"hi", 4, &meta);
        owned.with_view(|r| {
            assert_eq!(r.script_name.as_str(), "/app");
            assert_eq!(r.path_info.as_str(), "/x");
            assert_eq!(r.query.as_str(), "q=1");
            assert_eq!(r.header("host"), Some(&b"h"[..]));
            assert_eq!(r.body.as_slice(), b"hi");
            assert_eq!(r.peer.as_str(), "1.2.3.4:5");
        });
    }
}

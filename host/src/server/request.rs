//! Building the ABI's `Request` view from a parsed head, and an owned copy
//! of a request for handlers that run off the event loop.

use crate::http::parse::Head;
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
pub fn text<'a>(buf: &'a [u8], range: &Range<usize>) -> &'a str {
    std::str::from_utf8(&buf[range.clone()]).unwrap_or("")
}

/// `http://host/p?q` -> `/p?q`; origin-form is returned as is.
pub fn origin_form(target: &str) -> &str {
    for scheme in ["http://", "https://"] {
        if let Some(rest) = target.strip_prefix(scheme) {
            return rest.find('/').map_or("/", |i| &rest[i..]);
        }
    }
    target
}

/// The request's path (for routing) and raw query.
pub fn path_and_query<'a>(head: &Head, buf: &'a [u8]) -> (&'a str, &'a str) {
    let target = origin_form(text(buf, &head.target));
    target.split_once('?').unwrap_or((target, ""))
}

/// Calls `f` with the request's ABI view; `split` is the mount prefix's
/// length in the path (SCRIPT_NAME | PATH_INFO).
pub fn with_view<R>(
    head: &Head,
    buf: &[u8],
    body: &[u8],
    split: usize,
    meta: &Meta,
    f: impl FnOnce(&Request<'_>) -> R,
) -> R {
    let (path, query) = path_and_query(head, buf);
    let split = split.min(path.len());
    // On the stack for typical requests: no allocation per request.
    let headers: SmallVec<[HeaderRef<'_>; 24]> = head
        .headers
        .iter()
        .map(|(n, v)| HeaderRef {
            name: RStr::from(text(buf, n)),
            value: RSlice::from_slice(&buf[v.clone()]),
        })
        .collect();
    let request = Request {
        method: RStr::from(text(buf, &head.method)),
        version_minor: head.version_minor,
        scheme: RStr::from(meta.scheme),
        server_name: RStr::from(&*meta.server_name),
        server_port: meta.server_port,
        peer: RStr::from(&*meta.peer),
        script_name: RStr::from(path.get(..split).unwrap_or("")),
        path_info: RStr::from(path.get(split..).unwrap_or("")),
        query: RStr::from(query),
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
}

impl OwnedRequest {
    pub fn copy(head: &Head, buf: &[u8], body: &[u8], split: usize, meta: &Meta) -> Self {
        OwnedRequest {
            head: head.clone(),
            buf: buf[..head.len.min(buf.len())].to_vec(),
            body: body.to_vec(),
            split,
            meta: meta.clone(),
        }
    }

    pub fn with_view<R>(&self, f: impl FnOnce(&Request<'_>) -> R) -> R {
        with_view(&self.head, &self.buf, &self.body, self.split, &self.meta, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::{parse::parse_head, ConnParams};

    #[test]
    fn absolute_form_becomes_origin_form() {
        assert_eq!(origin_form("http://h:1/a?b"), "/a?b");
        assert_eq!(origin_form("http://h"), "/");
        assert_eq!(origin_form("/x"), "/x");
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
        let owned = OwnedRequest::copy(&head, raw, b"hi", 4, &meta);
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

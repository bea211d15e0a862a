//! Request heads: httparse plus the framing rules of RFC 9112 §6.
//!
//! The parsed head stores byte ranges into the connection's read buffer, not
//! borrowed slices, so the buffer can be read into again while a request
//! waits for its body. The request line's checks are in `line.rs`, single
//! header fields' in `fields.rs`.

use super::HttpError;
use crate::settings::ConnParams;
use std::mem::MaybeUninit;
use std::ops::Range;

mod fields;
mod line;

use fields::{parse_content_length, transfer_coding, valid_host};
pub use line::after_authority;
use line::{absolute_authority, check_partial, check_target, parse_later_minor};

/// Upper bound of the header array handed to httparse; `max_headers` in
/// `ConnParams` may be lower.
pub const HEADER_ARRAY: usize = 128;

/// How the request body is delimited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyKind {
    None,
    Length(usize),
    Chunked,
}

/// A complete request head, as offsets from the start of the request.
#[derive(Clone, Debug)]
pub struct Head {
    pub method: Range<usize>,
    pub target: Range<usize>,
    pub version_minor: u8,
    pub headers: Vec<(Range<usize>, Range<usize>)>,
    /// Bytes from the request's start to the end of the blank line.
    pub len: usize,
    pub body: BodyKind,
    pub keep_alive: bool,
    pub expect_continue: bool,
    /// An `Upgrade` field lists `websocket` (noted in the one pass over
    /// the fields, so a plain request costs no second look).
    pub asks_websocket: bool,
}

impl Head {
    /// Gives the header offsets' allocation back for the next head.
    pub fn into_spare(self) -> HeaderOffsets {
        let mut headers = self.headers;
        headers.clear();
        headers
    }

    /// The values of every header field named `name` (ASCII
    /// case-insensitive), in order; `buf` is the request the head was parsed
    /// from.
    pub fn values<'a>(
        &'a self,
        buf: &'a [u8],
        name: &'a str,
    ) -> impl DoubleEndedIterator<Item = &'a [u8]> + 'a {
        self.headers
            .iter()
            .filter(move |(n, _)| buf[n.clone()].eq_ignore_ascii_case(name.as_bytes()))
            .map(move |(_, v)| &buf[v.clone()])
    }
}

/// Where `part`, a slice of `buf` (as httparse hands them out), lies in
/// it: its start's distance from `buf`'s, and its length.
fn offset(buf: &[u8], part: &[u8]) -> Range<usize> {
    let start = part.as_ptr() as usize - buf.as_ptr() as usize;
    start..start + part.len()
}

/// True if the comma-separated header value lists `token` (case-insensitive).
pub fn has_token(value: &[u8], token: &str) -> bool {
    value
        .split(|&b| b == b',')
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(token.as_bytes()))
}

/// Parses a request head from `buf` (which starts at the request).
/// `Ok(None)` means more bytes are needed.
pub fn parse_head(buf: &[u8], params: &ConnParams) -> Result<Option<Head>, HttpError> {
    parse_head_reusing(buf, params, &mut Vec::new())
}

/// Header offsets of one head, the allocation kept from request to request.
pub type HeaderOffsets = Vec<(Range<usize>, Range<usize>)>;

/// `parse_head`, filling `spare`'s allocation (a connection's previous
/// head's, given back by `Head::into_spare`) instead of a new one: a parsed
/// head takes it, an incomplete one leaves it.
pub fn parse_head_reusing(
    buf: &[u8],
    params: &ConnParams,
    spare: &mut HeaderOffsets,
) -> Result<Option<Head>, HttpError> {
    // Left uninitialised: httparse writes the headers it finds, and filling
    // 128 empty headers per request would cost more than the parse.
    let mut storage = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; HEADER_ARRAY];
    let slots = params.max_headers.clamp(1, HEADER_ARRAY);
    let mut req = httparse::Request::new(&mut []);
    let status = match req.parse_with_uninit_headers(buf, &mut storage[..slots]) {
        Ok(s) => s,
        Err(httparse::Error::TooManyHeaders) => return Err(HttpError::TooManyHeaders),
        Err(httparse::Error::Version) => return parse_later_minor(buf, params, spare),
        Err(httparse::Error::Token) => {
            return Err(HttpError::Malformed(
                "invalid token in method or header name",
            ))
        }
        Err(httparse::Error::HeaderName) => {
            return Err(HttpError::Malformed("invalid header name"))
        }
        Err(httparse::Error::HeaderValue) => {
            return Err(HttpError::Malformed("invalid header value"))
        }
        Err(_) => return Err(HttpError::Malformed("malformed request head")),
    };
    let len = match status {
        httparse::Status::Complete(n) => n,
        httparse::Status::Partial => {
            return check_partial(buf, params).map(|()| None);
        }
    };
    let (Some(method), Some(path), Some(version)) = (req.method, req.path, req.version) else {
        return Err(HttpError::Malformed("incomplete request line"));
    };
    // The more specific limit first: a long target is 414 even when the
    // head is over its limit too.
    if path.len() > params.max_request_line {
        return Err(HttpError::UriTooLong);
    }
    if len > params.max_head {
        return Err(HttpError::HeadTooLarge);
    }
    let mut head = Head {
        method: offset(buf, method.as_bytes()),
        target: offset(buf, path.as_bytes()),
        version_minor: version,
        headers: std::mem::take(spare),
        len,
        body: BodyKind::None,
        keep_alive: version == 1,
        expect_continue: false,
        asks_websocket: false,
    };
    head.headers.clear();
    head.headers.reserve(req.headers.len());
    let mut content_length: Option<usize> = None;
    // Transfer-Encoding is one list across all its field lines (RFC 9110 §5.3).
    let mut codings: Vec<&[u8]> = Vec::new();
    let mut hosts = 0;
    let mut host_field = None;
    let mut host_value: Option<&[u8]> = None;
    for h in req.headers.iter() {
        if h.value.len() > params.max_header_field {
            return Err(HttpError::HeaderFieldTooLarge);
        }
        head.headers
            .push((offset(buf, h.name.as_bytes()), offset(buf, h.value)));
        let name = h.name;
        if name.eq_ignore_ascii_case("content-length") {
            // Repeated, even with the same value, as nginx does: 400.
            if content_length.is_some() {
                return Err(HttpError::Framing("more than one Content-Length"));
            }
            content_length = Some(parse_content_length(h.value)?);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            codings.extend(
                h.value
                    .split(|&b| b == b',')
                    .map(<[u8]>::trim_ascii)
                    .filter(|c| !c.is_empty()),
            );
            if codings.is_empty() {
                return Err(HttpError::Framing("empty Transfer-Encoding"));
            }
        } else if name.eq_ignore_ascii_case("connection") {
            if has_token(h.value, "close") {
                head.keep_alive = false;
            } else if version == 0 && has_token(h.value, "keep-alive") {
                head.keep_alive = true;
            }
        } else if name.eq_ignore_ascii_case("host") {
            hosts += 1;
            host_value = Some(h.value);
            host_field = Some(head.headers.len() - 1);
        } else if name.eq_ignore_ascii_case("upgrade") {
            head.asks_websocket |= has_token(h.value, "websocket");
        } else if name.eq_ignore_ascii_case("expect") {
            if h.value.eq_ignore_ascii_case(b"100-continue") {
                // An HTTP/1.0 client is never sent a 1xx (RFC 9110 §15.2).
                head.expect_continue = version == 1;
            } else {
                return Err(HttpError::ExpectationFailed);
            }
        }
    }
    // RFC 9112 §3.2: 400 for an HTTP/1.1 request without Host, and for any
    // request with several Host fields or an invalid one.
    match (hosts, version) {
        (0, 1) => return Err(HttpError::Malformed("missing Host header")),
        (0 | 1, _) => {}
        _ => return Err(HttpError::Malformed("more than one Host header")),
    }
    if !host_value.is_some_and(valid_host) && hosts == 1 {
        return Err(HttpError::Malformed("invalid Host header"));
    }
    // RFC 9112 §3.2.2: with an absolute-form target, the target's authority
    // is the host, whatever the Host field says; apps see it as Host.
    if let Some(authority) = absolute_authority(path) {
        if authority.is_empty() || !valid_host(authority.as_bytes()) {
            return Err(HttpError::Malformed("invalid host in the request-target"));
        }
        if let Some(i) = host_field {
            head.headers[i].1 = offset(buf, authority.as_bytes());
        }
    }
    let chunked = !codings.is_empty() && transfer_coding(&codings)?;
    // RFC 9112 §6.1: Transfer-Encoding in HTTP/1.0 means faulty framing.
    if chunked && version == 0 {
        return Err(HttpError::Framing(
            "Transfer-Encoding in an HTTP/1.0 request",
        ));
    }
    head.body = match (chunked, content_length) {
        (true, Some(_)) => {
            return Err(HttpError::Framing(
                "both Content-Length and Transfer-Encoding",
            ))
        }
        (true, None) => BodyKind::Chunked,
        (false, Some(0)) | (false, None) => BodyKind::None,
        (false, Some(n)) if n > params.max_body => return Err(HttpError::BodyTooLarge),
        (false, Some(n)) => BodyKind::Length(n),
    };
    check_target(&buf[head.method.clone()], path)?;
    Ok(Some(head))
}

#[cfg(test)]
mod tests;

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
    /// The request came on an HTTP/2 stream (apps still see HTTP/1.1's
    /// semantics, `version_minor` 1; the access log says `HTTP/2.0`).
    pub http2: bool,
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
    let len = match req.parse_with_uninit_headers(buf, &mut storage[..slots]) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return check_partial(buf, params).map(|()| None),
        Err(httparse::Error::Version) => return parse_later_minor(buf, params, spare),
        Err(e) => return Err(parse_error(e)),
    };
    let (Some(method), Some(path), Some(version)) = (req.method, req.path, req.version) else {
        return Err(HttpError::Malformed("incomplete request line"));
    };
    check_line_limits(path, len, params)?;
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
        http2: false,
    };
    head.headers.clear();
    head.headers.reserve(req.headers.len());
    let mut fields = Fields::default();
    for h in req.headers.iter() {
        fields.note(&mut head, buf, h, params)?;
    }
    fields.check_host(version)?;
    if let Some(authority) = absolute_authority(path) {
        take_authority(&mut head, buf, authority, fields.host_field)?;
    }
    head.body = fields.body_kind(version)?;
    check_target(&buf[head.method.clone()], path)?;
    Ok(Some(head))
}

/// What an httparse error (other than a later HTTP/1 minor version) is
/// answered with.
#[cold]
fn parse_error(e: httparse::Error) -> HttpError {
    match e {
        httparse::Error::TooManyHeaders => HttpError::TooManyHeaders,
        httparse::Error::Token => HttpError::Malformed("invalid token in method or header name"),
        httparse::Error::HeaderName => HttpError::Malformed("invalid header name"),
        httparse::Error::HeaderValue => HttpError::Malformed("invalid header value"),
        _ => HttpError::Malformed("malformed request head"),
    }
}

/// The limits on the request line and the head, the more specific first:
/// a long target is 414 even when the head is over its limit too.
#[inline]
fn check_line_limits(path: &str, len: usize, params: &ConnParams) -> Result<(), HttpError> {
    if path.len() > params.max_request_line {
        return Err(HttpError::UriTooLong);
    }
    if len > params.max_head {
        return Err(HttpError::HeadTooLarge);
    }
    Ok(())
}

/// RFC 9112 §3.2.2: with an absolute-form target, the target's authority
/// is the host, whatever the Host field says; apps see it as Host (the
/// field at `host_field`, if any).
#[inline]
fn take_authority(
    head: &mut Head,
    buf: &[u8],
    authority: &str,
    host_field: Option<usize>,
) -> Result<(), HttpError> {
    if authority.is_empty() || !valid_host(authority.as_bytes()) {
        return Err(HttpError::Malformed("invalid host in the request-target"));
    }
    if let Some(i) = host_field {
        head.headers[i].1 = offset(buf, authority.as_bytes());
    }
    Ok(())
}

/// What the one pass over the header fields gathers for the checks that
/// need them all: the body's framing and the Host fields.
#[derive(Default)]
struct Fields<'b> {
    content_length: Option<usize>,
    /// Transfer-Encoding is one list across all its field lines (RFC 9110 §5.3).
    codings: Vec<&'b [u8]>,
    hosts: usize,
    /// The Host field's index in the head's headers, and its value.
    host_field: Option<usize>,
    host_value: Option<&'b [u8]>,
}

impl<'b> Fields<'b> {
    /// Checks one header field, stores its offsets in `head` and notes
    /// what it says of the framing, the connection, Host, an upgrade or
    /// an expectation.
    #[inline]
    fn note(
        &mut self,
        head: &mut Head,
        buf: &'b [u8],
        h: &httparse::Header<'b>,
        params: &ConnParams,
    ) -> Result<(), HttpError> {
        if h.value.len() > params.max_header_field {
            return Err(HttpError::HeaderFieldTooLarge);
        }
        head.headers
            .push((offset(buf, h.name.as_bytes()), offset(buf, h.value)));
        let (name, version) = (h.name, head.version_minor);
        if name.eq_ignore_ascii_case("content-length") {
            // Repeated, even with the same value, as nginx does: 400.
            if self.content_length.is_some() {
                return Err(HttpError::Framing("more than one Content-Length"));
            }
            self.content_length = Some(parse_content_length(h.value)?);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            self.add_codings(h.value)?;
        } else if name.eq_ignore_ascii_case("connection") {
            if has_token(h.value, "close") {
                head.keep_alive = false;
            } else if version == 0 && has_token(h.value, "keep-alive") {
                head.keep_alive = true;
            }
        } else if name.eq_ignore_ascii_case("host") {
            self.hosts += 1;
            self.host_value = Some(h.value);
            self.host_field = Some(head.headers.len() - 1);
        } else if name.eq_ignore_ascii_case("upgrade") {
            head.asks_websocket |= has_token(h.value, "websocket");
        } else if name.eq_ignore_ascii_case("expect") {
            if !h.value.eq_ignore_ascii_case(b"100-continue") {
                return Err(HttpError::ExpectationFailed);
            }
            // An HTTP/1.0 client is never sent a 1xx (RFC 9110 §15.2).
            head.expect_continue = version == 1;
        }
        Ok(())
    }

    /// Adds one Transfer-Encoding field line's codings to the list.
    #[inline]
    fn add_codings(&mut self, value: &'b [u8]) -> Result<(), HttpError> {
        self.codings.extend(
            value
                .split(|&b| b == b',')
                .map(<[u8]>::trim_ascii)
                .filter(|c| !c.is_empty()),
        );
        if self.codings.is_empty() {
            return Err(HttpError::Framing("empty Transfer-Encoding"));
        }
        Ok(())
    }

    /// RFC 9112 §3.2: 400 for an HTTP/1.1 request without Host, and for
    /// any request with several Host fields or an invalid one.
    #[inline(always)]
    fn check_host(&self, version: u8) -> Result<(), HttpError> {
        match (self.hosts, version) {
            (0, 1) => return Err(HttpError::Malformed("missing Host header")),
            (0 | 1, _) => {}
            _ => return Err(HttpError::Malformed("more than one Host header")),
        }
        if !self.host_value.is_some_and(valid_host) && self.hosts == 1 {
            return Err(HttpError::Malformed("invalid Host header"));
        }
        Ok(())
    }

    /// How the body is delimited (RFC 9112 §6), from Content-Length and
    /// Transfer-Encoding together.
    #[inline(always)]
    fn body_kind(&self, version: u8) -> Result<BodyKind, HttpError> {
        let chunked = !self.codings.is_empty() && transfer_coding(&self.codings)?;
        // RFC 9112 §6.1: Transfer-Encoding in HTTP/1.0 means faulty framing.
        if chunked && version == 0 {
            return Err(HttpError::Framing(
                "Transfer-Encoding in an HTTP/1.0 request",
            ));
        }
        Ok(match (chunked, self.content_length) {
            (true, Some(_)) => {
                return Err(HttpError::Framing(
                    "both Content-Length and Transfer-Encoding",
                ))
            }
            (true, None) => BodyKind::Chunked,
            (false, Some(0)) | (false, None) => BodyKind::None,
            (false, Some(n)) => BodyKind::Length(n),
        })
    }
}

#[cfg(test)]
mod tests;

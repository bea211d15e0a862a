//! A request's header list (RFC 9113 §8.1–§8.3) made into the head the
//! host's request path reads: the same `parse::Head` of ranges over one
//! buffer that HTTP/1.1 yields, with `:method` and `:path` as its method
//! and target, `:authority` as its `Host` (unless it has one), and its
//! `cookie` fields joined into one (§8.2.3). Every rule of a well-formed
//! request is checked as the fields come; a malformed request is a stream
//! error (PROTOCOL_ERROR), a list over the limits an answer (431).

use crate::http::parse::{BodyKind, Head};
use std::ops::Range;

/// Why a header list is not a request the host serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// Malformed (RFC 9113 §8.1.1): the stream is reset with PROTOCOL_ERROR.
    Malformed(&'static str),
    /// More fields than `--max-headers`: answered 431.
    TooManyHeaders,
    /// Larger than `--max-head`: answered 431.
    TooLarge,
}

/// Builds one request's head from its fields, in the order they come.
pub struct RequestBuilder {
    buf: Vec<u8>,
    method: Option<Range<usize>>,
    path: Option<Range<usize>>,
    authority: Option<Range<usize>>,
    scheme: bool,
    headers: Vec<(Range<usize>, Range<usize>)>,
    cookie: Vec<u8>,
    host: bool,
    regular: bool,
    content_length: Option<u64>,
    max_headers: usize,
    refused: Option<Refused>,
}

/// Bytes taken by a `Host` field the builder adds.
const HOST: &[u8] = b"host";

impl RequestBuilder {
    /// A builder over `buf` (a spare, cleared) for a request of at most
    /// `max_headers` fields.
    pub fn new(mut buf: Vec<u8>, max_headers: usize) -> Self {
        buf.clear();
        RequestBuilder {
            buf,
            method: None,
            path: None,
            authority: None,
            scheme: false,
            headers: Vec::new(),
            cookie: Vec::new(),
            host: false,
            regular: false,
            content_length: None,
            max_headers,
            refused: None,
        }
    }

    fn refuse(&mut self, why: Refused) {
        // The first malformation wins; a limit gives way to one.
        match (self.refused, why) {
            (None, _)
            | (Some(Refused::TooManyHeaders | Refused::TooLarge), Refused::Malformed(_)) => {
                self.refused = Some(why)
            }
            _ => {}
        }
    }

    fn keep(&mut self, bytes: &[u8]) -> Range<usize> {
        let start = self.buf.len();
        self.buf.extend_from_slice(bytes);
        start..self.buf.len()
    }

    /// Takes the next field.
    pub fn field(&mut self, name: &[u8], value: &[u8]) {
        if let Some(pseudo) = name.strip_prefix(b":") {
            return self.pseudo(pseudo, value);
        }
        self.regular = true;
        if let Err(why) = check_field(name, value) {
            return self.refuse(Refused::Malformed(why));
        }
        match name {
            b"cookie" => {
                if !self.cookie.is_empty() {
                    self.cookie.extend_from_slice(b"; ");
                }
                self.cookie.extend_from_slice(value);
                return;
            }
            b"host" => self.host = true,
            b"content-length" => match parse_length(value) {
                Some(n) if self.content_length.is_none_or(|m| m == n) => {
                    self.content_length = Some(n)
                }
                _ => return self.refuse(Refused::Malformed("an invalid content-length")),
            },
            _ => {}
        }
        if self.headers.len() >= self.max_headers {
            return self.refuse(Refused::TooManyHeaders);
        }
        let name = self.keep(name);
        let value = self.keep(value);
        self.headers.push((name, value));
    }

    fn pseudo(&mut self, name: &[u8], value: &[u8]) {
        if self.regular {
            return self.refuse(Refused::Malformed("a pseudo-header after a regular field"));
        }
        let slot = match name {
            b"method" => &mut self.method,
            b"path" => &mut self.path,
            b"authority" => &mut self.authority,
            b"scheme" => {
                if std::mem::replace(&mut self.scheme, true) {
                    return self.refuse(Refused::Malformed("a repeated :scheme"));
                }
                return;
            }
            _ => return self.refuse(Refused::Malformed("an unknown pseudo-header")),
        };
        if slot.is_some() {
            return self.refuse(Refused::Malformed("a repeated pseudo-header"));
        }
        if value.iter().any(|&b| matches!(b, 0 | b'\r' | b'\n' | b' ')) {
            return self.refuse(Refused::Malformed(
                "a pseudo-header with a space or control octet",
            ));
        }
        let start = self.buf.len();
        self.buf.extend_from_slice(value);
        let range = start..self.buf.len();
        match name {
            b"method" => self.method = Some(range),
            b"path" => self.path = Some(range),
            _ => self.authority = Some(range),
        }
    }

    /// Marks the list as larger than the host takes (its decoder stopped
    /// handing fields over).
    pub fn too_large(&mut self) {
        self.refuse(Refused::TooLarge);
    }

    /// The request's head and the buffer its ranges index; `end_stream`:
    /// the HEADERS frame ended the stream (no body).
    pub fn finish(mut self, end_stream: bool) -> Result<(Head, Vec<u8>, Option<u64>), Refused> {
        if let Some(why) = self.refused {
            return Err(why);
        }
        let Some(method) = self.method.clone() else {
            return Err(Refused::Malformed("no :method"));
        };
        let connect = &self.buf[method.clone()] == b"CONNECT";
        let target = if connect {
            // CONNECT names only its authority (RFC 9113 §8.5).
            if self.scheme || self.path.is_some() {
                return Err(Refused::Malformed("CONNECT with :scheme or :path"));
            }
            self.authority
                .clone()
                .ok_or(Refused::Malformed("CONNECT without :authority"))?
        } else {
            if !self.scheme {
                return Err(Refused::Malformed("no :scheme"));
            }
            match self.path.clone() {
                Some(p) if !p.is_empty() => p,
                _ => return Err(Refused::Malformed("no :path, or an empty one")),
            }
        };
        if !self.host {
            if let Some(a) = self.authority.clone() {
                let name = self.keep(HOST);
                self.headers.push((name, a));
            }
        }
        if !self.cookie.is_empty() {
            let cookie = std::mem::take(&mut self.cookie);
            let name = self.keep(b"cookie");
            let value = self.keep(&cookie);
            self.headers.push((name, value));
        }
        if end_stream && self.content_length.is_some_and(|n| n > 0) {
            return Err(Refused::Malformed("content-length without a body"));
        }
        let body = match (end_stream, self.content_length) {
            (true, _) => BodyKind::None,
            (false, Some(n)) => BodyKind::Length(usize::try_from(n).unwrap_or(usize::MAX)),
            // The length is known when the stream ends: the host reads it
            // whole first, then gives it as a `Length`.
            (false, None) => BodyKind::Length(0),
        };
        let head = Head {
            method,
            target,
            version_minor: 1,
            headers: self.headers,
            len: self.buf.len(),
            body,
            keep_alive: true,
            expect_continue: false,
            asks_websocket: false,
            http2: true,
        };
        Ok((head, self.buf, self.content_length))
    }
}

/// Checks a regular field (RFC 9113 §8.2, §8.2.1, §8.2.2).
fn check_field(name: &[u8], value: &[u8]) -> Result<(), &'static str> {
    if name.is_empty() || !name.iter().all(|&b| is_name_octet(b)) {
        return Err("a field name with an uppercase or invalid octet");
    }
    if value.iter().any(|&b| matches!(b, 0 | b'\r' | b'\n')) {
        return Err("a field value with NUL, CR or LF");
    }
    if value.first().is_some_and(|&b| b == b' ' || b == b'\t')
        || value.last().is_some_and(|&b| b == b' ' || b == b'\t')
    {
        return Err("a field value with surrounding whitespace");
    }
    match name {
        b"connection" | b"keep-alive" | b"proxy-connection" | b"transfer-encoding" | b"upgrade" => {
            Err("a connection-specific field")
        }
        b"te" if value != b"trailers" => Err("te other than trailers"),
        _ => Ok(()),
    }
}

/// A token octet (RFC 9110 §5.6.2) that is not an uppercase letter.
fn is_name_octet(b: u8) -> bool {
    matches!(b,
        b'a'..=b'z' | b'0'..=b'9' | b'!' | b'#' | b'$' | b'%' | b'&' | b'\'' | b'*'
        | b'+' | b'-' | b'.' | b'^' | b'_' | b'`' | b'|' | b'~')
}

fn parse_length(value: &[u8]) -> Option<u64> {
    if value.is_empty() || value.len() > 19 || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(value).ok()?.parse().ok()
}

/// Checks a trailer section's fields (no pseudo-headers, each well formed).
pub fn check_trailer(name: &[u8], value: &[u8]) -> Result<(), &'static str> {
    if name.starts_with(b":") {
        return Err("a pseudo-header in trailers");
    }
    check_field(name, value)
}

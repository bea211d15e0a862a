//! Request heads: httparse plus the framing rules of RFC 9112 §6.
//!
//! The parsed head stores byte ranges into the connection's read buffer, not
//! borrowed slices, so the buffer can be read into again while a request
//! waits for its body.

use super::HttpError;
use crate::settings::ConnParams;
use std::mem::MaybeUninit;
use std::ops::Range;

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

/// `HTTP/2.0` (a well-formed version other than 1.x) is 505; anything else
/// in the version's place is a malformed request line.
fn version_error(buf: &[u8]) -> HttpError {
    let line = buf.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let version = line.rsplit(|&b| b == b' ').next().unwrap_or_default();
    match version {
        [b'H', b'T', b'T', b'P', b'/', major, b'.', minor]
            if major.is_ascii_digit() && minor.is_ascii_digit() && *major != b'1' =>
        {
            HttpError::VersionNotSupported
        }
        _ => HttpError::Malformed("invalid HTTP version"),
    }
}

/// `uri-host [":" port]` (RFC 3986): registered-name characters, or an IP
/// literal in brackets; empty is allowed (a target without authority).
fn valid_host(value: &[u8]) -> bool {
    let value = value.trim_ascii();
    let mut seen = 0;
    for &b in value {
        match HOST_BYTES[usize::from(b)] {
            NOT_HOST => return false,
            class => seen |= class,
        }
    }
    // Brackets are rare: only then are they counted.
    seen & BRACKET == 0
        || (value.iter().filter(|&&b| b == b'[').count() <= 1
            && (!value.starts_with(b"[") || value.contains(&b']')))
}

/// What `HOST_BYTES` says of a byte: not allowed, allowed, a bracket.
const NOT_HOST: u8 = 0;
const HOST: u8 = 1;
const BRACKET: u8 = 2;

/// The bytes `valid_host` allows, as a table (one look-up per byte).
const HOST_BYTES: [u8; 256] = {
    let mut table = [NOT_HOST; 256];
    let mut b = 0;
    while b < 256 {
        if (b as u8).is_ascii_alphanumeric() {
            table[b] = HOST;
        }
        b += 1;
    }
    let extra = b"-._~%!$&'()*+,;=:";
    let mut i = 0;
    while i < extra.len() {
        table[extra[i] as usize] = HOST;
        i += 1;
    }
    table[b'[' as usize] = BRACKET;
    table[b']' as usize] = BRACKET;
    table
};

/// An incomplete head is still bounded: a request line without its CRLF is
/// limited by `max_request_line` (414), the whole head by `max_head` (431).
fn check_partial(buf: &[u8], params: &ConnParams) -> Result<(), HttpError> {
    let line = buf.iter().position(|&b| b == b'\n').unwrap_or(buf.len());
    // The request line holds the method and version too: a few bytes more.
    if line > params.max_request_line + 32 {
        Err(HttpError::UriTooLong)
    } else if buf.len() > params.max_head {
        Err(HttpError::HeadTooLarge)
    } else {
        Ok(())
    }
}

fn parse_content_length(value: &[u8]) -> Result<usize, HttpError> {
    let v = value.trim_ascii();
    if v.is_empty() || v.len() > 19 || !v.iter().all(u8::is_ascii_digit) {
        return Err(HttpError::Framing("Content-Length is not a plain number"));
    }
    v.iter()
        .try_fold(0usize, |n, d| {
            n.checked_mul(10)?.checked_add(usize::from(d - b'0'))
        })
        .ok_or(HttpError::Framing("Content-Length is not a plain number"))
}

/// The codings of every Transfer-Encoding line, in order. Only a lone
/// `chunked` is accepted (RFC 9112 §6.3): a list not ending in chunked cannot
/// be framed (400), chunked twice is an error (400), and another coding
/// before chunked is not implemented (501).
fn transfer_coding(codings: &[&[u8]]) -> Result<bool, HttpError> {
    let is_chunked = |c: &&[u8]| c.eq_ignore_ascii_case(b"chunked");
    match codings {
        [one] if is_chunked(one) => Ok(true),
        [.., last] if !is_chunked(last) => Err(HttpError::Framing(
            "Transfer-Encoding does not end in chunked",
        )),
        [first @ .., _] if first.iter().any(is_chunked) => {
            Err(HttpError::Framing("chunked applied more than once"))
        }
        [] => Err(HttpError::Framing("empty Transfer-Encoding")),
        _ => Err(HttpError::UnsupportedCoding),
    }
}

/// An absolute-form target split where its authority ends
/// (`http://a.example:8/x?q` -> `a.example:8` and `/x?q`; the authority
/// ends at the first `/`, `?` or `#`, RFC 3986 §3.2), or `None` for other
/// forms.
fn split_absolute(target: &str) -> Option<(&str, &str)> {
    let rest = ["http://", "https://"].iter().find_map(|scheme| {
        target
            .get(..scheme.len())
            .filter(|p| p.eq_ignore_ascii_case(scheme))
            .map(|_| &target[scheme.len()..])
    })?;
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    Some(rest.split_at(end))
}

/// The authority of an absolute-form target (`http://a.example:8/x` ->
/// `a.example:8`), or `None` for other forms.
fn absolute_authority(target: &str) -> Option<&str> {
    split_absolute(target).map(|(authority, _)| authority)
}

/// What follows the authority of an absolute-form target, without a
/// fragment (`http://h/p?q` -> `/p?q`, `http://h?q` -> `?q`, `http://h`
/// -> ``), or `None` for other forms.
pub fn after_authority(target: &str) -> Option<&str> {
    let (_, rest) = split_absolute(target)?;
    Some(rest.split('#').next().unwrap_or(""))
}

/// `HTTP/1.2` and any later 1.x minor are served as HTTP/1.1 (RFC 9110
/// §2.5); httparse only knows 1.0 and 1.1, so the head is parsed from a copy
/// whose version reads `HTTP/1.1` (same length: every offset still holds).
/// Any other version is refused as before.
fn parse_later_minor(
    buf: &[u8],
    params: &ConnParams,
    spare: &mut HeaderOffsets,
) -> Result<Option<Head>, HttpError> {
    let line_end = buf.iter().position(|&b| b == b'\n').unwrap_or(buf.len());
    let line = &buf[..line_end];
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let start = line.iter().rposition(|&b| b == b' ').map_or(0, |i| i + 1);
    match &line[start..] {
        [b'H', b'T', b'T', b'P', b'/', b'1', b'.', minor] if (b'2'..=b'9').contains(minor) => {
            let mut copy = buf.to_vec();
            copy[start..start + 8].copy_from_slice(b"HTTP/1.1");
            parse_head_reusing(&copy, params, spare)
        }
        _ => Err(version_error(buf)),
    }
}

/// Request-target forms (RFC 9112 §3.2): origin-form for all methods,
/// absolute-form too, authority-form only for CONNECT, `*` only for OPTIONS.
fn check_target(method: &[u8], target: &str) -> Result<(), HttpError> {
    let ok = if target == "*" {
        method == b"OPTIONS"
    } else if method == b"CONNECT" {
        !target.starts_with('/') && target.contains(':')
    } else {
        target.starts_with('/') || target.starts_with("http://") || target.starts_with("https://")
    };
    if ok {
        Ok(())
    } else {
        Err(HttpError::Malformed(
            "request-target form not allowed for this method",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Option<Head>, HttpError> {
        parse_head(s.as_bytes(), &ConnParams::default())
    }

    #[test]
    fn parses_a_get_with_offsets() {
        let raw = "GET /a?b=1 HTTP/1.1\r\nHost: x\r\nX-Y: z\r\n\r\nrest";
        let head = parse(raw).unwrap().unwrap();
        assert_eq!(&raw[head.method.clone()], "GET");
        assert_eq!(&raw[head.target.clone()], "/a?b=1");
        assert_eq!(head.len, raw.len() - 4);
        assert_eq!(head.headers.len(), 2);
        assert_eq!(&raw[head.headers[1].1.clone()], "z");
        assert_eq!(
            head.values(raw.as_bytes(), "x-y").collect::<Vec<_>>(),
            [b"z"]
        );
        assert_eq!(head.values(raw.as_bytes(), "nope").next(), None);
        assert!(head.keep_alive);
        assert_eq!(head.body, BodyKind::None);
    }

    #[test]
    fn partial_head_needs_more() {
        assert!(parse("GET / HTTP/1.1\r\nHost: x\r\n").unwrap().is_none());
    }

    #[test]
    fn keep_alive_rules() {
        let h10 = parse("GET / HTTP/1.0\r\n\r\n").unwrap().unwrap();
        assert!(!h10.keep_alive);
        let h10ka = parse("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n")
            .unwrap()
            .unwrap();
        assert!(h10ka.keep_alive);
        let h11c = parse("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .unwrap()
            .unwrap();
        assert!(!h11c.keep_alive);
    }

    #[test]
    fn framing_rules() {
        let cl = parse("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(cl.body, BodyKind::Length(5));
        let ch = parse("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(ch.body, BodyKind::Chunked);
        for bad in [
            "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
            "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
            "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: +5\r\n\r\n",
            "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
        ] {
            assert!(matches!(parse(bad), Err(HttpError::Framing(_))), "{bad}");
        }
        assert!(matches!(
            parse("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"),
            Err(HttpError::UnsupportedCoding)
        ));
    }

    #[test]
    fn host_rules() {
        assert!(matches!(
            parse("GET / HTTP/1.1\r\n\r\n"),
            Err(HttpError::Malformed(_))
        ));
        assert!(matches!(
            parse("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"),
            Err(HttpError::Malformed(_))
        ));
    }

    #[test]
    fn host_byte_table_matches_the_rfc_3986_characters() {
        for b in 0..=255u8 {
            let rule = b.is_ascii_alphanumeric() || b"-._~%!$&'()*+,;=:[]".contains(&b);
            assert_eq!(HOST_BYTES[usize::from(b)] != NOT_HOST, rule, "byte {b}");
        }
        for (value, ok) in [
            (&b"[::1]:80"[..], true),
            (b"[::1", false),
            (b"[[::1]]", false),
            (b" a.b ", true),
            (b"a]", true),
            (b"", true),
        ] {
            assert_eq!(valid_host(value), ok, "{value:?}");
        }
    }

    #[test]
    fn host_values_and_http_1_0_rules() {
        assert!(parse("GET / HTTP/1.1\r\nHost: [::1]:8000\r\n\r\n")
            .unwrap()
            .is_some());
        assert!(parse("GET / HTTP/1.1\r\nHost: \r\n\r\n").unwrap().is_some());
        assert!(parse("GET / HTTP/1.1\r\nHost: a b\r\n\r\n").is_err());
        assert!(parse("GET / HTTP/1.1\r\nHost: evil/x\r\n\r\n").is_err());
        assert!(parse("GET / HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n").is_err());
        assert!(matches!(
            parse("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"),
            Err(HttpError::Framing(_))
        ));
    }

    #[test]
    fn transfer_encoding_is_one_list_across_lines() {
        let te = |lines: &str| parse(&format!("POST / HTTP/1.1\r\nHost: x\r\n{lines}\r\n"));
        assert!(matches!(
            te("Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n"),
            Err(HttpError::UnsupportedCoding)
        ));
        assert_eq!(
            te("Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n").err(),
            Some(HttpError::Framing("chunked applied more than once"))
        );
        assert_eq!(
            te("Transfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n").err(),
            Some(HttpError::Framing(
                "Transfer-Encoding does not end in chunked"
            ))
        );
        assert_eq!(
            te("Transfer-Encoding: chunked\r\n").unwrap().unwrap().body,
            BodyKind::Chunked
        );
    }

    #[test]
    fn repeated_content_length_is_400_even_when_equal() {
        for cl in [
            "Content-Length: 5\r\nContent-Length: 5",
            "Content-Length: 5, 5",
        ] {
            let r = parse(&format!("POST / HTTP/1.1\r\nHost: x\r\n{cl}\r\n\r\n"));
            assert!(matches!(r, Err(HttpError::Framing(_))), "{cl}: {r:?}");
        }
    }

    #[test]
    fn later_http_1_minors_are_served_as_1_1() {
        let raw = "GET /a HTTP/1.2\r\nHost: x\r\nX: y\r\n\r\n";
        let head = parse(raw).unwrap().unwrap();
        assert_eq!(head.version_minor, 1);
        assert!(head.keep_alive);
        assert_eq!(&raw[head.target.clone()], "/a");
        assert_eq!(head.values(raw.as_bytes(), "x").next(), Some(&b"y"[..]));
        assert_eq!(
            parse("GET / HTTP/2.0\r\n\r\n").err(),
            Some(HttpError::VersionNotSupported)
        );
        assert!(matches!(
            parse("GET / HTTP/1.x\r\n\r\n"),
            Err(HttpError::Malformed(_))
        ));
    }

    #[test]
    fn absolute_form_authority_is_the_host() {
        let raw = "GET http://a.example:81/x?q HTTP/1.1\r\nHost: b\r\n\r\n";
        let head = parse(raw).unwrap().unwrap();
        let hosts: Vec<_> = head.values(raw.as_bytes(), "host").collect();
        assert_eq!(hosts, [b"a.example:81"]);
        assert!(parse("GET http:///x HTTP/1.1\r\nHost: b\r\n\r\n").is_err());
        assert!(parse("GET http://u@h/x HTTP/1.1\r\nHost: b\r\n\r\n").is_err());
    }

    #[test]
    fn a_long_target_is_414_even_past_the_head_limit() {
        let p = ConnParams {
            max_head: 16 * 1024,
            ..ConnParams::default()
        };
        let long = format!(
            "GET /{} HTTP/1.1\r\nHost: x\r\n\r\n",
            "a".repeat(100 * 1024)
        );
        assert_eq!(
            parse_head(long.as_bytes(), &p).err(),
            Some(HttpError::UriTooLong)
        );
        let cut = &long.as_bytes()[..long.len() - 2];
        assert_eq!(parse_head(cut, &p).err(), Some(HttpError::UriTooLong));
    }

    #[test]
    fn garbage_is_malformed() {
        assert!(parse("\x01\x02 nonsense\r\n\r\n").is_err());
        assert!(parse("GET nothing HTTP/1.1\r\nHost: x\r\n\r\n").is_err());
    }

    #[test]
    fn limits() {
        let long = format!("GET /{} HTTP/1.1\r\n", "a".repeat(9000));
        assert!(matches!(parse(&long[..8500]), Err(HttpError::UriTooLong)));
        let p = ConnParams {
            max_body: 10,
            ..ConnParams::default()
        };
        let r = parse_head(
            b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\n",
            &p,
        );
        assert!(matches!(r, Err(HttpError::BodyTooLarge)));
    }
}

//! The request line: its length while incomplete, its HTTP version (a
//! later 1.x minor served as 1.1) and its request-target's form and
//! authority.

use super::{parse_head_reusing, Head, HeaderOffsets};
use crate::http::HttpError;
use crate::settings::ConnParams;

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

/// An incomplete head is still bounded: a request line without its CRLF is
/// limited by `max_request_line` (414), the whole head by `max_head` (431).
pub(super) fn check_partial(buf: &[u8], params: &ConnParams) -> Result<(), HttpError> {
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
pub(super) fn absolute_authority(target: &str) -> Option<&str> {
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
pub(super) fn parse_later_minor(
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
pub(super) fn check_target(method: &[u8], target: &str) -> Result<(), HttpError> {
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

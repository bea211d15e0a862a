//! The checks of single header fields: a Host value, a Content-Length,
//! the Transfer-Encoding list.

use crate::http::HttpError;

/// `uri-host [":" port]` (RFC 3986): registered-name characters, or an IP
/// literal in brackets; empty is allowed (a target without authority).
pub(super) fn valid_host(value: &[u8]) -> bool {
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
pub(super) const NOT_HOST: u8 = 0;
const HOST: u8 = 1;
const BRACKET: u8 = 2;

/// The bytes `valid_host` allows, as a table (one look-up per byte).
pub(super) const HOST_BYTES: [u8; 256] = {
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

pub(super) fn parse_content_length(value: &[u8]) -> Result<usize, HttpError> {
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
pub(super) fn transfer_coding(codings: &[&[u8]]) -> Result<bool, HttpError> {
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

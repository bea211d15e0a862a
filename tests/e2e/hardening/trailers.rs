//! Trailers: a chunked body's trailer section is accepted, bounded (many
//! lines, or one line that never ends, is 431) and held to the header field
//! rules (400).

use super::{accepted, justnow, refused, start};
use crate::common::assert_serves;
use crate::harness::Backend;

matrix!(
    tls:
    trailers_are_bounded,
    unterminated_trailer_line_is_bounded,
    malformed_trailer_is_400,
);

/// A chunked request whose trailer section is `trailers` (after `0\r\n`).
fn with_trailers(trailers: &[u8]) -> Vec<u8> {
    let mut body = b"3\r\nabc\r\n0\r\n".to_vec();
    body.extend_from_slice(trailers);
    justnow("POST", &["Transfer-Encoding: chunked"], &body)
}

fn trailers_are_bounded(on: Backend) {
    let server = start(on, &[]);
    accepted(&server, "a trailer", &with_trailers(b"X-T: v\r\n\r\n"));
    let many = with_trailers(&[&b"X-T: aaaa\r\n".repeat(3000)[..], b"\r\n"].concat());
    refused(&server, "33 KB of trailers", &many, 431, "431");
    assert_serves(&server);
}

/// A trailer line that never ends is refused once past the 16 KiB trailer
/// bound, as complete lines are, not buffered until the body timeout.
fn unterminated_trailer_line_is_bounded(on: Backend) {
    let server = start(on, &[]);
    let line = with_trailers(&[&b"X-T: "[..], &[b'a'; 20 * 1024]].concat());
    refused(&server, "unterminated trailer", &line, 431, "431");
    assert_serves(&server);
}

/// Trailer fields follow the header field rules: no NUL, a colon.
fn malformed_trailer_is_400(on: Backend) {
    let server = start(on, &[]);
    let nul = with_trailers(b"X-T: a\0b\r\n\r\n");
    refused(&server, "NUL in a trailer", &nul, 400, "400");
    let garbage = with_trailers(b"garbage\r\n\r\n");
    refused(&server, "trailer without a colon", &garbage, 400, "400");
    assert_serves(&server);
}

//! HTTP hardening (issue 7), through the `demo` app: every limit at a small
//! flag value answers its own status with a body naming the limit, then
//! `Connection: close` and the close (`limits`); every timeout at a short
//! flag value, and a slowloris crowd cut off by the head timeout while a
//! normal client is served (`timeouts`); every strict-framing rule of RFC
//! 9112, request smuggling attempts that must get exactly one answer, the
//! request-target forms and the Host field rules (`framing`); and bounded,
//! well-formed trailers (`trailers`). Each test then checks that the server
//! still serves a fresh request. Every case runs over plain TCP and over
//! TLS (`matrix!(tls: ..)`). This file holds the helpers they share.

mod framing;
mod limits;
mod timeouts;
mod trailers;

use crate::client::{with_body, Response};
use crate::common::JUSTNOW_BODY;
use crate::harness::{Backend, Server};

/// The demo app, with these flags.
fn start(on: Backend, args: &[&str]) -> Server {
    Server::start(on, &["demo", "misbehave"], args)
}

/// Sends `bytes` on a new connection and asserts the refusal: `status`, a
/// body containing `needle`, `Connection: close`, then the close.
pub(crate) fn refused(
    server: &Server,
    what: &str,
    bytes: &[u8],
    status: u16,
    needle: &str,
) -> Response {
    let mut c = server.connect();
    let r = c.request(bytes);
    assert_eq!(r.status, status, "{what}: {r:?}");
    assert!(
        String::from_utf8_lossy(&r.body).contains(needle),
        "{what}: body does not name {needle:?}: {r:?}"
    );
    assert_eq!(r.header("Connection"), Some("close"), "{what}: {r:?}");
    c.assert_closed();
    r
}

/// Asserts a request is served (`/demo/justnow/` answers any method).
pub(crate) fn accepted(server: &Server, what: &str, bytes: &[u8]) {
    let r = server.connect().request(bytes);
    assert_eq!((r.status, r.text()), (200, JUSTNOW_BODY), "{what}: {r:?}");
}

/// A request to `/demo/justnow/` with these extra header lines and body.
pub(crate) fn justnow(method: &str, headers: &[&str], body: &[u8]) -> Vec<u8> {
    with_body(method, "/demo/justnow/", headers, body)
}

/// Splits a flag string into the arguments `Server::start` takes.
fn flags(s: &str) -> Vec<&str> {
    s.split_whitespace().collect()
}

//! How a streamed response's body is framed on the wire: the host's
//! choice, never the app's (RFC 9112 §6): chunked on HTTP/1.1, delimited by
//! the connection's close on HTTP/1.0, the app's declared `Content-Length`
//! when it gave one, and no body at all for HEAD or a bodiless status.

use super::response::{never_has_body, BodyLength};

/// How each chunk goes out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// `size CRLF data CRLF`, ended by `0 CRLF CRLF`.
    Chunked,
    /// As is, under a declared `Content-Length` (the line holds the app
    /// to it).
    Length,
    /// As is; the body ends when the connection closes.
    Close,
    /// Nothing (HEAD, 204, 304): chunks are taken and dropped.
    Discard,
}

/// The framing of one streamed response, what its head announces, and
/// whether the connection must close after it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    pub framing: Framing,
    pub announce: BodyLength,
    pub must_close: bool,
}

/// Picks the framing for a response to a request of HTTP/1.`version_minor`.
pub fn plan(head_only: bool, status: u16, declared: Option<u64>, version_minor: u8) -> Plan {
    let (framing, announce, must_close) = if head_only || never_has_body(status) {
        // A HEAD answer says the length a GET would have, when known.
        let announce = declared.map_or(BodyLength::Unframed, BodyLength::Length);
        (Framing::Discard, announce, false)
    } else {
        match (declared, version_minor) {
            (Some(n), _) => (Framing::Length, BodyLength::Length(n), false),
            (None, 0) => (Framing::Close, BodyLength::Unframed, true),
            (None, _) => (Framing::Chunked, BodyLength::Chunked, false),
        }
    };
    Plan {
        framing,
        announce,
        must_close,
    }
}

/// A chunk's size line: the length in hex, CRLF.
pub fn chunk_size_line(len: usize) -> String {
    format!("{len:x}\r\n")
}

/// What ends a chunked body (no trailers).
pub const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_picks_the_framing() {
        let chunked = plan(false, 200, None, 1);
        assert_eq!(
            (chunked.framing, chunked.must_close),
            (Framing::Chunked, false)
        );
        let old = plan(false, 200, None, 0);
        assert_eq!(
            (old.framing, old.announce, old.must_close),
            (Framing::Close, BodyLength::Unframed, true)
        );
        let sized = plan(false, 200, Some(5), 0);
        assert_eq!(
            (sized.framing, sized.announce),
            (Framing::Length, BodyLength::Length(5))
        );
        assert_eq!(plan(true, 200, None, 1).framing, Framing::Discard);
        assert_eq!(plan(true, 200, Some(9), 1).announce, BodyLength::Length(9));
        assert_eq!(plan(false, 204, None, 1).framing, Framing::Discard);
        assert_eq!(chunk_size_line(255), "ff\r\n");
    }
}

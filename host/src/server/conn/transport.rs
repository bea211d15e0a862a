//! The byte stream under a connection.

use crate::listen::Accepted;
use crate::stats::HandshakeFailure;
use std::io::{self, Read, Write};

/// What a connection reads requests from and writes answers to: a socket
/// (`listen::Accepted`), a test's buffer, and later a TLS session over a
/// socket. Reads and writes are non-blocking: they end in `WouldBlock`
/// when the transport has nothing more to give or take now, and the
/// poller reports when it has.
///
/// Shaped so that TLS can sit behind it:
/// - `shutdown_write` ends the sending half while reads go on (a
///   lingering close). A socket sends its FIN; TLS sends `close_notify`
///   first, through its own output.
/// - `has_buffered_input` tells of plaintext already taken from the socket
///   but not handed out yet (a TLS record decrypted whole, of which a read
///   took part). The poller sees only the socket, which may never become
///   readable again for it, so the connection counts itself readable
///   while this is true (see `Conn::fill`) instead of waiting for an edge.
/// - A handshake (TLS's) comes before the first request byte: while
///   `is_handshaking`, the connection is under `tls_handshake_timeout`;
///   one that failed says how (`handshake_failure`), for the counters.
///   Plain HTTP where the handshake was due is such a failure, after
///   which the transport passes bytes through as a bare socket, so the
///   connection answers it in plaintext (`Conn::owes_plain_http_answer`).
pub trait Transport: Read + Write {
    /// Ends the sending half: no more bytes go out, reads go on.
    fn shutdown_write(&mut self) -> io::Result<()>;

    /// True while input is buffered inside the transport (none in a socket).
    fn has_buffered_input(&self) -> bool {
        false
    }

    /// True while output is buffered inside the transport for the socket
    /// (TLS records it did not take yet; none in a socket): the
    /// connection waits to write until it is gone.
    fn has_buffered_output(&self) -> bool {
        false
    }

    /// True when written bytes go out only at the loop's next wait (the
    /// completion backend's transport): writing again before then moves
    /// nothing once it is full.
    fn sends_at_wait(&self) -> bool {
        false
    }

    /// The TLS session apps see (none on a plain transport).
    fn tls_session(&mut self) -> Option<std::sync::Arc<stoa_app_api::abi::TlsSession>> {
        None
    }

    /// True once the transport's handshake chose HTTP/2 (TLS's ALPN `h2`).
    fn chose_h2(&self) -> bool {
        false
    }

    /// True while a handshake is under way (none on a bare socket).
    fn is_handshaking(&self) -> bool {
        false
    }

    /// How the handshake failed, if it did.
    fn handshake_failure(&self) -> Option<HandshakeFailure> {
        None
    }

    /// Gives the handshake up as failed with `kind` (its time ran out).
    fn fail_handshake(&mut self, _kind: HandshakeFailure) {}
}

impl Transport for Accepted {
    /// Sends a FIN (after `close_notify` on TLS).
    fn shutdown_write(&mut self) -> io::Result<()> {
        Accepted::shutdown_write(self)
    }

    fn has_buffered_input(&self) -> bool {
        match self {
            Accepted::Tls(s) => s.has_buffered_input(),
            _ => false,
        }
    }

    fn has_buffered_output(&self) -> bool {
        Accepted::has_buffered_output(self)
    }

    fn sends_at_wait(&self) -> bool {
        match self {
            Accepted::Ring(_) => true,
            Accepted::Tls(s) => matches!(s.socket(), Accepted::Ring(_)),
            _ => false,
        }
    }

    fn tls_session(&mut self) -> Option<std::sync::Arc<stoa_app_api::abi::TlsSession>> {
        match self {
            Accepted::Tls(s) => s.session(),
            _ => None,
        }
    }

    fn chose_h2(&self) -> bool {
        match self {
            Accepted::Tls(s) => s.chose_h2(),
            _ => false,
        }
    }

    fn is_handshaking(&self) -> bool {
        match self {
            Accepted::Tls(s) => s.is_handshaking(),
            _ => false,
        }
    }

    fn handshake_failure(&self) -> Option<HandshakeFailure> {
        match self {
            Accepted::Tls(s) => s.handshake_failure(),
            _ => None,
        }
    }

    fn fail_handshake(&mut self, kind: HandshakeFailure) {
        if let Accepted::Tls(s) = self {
            s.fail_handshake(kind);
        }
    }
}

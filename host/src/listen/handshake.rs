//! A TLS session's handshake as the host watches it (`tls::TlsStream`
//! keeps a `Watch`): what the first bytes on a TLS port are, and why a
//! handshake failed.
//!
//! The first bytes are read before the session sees them. A TLS
//! connection opens with a handshake record (content type 22, RFC 8446
//! section 5.1): those bytes go to the session. An uppercase token and a
//! space are an HTTP request line's method (RFC 9112 section 3): plain
//! HTTP sent to the TLS port, which the connection answers 400 in
//! plaintext, as nginx does; from then on the stream passes the socket's
//! bytes through untouched. Anything else is refused at once, unread by
//! the session.

use crate::stats::HandshakeFailure;
use std::io::{self, Read};

/// Most bytes read to tell a request line from other bytes: the longest
/// method a client sends (`VERSION-CONTROL`, `BASELINE-CONTROL`) and its
/// space fit.
const SNIFF_BYTES: usize = 24;

/// The content type of a TLS handshake record.
const HANDSHAKE_RECORD: u8 = 0x16;

/// What the first bytes on a TLS port are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Opening {
    /// Too few bytes yet to tell.
    Unsure,
    /// A TLS handshake record.
    Tls,
    /// A request line's method and its space: plain HTTP.
    PlainHttp,
    /// Neither.
    NotTls,
}

/// What the first bytes `bytes` are.
pub fn opening(bytes: &[u8]) -> Opening {
    match bytes.first() {
        None => return Opening::Unsure,
        Some(&HANDSHAKE_RECORD) => return Opening::Tls,
        Some(_) => {}
    }
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'A'..=b'Z' | b'-' | b'_' => {}
            b' ' if i > 0 => return Opening::PlainHttp,
            _ => return Opening::NotTls,
        }
    }
    match bytes.len() < SNIFF_BYTES {
        true => Opening::Unsure,
        false => Opening::NotTls,
    }
}

/// The kind a session error met during the handshake counts as.
pub fn kind_of(e: &rustls::Error) -> HandshakeFailure {
    use rustls::Error as E;
    match e {
        E::InvalidMessage(_) | E::PeerSentOversizedRecord => HandshakeFailure::NotTls,
        E::PeerIncompatible(_)
        | E::PeerMisbehaved(_)
        | E::NoApplicationProtocol
        | E::InappropriateMessage { .. }
        | E::InappropriateHandshakeMessage { .. }
        | E::UnsupportedNameType
        | E::DecryptError
        | E::InvalidEncryptedClientHello(_) => HandshakeFailure::Protocol,
        E::NoCertificatesPresented | E::InvalidCertificate(_) | E::InvalidCertRevocationList(_) => {
            HandshakeFailure::Certificate
        }
        E::AlertReceived(_) => HandshakeFailure::Alert,
        _ => HandshakeFailure::Other,
    }
}

/// Where a session's first bytes have got to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Reading them.
    Sniffing,
    /// A TLS handshake: the session has them.
    Tls,
    /// Plain HTTP: the stream passes the socket's bytes through.
    Plain,
}

/// What one look at the first bytes came to.
pub enum Sniffed<'a> {
    /// TLS: these are the bytes read, for the session.
    Tls(&'a [u8]),
    /// Plain HTTP (the stream passes through from now on).
    PlainHttp,
    /// Neither: refused.
    NotTls,
    /// The peer closed first.
    Ended,
}

/// A session's handshake: its first bytes, and how it failed.
pub struct Watch {
    first: [u8; SNIFF_BYTES],
    seen: usize,
    stage: Stage,
    failure: Option<HandshakeFailure>,
}

impl Default for Watch {
    fn default() -> Self {
        Watch {
            first: [0; SNIFF_BYTES],
            seen: 0,
            stage: Stage::Sniffing,
            failure: None,
        }
    }
}

impl Watch {
    pub fn stage(&self) -> Stage {
        self.stage
    }

    /// Reads the first bytes from `src` until they tell what they are
    /// (`WouldBlock` until then). A peer that closes after its first byte
    /// failed its handshake (`Closed`); one that closes before it sent
    /// nothing to fail.
    pub fn sniff(&mut self, src: &mut impl Read) -> io::Result<Sniffed<'_>> {
        loop {
            let kind = match opening(&self.first[..self.seen]) {
                Opening::Unsure => None,
                Opening::Tls => {
                    self.stage = Stage::Tls;
                    return Ok(Sniffed::Tls(&self.first[..self.seen]));
                }
                Opening::PlainHttp => Some(HandshakeFailure::PlainHttp),
                Opening::NotTls => Some(HandshakeFailure::NotTls),
            };
            if let Some(kind) = kind {
                self.fail(kind);
                return Ok(match kind {
                    HandshakeFailure::PlainHttp => {
                        self.stage = Stage::Plain;
                        Sniffed::PlainHttp
                    }
                    _ => Sniffed::NotTls,
                });
            }
            match src.read(&mut self.first[self.seen..]) {
                Ok(0) => {
                    if self.seen > 0 {
                        self.fail(HandshakeFailure::Closed);
                    }
                    return Ok(Sniffed::Ended);
                }
                Ok(n) => self.seen += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    if e.kind() != io::ErrorKind::WouldBlock && self.seen > 0 {
                        self.fail(HandshakeFailure::Closed);
                    }
                    return Err(e);
                }
            }
        }
    }

    /// The handshake failed with `kind` (the first failure is the one
    /// kept: a refusal's alert that then cannot be sent is no second).
    pub fn fail(&mut self, kind: HandshakeFailure) {
        self.failure.get_or_insert(kind);
    }

    /// How the handshake failed, if it did.
    pub fn failure(&self) -> Option<HandshakeFailure> {
        self.failure
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    #[test]
    fn the_first_bytes_tell_tls_plain_http_and_garbage_apart() {
        let unsure: &[&[u8]] = &[b"", b"GE"];
        let tls: &[&[u8]] = &[b"\x16", b"\x16\x03\x01\x02\x00"];
        let plain: &[&[u8]] = &[b"GET / HTTP/1.1\r\n", b"M-SEARCH * HTTP/1.1", b"PROPFIND "];
        let not_tls: &[&[u8]] = &[
            b"get / HTTP/1.1",
            b" GET",
            b"\x80\x2e\x01",
            b"\r\n",
            b"\x15\x03",
        ];
        for (what, all) in [
            (Opening::Unsure, unsure),
            (Opening::Tls, tls),
            (Opening::PlainHttp, plain),
            (Opening::NotTls, not_tls),
        ] {
            for bytes in all {
                assert_eq!(opening(bytes), what, "{bytes:?}");
            }
        }
        assert_eq!(opening(&[b'A'; SNIFF_BYTES - 1]), Opening::Unsure);
        assert_eq!(opening(&[b'A'; SNIFF_BYTES]), Opening::NotTls);
    }

    /// A source that gives `chunks` one read each, then `WouldBlock`, or
    /// the end once `eof`.
    struct Drip {
        chunks: VecDeque<Vec<u8>>,
        eof: bool,
    }

    impl Read for Drip {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let Some(mut chunk) = self.chunks.pop_front() else {
                return match self.eof {
                    true => Ok(0),
                    false => Err(io::ErrorKind::WouldBlock.into()),
                };
            };
            let n = chunk.len().min(buf.len());
            buf[..n].copy_from_slice(&chunk[..n]);
            if n < chunk.len() {
                self.chunks.push_front(chunk.split_off(n));
            }
            Ok(n)
        }
    }

    fn drip(chunks: &[&[u8]], eof: bool) -> Drip {
        Drip {
            chunks: chunks.iter().map(|c| c.to_vec()).collect(),
            eof,
        }
    }

    #[test]
    fn a_request_line_a_byte_at_a_time_is_told_once_its_space_comes() {
        let mut w = Watch::default();
        let mut src = drip(&[b"P", b"O", b"S", b"T"], false);
        let e = w.sniff(&mut src).err().map(|e| e.kind());
        assert_eq!(e, Some(io::ErrorKind::WouldBlock));
        assert_eq!((w.stage(), w.failure()), (Stage::Sniffing, None));
        src.chunks.push_back(b" /x HTTP/1.1\r\n".to_vec());
        assert!(matches!(w.sniff(&mut src), Ok(Sniffed::PlainHttp)));
        assert_eq!(w.stage(), Stage::Plain);
        assert_eq!(w.failure(), Some(HandshakeFailure::PlainHttp));
    }

    #[test]
    fn a_handshake_record_goes_to_the_session_with_what_came_with_it() {
        let mut w = Watch::default();
        let mut src = drip(&[b"\x16\x03\x01\x00\x05hello"], false);
        match w.sniff(&mut src) {
            Ok(Sniffed::Tls(first)) => assert_eq!(first, b"\x16\x03\x01\x00\x05hello"),
            _ => panic!("not TLS"),
        }
        assert_eq!((w.stage(), w.failure()), (Stage::Tls, None));
    }

    #[test]
    fn garbage_is_refused_and_a_close_counts_only_after_a_byte() {
        let mut w = Watch::default();
        assert!(matches!(
            w.sniff(&mut drip(&[b"\x00\x01"], false)),
            Ok(Sniffed::NotTls)
        ));
        assert_eq!(w.failure(), Some(HandshakeFailure::NotTls));
        let mut w = Watch::default();
        assert!(matches!(w.sniff(&mut drip(&[], true)), Ok(Sniffed::Ended)));
        assert_eq!(w.failure(), None);
        let mut w = Watch::default();
        assert!(matches!(
            w.sniff(&mut drip(&[b"GE"], true)),
            Ok(Sniffed::Ended)
        ));
        assert_eq!(w.failure(), Some(HandshakeFailure::Closed));
    }

    #[test]
    fn session_errors_count_by_kind() {
        use rustls::{AlertDescription, Error, InvalidMessage, PeerIncompatible};
        let cases = [
            (
                Error::InvalidMessage(InvalidMessage::MessageTooLarge),
                HandshakeFailure::NotTls,
            ),
            (
                Error::PeerIncompatible(PeerIncompatible::NoCipherSuitesInCommon),
                HandshakeFailure::Protocol,
            ),
            (Error::NoApplicationProtocol, HandshakeFailure::Protocol),
            (
                Error::NoCertificatesPresented,
                HandshakeFailure::Certificate,
            ),
            (
                Error::AlertReceived(AlertDescription::UnknownCA),
                HandshakeFailure::Alert,
            ),
            (Error::General("x".into()), HandshakeFailure::Other),
        ];
        for (e, kind) in cases {
            assert_eq!(kind_of(&e), kind, "{e}");
        }
    }
}

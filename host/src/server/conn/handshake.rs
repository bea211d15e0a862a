//! The handshake before a connection's first request (a TLS session's):
//! whether it is under way (its deadline is `Deadline::Handshake`), how
//! it failed, and the plaintext 400 owed to plain HTTP sent where it was
//! due (nginx's "The plain HTTP request was sent to HTTPS port").

use super::{Conn, Phase, Transport};
use crate::http::answer::HostAnswer;
use crate::http::reader::BufPool;
use crate::stats::HandshakeFailure;

impl<S: Transport> Conn<S> {
    /// How the transport's handshake failed, if it did.
    pub fn handshake_failure(&self) -> Option<HandshakeFailure> {
        self.stream.handshake_failure()
    }

    /// The handshake's time ran out: it failed (`Timeout`) and the
    /// connection is to close unanswered.
    pub fn handshake_timed_out(&mut self) {
        self.stream.fail_handshake(HandshakeFailure::Timeout);
        self.handshaking = false;
    }

    /// True when plain HTTP came where the handshake was due and is not
    /// answered yet (`answer_plain_http`).
    pub fn owes_plain_http_answer(&self) -> bool {
        matches!(self.phase, Phase::Reading(_))
            && self.stream.handshake_failure() == Some(HandshakeFailure::PlainHttp)
    }

    /// Answers plain HTTP sent where the handshake was due: 400 in
    /// plaintext (the transport passes bytes through now), then a
    /// lingering close, so the client reads the answer before the FIN
    /// (what it still sends is dropped, never answered).
    pub fn answer_plain_http(&mut self, date: &str, pool: &mut BufPool) {
        self.refuse(HostAnswer::PlainHttpToTls, date, pool);
    }
}

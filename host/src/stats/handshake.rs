//! Why a TLS handshake failed, by kind: what status and metrics count
//! (`stoa_tls_handshake_failures_total{kind}`) and the debug log names.

/// The kind of a failed TLS handshake.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HandshakeFailure {
    /// Not finished within `--tls-handshake-timeout` (a client that sends
    /// nothing, or its ClientHello a byte at a time).
    Timeout,
    /// A plain HTTP request sent to the TLS port (answered 400 in
    /// plaintext).
    PlainHttp,
    /// Bytes that are no TLS records: other garbage before a ClientHello,
    /// a malformed or oversized record.
    NotTls,
    /// A well-formed ClientHello the host cannot agree with: no common
    /// version, cipher suite, group or ALPN protocol, or messages out of
    /// order.
    Protocol,
    /// A client certificate refused (mutual TLS).
    Certificate,
    /// The client ended the handshake with an alert of its own (one that
    /// does not trust the host's certificate, for one).
    Alert,
    /// The client closed (or reset) the connection mid-handshake, after
    /// its first byte.
    Closed,
    /// Anything else.
    Other,
}

impl HandshakeFailure {
    /// Every kind, in the order status and metrics list them.
    pub const ALL: [HandshakeFailure; 8] = [
        HandshakeFailure::Timeout,
        HandshakeFailure::PlainHttp,
        HandshakeFailure::NotTls,
        HandshakeFailure::Protocol,
        HandshakeFailure::Certificate,
        HandshakeFailure::Alert,
        HandshakeFailure::Closed,
        HandshakeFailure::Other,
    ];

    /// The name status, metrics and logs give the kind.
    pub fn name(self) -> &'static str {
        match self {
            HandshakeFailure::Timeout => "timeout",
            HandshakeFailure::PlainHttp => "plain_http",
            HandshakeFailure::NotTls => "not_tls",
            HandshakeFailure::Protocol => "protocol",
            HandshakeFailure::Certificate => "certificate",
            HandshakeFailure::Alert => "alert",
            HandshakeFailure::Closed => "closed",
            HandshakeFailure::Other => "other",
        }
    }

    /// The kind's place in `ALL` (its counter's index).
    pub fn index(self) -> usize {
        self as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_has_its_place_and_a_name_of_its_own() {
        for (i, kind) in HandshakeFailure::ALL.iter().enumerate() {
            assert_eq!(kind.index(), i);
        }
        let mut names: Vec<_> = HandshakeFailure::ALL.iter().map(|k| k.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), HandshakeFailure::ALL.len());
    }
}

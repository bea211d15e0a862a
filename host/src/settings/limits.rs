//! The limits and timeouts a connection, a WebSocket and an app run under.

use std::time::Duration;

/// `--max-stream-body`'s default: 4 GiB (where a `usize` holds it).
pub const DEFAULT_MAX_STREAM_BODY: usize = if usize::BITS >= 64 {
    (4u64 << 30) as usize
} else {
    usize::MAX
};

/// Every per-connection limit and timeout, with its default.
#[derive(Clone, Debug)]
pub struct ConnParams {
    /// Longest request-target (414 past it).
    pub max_request_line: usize,
    /// Longest single header value (431).
    pub max_header_field: usize,
    /// Most header fields (431).
    pub max_headers: usize,
    /// Largest whole head (431).
    pub max_head: usize,
    /// Largest body, decoded (413), of a request whose app takes it whole.
    pub max_body: usize,
    /// Largest body, decoded (413), of a request whose app reads it as it
    /// arrives (`App::reads_body`): the host holds only a window of it, so
    /// this may be far above `max_body`.
    pub max_stream_body: usize,
    /// Requests served on one connection before it is closed.
    pub max_requests_per_conn: u32,
    /// A TLS handshake, from the accept (closed unanswered past it; a
    /// slowloris on the handshake).
    pub tls_handshake_timeout: Duration,
    /// Whole request head, from its first byte (408 past it; slowloris).
    pub head_timeout: Duration,
    /// Between two reads of a body (408).
    pub body_timeout: Duration,
    /// Without progress while sending a response (then closed).
    pub send_timeout: Duration,
    /// An idle keep-alive connection is closed quietly after this.
    pub keep_alive_timeout: Duration,
    /// An app that has not answered by then gets its client a 504.
    pub app_timeout: Duration,
    /// Bytes of a streamed response queued for one connection (sent by the
    /// app, not yet written) past which the app's sends are refused
    /// (`WouldBlock`) until the client reads.
    pub stream_queue: usize,
    /// A streamed response whose app sends nothing for this long is ended
    /// (abnormally: the connection closes).
    pub stream_idle_timeout: Duration,
    /// Bytes a second a body must average once `body_timeout` has passed
    /// since it began (408 below it); 0: no minimum.
    pub body_min_rate: usize,
    /// How a connection closed with its client still sending lingers.
    pub linger: LingerLimits,
}

/// The bounds of a lingering close: after an answer that leaves request
/// bytes unread (an error answer such as 413 or 408, an answer given before
/// a streamed body all came, pipelined requests after `Connection: close`)
/// the connection is half-closed and what the client still sends is read
/// and dropped, so that the close is a FIN and not a reset that would
/// destroy the answer before the client reads it (nginx's
/// `lingering_close`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LingerLimits {
    /// Longest linger, from the half-close (`--lingering-time`).
    pub time: Duration,
    /// Longest wait for the client's next bytes (`--lingering-timeout`).
    pub timeout: Duration,
    /// Most bytes read and dropped (`--lingering-bytes`).
    pub bytes: u64,
    /// Most connections one worker keeps lingering (its share of
    /// `--max-lingering`); past it the one lingering longest is closed.
    pub most: usize,
}

impl Default for LingerLimits {
    fn default() -> Self {
        LingerLimits {
            time: Duration::from_secs(30),
            timeout: Duration::from_secs(5),
            bytes: 64 << 20,
            most: 1024,
        }
    }
}

impl Default for ConnParams {
    fn default() -> Self {
        ConnParams {
            max_request_line: 8 * 1024,
            max_header_field: 8 * 1024,
            max_headers: 100,
            max_head: 64 * 1024,
            max_body: 8 * 1024 * 1024,
            max_stream_body: DEFAULT_MAX_STREAM_BODY,
            max_requests_per_conn: 1000,
            tls_handshake_timeout: Duration::from_secs(10),
            head_timeout: Duration::from_secs(30),
            body_timeout: Duration::from_secs(30),
            send_timeout: Duration::from_secs(30),
            keep_alive_timeout: Duration::from_secs(30),
            app_timeout: Duration::from_secs(30),
            stream_queue: 256 * 1024,
            stream_idle_timeout: Duration::from_secs(60),
            body_min_rate: 500,
            linger: LingerLimits::default(),
        }
    }
}

/// The timing policy of open WebSockets.
#[derive(Clone, Copy, Debug)]
pub struct WsParams {
    /// Largest message (`--ws-max-message`).
    pub max_message: usize,
    /// Silence after which the peer is pinged, and then dropped
    /// (`--ws-ping-interval`).
    pub ping_interval: Duration,
    /// Least average rate of a message, bytes a second, once `rate_grace`
    /// has passed since its first byte (`--body-min-rate`); 0: none.
    pub min_rate: usize,
    /// `--body-timeout`.
    pub rate_grace: Duration,
}

impl Default for WsParams {
    fn default() -> Self {
        WsParams {
            max_message: 16 << 20,
            ping_interval: Duration::from_secs(30),
            min_rate: 500,
            rate_grace: Duration::from_secs(30),
        }
    }
}

/// An app's own limits, in place of the server-wide flags (`None`: the
/// flag's value).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AppLimits {
    /// Largest request body (413), checked when the head arrives.
    pub max_body: Option<usize>,
    /// Largest body of a request it reads as it arrives (413).
    pub max_stream_body: Option<usize>,
    /// Time to answer before the client gets 504.
    pub app_timeout: Option<std::time::Duration>,
    /// Percent of the blocking pool's threads and queue it may hold.
    pub blocking_share: Option<u8>,
}

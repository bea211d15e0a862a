//! HTTP/1.1 on the wire: request heads (`parse`), chunked bodies
//! (`chunked`), response bytes and the cached `Date` (`response`), the
//! bytes waiting for the socket (`output`), a streamed body's framing
//! (`framing`). All limits live in one
//! `ConnParams`; all errors map to a status in one place.

pub(crate) mod answer;
pub(crate) mod chunked;
pub(crate) mod framing;
pub(crate) mod output;
pub mod parse;
pub mod reader;
pub mod response;
pub mod ws;

use std::time::Duration;

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
    /// Largest body, decoded (413).
    pub max_body: usize,
    /// Requests served on one connection before it is closed.
    pub max_requests_per_conn: u32,
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
            max_requests_per_conn: 1000,
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

/// Why a request could not be read. Every variant ends the connection.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HttpError {
    #[error("malformed request: {0}")]
    Malformed(&'static str),
    #[error("bad message framing: {0}")]
    Framing(&'static str),
    #[error("request-target longer than max_request_line")]
    UriTooLong,
    #[error("header field longer than max_header_field")]
    HeaderFieldTooLarge,
    #[error("more header fields than max_headers")]
    TooManyHeaders,
    #[error("request head larger than max_head")]
    HeadTooLarge,
    #[error("body larger than max_body")]
    BodyTooLarge,
    #[error("transfer coding not implemented")]
    UnsupportedCoding,
    #[error("unsupported expectation")]
    ExpectationFailed,
    #[error("HTTP major version not supported")]
    VersionNotSupported,
    #[error("request head not received within head_timeout")]
    HeadTimeout,
    #[error("request body stalled for body_timeout")]
    BodyTimeout,
    /// The body came slower than `body_min_rate` (bytes a second, after
    /// a first `body_timeout`).
    #[error("request body slower than body_min_rate ({0} bytes/s after body_timeout)")]
    BodyTooSlow(usize),
    /// The host holds all the request bodies and WebSocket messages its
    /// budget allows (`max_buffered`, bytes).
    #[error(
        "the host holds its whole max_buffered ({}) of request bodies and WebSocket messages; try again later",
        crate::budget::size_text(*.0)
    )]
    OverBudget(usize),
}

impl HttpError {
    /// The status code this error is answered with.
    pub fn status(&self) -> u16 {
        match self {
            HttpError::Malformed(_) | HttpError::Framing(_) => 400,
            HttpError::UriTooLong => 414,
            HttpError::HeaderFieldTooLarge
            | HttpError::TooManyHeaders
            | HttpError::HeadTooLarge => 431,
            HttpError::BodyTooLarge => 413,
            HttpError::UnsupportedCoding => 501,
            HttpError::ExpectationFailed => 417,
            HttpError::VersionNotSupported => 505,
            HttpError::HeadTimeout | HttpError::BodyTimeout | HttpError::BodyTooSlow(_) => 408,
            HttpError::OverBudget(_) => 503,
        }
    }
}

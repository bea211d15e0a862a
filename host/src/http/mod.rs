//! HTTP/1.1 on the wire: request heads (`parse`), chunked bodies
//! (`chunked`), response bytes and the cached `Date` (`response`), the
//! bytes waiting for the socket (`output`), a streamed body's framing
//! (`framing`). All limits live in one
//! `ConnParams`; all errors map to a status in one place.

pub(crate) mod answer;
pub(crate) mod chunked;
pub(crate) mod framing;
pub mod h2;
pub(crate) mod output;
pub mod parse;
pub mod reader;
pub mod response;
pub mod websocket;

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
    /// A body its app reads as it arrives, larger than its limit.
    #[error("streamed body larger than max_stream_body")]
    StreamBodyTooLarge,
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
            HttpError::BodyTooLarge | HttpError::StreamBodyTooLarge => 413,
            HttpError::UnsupportedCoding => 501,
            HttpError::ExpectationFailed => 417,
            HttpError::VersionNotSupported => 505,
            HttpError::HeadTimeout | HttpError::BodyTimeout | HttpError::BodyTooSlow(_) => 408,
            HttpError::OverBudget(_) => 503,
        }
    }
}

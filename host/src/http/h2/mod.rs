//! HTTP/2 on the wire (RFC 9113), free of sockets: frames (`frame`), header
//! compression (`hpack`, RFC 7541) and one connection's state (`machine`):
//! bytes in, events and frames out. The server drives it from its loop as
//! it drives HTTP/1.1's reader.

pub mod frame;
pub mod guard;
pub mod hpack;
pub mod machine;
pub mod params;
pub mod request;

/// The client's connection preface (RFC 9113 §3.4), before its SETTINGS.
pub const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// What a connection's first bytes say of its protocol on a plain bind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sniff {
    /// A strict prefix of the preface: more bytes decide.
    Unsure,
    /// The whole preface: HTTP/2 with prior knowledge.
    H2,
    /// Anything else: HTTP/1.1.
    Other,
}

/// Classifies a connection's first bytes (`buf`, as read so far).
pub fn sniff(buf: &[u8]) -> Sniff {
    let n = buf.len().min(PREFACE.len());
    if buf[..n] != PREFACE[..n] {
        Sniff::Other
    } else if n < PREFACE.len() {
        Sniff::Unsure
    } else {
        Sniff::H2
    }
}

/// The error codes of RFC 9113 §7, as RST_STREAM and GOAWAY carry them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum ErrorCode {
    NoError = 0x0,
    Protocol = 0x1,
    Internal = 0x2,
    FlowControl = 0x3,
    SettingsTimeout = 0x4,
    StreamClosed = 0x5,
    FrameSize = 0x6,
    RefusedStream = 0x7,
    Cancel = 0x8,
    Compression = 0x9,
    Connect = 0xa,
    EnhanceYourCalm = 0xb,
    InadequateSecurity = 0xc,
    Http11Required = 0xd,
}

// Status and metrics count by wire value, one counter per code named here.
const _: () = assert!(ErrorCode::ALL.len() == crate::stats::H2_CODES);

impl ErrorCode {
    /// Every code, in order of its wire value (what status counts by).
    pub const ALL: [ErrorCode; 14] = [
        ErrorCode::NoError,
        ErrorCode::Protocol,
        ErrorCode::Internal,
        ErrorCode::FlowControl,
        ErrorCode::SettingsTimeout,
        ErrorCode::StreamClosed,
        ErrorCode::FrameSize,
        ErrorCode::RefusedStream,
        ErrorCode::Cancel,
        ErrorCode::Compression,
        ErrorCode::Connect,
        ErrorCode::EnhanceYourCalm,
        ErrorCode::InadequateSecurity,
        ErrorCode::Http11Required,
    ];

    /// The code as sent on the wire.
    pub fn wire(self) -> u32 {
        self as u32
    }

    /// The code's name in RFC 9113 (what logs and status say).
    pub fn name(self) -> &'static str {
        match self {
            ErrorCode::NoError => "NO_ERROR",
            ErrorCode::Protocol => "PROTOCOL_ERROR",
            ErrorCode::Internal => "INTERNAL_ERROR",
            ErrorCode::FlowControl => "FLOW_CONTROL_ERROR",
            ErrorCode::SettingsTimeout => "SETTINGS_TIMEOUT",
            ErrorCode::StreamClosed => "STREAM_CLOSED",
            ErrorCode::FrameSize => "FRAME_SIZE_ERROR",
            ErrorCode::RefusedStream => "REFUSED_STREAM",
            ErrorCode::Cancel => "CANCEL",
            ErrorCode::Compression => "COMPRESSION_ERROR",
            ErrorCode::Connect => "CONNECT_ERROR",
            ErrorCode::EnhanceYourCalm => "ENHANCE_YOUR_CALM",
            ErrorCode::InadequateSecurity => "INADEQUATE_SECURITY",
            ErrorCode::Http11Required => "HTTP_1_1_REQUIRED",
        }
    }

    /// The code a peer sent; an unknown one is INTERNAL_ERROR's meaning
    /// (RFC 9113 §7: it must not trigger special behaviour).
    pub fn from_wire(code: u32) -> ErrorCode {
        ErrorCode::ALL
            .get(code as usize)
            .copied()
            .unwrap_or(ErrorCode::Internal)
    }
}

//! HTTP/2 frames (RFC 9113 §4, §6): the 9-octet header, typed views of the
//! payloads a client sends, each checked for its length, stream and
//! padding rules, and writers for the frames the host sends.

use super::ErrorCode;

/// Octets in a frame header.
pub const HEAD_LEN: usize = 9;

/// The largest frame payload any peer must accept (RFC 9113 §4.2), which
/// is also the smallest SETTINGS_MAX_FRAME_SIZE may be.
pub const MIN_MAX_FRAME: usize = 16_384;

/// The largest SETTINGS_MAX_FRAME_SIZE may be (2^24 - 1).
pub const MAX_MAX_FRAME: usize = (1 << 24) - 1;

/// Frame types (RFC 9113 §6).
pub mod kind {
    pub const DATA: u8 = 0x0;
    pub const HEADERS: u8 = 0x1;
    pub const PRIORITY: u8 = 0x2;
    pub const RST_STREAM: u8 = 0x3;
    pub const SETTINGS: u8 = 0x4;
    pub const PUSH_PROMISE: u8 = 0x5;
    pub const PING: u8 = 0x6;
    pub const GOAWAY: u8 = 0x7;
    pub const WINDOW_UPDATE: u8 = 0x8;
    pub const CONTINUATION: u8 = 0x9;
}

/// Frame flags (RFC 9113 §6).
pub mod flag {
    pub const END_STREAM: u8 = 0x1;
    pub const ACK: u8 = 0x1;
    pub const END_HEADERS: u8 = 0x4;
    pub const PADDED: u8 = 0x8;
    pub const PRIORITY: u8 = 0x20;
}

/// SETTINGS parameters (RFC 9113 §6.5.2).
pub mod setting {
    pub const HEADER_TABLE_SIZE: u16 = 0x1;
    pub const ENABLE_PUSH: u16 = 0x2;
    pub const MAX_CONCURRENT_STREAMS: u16 = 0x3;
    pub const INITIAL_WINDOW_SIZE: u16 = 0x4;
    pub const MAX_FRAME_SIZE: u16 = 0x5;
    pub const MAX_HEADER_LIST_SIZE: u16 = 0x6;
}

/// The largest flow-control window (2^31 - 1).
pub const MAX_WINDOW: u32 = (1 << 31) - 1;

/// A frame's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Head {
    pub len: usize,
    pub kind: u8,
    pub flags: u8,
    pub stream: u32,
}

impl Head {
    /// Reads a header from the first `HEAD_LEN` octets of `b`; `None` if
    /// there are fewer.
    pub fn parse(b: &[u8]) -> Option<Head> {
        let b: &[u8; HEAD_LEN] = b.get(..HEAD_LEN)?.try_into().ok()?;
        Some(Head {
            len: u32::from_be_bytes([0, b[0], b[1], b[2]]) as usize,
            kind: b[3],
            flags: b[4],
            stream: u32::from_be_bytes([b[5], b[6], b[7], b[8]]) & MAX_WINDOW,
        })
    }

    fn has(&self, f: u8) -> bool {
        self.flags & f != 0
    }
}

/// A stream dependency (RFC 9113 §5.3.2, deprecated: read and ignored,
/// but for a stream depending on itself).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Priority {
    pub depends_on: u32,
    pub exclusive: bool,
    pub weight: u8,
}

/// A frame from the peer, its payload checked.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame<'a> {
    Data {
        stream: u32,
        end_stream: bool,
        data: &'a [u8],
        /// What it counts against the flow-control windows: the whole
        /// payload, padding included (RFC 9113 §6.9).
        flow_len: u32,
    },
    Headers {
        stream: u32,
        end_stream: bool,
        end_headers: bool,
        priority: Option<Priority>,
        block: &'a [u8],
    },
    Priority {
        stream: u32,
        priority: Priority,
    },
    RstStream {
        stream: u32,
        code: u32,
    },
    Settings {
        ack: bool,
        /// Six octets per parameter (see `settings`).
        params: &'a [u8],
    },
    PushPromise {
        stream: u32,
    },
    Ping {
        ack: bool,
        data: [u8; 8],
    },
    GoAway {
        last: u32,
        code: u32,
    },
    WindowUpdate {
        stream: u32,
        increment: u32,
    },
    Continuation {
        stream: u32,
        end_headers: bool,
        block: &'a [u8],
    },
    /// A type this host does not know: ignored (RFC 9113 §5.5).
    Unknown {
        kind: u8,
    },
}

/// A frame that breaks the rules, and the scope of the error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameError {
    /// The connection ends with GOAWAY carrying the code.
    Conn(ErrorCode, &'static str),
    /// The stream ends with RST_STREAM carrying the code.
    Stream(u32, ErrorCode, &'static str),
}

fn conn<T>(code: ErrorCode, why: &'static str) -> Result<T, FrameError> {
    Err(FrameError::Conn(code, why))
}

fn be32(b: &[u8]) -> u32 {
    match b.get(..4) {
        Some(&[a, b, c, d]) => u32::from_be_bytes([a, b, c, d]),
        _ => 0,
    }
}

/// Checks the payload of a frame whose header is `head` (its length
/// already checked against the host's SETTINGS_MAX_FRAME_SIZE) and gives
/// its typed view.
pub fn decode<'a>(head: &Head, payload: &'a [u8]) -> Result<Frame<'a>, FrameError> {
    let stream = head.stream;
    let on_stream = |what: &'static str| {
        if stream == 0 {
            conn(ErrorCode::Protocol, what)
        } else {
            Ok(())
        }
    };
    let on_zero = |what: &'static str| {
        if stream != 0 {
            conn(ErrorCode::Protocol, what)
        } else {
            Ok(())
        }
    };
    match head.kind {
        kind::DATA => {
            on_stream("DATA on stream 0")?;
            let data = unpad(head, payload, 0)?;
            Ok(Frame::Data {
                stream,
                end_stream: head.has(flag::END_STREAM),
                data,
                flow_len: payload.len() as u32,
            })
        }
        kind::HEADERS => {
            on_stream("HEADERS on stream 0")?;
            let has_priority = head.has(flag::PRIORITY);
            let mut block = unpad(head, payload, if has_priority { 5 } else { 0 })?;
            let priority = match block.split_first_chunk::<5>() {
                Some((p, rest)) if has_priority => {
                    block = rest;
                    Some(priority(stream, p)?)
                }
                _ => None,
            };
            Ok(Frame::Headers {
                stream,
                end_stream: head.has(flag::END_STREAM),
                end_headers: head.has(flag::END_HEADERS),
                priority,
                block,
            })
        }
        kind::PRIORITY => {
            on_stream("PRIORITY on stream 0")?;
            let Ok(p) = <&[u8; 5]>::try_from(payload) else {
                return Err(FrameError::Stream(
                    stream,
                    ErrorCode::FrameSize,
                    "PRIORITY not 5 octets",
                ));
            };
            Ok(Frame::Priority {
                stream,
                priority: priority(stream, p)?,
            })
        }
        kind::RST_STREAM => {
            on_stream("RST_STREAM on stream 0")?;
            if payload.len() != 4 {
                return conn(ErrorCode::FrameSize, "RST_STREAM not 4 octets");
            }
            Ok(Frame::RstStream {
                stream,
                code: be32(payload),
            })
        }
        kind::SETTINGS => {
            on_zero("SETTINGS on a stream")?;
            let ack = head.has(flag::ACK);
            if ack && !payload.is_empty() {
                return conn(ErrorCode::FrameSize, "SETTINGS ACK with a payload");
            }
            if !payload.len().is_multiple_of(6) {
                return conn(ErrorCode::FrameSize, "SETTINGS not a multiple of 6 octets");
            }
            Ok(Frame::Settings {
                ack,
                params: payload,
            })
        }
        kind::PUSH_PROMISE => conn(ErrorCode::Protocol, "PUSH_PROMISE from a client"),
        kind::PING => {
            on_zero("PING on a stream")?;
            let Ok(data) = <[u8; 8]>::try_from(payload) else {
                return conn(ErrorCode::FrameSize, "PING not 8 octets");
            };
            Ok(Frame::Ping {
                ack: head.has(flag::ACK),
                data,
            })
        }
        kind::GOAWAY => {
            on_zero("GOAWAY on a stream")?;
            if payload.len() < 8 {
                return conn(ErrorCode::FrameSize, "GOAWAY shorter than 8 octets");
            }
            Ok(Frame::GoAway {
                last: be32(payload) & MAX_WINDOW,
                code: be32(&payload[4..]),
            })
        }
        kind::WINDOW_UPDATE => {
            if payload.len() != 4 {
                return conn(ErrorCode::FrameSize, "WINDOW_UPDATE not 4 octets");
            }
            let increment = be32(payload) & MAX_WINDOW;
            if increment == 0 {
                let why = "WINDOW_UPDATE of 0";
                return match stream {
                    0 => conn(ErrorCode::Protocol, why),
                    s => Err(FrameError::Stream(s, ErrorCode::Protocol, why)),
                };
            }
            Ok(Frame::WindowUpdate { stream, increment })
        }
        kind::CONTINUATION => {
            on_stream("CONTINUATION on stream 0")?;
            Ok(Frame::Continuation {
                stream,
                end_headers: head.has(flag::END_HEADERS),
                block: payload,
            })
        }
        kind => Ok(Frame::Unknown { kind }),
    }
}

/// The payload of a DATA or HEADERS frame without its padding; `fixed`:
/// the octets of fields between the pad length and the rest (a HEADERS
/// frame's priority), which the padding may not eat into.
fn unpad<'a>(head: &Head, payload: &'a [u8], fixed: usize) -> Result<&'a [u8], FrameError> {
    let rest = if head.has(flag::PADDED) {
        let Some((&pad, rest)) = payload.split_first() else {
            return conn(ErrorCode::FrameSize, "padded frame without its pad length");
        };
        // Padding as long as the payload or longer (RFC 9113 §6.1, §6.2).
        let Some(keep) = rest.len().checked_sub(pad as usize) else {
            return conn(ErrorCode::Protocol, "padding as long as the payload");
        };
        if keep < fixed {
            return conn(ErrorCode::Protocol, "padding over the priority fields");
        }
        &rest[..keep]
    } else {
        payload
    };
    if rest.len() < fixed {
        return conn(ErrorCode::FrameSize, "HEADERS too short for its priority");
    }
    Ok(rest)
}

fn priority(stream: u32, p: &[u8; 5]) -> Result<Priority, FrameError> {
    let dep = be32(p);
    let depends_on = dep & MAX_WINDOW;
    if depends_on == stream {
        return Err(FrameError::Stream(
            stream,
            ErrorCode::Protocol,
            "a stream depending on itself",
        ));
    }
    Ok(Priority {
        depends_on,
        exclusive: dep & !MAX_WINDOW != 0,
        weight: p[4],
    })
}

/// The parameters of a SETTINGS payload, in order.
pub fn settings(params: &[u8]) -> impl Iterator<Item = (u16, u32)> + '_ {
    params
        .chunks_exact(6)
        .map(|p| (u16::from_be_bytes([p[0], p[1]]), be32(&p[2..])))
}

/// Writes a frame header.
pub fn put_head(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream: u32) {
    let len = (len as u32).to_be_bytes();
    out.extend_from_slice(&[len[1], len[2], len[3], kind, flags]);
    out.extend_from_slice(&(stream & MAX_WINDOW).to_be_bytes());
}

/// Writes a SETTINGS frame with `params`.
pub fn put_settings(out: &mut Vec<u8>, params: &[(u16, u32)]) {
    put_head(out, params.len() * 6, kind::SETTINGS, 0, 0);
    for &(id, value) in params {
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(&value.to_be_bytes());
    }
}

/// Writes the acknowledgement of the peer's SETTINGS.
pub fn put_settings_ack(out: &mut Vec<u8>) {
    put_head(out, 0, kind::SETTINGS, flag::ACK, 0);
}

/// Writes a PING (`ack`: the answer to the peer's).
pub fn put_ping(out: &mut Vec<u8>, ack: bool, data: [u8; 8]) {
    put_head(out, 8, kind::PING, if ack { flag::ACK } else { 0 }, 0);
    out.extend_from_slice(&data);
}

/// Writes a GOAWAY naming the last stream the host processes, with a
/// short reason for the peer's logs.
pub fn put_goaway(out: &mut Vec<u8>, last: u32, code: ErrorCode, debug: &[u8]) {
    put_head(out, 8 + debug.len(), kind::GOAWAY, 0, 0);
    out.extend_from_slice(&(last & MAX_WINDOW).to_be_bytes());
    out.extend_from_slice(&code.wire().to_be_bytes());
    out.extend_from_slice(debug);
}

/// Writes an RST_STREAM.
pub fn put_rst(out: &mut Vec<u8>, stream: u32, code: ErrorCode) {
    put_head(out, 4, kind::RST_STREAM, 0, stream);
    out.extend_from_slice(&code.wire().to_be_bytes());
}

/// Writes a WINDOW_UPDATE (`stream` 0: the connection's window).
pub fn put_window_update(out: &mut Vec<u8>, stream: u32, increment: u32) {
    put_head(out, 4, kind::WINDOW_UPDATE, 0, stream);
    out.extend_from_slice(&(increment & MAX_WINDOW).to_be_bytes());
}

/// Writes a header block as HEADERS and as many CONTINUATION frames as
/// `max_frame` (the peer's SETTINGS_MAX_FRAME_SIZE) needs.
pub fn put_headers(
    out: &mut Vec<u8>,
    stream: u32,
    block: &[u8],
    end_stream: bool,
    max_frame: usize,
) {
    let max_frame = max_frame.max(MIN_MAX_FRAME);
    let mut chunks = block.chunks(max_frame).peekable();
    let first = chunks.next().unwrap_or(&[]);
    let mut flags = if end_stream { flag::END_STREAM } else { 0 };
    if chunks.peek().is_none() {
        flags |= flag::END_HEADERS;
    }
    put_head(out, first.len(), kind::HEADERS, flags, stream);
    out.extend_from_slice(first);
    while let Some(chunk) = chunks.next() {
        let last = chunks.peek().is_none();
        let flags = if last { flag::END_HEADERS } else { 0 };
        put_head(out, chunk.len(), kind::CONTINUATION, flags, stream);
        out.extend_from_slice(chunk);
    }
}

/// Writes a DATA frame's header for `len` octets that follow it.
pub fn put_data_head(out: &mut Vec<u8>, stream: u32, len: usize, end_stream: bool) {
    let flags = if end_stream { flag::END_STREAM } else { 0 };
    put_head(out, len, kind::DATA, flags, stream);
}

#[cfg(test)]
mod tests;

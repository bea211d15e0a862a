//! Each frame type's length, stream and padding rules (RFC 9113 §6).

use super::{decode, flag, kind, put_headers, Frame, FrameError, Head, HEAD_LEN, MIN_MAX_FRAME};
use crate::http::h2::ErrorCode;

fn head(len: usize, kind: u8, flags: u8, stream: u32) -> Head {
    Head {
        len,
        kind,
        flags,
        stream,
    }
}

fn conn_code(r: Result<Frame<'_>, FrameError>) -> Option<ErrorCode> {
    match r {
        Err(FrameError::Conn(code, _)) => Some(code),
        _ => None,
    }
}

#[test]
fn a_header_reads_its_fields_and_drops_the_reserved_bit() {
    let b = [0, 0, 5, kind::DATA, 1, 0x80, 0, 0, 3];
    let h = Head::parse(&b).expect("whole");
    assert_eq!(h, head(5, kind::DATA, 1, 3));
    assert!(Head::parse(&b[..8]).is_none());
}

#[test]
fn frames_on_the_wrong_stream_are_protocol_errors() {
    let p = [0u8; 8];
    for (k, stream) in [
        (kind::DATA, 0),
        (kind::HEADERS, 0),
        (kind::PRIORITY, 0),
        (kind::RST_STREAM, 0),
        (kind::CONTINUATION, 0),
        (kind::SETTINGS, 1),
        (kind::PING, 1),
        (kind::GOAWAY, 1),
    ] {
        let len = match k {
            kind::PRIORITY => 5,
            kind::RST_STREAM => 4,
            kind::SETTINGS => 6,
            _ => 8,
        };
        let got = conn_code(decode(&head(len, k, 0, stream), &p[..len]));
        assert_eq!(
            got,
            Some(ErrorCode::Protocol),
            "type {k} on stream {stream}"
        );
    }
}

#[test]
fn wrong_lengths_are_frame_size_errors() {
    let p = [0u8; 16];
    assert_eq!(
        conn_code(decode(&head(7, kind::SETTINGS, 0, 0), &p[..7])),
        Some(ErrorCode::FrameSize)
    );
    assert_eq!(
        conn_code(decode(&head(6, kind::SETTINGS, flag::ACK, 0), &p[..6])),
        Some(ErrorCode::FrameSize)
    );
    assert_eq!(
        conn_code(decode(&head(7, kind::PING, 0, 0), &p[..7])),
        Some(ErrorCode::FrameSize)
    );
    assert_eq!(
        conn_code(decode(&head(3, kind::RST_STREAM, 0, 1), &p[..3])),
        Some(ErrorCode::FrameSize)
    );
    assert_eq!(
        conn_code(decode(&head(5, kind::WINDOW_UPDATE, 0, 0), &p[..5])),
        Some(ErrorCode::FrameSize)
    );
    assert_eq!(
        decode(&head(4, kind::PRIORITY, 0, 1), &p[..4]),
        Err(FrameError::Stream(
            1,
            ErrorCode::FrameSize,
            "PRIORITY not 5 octets"
        ))
    );
}

#[test]
fn padding_is_removed_and_too_much_of_it_is_a_protocol_error() {
    let p = [2, b'h', b'i', 0, 0];
    match decode(&head(5, kind::DATA, flag::PADDED, 1), &p) {
        Ok(Frame::Data { data, flow_len, .. }) => assert_eq!((data, flow_len), (&b"hi"[..], 5)),
        other => panic!("{other:?}"),
    }
    let p = [5, 0, 0, 0, 0];
    assert_eq!(
        conn_code(decode(&head(5, kind::DATA, flag::PADDED, 1), &p)),
        Some(ErrorCode::Protocol)
    );
    let p = [4, 0, 0, 0, 0];
    assert!(decode(&head(5, kind::DATA, flag::PADDED, 1), &p).is_ok());
    // Padding may not eat into a HEADERS frame's priority fields.
    let p = [1, 0, 0, 0, 3, 16, 0];
    let flags = flag::PADDED | flag::PRIORITY;
    assert!(decode(&head(7, kind::HEADERS, flags, 1), &p).is_ok());
    let p = [2, 0, 0, 0, 3, 16, 0];
    assert_eq!(
        conn_code(decode(&head(7, kind::HEADERS, flags, 1), &p)),
        Some(ErrorCode::Protocol)
    );
}

#[test]
fn a_stream_depending_on_itself_is_a_stream_error() {
    let p = [0, 0, 0, 1, 16];
    assert!(matches!(
        decode(&head(5, kind::PRIORITY, 0, 1), &p),
        Err(FrameError::Stream(1, ErrorCode::Protocol, _))
    ));
}

#[test]
fn a_window_update_of_zero_is_a_stream_or_connection_error() {
    let p = [0u8; 4];
    assert_eq!(
        conn_code(decode(&head(4, kind::WINDOW_UPDATE, 0, 0), &p)),
        Some(ErrorCode::Protocol)
    );
    assert!(matches!(
        decode(&head(4, kind::WINDOW_UPDATE, 0, 3), &p),
        Err(FrameError::Stream(3, ErrorCode::Protocol, _))
    ));
}

#[test]
fn unknown_types_are_ignored_and_push_promise_refused() {
    assert_eq!(
        decode(&head(0, 0x42, 0, 0), &[]),
        Ok(Frame::Unknown { kind: 0x42 })
    );
    assert_eq!(
        conn_code(decode(&head(4, kind::PUSH_PROMISE, 0, 1), &[0; 4])),
        Some(ErrorCode::Protocol)
    );
}

#[test]
fn a_large_block_is_split_into_continuations() {
    let block = vec![7u8; MIN_MAX_FRAME * 2 + 10];
    let mut out = Vec::new();
    put_headers(&mut out, 1, &block, true, MIN_MAX_FRAME);
    let mut kinds = Vec::new();
    let mut rest = &out[..];
    let mut total = 0;
    while let Some(h) = Head::parse(rest) {
        kinds.push((h.kind, h.flags));
        total += h.len;
        rest = &rest[HEAD_LEN + h.len..];
    }
    assert_eq!(total, block.len());
    assert_eq!(
        kinds,
        vec![
            (kind::HEADERS, flag::END_STREAM),
            (kind::CONTINUATION, 0),
            (kind::CONTINUATION, flag::END_HEADERS)
        ]
    );
}

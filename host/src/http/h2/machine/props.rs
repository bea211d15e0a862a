//! The machine under any input (proptest): whatever frames a client sends,
//! well-formed or not, cut into whatever reads, the machine never panics,
//! never holds more streams than it advertised, and writes only whole
//! frames, each within the largest frame size there is; once failed, it
//! answers nothing more. The host's side answers every request it yields,
//! as the server does.

use super::stream::{Chunk, Request};
use super::{Event, Machine};
use crate::http::h2::frame::{self, kind, setting, Head, HEAD_LEN, MAX_MAX_FRAME};
use crate::http::h2::hpack::Encoder;
use crate::http::h2::params::H2Params;
use crate::http::h2::PREFACE;
use proptest::prelude::*;
use std::time::Instant;

const STREAMS: u32 = 4;

/// A frame of `kind` with `flags` on `stream`, carrying `payload`.
fn raw(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    frame::put_head(&mut f, payload.len(), kind, flags, stream);
    f.extend_from_slice(payload);
    f
}

/// A GET's HEADERS on `stream`, its block encoded afresh (a client's
/// dynamic table is its own; a fresh encoder only adds to the host's).
fn get(stream: u32, end_stream: bool) -> Vec<u8> {
    let mut enc = Encoder::new();
    let mut block = Vec::new();
    enc.begin(&mut block);
    for (n, v) in [
        (":method", "GET"),
        (":scheme", "http"),
        (":path", "/p"),
        (":authority", "h"),
    ] {
        enc.field(n.as_bytes(), v.as_bytes(), &mut block);
    }
    let mut f = Vec::new();
    frame::put_headers(&mut f, stream, &block, end_stream, 16_384);
    f
}

/// One thing a client may send: a well-formed request, a reset, a window
/// update, data, settings, or any frame at all.
fn client_frame() -> impl Strategy<Value = Vec<u8>> {
    let stream = prop_oneof![Just(0u32), (0u32..8).prop_map(|i| 2 * i + 1), any::<u32>()];
    let bytes = proptest::collection::vec(any::<u8>(), 0..40);
    prop_oneof![
        3 => (0u32..8, any::<bool>()).prop_map(|(i, end)| get(2 * i + 1, end)),
        1 => (stream.clone(), 0u32..14).prop_map(|(s, code)| raw(kind::RST_STREAM, 0, s, &code.to_be_bytes())),
        1 => (stream.clone(), any::<u32>()).prop_map(|(s, n)| raw(kind::WINDOW_UPDATE, 0, s, &(n % 70_000).to_be_bytes())),
        1 => (stream.clone(), any::<u8>(), bytes.clone()).prop_map(|(s, f, b)| raw(kind::DATA, f & 1, s, &b)),
        1 => (0u32..80_000).prop_map(|w| {
            let mut p = setting::INITIAL_WINDOW_SIZE.to_be_bytes().to_vec();
            p.extend_from_slice(&w.to_be_bytes());
            raw(kind::SETTINGS, 0, 0, &p)
        }),
        2 => (0u8..12, any::<u8>(), stream, bytes).prop_map(|(k, f, s, b)| raw(k, f, s, &b)),
    ]
}

/// Feeds `input` to `m` in pieces cut at `cuts`, answering what it yields;
/// checks the properties after each piece.
fn drive(m: &mut Machine, input: &[u8], cuts: &[usize]) -> Result<(), TestCaseError> {
    let now = Instant::now();
    let (mut pending, mut out, mut events) = (Vec::new(), Vec::new(), Vec::new());
    let mut at = 0;
    let mut ends: Vec<usize> = cuts.iter().map(|c| c % (input.len() + 1)).collect();
    ends.push(input.len());
    ends.sort_unstable();
    for end in ends {
        pending.extend_from_slice(&input[at..end.max(at)]);
        at = end.max(at);
        let failed_before = m.failed();
        let used = m.recv(&pending, now, &mut out);
        prop_assert!(used <= pending.len());
        pending.drain(..used);
        m.take_events(&mut events);
        if failed_before {
            // What comes after the GOAWAY is dropped unread.
            prop_assert!(
                out.is_empty() && events.is_empty(),
                "a failed machine read on"
            );
        }
        for event in events.drain(..) {
            if let Event::Head(id) = event {
                if let Some(Request::Ready(_, buf)) = m.take_request(id) {
                    m.give_back(buf);
                    if m.respond(id, 200, std::iter::empty(), false, &mut out) {
                        m.queue_data(id, Chunk::Host(vec![b'x'; 20_000]), true);
                    }
                }
            }
        }
        m.send_data(&mut out, 1 << 20);
        prop_assert!(m.open_streams() <= STREAMS as usize);
        whole_frames(&out)?;
        out.clear();
    }
    Ok(())
}

/// `out` is whole frames, each within the largest frame size there is.
fn whole_frames(mut out: &[u8]) -> Result<(), TestCaseError> {
    while !out.is_empty() {
        let head = Head::parse(out);
        prop_assert!(head.is_some(), "a cut frame head: {:?}", out);
        let Some(head) = head else {
            return Ok(());
        };
        prop_assert!(head.len <= MAX_MAX_FRAME);
        prop_assert!(out.len() >= HEAD_LEN + head.len, "a cut frame");
        out = &out[HEAD_LEN + head.len..];
    }
    Ok(())
}

fn machine() -> Machine {
    let params = H2Params {
        max_concurrent_streams: STREAMS,
        ..H2Params::default()
    };
    let mut m = Machine::new(params);
    m.start(&mut Vec::new());
    m
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Frames after a good preface and SETTINGS.
    #[test]
    fn any_frames_in_any_reads_keep_the_machine_sound(
        frames in proptest::collection::vec(client_frame(), 0..24),
        cuts in proptest::collection::vec(any::<usize>(), 0..6),
    ) {
        let mut input = PREFACE.to_vec();
        frame::put_settings(&mut input, &[]);
        for f in &frames {
            input.extend_from_slice(f);
        }
        drive(&mut machine(), &input, &cuts)?;
    }

    /// Bytes at all, after the preface or instead of it.
    #[test]
    fn any_bytes_keep_the_machine_sound(
        bytes in proptest::collection::vec(any::<u8>(), 0..300),
        preface in any::<bool>(),
        cuts in proptest::collection::vec(any::<usize>(), 0..6),
    ) {
        let mut input = if preface { PREFACE.to_vec() } else { Vec::new() };
        input.extend_from_slice(&bytes);
        drive(&mut machine(), &input, &cuts)?;
    }
}

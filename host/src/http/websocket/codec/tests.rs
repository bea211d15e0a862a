use super::*;
use std::collections::VecDeque;

/// Bytes arriving from a client: `WouldBlock` when empty, EOF once `eof`.
#[derive(Default)]
struct Feed {
    data: VecDeque<u8>,
    eof: bool,
}

impl Feed {
    fn push(&mut self, bytes: &[u8]) {
        self.data.extend(bytes);
    }
}

impl Read for Feed {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.data.is_empty() {
            return if self.eof {
                Ok(0)
            } else {
                Err(io::ErrorKind::WouldBlock.into())
            };
        }
        let n = buf.len().min(self.data.len());
        for (slot, b) in buf.iter_mut().zip(self.data.drain(..n)) {
            *slot = b;
        }
        Ok(n)
    }
}

const TEXT: u8 = 0x1;
const BINARY: u8 = 0x2;
const CONT: u8 = 0x0;
const CLOSE: u8 = 0x8;
const PING: u8 = 0x9;
const PONG: u8 = 0xA;
/// No limit on the bytes a read may take.
const ALL: usize = usize::MAX;
const MASK: [u8; 4] = [0x37, 0xfa, 0x21, 0x3d];

/// A client frame: `first` holds FIN, RSV and the opcode; masked with
/// `mask` when given.
fn raw(first: u8, payload: &[u8], mask: Option<[u8; 4]>) -> Vec<u8> {
    let mut f = vec![first];
    let bit = if mask.is_some() { 0x80 } else { 0 };
    match payload.len() {
        n if n < 126 => f.push(bit | n as u8),
        n if n <= 0xffff => {
            f.push(bit | 126);
            f.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            f.push(bit | 127);
            f.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    match mask {
        Some(m) => {
            f.extend_from_slice(&m);
            f.extend(payload.iter().enumerate().map(|(i, b)| b ^ m[i % 4]));
        }
        None => f.extend_from_slice(payload),
    }
    f
}

/// A masked client frame.
fn frame(fin: bool, opcode: u8, payload: &[u8]) -> Vec<u8> {
    raw(if fin { 0x80 } else { 0 } | opcode, payload, Some(MASK))
}

fn codec(max_message: usize) -> Codec {
    Codec::new(Vec::new(), Limits { max_message })
}

/// The server frames in `out`: (opcode, payload); server frames are never
/// masked.
fn frames(out: &[u8]) -> Vec<(u8, Vec<u8>)> {
    let mut found = Vec::new();
    let mut at = 0;
    while at < out.len() {
        assert_eq!(out[at + 1] & 0x80, 0, "a server frame is never masked");
        let (len, start) = match out[at + 1] {
            126 => (
                u16::from_be_bytes([out[at + 2], out[at + 3]]) as usize,
                at + 4,
            ),
            127 => panic!("no test sends that much"),
            n => (n as usize, at + 2),
        };
        found.push((out[at] & 0x0f, out[start..start + len].to_vec()));
        at = start + len;
    }
    found
}

/// The close code of the last frame in `out`.
fn close_code(out: &[u8]) -> u16 {
    let (op, payload) = frames(out).pop().expect("a frame");
    assert_eq!(op, CLOSE);
    u16::from_be_bytes([payload[0], payload[1]])
}

fn failed_with(step: Step) -> u16 {
    match step {
        Step::Failed { code, .. } => code,
        other => panic!("expected a failure, got {other:?}"),
    }
}

#[test]
fn a_masked_text_frame_is_a_message() {
    let mut c = codec(1024);
    let mut feed = Feed::default();
    feed.push(&frame(true, TEXT, b"hello"));
    assert_eq!(
        c.read(&mut feed, ALL),
        Step::Message(Message::text("hello"))
    );
    assert_eq!(c.read(&mut feed, ALL), Step::Idle);
    assert!(c.output().is_empty());
}

#[test]
fn bytes_one_at_a_time_make_the_same_message() {
    let mut c = codec(1024);
    let mut feed = Feed::default();
    let bytes = frame(true, BINARY, &[0, 1, 2, 255]);
    for (i, b) in bytes.iter().enumerate() {
        feed.push(&[*b]);
        let step = c.read(&mut feed, ALL);
        if i + 1 < bytes.len() {
            assert_eq!(step, Step::Idle);
        } else {
            assert_eq!(step, Step::Message(Message::binary(vec![0, 1, 2, 255])));
        }
    }
}

#[test]
fn bytes_sent_with_the_handshake_are_read_first() {
    let mut c = Codec::new(frame(true, TEXT, b"early"), Limits { max_message: 64 });
    assert_eq!(
        c.read(&mut Feed::default(), ALL),
        Step::Message(Message::text("early"))
    );
}

#[test]
fn fragments_are_joined_and_a_ping_between_them_is_answered() {
    let mut c = codec(1024);
    let mut feed = Feed::default();
    feed.push(&frame(false, TEXT, "hé".as_bytes()));
    feed.push(&frame(true, PING, b"p1"));
    // "llo wörld", its two-byte character split over two frames.
    let rest = "llo wörld".as_bytes();
    feed.push(&frame(false, CONT, &rest[..6]));
    feed.push(&frame(true, CONT, &rest[6..]));
    assert_eq!(c.read(&mut feed, ALL), Step::Control);
    assert_eq!(frames(c.output()), vec![(PONG, b"p1".to_vec())]);
    assert_eq!(
        c.read(&mut feed, ALL),
        Step::Message(Message::text("héllo wörld"))
    );
}

#[test]
fn each_ping_is_reported_with_its_pong_already_queued() {
    let mut c = codec(1024);
    let mut feed = Feed::default();
    for _ in 0..1000 {
        feed.push(&frame(true, PING, &[b'p'; 125]));
    }
    feed.push(&frame(true, PONG, b"unasked"));
    // One ping per read, so the connection can stop at its output bound.
    for n in 1..=1000 {
        assert_eq!(c.read(&mut feed, ALL), Step::Control, "ping {n}");
        assert_eq!(frames(c.output()).len(), n, "pongs after ping {n}");
    }
    assert_eq!(frames(c.output())[999], (PONG, vec![b'p'; 125]));
    // A pong is dropped: nothing answers it.
    assert_eq!(c.read(&mut feed, ALL), Step::Control);
    assert_eq!(c.read(&mut feed, ALL), Step::Idle);
    assert_eq!(frames(c.output()).len(), 1000);
}

/// A source that never runs dry: a text frame's first fragment, then
/// continuation fragments of `piece` bytes without end. It counts what it
/// gave, and fails the test past `most` (a read that never returns).
struct Endless {
    head: Vec<u8>,
    piece: Vec<u8>,
    at: usize,
    given: usize,
    most: usize,
}

impl Endless {
    fn new(most: usize) -> Self {
        Endless {
            head: frame(false, TEXT, b"start"),
            piece: frame(false, CONT, &[b'x'; 100]),
            at: 0,
            given: 0,
            most,
        }
    }
}

impl Read for Endless {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        assert!(
            self.given <= self.most,
            "read {} bytes in one go",
            self.given
        );
        let mut n = 0;
        while n < buf.len() {
            let src = if self.given < self.head.len() {
                &self.head[self.given..]
            } else {
                &self.piece[self.at..]
            };
            let k = src.len().min(buf.len() - n);
            buf[n..n + k].copy_from_slice(&src[..k]);
            if self.given >= self.head.len() {
                self.at = (self.at + k) % self.piece.len();
            }
            n += k;
            self.given += k;
        }
        Ok(n)
    }
}

#[test]
fn a_read_stops_at_the_bytes_allowed_and_goes_on_later() {
    let mut c = codec(16 << 20);
    let mut src = Endless::new(1 << 20);
    // Fragments never make a step: only the allowance ends the read.
    assert_eq!(c.read(&mut src, 10_000), Step::Paused);
    assert_eq!(src.given, 10_000);
    assert_eq!(c.read(&mut src, 10_000), Step::Paused);
    assert_eq!(src.given, 20_000);
    assert!(c.output().is_empty());
    // A later read takes up the frame where the last one stopped.
    let mut rest = Feed::default();
    let cut = (src.given - src.head.len()) % src.piece.len();
    rest.push(&src.piece[cut..]);
    rest.push(&frame(true, CONT, b"end"));
    let Step::Message(Message::Text(t)) = c.read(&mut rest, ALL) else {
        panic!("the message, whole");
    };
    assert!(t.as_str().starts_with("startxxx") && t.as_str().ends_with("xxxend"));
}

#[test]
fn an_unmasked_frame_fails_with_1002() {
    let mut c = codec(1024);
    let mut feed = Feed::default();
    feed.push(&raw(0x80 | TEXT, b"bare", None));
    assert_eq!(failed_with(c.read(&mut feed, ALL)), code::PROTOCOL);
    assert_eq!(close_code(c.output()), 1002);
    assert!(c.done());
    // Nothing more is read once failed.
    feed.push(&frame(true, TEXT, b"after"));
    assert_eq!(c.read(&mut feed, ALL), Step::Idle);
}

#[test]
fn invalid_utf8_text_fails_with_1007_whole_or_fragmented() {
    let mut c = codec(1024);
    let mut feed = Feed::default();
    feed.push(&frame(true, TEXT, &[b'a', 0xff, b'b']));
    assert_eq!(failed_with(c.read(&mut feed, ALL)), code::INVALID_DATA);
    assert_eq!(close_code(c.output()), 1007);

    let mut c = codec(1024);
    let mut feed = Feed::default();
    feed.push(&frame(false, TEXT, b"ok so far"));
    feed.push(&frame(true, CONT, &[0xc3, 0x28]));
    assert_eq!(failed_with(c.read(&mut feed, ALL)), code::INVALID_DATA);
    assert_eq!(close_code(c.output()), 1007);
}

#[test]
fn a_frame_over_the_limit_fails_with_1009_from_its_header() {
    let mut c = codec(100);
    let mut feed = Feed::default();
    // Only the header of a 1 MiB frame: refused before its payload.
    let whole = frame(true, BINARY, &vec![7; 1 << 20]);
    feed.push(&whole[..14]);
    assert_eq!(failed_with(c.read(&mut feed, ALL)), code::TOO_BIG);
    assert_eq!(close_code(c.output()), 1009);
}

#[test]
fn fragments_adding_up_over_the_limit_fail_with_1009() {
    let mut c = codec(100);
    let mut feed = Feed::default();
    feed.push(&frame(false, BINARY, &[1; 60]));
    feed.push(&frame(true, CONT, &[2; 60]));
    assert_eq!(failed_with(c.read(&mut feed, ALL)), code::TOO_BIG);
}

#[test]
fn a_message_at_the_limit_passes() {
    let mut c = codec(100);
    let mut feed = Feed::default();
    feed.push(&frame(false, BINARY, &[1; 50]));
    feed.push(&frame(true, CONT, &[2; 50]));
    assert!(matches!(c.read(&mut feed, ALL), Step::Message(Message::Binary(b)) if b.len() == 100));
}

#[test]
fn protocol_errors_fail_with_1002() {
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("continuation first", frame(true, CONT, b"x")),
        ("new message inside a fragmented one", {
            let mut b = frame(false, TEXT, b"a");
            b.extend(frame(true, TEXT, b"b"));
            b
        }),
        ("fragmented ping", frame(false, PING, b"x")),
        ("ping over 125 bytes", frame(true, PING, &[0; 126])),
        ("reserved bit", raw(0x80 | 0x40 | TEXT, b"x", Some(MASK))),
        ("reserved opcode", frame(true, 0x3, b"x")),
        ("reserved control opcode", frame(true, 0xB, b"")),
    ];
    for (what, bytes) in cases {
        let mut c = codec(1024);
        let mut feed = Feed::default();
        feed.push(&bytes);
        assert_eq!(
            failed_with(c.read(&mut feed, ALL)),
            code::PROTOCOL,
            "{what}"
        );
        assert_eq!(close_code(c.output()), 1002, "{what}");
    }
}

#[test]
fn the_peers_close_is_echoed_then_the_connection_ends() {
    let mut c = codec(1024);
    let mut feed = Feed::default();
    let mut payload = 1000u16.to_be_bytes().to_vec();
    payload.extend_from_slice(b"bye");
    feed.push(&frame(true, CLOSE, &payload));
    assert_eq!(
        c.read(&mut feed, ALL),
        Step::Closed {
            code: 1000,
            reason: "bye".into()
        }
    );
    assert_eq!(frames(c.output()), vec![(CLOSE, payload)]);
    assert!(c.closing() && c.done());
    assert_eq!(c.send(Message::text("late")), Err(SendError::Closing));
}

#[test]
fn a_close_without_a_code_is_reported_as_1005_and_echoed_empty() {
    let mut c = codec(1024);
    let mut feed = Feed::default();
    feed.push(&frame(true, CLOSE, b""));
    assert!(matches!(
        c.read(&mut feed, ALL),
        Step::Closed { code: 1005, .. }
    ));
    assert_eq!(frames(c.output()), vec![(CLOSE, vec![])]);
}

#[test]
fn a_close_with_a_forbidden_code_is_answered_1002() {
    let mut c = codec(1024);
    let mut feed = Feed::default();
    feed.push(&frame(true, CLOSE, &1005u16.to_be_bytes()));
    assert!(matches!(
        c.read(&mut feed, ALL),
        Step::Closed { code: 1002, .. }
    ));
    assert_eq!(close_code(c.output()), 1002);
}

#[test]
fn a_close_from_the_host_waits_for_the_peers_answer() {
    let mut c = codec(1024);
    let mut feed = Feed::default();
    c.close(code::GOING_AWAY, "draining");
    assert_eq!(close_code(c.output()), 1001);
    c.output().clear();
    assert!(c.closing() && !c.done());
    assert_eq!(c.send(Message::text("x")), Err(SendError::Closing));
    // Data the peer sent before it saw the close still arrives.
    feed.push(&frame(true, TEXT, b"in flight"));
    assert_eq!(
        c.read(&mut feed, ALL),
        Step::Message(Message::text("in flight"))
    );
    feed.push(&frame(true, CLOSE, &1001u16.to_be_bytes()));
    assert!(matches!(
        c.read(&mut feed, ALL),
        Step::Closed { code: 1001, .. }
    ));
    // The answer to our close is not answered again.
    assert!(c.output().is_empty());
    assert!(c.done());
}

#[test]
fn a_long_reason_is_cut_to_fit_a_control_frame() {
    let mut c = codec(1024);
    c.close(code::NORMAL, &"é".repeat(100));
    let (_, payload) = frames(c.output()).pop().unwrap();
    assert!(payload.len() <= 125);
    assert!(std::str::from_utf8(&payload[2..]).is_ok());
}

#[test]
fn eof_without_a_close_frame_is_gone() {
    let mut c = codec(1024);
    let mut feed = Feed {
        eof: true,
        ..Feed::default()
    };
    assert!(matches!(c.read(&mut feed, ALL), Step::Gone { .. }));
    assert!(c.done());
}

#[test]
fn sent_messages_are_unmasked_frames() {
    let mut c = codec(1024);
    c.send(Message::text("hi")).unwrap();
    c.send(Message::binary(vec![1u8; 300])).unwrap();
    let out = frames(c.output());
    assert_eq!(out[0], (TEXT, b"hi".to_vec()));
    assert_eq!(out[1], (BINARY, vec![1u8; 300]));
    assert_eq!(c.output()[0], 0x81, "FIN and text");
}

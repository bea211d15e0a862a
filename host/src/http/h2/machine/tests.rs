//! The machine against a scripted client: bytes in, frames and events out.

use super::stream::{Chunk, Request};
use super::{Event, Machine};
use crate::http::h2::frame::{self, flag, kind, setting, Head, HEAD_LEN};
use crate::http::h2::hpack::{Decoder, Encoder};
use crate::http::h2::params::H2Params;
use crate::http::h2::{ErrorCode, PREFACE};
use std::time::Instant;

/// A frame the host wrote.
#[derive(Debug)]
struct Out {
    kind: u8,
    flags: u8,
    stream: u32,
    payload: Vec<u8>,
}

impl Out {
    fn code(&self) -> u32 {
        let p = &self.payload;
        let at = if self.kind == kind::GOAWAY { 4 } else { 0 };
        u32::from_be_bytes([p[at], p[at + 1], p[at + 2], p[at + 3]])
    }
}

fn frames(mut bytes: &[u8]) -> Vec<Out> {
    let mut v = Vec::new();
    while let Some(h) = Head::parse(bytes) {
        let payload = bytes[HEAD_LEN..HEAD_LEN + h.len].to_vec();
        v.push(Out {
            kind: h.kind,
            flags: h.flags,
            stream: h.stream,
            payload,
        });
        bytes = &bytes[HEAD_LEN + h.len..];
    }
    v
}

/// A client speaking to one machine.
struct Client {
    m: Machine,
    enc: Encoder,
    out: Vec<u8>,
    events: Vec<Event>,
    now: Instant,
}

impl Client {
    fn new(params: H2Params) -> Self {
        let mut m = Machine::new(params);
        let mut out = Vec::new();
        m.start(&mut out);
        let mut c = Client {
            m,
            enc: Encoder::new(),
            out: Vec::new(),
            events: Vec::new(),
            now: Instant::now(),
        };
        let mut hello = PREFACE.to_vec();
        frame::put_settings(&mut hello, &[]);
        c.send(&hello);
        c
    }

    fn send(&mut self, bytes: &[u8]) -> usize {
        let n = self.m.recv(bytes, self.now, &mut self.out);
        self.m.take_events(&mut self.events);
        n
    }

    fn take(&mut self) -> Vec<Out> {
        frames(&std::mem::take(&mut self.out))
    }

    fn block(&mut self, fields: &[(&str, &str)]) -> Vec<u8> {
        let mut b = Vec::new();
        self.enc.begin(&mut b);
        for (n, v) in fields {
            self.enc.field(n.as_bytes(), v.as_bytes(), &mut b);
        }
        b
    }

    fn get(&mut self, id: u32, path: &str) {
        let b = self.block(&[
            (":method", "GET"),
            (":scheme", "http"),
            (":path", path),
            (":authority", "example.test"),
        ]);
        let mut f = Vec::new();
        frame::put_headers(&mut f, id, &b, true, 16_384);
        self.send(&f);
    }
}

fn ack_and_settings(c: &mut Client) {
    let got = c.take();
    assert!(got
        .iter()
        .any(|f| f.kind == kind::SETTINGS && f.flags & flag::ACK != 0));
}

#[test]
fn the_host_opens_with_its_settings_and_acknowledges_the_clients() {
    let mut m = Machine::new(H2Params::default());
    let mut out = Vec::new();
    m.start(&mut out);
    let first = frames(&out);
    assert_eq!(first[0].kind, kind::SETTINGS);
    let params: Vec<_> = frame::settings(&first[0].payload).collect();
    assert!(params.contains(&(setting::MAX_CONCURRENT_STREAMS, 100)));
    assert_eq!(first[1].kind, kind::WINDOW_UPDATE);
    let mut c = Client::new(H2Params::default());
    ack_and_settings(&mut c);
    assert!(!c.m.starting());
}

#[test]
fn a_get_is_a_request_with_its_head_and_an_answer_goes_out() {
    let mut c = Client::new(H2Params::default());
    c.take();
    c.get(1, "/hello?x=1");
    assert_eq!(c.events, vec![Event::Head(1), Event::End(1)]);
    let Some(Request::Ready(head, buf)) = c.m.take_request(1) else {
        panic!("no request");
    };
    assert_eq!(&buf[head.method.clone()], b"GET");
    assert_eq!(&buf[head.target.clone()], b"/hello?x=1");
    let host: Vec<_> = head.values(&buf, "host").collect();
    assert_eq!(host, vec![&b"example.test"[..]]);
    let fields = [(&b"content-type"[..], &b"text/plain"[..])];
    assert!(c.m.respond(1, 200, fields.into_iter(), false, &mut c.out));
    assert!(c.m.queue_data(1, Chunk::Host(b"hello".to_vec()), true));
    assert!(!c.m.send_data(&mut c.out, 1 << 20));
    let got = c.take();
    assert_eq!(got[0].kind, kind::HEADERS);
    let mut dec = Decoder::new(4096);
    let mut seen = Vec::new();
    dec.decode(&got[0].payload, 1 << 16, &mut |n, v| {
        seen.push((n.to_vec(), v.to_vec()))
    })
    .expect("decodes");
    assert_eq!(seen[0], (b":status".to_vec(), b"200".to_vec()));
    assert_eq!(got[1].kind, kind::DATA);
    assert_eq!(got[1].payload, b"hello");
    assert_eq!(got[1].flags & flag::END_STREAM, flag::END_STREAM);
    assert!(c.m.is_idle());
}

#[test]
fn a_body_waits_for_its_window_and_goes_on_when_it_opens() {
    let mut c = Client::new(H2Params::default());
    let mut s = Vec::new();
    frame::put_settings(&mut s, &[(setting::INITIAL_WINDOW_SIZE, 10)]);
    c.send(&s);
    c.take();
    c.get(1, "/");
    c.m.respond(1, 200, std::iter::empty(), false, &mut c.out);
    c.m.queue_data(1, Chunk::Host(vec![b'x'; 25]), true);
    c.m.send_data(&mut c.out, 1 << 20);
    let data: usize = c
        .take()
        .iter()
        .filter(|f| f.kind == kind::DATA)
        .map(|f| f.payload.len())
        .sum();
    assert_eq!(data, 10);
    assert_eq!(c.m.queued(1), 15);
    let mut wu = Vec::new();
    frame::put_window_update(&mut wu, 1, 100);
    c.send(&wu);
    c.m.send_data(&mut c.out, 1 << 20);
    let got = c.take();
    let last = got.iter().rfind(|f| f.kind == kind::DATA).expect("data");
    assert_eq!(last.payload.len(), 15);
    assert_eq!(last.flags & flag::END_STREAM, flag::END_STREAM);
}

#[test]
fn a_post_body_comes_whole_and_windows_open_again() {
    let mut c = Client::new(H2Params::default());
    c.take();
    let b = c.block(&[
        (":method", "POST"),
        (":scheme", "http"),
        (":path", "/up"),
        ("content-length", "70000"),
    ]);
    let mut f = Vec::new();
    frame::put_headers(&mut f, 1, &b, false, 16_384);
    for i in 0..5 {
        let n = if i < 4 { 16_384 } else { 70_000 - 4 * 16_384 };
        frame::put_data_head(&mut f, 1, n, i == 4);
        f.extend(std::iter::repeat_n(b'a', n));
    }
    c.send(&f);
    assert_eq!(c.events, vec![Event::Head(1), Event::End(1)]);
    let (body, over) = c.m.take_body(1).expect("body");
    assert_eq!((body.len(), over), (70_000, false));
    // The stream's window (64K) was opened again on the way.
    assert!(c
        .take()
        .iter()
        .any(|f| f.kind == kind::WINDOW_UPDATE && f.stream == 1));
}

#[test]
fn content_length_that_the_data_does_not_match_resets_the_stream() {
    let mut c = Client::new(H2Params::default());
    c.take();
    let b = c.block(&[
        (":method", "POST"),
        (":scheme", "http"),
        (":path", "/"),
        ("content-length", "3"),
    ]);
    let mut f = Vec::new();
    frame::put_headers(&mut f, 1, &b, false, 16_384);
    frame::put_data_head(&mut f, 1, 5, true);
    f.extend_from_slice(b"12345");
    c.send(&f);
    let got = c.take();
    let rst = got
        .iter()
        .find(|f| f.kind == kind::RST_STREAM)
        .expect("reset");
    assert_eq!(rst.code(), ErrorCode::Protocol.wire());
    assert!(c.events.contains(&Event::Gone(1)));
}

#[test]
fn malformed_requests_are_reset_with_protocol_error() {
    let cases: &[&[(&str, &str)]] = &[
        &[(":method", "GET"), (":path", "/")],
        &[(":method", "GET"), (":scheme", "http"), (":path", "")],
        &[
            (":method", "GET"),
            (":scheme", "http"),
            (":path", "/"),
            (":foo", "x"),
        ],
        &[
            (":method", "GET"),
            (":scheme", "http"),
            ("x", "1"),
            (":path", "/"),
        ],
        &[
            (":method", "GET"),
            (":scheme", "http"),
            (":path", "/"),
            ("connection", "close"),
        ],
        &[
            (":method", "GET"),
            (":scheme", "http"),
            (":path", "/"),
            ("te", "gzip"),
        ],
        &[
            (":method", "GET"),
            (":scheme", "http"),
            (":path", "/"),
            ("X-Upper", "1"),
        ],
        &[
            (":method", "GET"),
            (":method", "GET"),
            (":scheme", "http"),
            (":path", "/"),
        ],
        &[
            (":status", "200"),
            (":method", "GET"),
            (":scheme", "http"),
            (":path", "/"),
        ],
    ];
    for (i, fields) in cases.iter().enumerate() {
        let mut c = Client::new(H2Params::default());
        c.take();
        let b = c.block(fields);
        let mut f = Vec::new();
        frame::put_headers(&mut f, 1, &b, true, 16_384);
        c.send(&f);
        let got = c.take();
        let rst = got.iter().find(|f| f.kind == kind::RST_STREAM);
        assert_eq!(
            rst.map(Out::code),
            Some(ErrorCode::Protocol.wire()),
            "case {i}: {fields:?}"
        );
        assert!(!c.m.failed(), "case {i}");
    }
}

#[test]
fn streams_past_the_limit_are_refused() {
    let params = H2Params {
        max_concurrent_streams: 2,
        ..H2Params::default()
    };
    let mut c = Client::new(params);
    c.take();
    for id in [1, 3, 5] {
        c.get(id, "/");
    }
    let got = c.take();
    let rst = got
        .iter()
        .find(|f| f.kind == kind::RST_STREAM)
        .expect("refused");
    assert_eq!(
        (rst.stream, rst.code()),
        (5, ErrorCode::RefusedStream.wire())
    );
    assert_eq!(c.m.open_streams(), 2);
}

#[test]
fn a_stream_id_going_back_or_even_ends_the_connection() {
    let mut c = Client::new(H2Params::default());
    c.take();
    c.get(5, "/");
    c.get(3, "/");
    assert!(c.m.failed());
    let mut c = Client::new(H2Params::default());
    c.take();
    c.get(2, "/");
    let got = c.take();
    let ga = got.iter().find(|f| f.kind == kind::GOAWAY).expect("goaway");
    assert_eq!(ga.code(), ErrorCode::Protocol.wire());
}

#[test]
fn rapid_reset_is_answered_with_goaway_enhance_your_calm() {
    let mut c = Client::new(H2Params::default());
    c.take();
    let mut id = 1;
    while !c.m.failed() && id < 20_000 {
        c.get(id, "/");
        let mut rst = Vec::new();
        frame::put_rst(&mut rst, id, ErrorCode::Cancel);
        c.send(&rst);
        id += 2;
    }
    assert!(c.m.failed(), "never stopped");
    assert!(id / 2 <= 300, "{} streams before GOAWAY", id / 2);
    let ga = c
        .take()
        .into_iter()
        .find(|f| f.kind == kind::GOAWAY)
        .expect("goaway");
    assert_eq!(ga.code(), ErrorCode::EnhanceYourCalm.wire());
}

#[test]
fn a_ping_flood_is_cut_off() {
    let mut c = Client::new(H2Params::default());
    c.take();
    let mut pings = Vec::new();
    for _ in 0..5000 {
        frame::put_ping(&mut pings, false, [1; 8]);
    }
    c.send(&pings);
    assert!(c.m.failed());
    let acks = c.take().iter().filter(|f| f.kind == kind::PING).count();
    assert!(acks <= 1000, "{acks} PING acks");
}

#[test]
fn a_continuation_flood_is_cut_off() {
    let mut c = Client::new(H2Params::default());
    c.take();
    let mut f = Vec::new();
    frame::put_head(&mut f, 0, kind::HEADERS, 0, 1);
    c.send(&f);
    let chunk = vec![0u8; 16_384];
    for _ in 0..100 {
        let mut f = Vec::new();
        frame::put_head(&mut f, chunk.len(), kind::CONTINUATION, 0, 1);
        f.extend_from_slice(&chunk);
        c.send(&f);
        if c.m.failed() {
            break;
        }
    }
    assert!(c.m.failed());
}

#[test]
fn a_frame_inside_a_header_block_ends_the_connection() {
    let mut c = Client::new(H2Params::default());
    c.take();
    let mut f = Vec::new();
    frame::put_head(&mut f, 0, kind::HEADERS, 0, 1);
    frame::put_ping(&mut f, false, [0; 8]);
    c.send(&f);
    assert!(c.m.failed());
}

#[test]
fn the_first_frame_must_be_settings() {
    let mut m = Machine::new(H2Params::default());
    let mut out = Vec::new();
    let mut hello = PREFACE.to_vec();
    frame::put_ping(&mut hello, false, [0; 8]);
    m.recv(&hello, Instant::now(), &mut out);
    assert!(m.failed());
}

#[test]
fn a_frame_split_anywhere_is_taken_when_whole() {
    let mut c = Client::new(H2Params::default());
    c.take();
    let b = c.block(&[(":method", "GET"), (":scheme", "http"), (":path", "/")]);
    let mut f = Vec::new();
    frame::put_headers(&mut f, 1, &b, true, 16_384);
    let used = c.send(&f[..5]);
    assert_eq!(used, 0);
    let used = c.send(&f[..f.len() - 1]);
    assert_eq!(used, 0);
    assert_eq!(c.send(&f), f.len());
    assert_eq!(c.events, vec![Event::Head(1), Event::End(1)]);
}

#[test]
fn a_client_reset_is_an_event_and_frees_the_stream() {
    let mut c = Client::new(H2Params::default());
    c.take();
    c.get(1, "/");
    let mut rst = Vec::new();
    frame::put_rst(&mut rst, 1, ErrorCode::Cancel);
    c.send(&rst);
    assert_eq!(
        c.events,
        vec![Event::Head(1), Event::End(1), Event::Gone(1)]
    );
    assert!(!c.m.respond(1, 200, std::iter::empty(), true, &mut c.out));
    assert!(c.m.is_idle());
}

#[test]
fn goaway_lets_the_open_streams_finish_and_drops_later_ones() {
    let mut c = Client::new(H2Params::default());
    c.take();
    c.get(1, "/");
    c.m.go_away(&mut c.out);
    c.get(3, "/");
    let got = c.take();
    let ga = got.iter().find(|f| f.kind == kind::GOAWAY).expect("goaway");
    assert_eq!(&ga.payload[..4], &1u32.to_be_bytes());
    assert!(!c.events.contains(&Event::Head(3)));
    assert!(c.m.respond(1, 204, std::iter::empty(), true, &mut c.out));
    assert!(c.m.is_idle());
}

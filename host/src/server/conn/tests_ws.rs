//! `Conn`'s WebSocket half over the in-memory transport: the switch, the
//! frames both ways (through an app session that echoes), ping and pong,
//! the close handshake and the lingering close after it.

use super::mem::Mem;
use super::*;
use crate::inbox::{Inbox, Upgrade};
use crate::ops::watchdog::Board;
use crate::poller::Token;
use crate::server::responder::ReplyTo;
use crate::server::testing::{settings, NoWake};
use crate::server::ws_link::line::Line;
use crate::server::ws_link::LinkWatch;
use crate::settings::{ConnParams, LingerLimits, Overload};
use crate::stats::Stats;
use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::std_types::{RSlice, RStr};
use std::sync::Mutex;
use std::time::Duration;
use stoa_app_api::abi::{RawWsSession, RawWsSession_TO, WsSenderBox};

/// What the app's session heard, in order.
type Heard = Arc<Mutex<Vec<String>>>;

/// An app session that echoes every message and notes its calls.
struct Echo {
    sender: Option<WsSenderBox>,
    heard: Heard,
}

impl RawWsSession for Echo {
    fn on_open(&mut self, sender: WsSenderBox) {
        self.sender = Some(sender);
        self.note("open".into());
    }

    fn on_message(&mut self, kind: u8, data: RSlice<'_, u8>) {
        self.note(format!("message {}", String::from_utf8_lossy(&data)));
        if let Some(sender) = &self.sender {
            sender.send(kind, data);
        }
    }

    fn on_close(&mut self, code: u16, _reason: RStr<'_>) {
        self.note(format!("close {code}"));
    }
}

impl Echo {
    fn note(&self, what: String) {
        self.heard.lock().expect("heard").push(what);
    }
}

/// What a link reads of its worker, at the defaults, for one worker: it
/// counts its WebSockets and watches its app calls there.
fn watch() -> LinkWatch {
    let second = Duration::from_secs(1);
    LinkWatch {
        stats: Arc::new(Stats::new(1)),
        board: Arc::new(Board::new(Vec::new(), second, second, Vec::new(), 0)),
        worker: 0,
        settings: Arc::new(settings(16, Overload::Queue)),
    }
}

const DATE: &str = "Tue, 01 Dec 2026 00:00:00 GMT";
const HANDSHAKE: &str = "GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n\
     Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
     Sec-WebSocket-Version: 13\r\n\r\n";

/// A masked client frame (FIN set) with `opcode` and `payload`.
fn frame(opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mask = [0x37, 0xfa, 0x21, 0x3d];
    let mut f = vec![0x80 | opcode, 0x80 | payload.len() as u8];
    f.extend_from_slice(&mask);
    f.extend(payload.iter().zip(mask.iter().cycle()).map(|(b, m)| b ^ m));
    f
}

/// An unmasked server frame, as the host writes it.
fn server_frame(opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0x80 | opcode, payload.len() as u8];
    f.extend_from_slice(payload);
    f
}

fn holds(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// A connection that read `HANDSHAKE` followed by `after`, dispatched it
/// and switched to WebSocket with an echoing session (opened).
fn upgraded(after: &[u8], pool: &mut BufPool) -> (Conn<Mem>, Heard) {
    let params = ConnParams::default();
    let mut input = HANDSHAKE.as_bytes().to_vec();
    input.extend_from_slice(after);
    let mut c = Conn::new(Mem::new(&input), "127.0.0.1:1".into());
    c.note_ready(true, false);
    assert!(c.read_some(&params, pool));
    assert_eq!(c.next_request(&params, pool), Ok(true));
    c.begin_dispatch(1, Instant::now(), Some(0), None, None);
    let heard = Heard::default();
    let session = RawWsSession_TO::from_value(
        Echo {
            sender: None,
            heard: heard.clone(),
        },
        TD_Opaque,
    );
    let upgrade = Upgrade {
        accept: "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=".into(),
        headers: Vec::new(),
        session,
        slot: 0,
        generation: Arc::new(()),
    };
    let inbox = Arc::new(Inbox::new(Arc::new(NoWake)));
    let reply = ReplyTo {
        queue: inbox,
        token: Token(3),
        id: 1,
    };
    let line = Line::new(reply, 1 << 20, Duration::from_secs(1));
    let budget = crate::budget::Budget::new(1 << 20);
    let now = Instant::now();
    let pending = c
        .upgrade(("s3pPLMBiTxaQ9kYGzzhZRbK+xOo=", &[]), DATE, pool, |rest| {
            Link::new(upgrade, line, watch(), rest, budget, now)
        })
        .expect("the request with the app");
    assert_eq!(pending.id, 1);
    c.link().expect("a link").open();
    (c, heard)
}

fn heard(h: &Heard) -> Vec<String> {
    h.lock().expect("heard").clone()
}

#[test]
fn the_switch_answers_101_and_the_bytes_after_it_are_the_first_frames() {
    let mut pool = BufPool::default();
    let (mut c, h) = upgraded(&frame(0x1, b"hi"), &mut pool);
    assert!(c.is_upgraded() && !c.is_dispatched() && c.pending().is_none());
    assert_eq!(c.pump_ws(Instant::now(), &mut pool), Flow::Open);
    let out = &c.stream().written;
    let text = c.stream().text();
    assert!(
        text.starts_with("HTTP/1.1 101 Switching Protocols\r\n"),
        "{text}"
    );
    assert!(text.contains("s3pPLMBiTxaQ9kYGzzhZRbK+xOo="), "{text}");
    // The message reached the app, and its echo went out after the 101.
    assert_eq!(heard(&h), ["open", "message hi"]);
    let echo = server_frame(0x1, b"hi");
    assert!(out.ends_with(&echo), "{out:?}");
    // Later frames come from the transport.
    c.stream.send(&frame(0x2, b"more"));
    c.note_ready(true, false);
    assert_eq!(c.pump_ws(Instant::now(), &mut pool), Flow::Open);
    assert!(c.stream().written.ends_with(&server_frame(0x2, b"more")));
    assert!(!c.finished() && !c.lingers());
}

#[test]
fn a_ping_gets_its_pong_and_a_silent_peer_is_pinged() {
    let mut pool = BufPool::default();
    let params = ConnParams::default();
    let (mut c, _h) = upgraded(&frame(0x9, b"p"), &mut pool);
    assert_eq!(c.pump_ws(Instant::now(), &mut pool), Flow::Open);
    assert!(c.stream().written.ends_with(&server_frame(0xA, b"p")));
    // With no output waiting the WebSocket's own deadline runs: at it, a
    // ping goes out.
    c.update_deadline(&params, Instant::now());
    let (at, kind) = c.deadline().expect("a deadline");
    assert_eq!(kind, Deadline::WebSocket);
    assert_eq!(c.expire_ws(at, &mut pool), Flow::Open);
    c.flush(&mut pool).expect("flush");
    assert!(c.stream().written.ends_with(&server_frame(0x9, b"")));
}

#[test]
fn the_peers_close_is_echoed_then_the_connection_lingers_half_closed() {
    let mut pool = BufPool::default();
    let (mut c, h) = upgraded(&frame(0x8, &1000u16.to_be_bytes()), &mut pool);
    assert_eq!(c.pump_ws(Instant::now(), &mut pool), Flow::Open);
    assert_eq!(heard(&h), ["open", "close 1000"]);
    let echoed = server_frame(0x8, &1000u16.to_be_bytes());
    assert!(c.stream().written.ends_with(&echoed));
    // The last frame is out: due to linger, not finished.
    assert!(c.lingers() && !c.finished());
    let now = Instant::now();
    assert_eq!(c.linger(now, &LingerLimits::default()), Flow::Open);
    assert!(c.is_lingering() && !c.is_upgraded() && c.link().is_none());
    // The half-close came after the close frame.
    assert_eq!(c.stream().shut_at, Some(c.stream().written.len()));
    // A WebSocket lingers no longer than its close grace.
    let grace = crate::server::ws_link::CLOSE_GRACE;
    assert!(c.deadline_of_linger().is_some_and(|at| at <= now + grace));
    // What the peer still sends is dropped; its EOF closes.
    c.stream.send(&frame(0x1, b"late"));
    assert_eq!(c.linger(now, &LingerLimits::default()), Flow::Open);
    assert!(c.stream().input.is_empty());
    assert_eq!(heard(&h), ["open", "close 1000"]);
    c.stream.eof = true;
    assert_eq!(c.linger(now, &LingerLimits::default()), Flow::Close);
}

#[test]
fn a_drains_close_waits_for_the_peers_answer() {
    let mut pool = BufPool::default();
    let (mut c, h) = upgraded(b"", &mut pool);
    let now = Instant::now();
    assert_eq!(c.pump_ws(now, &mut pool), Flow::Open);
    c.close_ws(1001, "bye", now, &mut pool);
    c.flush(&mut pool).expect("flush");
    assert!(holds(&c.stream().written, &[0x88, 5, 0x03, 0xE9]));
    // Not done until the peer answers.
    assert!(!c.lingers());
    c.stream.send(&frame(0x8, &1001u16.to_be_bytes()));
    c.note_ready(true, false);
    assert_eq!(c.pump_ws(now, &mut pool), Flow::Open);
    assert!(c.lingers());
    assert_eq!(heard(&h), ["open", "close 1001"]);
}

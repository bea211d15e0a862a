//! One stream's state in the machine (RFC 9113 §5.1): what the client has
//! sent of its request, what the host has sent of its answer, and both
//! flow-control windows.

use crate::http::parse::Head;
use abi_stable::std_types::RVec;
use std::collections::VecDeque;

/// Bytes of an answer's body waiting for the windows to open.
pub enum Chunk {
    Host(Vec<u8>),
    /// An app's buffer, sent from where it is.
    App(RVec<u8>),
}

impl Chunk {
    pub fn bytes(&self) -> &[u8] {
        match self {
            Chunk::Host(v) => v,
            Chunk::App(v) => v,
        }
    }
}

/// What the stream's request came to, when its head was whole.
pub enum Request {
    /// Not whole yet.
    Waiting,
    /// The head, and the buffer its ranges index.
    Ready(Head, Vec<u8>),
    /// Over a limit: answered with this status (431, 413).
    Refused(u16),
    /// Taken by the host.
    Taken,
}

pub struct Stream {
    pub id: u32,
    pub request: Request,
    /// The client has ended its side (END_STREAM).
    pub recv_closed: bool,
    /// The request's body, as it came (up to `body_limit`).
    pub body: Vec<u8>,
    /// The body is over its limit: its bytes are dropped, and the host
    /// answers 413.
    pub discard: bool,
    /// The host opens the stream's window only for bytes its app took
    /// (`Machine::release`): a body streamed to its app.
    pub held: bool,
    pub body_limit: usize,
    /// The length the request declared.
    pub content_length: Option<u64>,
    /// Body octets received (DATA payloads without padding).
    pub received: u64,
    /// What the client may still send before a WINDOW_UPDATE.
    pub recv_window: i64,
    /// Octets received since the stream's window was last opened again.
    pub recv_unacked: u32,
    /// What the host may still send.
    pub send_window: i64,
    /// The answer's head is out.
    pub answered: bool,
    /// The body waiting to be framed, and whether the answer ends with it.
    pub send: VecDeque<(Chunk, usize)>,
    pub send_end: bool,
    /// The host's END_STREAM is framed.
    pub sent_end: bool,
}

impl Stream {
    pub fn new(id: u32, recv_window: u32, send_window: i64, body_limit: usize) -> Self {
        Stream {
            id,
            request: Request::Waiting,
            recv_closed: false,
            body: Vec::new(),
            discard: false,
            held: false,
            body_limit,
            content_length: None,
            received: 0,
            recv_window: i64::from(recv_window),
            recv_unacked: 0,
            send_window,
            answered: false,
            send: VecDeque::new(),
            send_end: false,
            sent_end: false,
        }
    }

    /// Body octets waiting to be framed.
    pub fn queued(&self) -> usize {
        self.send.iter().map(|(c, at)| c.bytes().len() - at).sum()
    }

    /// True once both sides have ended it.
    pub fn is_done(&self) -> bool {
        self.recv_closed && self.sent_end
    }

    /// True while the host has DATA to frame (bytes, or the end).
    pub fn wants_send(&self) -> bool {
        self.answered && !self.sent_end && (!self.send.is_empty() || self.send_end)
    }
}

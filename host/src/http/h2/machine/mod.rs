//! One HTTP/2 connection's state, free of sockets: the client's bytes go in
//! (`recv`), the frames the host answers with come out into a buffer, and
//! what the host must act on is left as events (a request whose head is
//! whole, a body that ended, a stream the client reset). The host answers
//! a stream with `respond` and its body's bytes, framed as the windows
//! allow (`send_data`).
//!
//! Split by concern: `recv` (frames in, each frame type's rules), `send`
//! (answers out, flow control), `stream` (one stream's state).

#[cfg(test)]
mod props;
mod recv;
mod send;
pub mod stream;
#[cfg(test)]
mod tests;

use super::frame::{self, MIN_MAX_FRAME};
use super::guard::{Bucket, Guard};
use super::hpack::{Decoder, Encoder};
use super::params::H2Params;
use super::ErrorCode;
use crate::stats::{ByCode, ConnCounts};
use stream::Stream;

/// What the host must act on after `recv`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// A stream's request head is whole (`take_request`); its body, if
    /// any, follows.
    Head(u32),
    /// A stream's request ended (its body is whole: `take_body`).
    End(u32),
    /// A stream is gone before its answer ended (the client reset it, or
    /// the host did for an error): whatever the host holds for it goes.
    Gone(u32),
}

/// Where the connection is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Waiting for the client's preface.
    Preface,
    /// Waiting for the client's first SETTINGS.
    FirstSettings,
    Open,
    /// A connection error was sent (GOAWAY): nothing more is read.
    Failed,
}

/// A header block being received (HEADERS, then CONTINUATION frames).
struct Block {
    stream: u32,
    end_stream: bool,
    purpose: Purpose,
    bytes: Vec<u8>,
}

/// What a header block is for, decided at its HEADERS frame; it is decoded
/// whatever it is for, so the compression state stays in step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Purpose {
    Request,
    Trailers,
    /// Decoded and dropped; then the stream is reset with the code (none:
    /// dropped quietly, as for a stream past the GOAWAY's last).
    Drop(Option<ErrorCode>),
}

/// Counts one frame with `code` in `counts` (the connection's counts for
/// status and metrics: `stats::ConnCounts`).
fn tally(counts: &mut ByCode, code: ErrorCode) {
    crate::stats::tally(counts, code.wire());
}

/// One connection's HTTP/2 state.
pub struct Machine {
    params: H2Params,
    state: State,
    decoder: Decoder,
    encoder: Encoder,
    /// The client's SETTINGS_INITIAL_WINDOW_SIZE and MAX_FRAME_SIZE.
    peer_window: i64,
    peer_max_frame: usize,
    streams: Vec<Stream>,
    /// The highest stream id the client has opened.
    last_id: u32,
    block: Option<Block>,
    /// What the host may still send on the connection.
    conn_send: i64,
    /// What the client may still send on the connection, and what it sent
    /// since the window was last opened again.
    conn_recv: i64,
    conn_unacked: u32,
    guard: Guard,
    /// The GOAWAY the host sent: the last stream it processes.
    goaway: Option<(u32, ErrorCode)>,
    /// The client sent GOAWAY: it opens no more streams.
    peer_goaway: bool,
    events: Vec<Event>,
    /// Streams whose DATA the scheduler visits next, in turn.
    turn: usize,
    /// Spare buffers for request heads.
    spare: Vec<Vec<u8>>,
    /// The buffer answer heads are encoded in, kept between answers.
    spare_block: Vec<u8>,
    pub counts: ConnCounts,
    /// Why the connection failed, for the log.
    failure: Option<(ErrorCode, &'static str)>,
}

impl Machine {
    /// A connection with `params`; `max_body` is each request body's limit
    /// until the host sets its route's (`set_body_limit`).
    pub fn new(params: H2Params) -> Self {
        let guard = Guard {
            resets: Bucket::new(params.reset_rate, params.reset_burst),
            control: Bucket::new(params.control_rate, params.control_burst),
        };
        Machine {
            decoder: Decoder::new(params.header_table_size as usize),
            encoder: Encoder::new(),
            peer_window: 65_535,
            peer_max_frame: MIN_MAX_FRAME,
            streams: Vec::new(),
            last_id: 0,
            block: None,
            conn_send: 65_535,
            conn_recv: 65_535,
            conn_unacked: 0,
            guard,
            goaway: None,
            peer_goaway: false,
            events: Vec::new(),
            turn: 0,
            spare: Vec::new(),
            spare_block: Vec::new(),
            counts: ConnCounts::default(),
            failure: None,
            state: State::Preface,
            params,
        }
    }

    /// Writes what the host opens the connection with: its SETTINGS, and
    /// the connection window opened to `conn_window`.
    pub fn start(&mut self, out: &mut Vec<u8>) {
        frame::put_settings(out, &super::params::advertised(&self.params));
        let more = i64::from(self.params.conn_window) - self.conn_recv;
        if more > 0 {
            frame::put_window_update(out, 0, more as u32);
            self.conn_recv += more;
        }
    }

    /// Takes the events `recv` left, in order.
    pub fn take_events(&mut self, into: &mut Vec<Event>) {
        into.append(&mut self.events);
    }

    /// True once a connection error ended it (its GOAWAY is in the output).
    pub fn failed(&self) -> bool {
        self.state == State::Failed
    }

    /// Why the connection failed, if it did.
    pub fn failure(&self) -> Option<(ErrorCode, &'static str)> {
        self.failure
    }

    /// True while the preface or the first SETTINGS has not come.
    pub fn starting(&self) -> bool {
        matches!(self.state, State::Preface | State::FirstSettings)
    }

    /// True once no stream is open and no header block is half received.
    pub fn is_idle(&self) -> bool {
        self.streams.is_empty() && self.block.is_none()
    }

    /// True while some stream has body bytes queued that its window or
    /// the connection's does not let out.
    pub fn waits_for_window(&self) -> bool {
        self.streams
            .iter()
            .any(|s| !s.send.is_empty() && (s.send_window <= 0 || self.conn_send <= 0))
    }

    /// True while a header block is part way received.
    pub fn receiving_block(&self) -> bool {
        self.block.is_some()
    }

    /// Streams open.
    pub fn open_streams(&self) -> usize {
        self.streams.len()
    }

    /// True once the host has sent its GOAWAY (no stream past its last is
    /// served), or the client its own.
    pub fn going_away(&self) -> bool {
        self.goaway.is_some() || self.peer_goaway
    }

    fn stream(&self, id: u32) -> Option<&Stream> {
        self.streams.iter().find(|s| s.id == id)
    }

    fn stream_mut(&mut self, id: u32) -> Option<&mut Stream> {
        self.streams.iter_mut().find(|s| s.id == id)
    }

    /// True if stream `id` is open (not ended both ways, nor reset).
    pub fn is_open(&self, id: u32) -> bool {
        self.stream(id).is_some()
    }

    /// The request of stream `id` once its head is whole: its head and
    /// the buffer its ranges index; or the status it is refused with.
    pub fn take_request(&mut self, id: u32) -> Option<stream::Request> {
        let s = self.stream_mut(id)?;
        match s.request {
            stream::Request::Waiting | stream::Request::Taken => None,
            _ => Some(std::mem::replace(&mut s.request, stream::Request::Taken)),
        }
    }

    /// Gives a request head's buffer back for the next one.
    pub fn give_back(&mut self, buf: Vec<u8>) {
        if self.spare.len() < 4 {
            self.spare.push(buf);
        }
    }

    /// The body stream `id` received (whole once `Event::End` came), and
    /// whether it went over its limit.
    pub fn take_body(&mut self, id: u32) -> Option<(Vec<u8>, bool)> {
        let s = self.stream_mut(id)?;
        Some((std::mem::take(&mut s.body), s.discard))
    }

    /// Streams stream `id`'s body to its app: its window opens again only
    /// for what the app took (`release`), so a slow app slows the client.
    pub fn hold_window(&mut self, id: u32) {
        if let Some(s) = self.stream_mut(id) {
            s.held = true;
        }
    }

    /// The body bytes stream `id` received since last asked, whether its
    /// request has ended, and whether the body went over its limit.
    pub fn take_piece(&mut self, id: u32) -> Option<(Vec<u8>, bool, bool)> {
        let s = self.stream_mut(id)?;
        Some((std::mem::take(&mut s.body), s.recv_closed, s.discard))
    }

    /// The app took `n` bytes of stream `id`'s body: the client may send
    /// that much more.
    pub fn release(&mut self, id: u32, n: usize, out: &mut Vec<u8>) {
        let Some(s) = self.stream_mut(id).filter(|s| !s.recv_closed) else {
            return;
        };
        let n = u32::try_from(n).unwrap_or(u32::MAX).min(s.recv_unacked);
        if n > 0 {
            frame::put_window_update(out, id, n);
            s.recv_window += i64::from(n);
            s.recv_unacked -= n;
        }
    }

    /// Sets the body limit of stream `id` (its route's).
    pub fn set_body_limit(&mut self, id: u32, limit: usize) {
        if let Some(s) = self.stream_mut(id) {
            s.body_limit = limit;
        }
    }

    /// Ends the connection with a connection error: a GOAWAY with `code`
    /// naming the last stream the host processed; nothing more is read.
    pub fn fail(&mut self, code: ErrorCode, why: &'static str, out: &mut Vec<u8>) {
        if self.state == State::Failed {
            return;
        }
        let last = self.goaway.map_or(self.last_id, |(last, _)| last);
        frame::put_goaway(out, last, code, why.as_bytes());
        tally(&mut self.counts.goaways_sent, code);
        self.goaway = Some((last, code));
        self.failure = Some((code, why));
        self.state = State::Failed;
        for s in self.streams.drain(..) {
            self.events.push(Event::Gone(s.id));
        }
        self.block = None;
    }

    /// Starts a graceful close: a GOAWAY NO_ERROR naming the last stream
    /// opened; those go on to their answers, none past it is served.
    pub fn go_away(&mut self, out: &mut Vec<u8>) {
        if self.goaway.is_some() || self.state == State::Failed {
            return;
        }
        frame::put_goaway(out, self.last_id, ErrorCode::NoError, b"");
        tally(&mut self.counts.goaways_sent, ErrorCode::NoError);
        self.goaway = Some((self.last_id, ErrorCode::NoError));
    }

    /// Resets stream `id` with `code` (the host's error on it, or its
    /// answer given up): its state goes.
    pub fn reset(&mut self, id: u32, code: ErrorCode, out: &mut Vec<u8>) {
        if let Some(i) = self.streams.iter().position(|s| s.id == id) {
            self.streams.swap_remove(i);
            frame::put_rst(out, id, code);
            tally(&mut self.counts.resets_sent, code);
        }
    }
}

//! An HTTP/2 connection's streams on the loop: the machine (`http::h2`),
//! the bytes read and not yet taken by it, and per stream what the host
//! holds until its answer ends (the request waiting for its body, the
//! request with its app, a streamed answer's line and access-log tail).
//! A connection becomes one after its TLS handshake chose `h2`, or when a
//! plain connection opens with the preface (`Conn::promote_h2`).
//!
//! Split by concern: `exchange` (a stream's answering side, for the
//! dispatcher), `head` (an answer's head as HTTP/2 fields).

pub mod exchange;
mod head;

use super::body_feed::BodyLink;
use super::conn::tail::Tail;
use super::exchange::{Gone, Pending};
use super::route::Route;
use crate::budget::Reservation;
use crate::http::h2::machine::stream::Chunk;
use crate::http::h2::machine::{Event, Machine};
use crate::http::h2::params::H2Params;
use crate::http::h2::ErrorCode;
use crate::http::parse::Head;
use crate::http::response::never_has_body;
use crate::stats::{bump, ConnCounts, H2Stats};
use crate::stream_line::{End, StreamLine};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use stoa_app_api::abi::{BODY_COMPLETE, BODY_TOO_LARGE};

/// Bytes read ahead of the machine: two of the largest frames it takes.
const INPUT_ROOM: usize = 2 * (16_384 + 9);

/// A request whose head is whole, waiting for its body.
pub struct Waiting {
    pub head: Head,
    pub buf: Vec<u8>,
    pub route: Option<Route<'static>>,
}

/// A streamed answer going out on a stream.
pub struct Streamed {
    line: Arc<StreamLine>,
    open: Arc<AtomicU64>,
    /// Body bytes taken from the line so far.
    bytes: u64,
}

impl Drop for Streamed {
    fn drop(&mut self) {
        self.line.close();
        self.open.fetch_sub(1, Ordering::Relaxed);
    }
}

/// What the host holds for one stream.
pub struct Slot {
    pub stream: u32,
    pub waiting: Option<Waiting>,
    /// The request with its app (its number is `pending.id`).
    pub pending: Option<Pending>,
    /// The app's task for the request abandoned before its answer ended.
    pub gone: Option<Gone>,
    pub streamed: Option<Streamed>,
    /// The streamed answer's access-log line, due at its end.
    pub tail: Option<Tail>,
    /// The request's number, kept while its answer streams.
    pub id: u64,
    /// Its body streams to its app: the app's sink, once given.
    pub streams_body: bool,
    pub link: Option<BodyLink>,
}

/// One HTTP/2 connection's state on the loop.
pub struct Session {
    pub machine: Machine,
    input: Vec<u8>,
    slots: Vec<Slot>,
    events: Vec<Event>,
    /// The worker's HTTP/2 counters, and the machine's counts as last
    /// published there.
    stats: Arc<H2Stats>,
    published: ConnCounts,
    /// The answer bytes held for the client's windows, in `--max-buffered`.
    held: Reservation,
}

impl Session {
    /// A session whose client has sent `read` already; its SETTINGS go to
    /// `out`; it counts itself in `stats`, and the answers it holds in
    /// `held`.
    pub fn new(
        params: H2Params,
        read: Vec<u8>,
        out: &mut Vec<u8>,
        (stats, held): (Arc<H2Stats>, Reservation),
    ) -> Self {
        let mut machine = Machine::new(params);
        machine.start(out);
        bump(&stats.opened, 1);
        Session {
            machine,
            input: read,
            slots: Vec::new(),
            events: Vec::new(),
            stats,
            published: ConnCounts::default(),
            held,
        }
    }

    /// Adds what the machine counted since the last call to the worker's
    /// counters, and holds the answer bytes waiting for the client's
    /// windows against `--max-buffered` (they exist already: counted even
    /// past the limit, which then refuses new streams and bodies).
    pub fn account(&mut self) {
        let now = self.machine.counts;
        if now != self.published {
            self.stats.publish(&self.published, &now);
            self.published = now;
        }
        self.held.force(self.machine.queued_total());
    }

    /// Room for more input: the machine takes what it can each turn.
    pub fn input_room(&self) -> usize {
        INPUT_ROOM.saturating_sub(self.input.len())
    }

    pub fn input_mut(&mut self) -> &mut Vec<u8> {
        &mut self.input
    }

    /// Hands the input to the machine; its answers go to `out`, and its
    /// events wait for `take_events`.
    pub fn recv(&mut self, now: std::time::Instant, out: &mut Vec<u8>) {
        let used = self.machine.recv(&self.input, now, out);
        self.input.drain(..used);
        self.machine.take_events(&mut self.events);
    }

    /// The events since the last call; a stream gone in the same batch is
    /// not started at all (a request reset at once costs its app nothing).
    pub fn take_events(&mut self) -> Vec<Event> {
        let mut events = std::mem::take(&mut self.events);
        let gone: Vec<u32> = events
            .iter()
            .filter_map(|e| match e {
                Event::Gone(id) => Some(*id),
                _ => None,
            })
            .collect();
        if !gone.is_empty() {
            events.retain(|e| match e {
                Event::Head(id) | Event::End(id) => !gone.contains(id),
                Event::Gone(_) => true,
            });
        }
        events
    }

    pub fn slot(&mut self, stream: u32) -> &mut Slot {
        let i = match self.slots.iter().position(|s| s.stream == stream) {
            Some(i) => i,
            None => {
                self.slots.push(Slot {
                    stream,
                    waiting: None,
                    pending: None,
                    gone: None,
                    streamed: None,
                    tail: None,
                    id: 0,
                    streams_body: false,
                    link: None,
                });
                self.slots.len() - 1
            }
        };
        &mut self.slots[i]
    }

    /// The stream whose request is numbered `id`.
    pub fn stream_of(&self, id: u64) -> Option<u32> {
        self.slots
            .iter()
            .find(|s| {
                s.pending.as_ref().is_some_and(|p| p.id == id)
                    || (s.id == id && s.streamed.is_some())
            })
            .map(|s| s.stream)
    }

    /// True if request `id` waits for its answer here.
    pub fn waits_for(&self, id: u64) -> bool {
        self.slots
            .iter()
            .any(|s| s.pending.as_ref().is_some_and(|p| p.id == id))
    }

    /// True if request `id`'s answer streams here.
    pub fn streams_for(&self, id: u64) -> bool {
        self.slots
            .iter()
            .any(|s| s.id == id && s.streamed.is_some())
    }

    /// Keeps an app's `on_gone` task with request `id`, if it is here
    /// (with its request while the app has it, with its streamed answer
    /// after).
    pub fn set_gone(&mut self, id: u64, gone: Gone) -> Result<(), Gone> {
        for s in &mut self.slots {
            match &mut s.pending {
                Some(p) if p.id == id => {
                    p.gone = Some(gone);
                    return Ok(());
                }
                None if s.id == id && s.streamed.is_some() => {
                    s.gone = Some(gone);
                    return Ok(());
                }
                _ => {}
            }
        }
        Err(gone)
    }

    /// Lets stream `stream`'s slot go; its `on_gone` task if its answer had
    /// not ended.
    pub fn drop_slot(&mut self, stream: u32) -> Option<Gone> {
        let i = self.slots.iter().position(|s| s.stream == stream)?;
        let mut slot = self.slots.swap_remove(i);
        slot.gone
            .take()
            .or_else(|| slot.pending.as_mut()?.gone.take())
    }

    /// Every stream's `on_gone` task (the connection goes).
    pub fn take_gones(&mut self) -> Vec<Gone> {
        let mut gones = Vec::new();
        for s in &mut self.slots {
            gones.extend(s.gone.take());
            gones.extend(s.pending.as_mut().and_then(|p| p.gone.take()));
        }
        gones
    }

    /// True while some stream's answer streams from its app.
    pub fn streams_answers(&self) -> bool {
        self.slots.iter().any(|s| s.streamed.is_some())
    }

    /// True while no stream is held and the machine has none open.
    pub fn is_idle(&self) -> bool {
        self.slots.is_empty() && self.machine.is_idle()
    }

    /// The oldest request with its app: its start and its own timeout.
    pub fn oldest_pending(&self) -> Option<&Pending> {
        self.slots
            .iter()
            .filter_map(|s| s.pending.as_ref())
            .min_by_key(|p| p.started)
    }

    /// Takes what the apps of streamed answers sent, while each stream has
    /// less than `bound` queued; ended ones end their stream (an aborted
    /// one is reset). Returns the streams that ended.
    pub fn pull_streams(&mut self, bound: usize, out: &mut Vec<u8>) -> Vec<u32> {
        let mut ended = Vec::new();
        for slot in &mut self.slots {
            let Some(st) = &mut slot.streamed else {
                continue;
            };
            if self.machine.queued(slot.stream) >= bound {
                continue;
            }
            let taken = st.line.take();
            for chunk in taken.chunks {
                st.bytes += chunk.len() as u64;
                self.machine
                    .queue_data(slot.stream, Chunk::Host(chunk), false);
            }
            match taken.end {
                End::Open => {}
                End::Finished => {
                    self.machine
                        .queue_data(slot.stream, Chunk::Host(Vec::new()), true);
                    ended.push(slot.stream);
                }
                End::Aborted => {
                    self.machine.reset(slot.stream, ErrorCode::Internal, out);
                    ended.push(slot.stream);
                }
            }
        }
        for &stream in &ended {
            if let Some(slot) = self.slots.iter_mut().find(|s| s.stream == stream) {
                let bytes = slot.streamed.take().map_or(0, |s| s.bytes);
                if let Some(mut tail) = slot.tail.take() {
                    tail.sent_all(bytes);
                }
                slot.gone = None;
            }
            self.drop_slot_if_done(stream);
        }
        ended
    }

    /// Tells each streamed answer's line what waits to go out for it.
    pub fn report_streams(&self) {
        for slot in &self.slots {
            if let Some(st) = &slot.streamed {
                st.line.report(self.machine.queued(slot.stream));
            }
        }
    }

    /// Hands each streamed body's new bytes to its app's sink (one whose
    /// pool sink is busy waits for its notice), opening the client's
    /// window for what went; a body that ended or went over its limit
    /// ends its sink.
    pub fn feed_bodies(&mut self, out: &mut Vec<u8>) {
        for slot in &mut self.slots {
            let Some(link) = slot.link.as_mut().filter(|l| !l.waits()) else {
                continue;
            };
            let Some((piece, ended, over)) = self.machine.take_piece(slot.stream) else {
                continue;
            };
            let outcome = if over {
                Some(BODY_TOO_LARGE)
            } else {
                link.give(&piece);
                self.machine.release(slot.stream, piece.len(), out);
                ended.then_some(BODY_COMPLETE)
            };
            if let Some(outcome) = outcome {
                slot.streams_body = false;
                if let Some(link) = slot.link.take() {
                    link.end(outcome);
                }
            }
        }
    }

    /// The app of request `id` gave its sink for the body: kept to be fed
    /// if the body streams; ended at once if it came with the request.
    pub fn attach_body(&mut self, id: u64, link: BodyLink) {
        match self
            .slots
            .iter_mut()
            .find(|s| s.pending.as_ref().is_some_and(|p| p.id == id))
        {
            Some(slot) if slot.streams_body => slot.link = Some(link),
            Some(_) => link.complete_now(),
            None => drop(link),
        }
    }

    /// Queues `response` (with `fixed`) as stream `stream`'s whole answer:
    /// its head, then its body (taken out of `response`, framed from the
    /// app's buffer as the windows allow), none for HEAD (`head_only`) or
    /// a status without one.
    pub fn send_answer(
        &mut self,
        stream: u32,
        response: &mut stoa_app_api::Response,
        fixed: crate::http::response::Fixed,
        head_only: bool,
        date: &str,
        out: &mut Vec<u8>,
    ) {
        let body = std::mem::take(&mut response.body);
        let fields = head::fields(response, fixed, Some(body.len() as u64), date);
        let end = head_only || never_has_body(response.status) || body.is_empty();
        let machine = &mut self.machine;
        if machine.respond(stream, response.status, fields.iter(), end, out) && !end {
            machine.queue_data(stream, Chunk::App(body), true);
        }
    }

    /// Takes the request stream `stream` holds waiting for its body.
    pub fn take_waiting(&mut self, stream: u32) -> Option<Waiting> {
        self.slots
            .iter_mut()
            .find(|s| s.stream == stream)?
            .waiting
            .take()
    }

    /// Lets a slot go once nothing of it is held.
    pub fn drop_slot_if_done(&mut self, stream: u32) {
        if let Some(i) = self.slots.iter().position(|s| {
            s.stream == stream && s.waiting.is_none() && s.pending.is_none() && s.streamed.is_none()
        }) {
            self.slots.swap_remove(i);
        }
    }

    /// Starts a streamed answer on `stream`.
    pub fn start_streamed(
        &mut self,
        stream: u32,
        id: u64,
        line: Arc<StreamLine>,
        open: Arc<AtomicU64>,
    ) {
        open.fetch_add(1, Ordering::Relaxed);
        let slot = self.slot(stream);
        slot.id = id;
        slot.streamed = Some(Streamed {
            line,
            open,
            bytes: 0,
        });
    }
}

impl Drop for Session {
    /// The connection ends (closed, or its phase left behind): what it
    /// counted last is published, and it counts as closed.
    fn drop(&mut self) {
        self.account();
        bump(&self.stats.closed, 1);
    }
}

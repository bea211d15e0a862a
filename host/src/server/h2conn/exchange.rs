//! A stream's answering side: what the dispatcher's answering half
//! (`server::answering`) queues an answer through, as HTTP/1.1's `Conn`.

use super::head::fields;
use super::Session;
use crate::http::output::Output;
use crate::http::reader::BufPool;
use crate::http::response::{never_has_body, Fixed};
use crate::server::conn::tail::Tail;
use crate::server::exchange::{Exchange, Pending, Terms};
use crate::stream_line::StreamLine;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use stoa_app_api::Response;

/// Stream `stream` of an HTTP/2 connection, answering its request.
pub struct StreamExchange<'a> {
    pub session: &'a mut Session,
    /// The connection's output, where the frames go.
    pub out: &'a mut Output,
    pub stream: u32,
    /// The listener the connection came in on.
    pub via: usize,
}

impl StreamExchange<'_> {
    fn take_pending(&mut self) -> Option<Pending> {
        let stream = self.stream;
        self.session
            .slots
            .iter_mut()
            .find(|s| s.stream == stream)?
            .pending
            .take()
    }
}

impl Exchange for StreamExchange<'_> {
    fn pending(&self) -> Option<&Pending> {
        let slot = self
            .session
            .slots
            .iter()
            .find(|s| s.stream == self.stream)?;
        slot.pending.as_ref()
    }

    fn listener(&self) -> usize {
        self.via
    }

    fn answer(
        &mut self,
        response: &mut Response,
        fixed: Fixed,
        terms: &Terms,
        pool: &mut BufPool,
    ) -> Option<Pending> {
        let pending = self.take_pending()?;
        let out = self.out.buf_for(pool);
        let head_only = pending.head_only;
        self.session
            .send_answer(self.stream, response, fixed, head_only, terms.date, out);
        if terms.close {
            self.session.machine.go_away(out);
        }
        self.session.drop_slot_if_done(self.stream);
        Some(pending)
    }

    fn start_stream(
        &mut self,
        head: &mut Response,
        line: Arc<StreamLine>,
        open: Arc<AtomicU64>,
        terms: &Terms,
        pool: &mut BufPool,
    ) -> Option<Pending> {
        let mut pending = self.take_pending()?;
        let end = pending.head_only || never_has_body(head.status);
        let length = line.declared().filter(|_| !end);
        let fields = fields(head, &[], length, terms.date);
        let out = self.out.buf_for(pool);
        let open_now =
            self.session
                .machine
                .respond(self.stream, head.status, fields.iter(), end, out);
        if terms.close {
            self.session.machine.go_away(out);
        }
        if open_now && !end {
            self.session
                .start_streamed(self.stream, pending.id, line, open);
            let gone = pending.gone.take();
            self.session.slot(self.stream).gone = gone;
        } else {
            line.close();
            self.session.drop_slot_if_done(self.stream);
        }
        Some(pending)
    }

    fn follow(&mut self, tail: Tail) {
        let stream = self.stream;
        if let Some(slot) = self.session.slots.iter_mut().find(|s| s.stream == stream) {
            slot.tail = Some(tail);
        }
    }
}

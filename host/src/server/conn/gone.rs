//! A client that leaves while its request is pending (with its app, its
//! body read by the app, or its streamed answer going out): the
//! connection reads on to see it go, and the app's `on_gone` task is kept
//! here until the request ends, to run if it ends abandoned.
//!
//! What the connection reads meanwhile is kept: bytes of a pipelined next
//! request are buffered (up to what one read takes) and wait for their
//! turn; once some are buffered it reads no more until the answer, so it
//! does not see the client leave behind them (the answer's write does).
//! Nor does it while a body sink holds its whole read window (that is the
//! backpressure: nothing is read then). A half-close (the client's FIN)
//! counts as leaving, as nginx's "client prematurely closed connection"
//! and ASGI's `http.disconnect` do; so does a reset.

use super::{Conn, Phase};
use crate::server::exchange::Gone;

impl<S> Conn<S> {
    /// True while a request is pending and the connection reads only to
    /// see its client leave: nothing of a next request buffered (past it
    /// the leaving cannot be read), no body's rest in the socket (read by
    /// its sink, or left unread, which the close after the answer drops).
    pub(super) fn watches_peer(&self) -> bool {
        let pending = match &self.phase {
            Phase::Dispatched(d) => !d.body_broke && !self.reader.feeds_body(),
            Phase::Streaming { body_left, .. } => !body_left,
            _ => false,
        };
        pending && self.reader.buffered() == 0
    }

    /// True if the client of the pending request has left: its end of
    /// stream (or a failed read) came before the request's answer was
    /// complete, with no next request read ahead (or in the middle of the
    /// body its app reads, which can never complete now).
    pub fn client_gone(&self) -> bool {
        self.read_closed
            && match &self.phase {
                Phase::H2(s) => !s.is_idle(),
                Phase::Dispatched(_) => self.reader.feeds_body() || self.reader.buffered() == 0,
                Phase::Streaming { body_left, .. } => !body_left && self.reader.buffered() == 0,
                _ => false,
            }
    }

    /// True while a request is pending but the connection cannot read its
    /// client leaving (see `watches_peer`); a body streamed to its app is
    /// read as it comes.
    pub fn pending_unwatched(&self) -> bool {
        let pending = match &self.phase {
            Phase::Dispatched(_) => !self.reader.feeds_body(),
            Phase::Streaming { .. } => true,
            _ => false,
        };
        pending && !self.watches_peer()
    }

    /// Keeps `gone` for request `id` (replacing an earlier task, which is
    /// dropped unrun); hands it back if that request is no longer pending
    /// here (it is gone: the caller runs it).
    pub fn set_gone(&mut self, id: u64, gone: Gone) -> Result<(), Gone> {
        match &mut self.phase {
            Phase::H2(s) => return s.set_gone(id, gone),
            Phase::Dispatched(d) if d.pending.id == id => d.pending.gone = Some(gone),
            Phase::Streaming {
                stream, gone: kept, ..
            } if stream.request_id() == id => {
                *kept = Some(gone);
            }
            _ => return Err(gone),
        }
        Ok(())
    }

    /// Takes the pending request's task (its request is being abandoned:
    /// the caller runs it).
    pub fn take_gone(&mut self) -> Option<Gone> {
        match &mut self.phase {
            Phase::Dispatched(d) => d.pending.gone.take(),
            Phase::Streaming { gone, .. } => gone.take(),
            _ => None,
        }
    }
}

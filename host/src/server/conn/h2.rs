//! The switch to HTTP/2, and the connection's reads and writes once
//! switched (`Phase::H2`): a TLS session that chose `h2`, or a plain
//! connection whose first bytes are the preface (h2c with prior
//! knowledge), becomes an HTTP/2 session before any request is read.

use super::{Conn, Phase, Transport};
use crate::budget::Reservation;
use crate::http::h2::params::H2Params;
use crate::http::h2::{sniff, Sniff};
use crate::http::output::Output;
use crate::http::reader::BufPool;
use crate::server::h2conn::Session;
use crate::stats::H2Stats;
use std::io;
use std::sync::Arc;
use std::time::Instant;

impl<S> Conn<S> {
    /// True once the connection speaks HTTP/2.
    pub fn is_h2(&self) -> bool {
        matches!(self.phase, Phase::H2(_))
    }

    /// The HTTP/2 session and the output its frames go to.
    pub fn h2_parts(&mut self) -> Option<(&mut Session, &mut Output)> {
        match &mut self.phase {
            Phase::H2(session) => Some((session, &mut self.out)),
            _ => None,
        }
    }

    /// True while an HTTP/2 client is part way through a header block.
    pub fn h2_receiving_block(&self) -> bool {
        matches!(&self.phase, Phase::H2(s) if s.machine.receiving_block())
    }

    /// True while the first bytes of a plain connection are a strict
    /// prefix of the HTTP/2 preface (`h2c`): no request is parsed until
    /// more decide.
    pub fn may_be_h2c(&self, h2c: bool) -> bool {
        h2c && self.first_bytes() && sniff(self.reader.buffered_bytes()) == Sniff::Unsure
    }

    fn first_bytes(&self) -> bool {
        self.served == 0 && matches!(self.phase, Phase::Reading(None)) && !self.handshaking
    }

    /// True when the connection is to switch to HTTP/2 now: its TLS
    /// session chose `h2`, or (`h2c`) its first bytes are the preface.
    pub fn h2_due(&self, h2c: bool) -> bool
    where
        S: Transport,
    {
        self.first_bytes()
            && (self.stream.chose_h2() || (h2c && sniff(self.reader.buffered_bytes()) == Sniff::H2))
    }

    /// Switches to HTTP/2: the bytes read so far are the session's first,
    /// and the host's SETTINGS go out first; the session counts itself in
    /// `stats`, and the answers it holds in `held`.
    pub fn promote_h2(
        &mut self,
        params: H2Params,
        pool: &mut BufPool,
        (stats, held): (Arc<H2Stats>, Reservation),
    ) {
        let read = self.reader.take_rest(pool);
        let out = self.out.buf_for(pool);
        let session = Session::new(params, read, out, (stats, held));
        self.phase = Phase::H2(Box::new(session));
        self.read_ready = true;
    }
}

impl<S: Transport> Conn<S> {
    /// Reads what the session has room for, until the transport would
    /// block; true if any byte came. At end of stream (or a failed read)
    /// the connection's reading side is closed.
    pub fn h2_read(&mut self) -> bool {
        let Phase::H2(session) = &mut self.phase else {
            return false;
        };
        let mut got = false;
        let mut chunk = [0u8; 16 * 1024];
        loop {
            let room = session.input_room();
            if room == 0 || self.read_closed {
                // Full: read on when the machine has taken some.
                self.read_ready = !self.read_closed;
                break;
            }
            let want = room.min(chunk.len());
            match self.stream.read(&mut chunk[..want]) {
                Ok(0) => {
                    self.read_closed = true;
                    break;
                }
                Ok(n) => {
                    session.input_mut().extend_from_slice(&chunk[..n]);
                    got = true;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.read_ready = self.stream.has_buffered_input();
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    log::debug!("read from {} failed: {e}", self.peer);
                    self.read_closed = true;
                    break;
                }
            }
        }
        self.held = self.stream.has_buffered_output();
        self.reader.progressed |= got;
        got
    }

    /// Hands what was read to the session's machine (its answers go to
    /// the output).
    pub fn h2_recv(&mut self, now: Instant, pool: &mut BufPool) {
        if let Phase::H2(session) = &mut self.phase {
            let out = self.out.buf_for(pool);
            session.recv(now, out);
        }
    }
}

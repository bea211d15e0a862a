//! An in-memory transport for the connection's tests.

use super::Transport;
use crate::stats::HandshakeFailure;
use std::collections::VecDeque;
use std::io::{self, Read, Write};

/// A transport with scripted input and a bounded output window: reads
/// return the input, then `WouldBlock` (or end of stream once `eof`);
/// writes take up to `window` bytes, then `WouldBlock`; after
/// `shutdown_write`, writes fail. With `record`, a read gives at most that
/// many bytes and the rest counts as held inside the transport (as a TLS
/// session holds a record's plaintext), which `has_buffered_input` tells.
/// `handshaking` and `failure` script a handshake (as a TLS session's).
#[derive(Default)]
pub struct Mem {
    pub input: VecDeque<u8>,
    pub eof: bool,
    pub written: Vec<u8>,
    pub window: usize,
    pub record: Option<usize>,
    /// `written`'s length when the sending half was shut.
    pub shut_at: Option<usize>,
    pub handshaking: bool,
    pub failure: Option<HandshakeFailure>,
}

impl Mem {
    pub fn new(input: &[u8]) -> Self {
        Mem {
            input: input.iter().copied().collect(),
            window: usize::MAX,
            ..Mem::default()
        }
    }

    /// Bytes the client sends next.
    pub fn send(&mut self, bytes: &[u8]) {
        self.input.extend(bytes);
    }

    /// What was written so far, as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.written).into_owned()
    }
}

impl Read for Mem {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.input.is_empty() {
            return if self.eof {
                Ok(0)
            } else {
                Err(io::ErrorKind::WouldBlock.into())
            };
        }
        let n = buf
            .len()
            .min(self.input.len())
            .min(self.record.unwrap_or(usize::MAX));
        for (slot, byte) in buf.iter_mut().zip(self.input.drain(..n)) {
            *slot = byte;
        }
        Ok(n)
    }
}

impl Write for Mem {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.shut_at.is_some() {
            return Err(io::ErrorKind::BrokenPipe.into());
        }
        if self.window == 0 {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let n = buf.len().min(self.window);
        self.written.extend_from_slice(&buf[..n]);
        self.window -= n;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Transport for Mem {
    fn shutdown_write(&mut self) -> io::Result<()> {
        self.shut_at.get_or_insert(self.written.len());
        Ok(())
    }

    fn has_buffered_input(&self) -> bool {
        self.record.is_some() && !self.input.is_empty()
    }

    fn is_handshaking(&self) -> bool {
        self.handshaking && self.failure.is_none()
    }

    fn handshake_failure(&self) -> Option<HandshakeFailure> {
        self.failure
    }

    fn fail_handshake(&mut self, kind: HandshakeFailure) {
        self.failure.get_or_insert(kind);
    }
}

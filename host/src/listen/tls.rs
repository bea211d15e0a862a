//! TLS over an accepted TCP connection, with rustls (ring as its crypto
//! provider): the server's certificate chain and key, loaded once into a
//! configuration, and a non-blocking session that reads and writes
//! plaintext as a bare socket does, ending in `WouldBlock` when it can go
//! no further now, so that a connection over it is driven as one over a
//! socket (`server::conn::Transport`):
//! - `read` fills the buffer from the plaintext decrypted and then from
//!   the socket's ciphertext, until the buffer is full or the socket
//!   would block (so a read that comes back short has drained the socket,
//!   as on a bare socket: a connection under edge-triggered readiness
//!   relies on it; a read of the socket that comes back short counts as
//!   that, without a further one to meet `WouldBlock`), and sends the
//!   handshake's answers as soon as they are made (what is queued with a
//!   request, the session tickets after the handshake, goes out with its
//!   answer);
//! - `write` takes plaintext while the session holds under `SEND_LIMIT` of
//!   ciphertext for the socket, and sends the records held before and the
//!   new ones in one `writev`, as far as the socket takes them;
//! - `has_buffered_output` tells of ciphertext still held for the socket
//!   (the connection keeps waiting to write until it is gone), and
//!   `has_buffered_input` of plaintext decrypted but not yet handed out;
//! - `shutdown_write` sends `close_notify`, then the FIN; a session dropped
//!   without it sends `close_notify` as far as the socket takes it then.
//!
//! The first bytes are looked at before the session takes them
//! (`handshake::Watch`): plain HTTP turns the stream into a bare socket,
//! so the connection can answer it in plaintext; other bytes that are no
//! TLS record are refused. A handshake that fails keeps its kind
//! (`handshake_failure`) for the counters.
//!
//! Used on the connections of `tls://` binds.

use super::handshake::{kind_of, Sniffed, Stage, Watch};
use super::socket::Accepted;
use crate::stats::HandshakeFailure;
use rustls::{ServerConfig, ServerConnection};
use std::io::{self, IoSlice, Read, Write};
use std::sync::Arc;

/// Most ciphertext a session holds for the socket before `write` takes no
/// more plaintext (the bound a connection keeps on its own output).
pub const SEND_LIMIT: usize = 64 << 10;

mod config;
pub mod expiry;
mod session;
mod sites;
pub mod tickets;
pub mod watch;

pub use crate::error::TlsError;
pub use config::{facts, CertFacts, Resumption};
pub use sites::{log_reload, site_name, TlsSites};

/// Session tickets sealed with `shared` keys (a worker process's, which
/// the supervisor rotates), or with this process's own.
pub fn tickets(
    shared: Option<&'static [std::sync::atomic::AtomicU64]>,
) -> Arc<dyn rustls::server::ProducesTickets> {
    match shared {
        Some(keys) => Arc::new(tickets::SharedTickets::shared(keys)),
        None => Arc::new(tickets::SharedTickets::own()),
    }
}

/// A TLS session over one accepted connection.
pub struct TlsStream {
    /// A TCP connection, bare or through the ring.
    sock: Accepted,
    tls: ServerConnection,
    /// Plaintext decrypted and not yet handed out.
    plain: usize,
    /// The FIN waits for the records before it (`close_notify` last).
    fin_pending: bool,
    /// What apps see of the session, read once after the handshake.
    session: Option<Arc<stoa_app_api::abi::TlsSession>>,
    /// The first bytes, and how the handshake failed.
    watch: Watch,
}

impl TlsStream {
    /// A server session over `sock`, its handshake still to come.
    pub fn new(sock: Accepted, config: Arc<ServerConfig>) -> io::Result<Self> {
        let mut tls = ServerConnection::new(config).map_err(io::Error::other)?;
        tls.set_buffer_limit(Some(SEND_LIMIT));
        Ok(TlsStream {
            sock,
            tls,
            plain: 0,
            fin_pending: false,
            session: None,
            watch: Watch::default(),
        })
    }

    /// The socket under the session.
    pub fn socket(&self) -> &Accepted {
        &self.sock
    }

    /// True while ciphertext waits for the socket (in the session, or in
    /// the ring under it).
    pub fn has_buffered_output(&self) -> bool {
        self.tls.wants_write() || self.sock.has_buffered_output()
    }

    /// True while decrypted plaintext waits for a read.
    pub fn has_buffered_input(&self) -> bool {
        self.plain > 0
    }

    /// What apps see of the session (`None` until the handshake is done).
    pub fn session(&mut self) -> Option<Arc<stoa_app_api::abi::TlsSession>> {
        if self.session.is_none() {
            self.session = session::of(&self.tls).map(Arc::new);
        }
        self.session.clone()
    }

    /// True once the handshake chose HTTP/2 (ALPN `h2`).
    pub fn chose_h2(&self) -> bool {
        !self.tls.is_handshaking() && self.tls.alpn_protocol() == Some(b"h2")
    }

    /// True until the handshake is done, or has failed (plain HTTP is no
    /// handshake: the stream is a bare socket then).
    pub fn is_handshaking(&self) -> bool {
        self.watch.stage() != Stage::Plain
            && self.watch.failure().is_none()
            && self.tls.is_handshaking()
    }

    /// How the handshake failed, if it did.
    pub fn handshake_failure(&self) -> Option<HandshakeFailure> {
        self.watch.failure()
    }

    /// Gives the handshake up as failed with `kind` (its time ran out).
    pub fn fail_handshake(&mut self, kind: HandshakeFailure) {
        self.watch.fail(kind);
    }

    /// True once the first bytes were plain HTTP: reads and writes go to
    /// the socket as they are.
    fn passes_through(&self) -> bool {
        self.watch.stage() == Stage::Plain
    }

    /// Ends the sending half: `close_notify`, then the FIN once every
    /// record before it is out (now, or when the socket takes the rest:
    /// `has_buffered_output` is true until then).
    pub fn shutdown_write(&mut self) -> io::Result<()> {
        if self.passes_through() {
            return self.sock.shutdown_write();
        }
        self.tls.send_close_notify();
        self.fin_pending = true;
        self.send()
    }

    /// Sends the ciphertext the session holds until the socket would
    /// block (what is left waits: `has_buffered_output`), then a pending
    /// FIN.
    fn send(&mut self) -> io::Result<()> {
        while self.tls.wants_write() {
            match self.tls.write_tls(&mut self.sock) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.broke(e)),
            }
        }
        if std::mem::take(&mut self.fin_pending) {
            self.sock.shutdown_write()?;
        }
        Ok(())
    }

    /// A socket error `e`; mid-handshake, the peer has gone (`Closed`).
    fn broke(&mut self, e: io::Error) -> io::Error {
        if self.tls.is_handshaking() {
            self.watch.fail(HandshakeFailure::Closed);
        }
        e
    }

    /// Reads the first bytes (`Watch::sniff`): TLS goes on to the session
    /// (true), plain HTTP is left to the connection to answer (the stream
    /// passes through from now on: `WouldBlock` here), other bytes are an
    /// error, and an end before them the end (false).
    fn sniff(&mut self) -> io::Result<bool> {
        match self.watch.sniff(&mut self.sock)? {
            Sniffed::Tls(mut first) => {
                self.tls.read_tls(&mut first)?;
                self.take_records()?;
                Ok(true)
            }
            Sniffed::PlainHttp => Err(io::ErrorKind::WouldBlock.into()),
            Sniffed::NotTls => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "the first bytes are not a TLS handshake record",
            )),
            Sniffed::Ended => Ok(false),
        }
    }

    /// Decrypts the records read and sends the handshake's answers now;
    /// true if the peer has closed and no plaintext waits. An error that
    /// fails the handshake counts by its kind, and the alert the session
    /// made for it goes out.
    fn take_records(&mut self) -> io::Result<bool> {
        let handshaking = self.tls.is_handshaking();
        let state = match self.tls.process_new_packets() {
            Ok(state) => state,
            Err(e) => {
                if handshaking {
                    self.watch.fail(kind_of(&e));
                }
                let _ = self.send();
                return Err(io::Error::new(io::ErrorKind::InvalidData, e));
            }
        };
        self.plain = state.plaintext_bytes_to_read();
        // Handshake records go at once. Once plaintext comes (a
        // request), what the session queued with it (the session
        // tickets after the handshake) waits for the write of its
        // answer, or the connection's flush after the read, and
        // shares their `writev`.
        if self.plain == 0 {
            self.send()?;
        }
        Ok(self.plain == 0 && state.peer_has_closed())
    }
}

/// The socket as rustls reads it, noting whether the last read came
/// back short of the room it was given: the socket had no more then (as
/// a short read on a bare socket says), so asking again would only meet
/// `WouldBlock`.
struct Drain<'a> {
    sock: &'a mut Accepted,
    short: bool,
}

impl Read for Drain<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.sock.read(buf)?;
        self.short = n < buf.len();
        Ok(n)
    }
}

impl Read for TlsStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self.watch.stage() {
            Stage::Plain => return self.sock.read(buf),
            Stage::Sniffing if !self.sniff()? => return Ok(0),
            Stage::Sniffing | Stage::Tls => {}
        }
        let mut n = 0;
        let mut drained = false;
        loop {
            if self.plain > 0 {
                let k = self.tls.reader().read(&mut buf[n..])?;
                self.plain = self.plain.saturating_sub(k);
                n += k;
            }
            if n == buf.len() {
                return Ok(n);
            }
            if drained {
                // Every record the socket held is in: what came is all
                // there is until the next readiness.
                if n > 0 {
                    return Ok(n);
                }
                return Err(io::ErrorKind::WouldBlock.into());
            }
            let mut sock = Drain {
                sock: &mut self.sock,
                short: false,
            };
            match self.tls.read_tls(&mut sock) {
                // The peer's FIN, or its close_notify before: the end
                // once what came before it is handed out.
                Ok(0) => {
                    if self.tls.is_handshaking() {
                        self.watch.fail(HandshakeFailure::Closed);
                    }
                    return Ok(n);
                }
                Ok(_) => drained = sock.short,
                Err(e) if n > 0 && e.kind() == io::ErrorKind::WouldBlock => return Ok(n),
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                    ) =>
                {
                    return Err(e)
                }
                Err(e) => return Err(self.broke(e)),
            }
            if self.take_records()? {
                return Ok(n);
            }
        }
    }
}

impl Drop for TlsStream {
    /// A session closed without `shutdown_write` (a connection closed at
    /// once, its answer done) still tells the peer it ended: without
    /// `close_notify` a body that ends at the close could be a cut one.
    fn drop(&mut self) {
        if self.passes_through() {
            return;
        }
        self.tls.send_close_notify();
        let _ = self.send();
    }
}

impl Write for TlsStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_vectored(&[IoSlice::new(buf)])
    }

    /// Encrypts what fits under `SEND_LIMIT` behind what the session
    /// holds already, then sends it all in one go; with no room left,
    /// sends first and tries again. `WouldBlock` only once the socket
    /// would block.
    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        if self.passes_through() {
            return self.sock.write_vectored(bufs);
        }
        let mut n = self.tls.writer().write_vectored(bufs)?;
        if n == 0 && bufs.iter().any(|b| !b.is_empty()) {
            self.send()?;
            n = self.tls.writer().write_vectored(bufs)?;
        }
        self.send()?;
        if n == 0 && bufs.iter().any(|b| !b.is_empty()) {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        Ok(n)
    }

    /// Sends what the socket takes now; the rest waits for it to be
    /// writable (`has_buffered_output`), never an error.
    fn flush(&mut self) -> io::Result<()> {
        self.send()
    }
}

/// A file of tests/fixtures/tls, for the unit tests.
#[cfg(test)]
pub(crate) fn fixture(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/tls")
        .join(name)
}

#[cfg(test)]
mod tests;

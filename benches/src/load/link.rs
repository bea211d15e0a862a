//! What a load connection speaks over: a bare TCP socket (`http://`) or a
//! TLS session over one (`https://`, see `tls.rs`). The worker and its
//! connections are generic over it, so the plain path is compiled on its
//! own, with no TLS branch in it.

use mio::net::TcpStream;
use std::io::{self, Read, Write};
use std::net::SocketAddr;

/// What a TLS handshake settled, as a connection reports it once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Negotiated {
    /// A resumed session (no certificate, no signature) rather than a full handshake.
    pub resumed: bool,
    pub version: Option<rustls::ProtocolVersion>,
    pub suite: Option<rustls::CipherSuite>,
    pub group: Option<rustls::NamedGroup>,
}

impl Negotiated {
    /// `TLSv1_3 TLS13_AES_128_GCM_SHA256 X25519`, as reports print it.
    pub fn describe(&self) -> String {
        fn or_none<T: std::fmt::Debug>(v: Option<T>) -> String {
            v.map_or_else(|| "-".to_string(), |v| format!("{v:?}"))
        }
        format!(
            "{} {} {}",
            or_none(self.version),
            or_none(self.suite),
            or_none(self.group)
        )
    }
}

/// A connection's byte stream: non-blocking reads and writes that end in
/// `WouldBlock`, over a socket registered with the worker's poll.
pub(crate) trait Link: Read + Write + Sized {
    /// What opening one needs, shared by every connection of a run.
    type Opener: Sync;

    /// Starts a non-blocking connect to `addr` (over TLS, a session whose
    /// handshake goes out with the first write).
    fn open(addr: SocketAddr, opener: &Self::Opener) -> io::Result<Self>;

    /// The socket under it: the connect's outcome.
    fn socket(&self) -> &TcpStream;

    /// The socket under it: registration with the poll.
    fn socket_mut(&mut self) -> &mut TcpStream;

    /// What the handshake settled, once it is done, the first time it is
    /// asked (never on a bare socket).
    fn take_handshake(&mut self) -> Option<Negotiated> {
        None
    }
}

impl Link for TcpStream {
    type Opener = ();

    fn open(addr: SocketAddr, _: &()) -> io::Result<Self> {
        TcpStream::connect(addr)
    }

    fn socket(&self) -> &TcpStream {
        self
    }

    fn socket_mut(&mut self) -> &mut TcpStream {
        self
    }
}

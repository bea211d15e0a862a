//! What a loop listens on and what it accepts: a TCP listener (each worker
//! its own, `SO_REUSEPORT`) or a Unix-domain one (one socket, shared by
//! the workers), and the connection streams they give.

use super::ring::Ringed;
use super::tls::TlsStream;
use crate::poller::Link;
use mio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use std::io::{self, IoSlice, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;

/// The peer of every Unix-socket connection, as apps and logs see it (as
/// nginx's `$remote_addr` shows it). Allow-lists treat it as loopback.
pub const UNIX_PEER: &str = "unix:";

pub enum Listener {
    Tcp(TcpListener),
    Unix(UnixListener),
}

/// An accepted client connection: TCP, Unix, or TLS over TCP.
pub enum Accepted {
    Tcp(TcpStream),
    Unix(UnixStream),
    /// A TLS session over a TCP connection (a `tls://` bind), read and
    /// written as a socket or through the ring.
    Tls(Box<TlsStream>),
    /// A TCP or Unix connection a completion backend reads and writes.
    Ring(Box<Ringed>),
}

impl Listener {
    /// Accepts one connection and names its peer.
    pub fn accept(&self) -> io::Result<(Accepted, Arc<str>)> {
        match self {
            Listener::Tcp(l) => {
                let (s, addr) = l.accept()?;
                Ok((Accepted::Tcp(s), addr.to_string().into()))
            }
            Listener::Unix(l) => {
                let (s, _) = l.accept()?;
                Ok((Accepted::Unix(s), UNIX_PEER.into()))
            }
        }
    }
}

impl Listener {
    /// A second handle on the same listening socket (another worker's).
    pub fn try_clone(&self) -> io::Result<Listener> {
        let fd = std::os::fd::AsFd::as_fd(self).try_clone_to_owned()?;
        Ok(match self {
            Listener::Tcp(_) => {
                Listener::Tcp(TcpListener::from_std(std::net::TcpListener::from(fd)))
            }
            Listener::Unix(_) => Listener::Unix(UnixListener::from_std(
                std::os::unix::net::UnixListener::from(fd),
            )),
        })
    }
}

impl std::os::fd::AsFd for Listener {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        match self {
            Listener::Tcp(l) => l.as_fd(),
            Listener::Unix(l) => l.as_fd(),
        }
    }
}

impl AsRawFd for Listener {
    fn as_raw_fd(&self) -> RawFd {
        match self {
            Listener::Tcp(l) => l.as_raw_fd(),
            Listener::Unix(l) => l.as_raw_fd(),
        }
    }
}

impl Accepted {
    /// The same connection under a TLS session (a TCP one; any other is
    /// given back as it is).
    pub fn into_tls(self, config: Arc<rustls::ServerConfig>) -> io::Result<Accepted> {
        match self {
            Accepted::Tcp(_) => Ok(Accepted::Tls(Box::new(TlsStream::new(self, config)?))),
            Accepted::Ring(ref r) if r.is_tcp() => {
                Ok(Accepted::Tls(Box::new(TlsStream::new(self, config)?)))
            }
            other => Ok(other),
        }
    }

    /// The same connection read and written through `link` (a completion
    /// backend's); a TLS one is given back as it is (it is made over the
    /// ringed socket instead: `into_tls` after this).
    pub fn into_ring(self, link: Link) -> Accepted {
        match self {
            Accepted::Tcp(s) => Accepted::Ring(Box::new(Ringed::new(s.into(), link, true))),
            Accepted::Unix(s) => Accepted::Ring(Box::new(Ringed::new(s.into(), link, false))),
            other => other,
        }
    }

    /// True while bytes written wait for the socket: in a TLS session or
    /// in the ring (none on a bare socket).
    pub fn has_buffered_output(&self) -> bool {
        match self {
            Accepted::Tls(s) => s.has_buffered_output(),
            Accepted::Ring(r) => r.has_buffered_output(),
            _ => false,
        }
    }

    /// A pending socket error (a reset), if any.
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        match self {
            Accepted::Tcp(s) => s.take_error(),
            Accepted::Unix(s) => s.take_error(),
            Accepted::Tls(s) => s.socket().take_error(),
            Accepted::Ring(r) => r.take_error(),
        }
    }

    /// Turns Nagle off on TCP (nothing to do on a Unix socket).
    pub fn set_nodelay(&self) -> io::Result<()> {
        match self {
            Accepted::Tcp(s) => s.set_nodelay(true),
            Accepted::Unix(_) => Ok(()),
            Accepted::Tls(s) => s.socket().set_nodelay(),
            Accepted::Ring(r) => r.set_nodelay(),
        }
    }
}

impl Accepted {
    /// Ends the sending half with a FIN; reads go on.
    pub fn shutdown_write(&mut self) -> io::Result<()> {
        match self {
            Accepted::Tcp(s) => s.shutdown(std::net::Shutdown::Write),
            Accepted::Unix(s) => s.shutdown(std::net::Shutdown::Write),
            Accepted::Tls(s) => s.shutdown_write(),
            Accepted::Ring(r) => r.shutdown_write(),
        }
    }
}

impl AsRawFd for Accepted {
    fn as_raw_fd(&self) -> RawFd {
        match self {
            Accepted::Tcp(s) => s.as_raw_fd(),
            Accepted::Unix(s) => s.as_raw_fd(),
            Accepted::Tls(s) => s.socket().as_raw_fd(),
            Accepted::Ring(r) => r.as_raw_fd(),
        }
    }
}

impl Read for Accepted {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Accepted::Tcp(s) => s.read(buf),
            Accepted::Unix(s) => s.read(buf),
            Accepted::Tls(s) => s.read(buf),
            Accepted::Ring(r) => r.read(buf),
        }
    }
}

impl Write for Accepted {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Accepted::Tcp(s) => s.write(buf),
            Accepted::Unix(s) => s.write(buf),
            Accepted::Tls(s) => s.write(buf),
            Accepted::Ring(r) => r.write(buf),
        }
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        match self {
            Accepted::Tcp(s) => s.write_vectored(bufs),
            Accepted::Unix(s) => s.write_vectored(bufs),
            Accepted::Tls(s) => s.write_vectored(bufs),
            Accepted::Ring(r) => r.write_vectored(bufs),
        }
    }

    /// Sends what a TLS session holds for the socket, as far as it takes
    /// it now (nothing to do on a bare socket).
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Accepted::Tls(s) => s.flush(),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_unix_listener_accepts_a_stream_that_reads_and_writes() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("s.sock");
        let listener = Listener::Unix(UnixListener::bind(&path).expect("bind"));
        let mut client = std::os::unix::net::UnixStream::connect(&path).expect("connect");
        client.write_all(b"ping").expect("write");
        let (mut stream, peer) = loop {
            match listener.accept() {
                Ok(accepted) => break accepted,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::yield_now(),
                Err(e) => panic!("accept: {e}"),
            }
        };
        assert_eq!(&*peer, UNIX_PEER);
        stream.set_nodelay().expect("no-op on unix");
        let mut got = [0u8; 4];
        let mut n = 0;
        while n < 4 {
            match stream.read(&mut got[n..]) {
                Ok(k) => n += k,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::yield_now(),
                Err(e) => panic!("read: {e}"),
            }
        }
        assert_eq!(&got, b"ping");
        assert_eq!(
            stream
                .write_vectored(&[IoSlice::new(b"po"), IoSlice::new(b"ng")])
                .ok(),
            Some(4)
        );
    }
}

//! A connection whose I/O a completion backend does (`poller::Link`): it
//! reads what the ring received and writes into what the ring sends. The
//! socket's fd is kept for what only it can answer (its pending error,
//! `TCP_NODELAY`) and handed to the poller at the end, which closes it
//! once nothing in the ring refers to it.

use crate::poller::Link;
use socket2::SockRef;
use std::io::{self, IoSlice, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

pub struct Ringed {
    /// `None` only during drop.
    fd: Option<OwnedFd>,
    link: Link,
    tcp: bool,
}

impl Ringed {
    /// `fd` (a TCP connection if `tcp`) is read and written through `link`
    /// from now on.
    pub fn new(fd: OwnedFd, link: Link, tcp: bool) -> Self {
        Ringed {
            fd: Some(fd),
            link,
            tcp,
        }
    }

    /// True for a TCP connection (a Unix one otherwise).
    pub fn is_tcp(&self) -> bool {
        self.tcp
    }

    fn sock(&self) -> Option<SockRef<'_>> {
        self.fd.as_ref().map(SockRef::from)
    }

    /// Ends the sending half once what was written is out.
    pub fn shutdown_write(&mut self) -> io::Result<()> {
        self.link.shutdown_write()
    }

    /// True while written bytes (or the FIN) wait for the ring.
    pub fn has_buffered_output(&self) -> bool {
        self.link.has_output()
    }

    /// The error the ring met, or the socket's pending one.
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        if let Some(e) = self.link.take_error() {
            return Ok(Some(e));
        }
        match self.sock() {
            Some(s) => s.take_error(),
            None => Ok(None),
        }
    }

    /// Turns Nagle off on TCP.
    pub fn set_nodelay(&self) -> io::Result<()> {
        match self.sock() {
            Some(s) if self.tcp => s.set_tcp_nodelay(true),
            _ => Ok(()),
        }
    }
}

impl AsRawFd for Ringed {
    fn as_raw_fd(&self) -> RawFd {
        self.link.fd()
    }
}

impl Read for Ringed {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.link.read(buf)
    }
}

impl Write for Ringed {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.link.write_vectored(&[IoSlice::new(buf)])
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        self.link.write_vectored(bufs)
    }

    /// The ring sends at the loop's next wait: nothing to do now.
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for Ringed {
    fn drop(&mut self) {
        if let Some(fd) = self.fd.take() {
            self.link.release(fd);
        }
    }
}

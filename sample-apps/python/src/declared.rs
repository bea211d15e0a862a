//! An application's declared `Content-Length`, held to: the bridge sends
//! at most that many body bytes (the rest is dropped, logged, and the
//! connection closed after the declared bytes), and a body that ends short
//! of it closes the connection, so the client sees a short body (as
//! gunicorn does) instead of a complete-looking one.

use stoa_app_api::log;

/// The declared length and the body bytes taken against it so far.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Declared {
    pub length: u64,
    pub sent: u64,
}

impl Declared {
    pub fn new(length: u64) -> Self {
        Declared { length, sent: 0 }
    }

    /// The part of `chunk` that fits in the declared length (counted as
    /// sent), and whether the chunk went past it.
    pub fn take<'a>(&mut self, chunk: &'a [u8]) -> (&'a [u8], bool) {
        let room = self.length - self.sent;
        let fits = usize::try_from(room).map_or(chunk.len(), |room| room.min(chunk.len()));
        self.sent += fits as u64;
        (&chunk[..fits], fits < chunk.len())
    }

    /// True while fewer bytes than declared have been taken.
    pub fn short(&self) -> bool {
        self.sent < self.length
    }

    /// Logs a body past the declared length.
    pub fn log_overrun(&self) {
        log::warn!(
            "the WSGI application sent more than its declared Content-Length ({} bytes): \
             {} bytes sent, the rest dropped, the connection closed",
            self.length,
            self.length
        );
    }

    /// Logs a body that ended short of the declared length.
    pub fn log_short(&self) {
        log::warn!(
            "the WSGI application's body ended after {} of its declared Content-Length \
             ({} bytes): the connection is closed, so the client sees a short body",
            self.sent,
            self.length
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_up_to_the_declared_length() {
        let mut d = Declared::new(5);
        assert_eq!(d.take(b"abc"), (&b"abc"[..], false));
        assert!(d.short());
        assert_eq!(d.take(b"defg"), (&b"de"[..], true));
        assert!(!d.short());
        assert_eq!(d.take(b"h"), (&b""[..], true));
        assert_eq!(d.take(b""), (&b""[..], false));
        assert_eq!(d.sent, 5);
    }
}

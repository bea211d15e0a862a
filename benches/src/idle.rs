//! Idle keep-alive connections held open during a measurement (the case
//! where select and poll pay for every idle descriptor), and the blocking
//! one-request round trip used for them and for readiness checks.

use crate::target::Target;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Sends `request` on `stream` and reads one whole response (Content-Length
/// framed, or to close); returns its status.
pub fn round_trip(stream: &mut TcpStream, request: &[u8]) -> io::Result<u16> {
    stream.write_all(request)?;
    let mut buf = [0u8; 4096];
    let mut filled = 0;
    let (status, head_len, length) = loop {
        let n = stream.read(&mut buf[filled..])?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        filled += n;
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut resp = httparse::Response::new(&mut headers);
        match resp.parse(&buf[..filled]) {
            Ok(httparse::Status::Complete(len)) => {
                let length = resp
                    .headers
                    .iter()
                    .find(|h| h.name.eq_ignore_ascii_case("content-length"))
                    .and_then(|h| {
                        std::str::from_utf8(h.value)
                            .ok()?
                            .trim()
                            .parse::<usize>()
                            .ok()
                    });
                break (resp.code.unwrap_or(0), len, length);
            }
            Ok(httparse::Status::Partial) if filled < buf.len() => {}
            Ok(httparse::Status::Partial) => {
                return Err(io::Error::other("response head too large"))
            }
            Err(e) => return Err(io::Error::other(format!("bad response: {e}"))),
        }
    };
    let mut body = filled - head_len;
    match length {
        Some(length) => {
            while body < length {
                let n = stream.read(&mut buf)?;
                if n == 0 {
                    return Err(io::ErrorKind::UnexpectedEof.into());
                }
                body += n;
            }
        }
        None => while stream.read(&mut buf)? > 0 {},
    }
    Ok(status)
}

/// One request on a fresh connection (HTTP/1.0, closed after).
pub fn fetch(target: &Target, timeout: Duration) -> io::Result<u16> {
    let mut stream = TcpStream::connect_timeout(&target.addr, timeout)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    round_trip(&mut stream, &target.request_bytes(false))
}

/// Polls `target` until it answers 2xx or `within` passes.
pub fn wait_until_answers(target: &Target, within: Duration) -> Result<(), String> {
    let deadline = Instant::now() + within;
    loop {
        let last = match fetch(target, Duration::from_secs(2)) {
            Ok(status) if (200..300).contains(&status) => return Ok(()),
            Ok(status) => format!("status {status}"),
            Err(e) => e.to_string(),
        };
        if Instant::now() >= deadline {
            return Err(format!(
                "{} did not answer 2xx within {within:?}: {last}",
                target.url()
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Keep-alive connections that have each completed one request and now sit
/// idle; closed on drop.
pub struct IdleConns {
    streams: Vec<TcpStream>,
}

impl IdleConns {
    /// Opens `count` connections to `target`, one request each. Fails if any
    /// connection is not served within `timeout` (e.g. past a server's
    /// connection cap).
    pub fn open(target: &Target, count: usize, timeout: Duration) -> Result<IdleConns, String> {
        crate::load::raise_nofile(count as u64 + 64)?;
        let request = target.request_bytes(true);
        let mut streams = Vec::with_capacity(count);
        for i in 0..count {
            let failed = |e: io::Error| format!("idle connection {} of {count}: {e}", i + 1);
            let mut s = TcpStream::connect_timeout(&target.addr, timeout).map_err(failed)?;
            s.set_read_timeout(Some(timeout)).map_err(failed)?;
            s.set_write_timeout(Some(timeout)).map_err(failed)?;
            let status = round_trip(&mut s, &request).map_err(failed)?;
            if !(200..300).contains(&status) {
                return Err(format!("idle connection {}: status {status}", i + 1));
            }
            streams.push(s);
        }
        Ok(IdleConns { streams })
    }

    /// How many connections are held.
    pub fn len(&self) -> usize {
        self.streams.len()
    }

    /// How many are still open on the server's side too: a peek that would
    /// block means open; end of stream (or an unexpected answer, such as a
    /// 408) means the server has given up on it.
    pub fn still_open(&self) -> usize {
        let mut byte = [0u8; 1];
        self.streams
            .iter()
            .filter(|s| {
                if s.set_nonblocking(true).is_err() {
                    return false;
                }
                matches!(s.peek(&mut byte), Err(e) if e.kind() == io::ErrorKind::WouldBlock)
            })
            .count()
    }

    /// True when no connection is held.
    pub fn is_empty(&self) -> bool {
        self.streams.is_empty()
    }
}

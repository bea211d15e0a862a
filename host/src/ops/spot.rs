//! Where a worker's loop is in app code: a seqlock over atomic words in
//! the worker's row (the writer is the loop alone; a reader retries a read
//! that raced a write). It holds the app's counters slot and the request
//! the loop runs: its method, the first [`PATH_BYTES`] of its path, the
//! client's address and the protocol, so the watchdog can name a stuck
//! request and, in process mode, the supervisor the request a dead worker
//! was running (its crash line and its access-log line). A few relaxed
//! stores per request; no lock, no allocation.

use crate::ops::worker_row::{load_bytes, store_bytes, CLIENT_WORDS, PATH_WORDS, SPOT_WORDS};
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{fence, AtomicU64};

/// How much of a path a spot keeps.
pub const PATH_BYTES: usize = PATH_WORDS * 8;
/// How much of a client's address a spot keeps (an IPv6 address and port
/// fit).
const CLIENT_BYTES: usize = CLIENT_WORDS * 8;

/// `slot` when the loop is in host code, and in a timer callback.
pub const IN_HOST: usize = usize::MAX;
pub const IN_TIMER: usize = usize::MAX - 1;

// Its words: [seq, slot, len, method, meta, path..., client...], where
// meta is the client's length and the protocol's minor version plus one
// (0: no request) in the next byte.
const SEQ: usize = 0;
const SLOT: usize = 1;
const LEN: usize = 2;
const METHOD: usize = 3;
const META: usize = 4;
const PATH: usize = 5;
const CLIENT: usize = PATH + PATH_WORDS;
const _: () = assert!(CLIENT + CLIENT_WORDS == SPOT_WORDS);

/// A spot: see the module's doc.
#[derive(Clone, Copy)]
pub struct Spot(&'static [AtomicU64]);

/// The request a spot names.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Spotted {
    pub slot: usize,
    /// Empty for a WebSocket or timer callback.
    pub method: String,
    /// Cut at `PATH_BYTES` (then ending in `...`).
    pub path: String,
    /// `ADDR:PORT`, empty when not a request.
    pub client: String,
    /// `HTTP/1.x`, empty when not a request.
    pub protocol: String,
}

impl Spotted {
    /// "METHOD path", or the path alone when there is no method.
    pub fn place(&self) -> String {
        match self.method.is_empty() {
            true => self.path.clone(),
            false => format!("{} {}", self.method, self.path),
        }
    }
}

/// What the loop runs, as `Spot::enter` takes it.
pub struct Running<'a> {
    pub method: &'a str,
    pub path: &'a str,
    /// The client and the protocol's minor version, for a request.
    pub request: Option<(&'a str, u8)>,
}

impl<'a> Running<'a> {
    /// A callback (a timer's, a WebSocket's): no method, no request.
    pub fn callback(what: &'a str) -> Self {
        Running {
            method: "",
            path: what,
            request: None,
        }
    }
}

impl Spot {
    /// The spot kept in `words` (`SPOT_WORDS` of them), starting in host
    /// code.
    pub fn over(words: &'static [AtomicU64]) -> Self {
        let spot = Spot::over_existing(words);
        spot.0[SLOT].store(IN_HOST as u64, Relaxed);
        spot
    }

    /// The spot another process keeps in `words`, to read.
    pub fn over_existing(words: &'static [AtomicU64]) -> Self {
        Spot(&words[..SPOT_WORDS])
    }

    #[inline]
    pub fn enter(&self, slot: usize, running: &Running<'_>) {
        let w = self.0;
        let seq = w[SEQ].load(Relaxed);
        w[SEQ].store(seq.wrapping_add(1), Relaxed);
        fence(Release);
        let bytes = running.path.as_bytes();
        store_bytes(&w[PATH..CLIENT], &bytes[..bytes.len().min(PATH_BYTES)]);
        let m = running.method.as_bytes();
        let mut word = [0u8; 8];
        let n = m.len().min(8);
        word[..n].copy_from_slice(&m[..n]);
        w[METHOD].store(u64::from_le_bytes(word), Relaxed);
        let meta = match running.request {
            Some((client, minor)) => {
                let c = client.as_bytes();
                let c = &c[..c.len().min(CLIENT_BYTES)];
                store_bytes(&w[CLIENT..], c);
                c.len() as u64 | (u64::from(minor) + 1) << 8
            }
            None => 0,
        };
        w[META].store(meta, Relaxed);
        w[LEN].store(bytes.len() as u64, Relaxed);
        w[SLOT].store(slot as u64, Relaxed);
        w[SEQ].store(seq.wrapping_add(2), Release);
    }

    pub fn leave(&self) {
        self.0[SLOT].store(IN_HOST as u64, Release);
    }

    /// What the spot names, or `None` if a write was under way.
    pub fn read(&self) -> Option<Spotted> {
        let w = self.0;
        let before = w[SEQ].load(Acquire);
        if before & 1 == 1 {
            return None;
        }
        let slot = usize::try_from(w[SLOT].load(Relaxed)).unwrap_or(IN_HOST);
        let len = usize::try_from(w[LEN].load(Relaxed)).unwrap_or(0);
        let method = w[METHOD].load(Relaxed).to_le_bytes();
        let meta = w[META].load(Relaxed);
        let bytes = load_bytes(&w[PATH..CLIENT], len.min(PATH_BYTES));
        let client_len = usize::try_from(meta & 0xff).unwrap_or(0).min(CLIENT_BYTES);
        let client = load_bytes(&w[CLIENT..], client_len);
        fence(Acquire);
        if w[SEQ].load(Relaxed) != before {
            return None;
        }
        let method = String::from_utf8_lossy(&method);
        let mut path = String::from_utf8_lossy(&bytes).into_owned();
        if len > PATH_BYTES {
            path.push_str("...");
        }
        let protocol = match (meta >> 8) & 0xff {
            0 => String::new(),
            v => format!("HTTP/1.{}", v - 1),
        };
        Some(Spotted {
            slot,
            method: method.trim_end_matches('\0').to_string(),
            path,
            client: String::from_utf8_lossy(&client).into_owned(),
            protocol,
        })
    }

    /// The slot of the app whose code the loop runs (a handler or a timer
    /// callback), if any.
    pub fn in_app(&self) -> Option<usize> {
        let slot = usize::try_from(self.0[SLOT].load(Relaxed)).unwrap_or(IN_HOST);
        (slot != IN_HOST && slot != IN_TIMER).then_some(slot)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::worker_row::Row;

    fn spot() -> Spot {
        Spot::over(&Row::private().pulse()[2..])
    }

    fn bare<'a>(method: &'a str, path: &'a str) -> Running<'a> {
        if method.is_empty() {
            return Running::callback(path);
        }
        Running {
            method,
            path,
            request: None,
        }
    }

    #[test]
    fn spot_keeps_the_slot_and_path() {
        let spot = spot();
        let read = |spot: &Spot| spot.read().map(|s| (s.slot, s.place()));
        assert_eq!(read(&spot), Some((IN_HOST, String::new())));
        spot.enter(3, &bare("", "/_stuck/spin"));
        assert_eq!(read(&spot), Some((3, "/_stuck/spin".to_string())));
        spot.enter(4, &bare("GET", "/a"));
        assert_eq!(read(&spot), Some((4, "GET /a".to_string())));
        assert_eq!(spot.in_app(), Some(4));
        spot.enter(5, &bare("PROPFIND", "/8-bytes"));
        assert_eq!(read(&spot), Some((5, "PROPFIND /8-bytes".to_string())));
        spot.leave();
        assert_eq!(spot.read().map(|s| s.slot), Some(IN_HOST));
    }

    #[test]
    fn spot_keeps_a_request_s_client_and_protocol() {
        let spot = spot();
        let request = Running {
            method: "POST",
            path: "/crashy/segv",
            request: Some(("[2001:db8::1]:65535", 1)),
        };
        spot.enter(2, &request);
        let seen = spot.read().expect("settled");
        assert_eq!(seen.client, "[2001:db8::1]:65535");
        assert_eq!(seen.protocol, "HTTP/1.1");
        assert_eq!(seen.place(), "POST /crashy/segv");
        // A callback after it names no client.
        spot.enter(2, &Running::callback("(a WebSocket callback)"));
        let seen = spot.read().expect("settled");
        assert_eq!((seen.client.as_str(), seen.protocol.as_str()), ("", ""));
    }

    #[test]
    fn spot_truncates_a_long_path_and_client() {
        let spot = spot();
        let long = "x".repeat(PATH_BYTES + 10);
        let client = "c".repeat(CLIENT_BYTES + 3);
        spot.enter(
            1,
            &Running {
                method: "",
                path: &long,
                request: Some((&client, 0)),
            },
        );
        let seen = spot.read().expect("settled");
        assert_eq!(seen.path, format!("{}...", &long[..PATH_BYTES]));
        assert_eq!(seen.client, client[..CLIENT_BYTES]);
        assert_eq!(seen.protocol, "HTTP/1.0");
    }
}

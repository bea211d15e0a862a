//! The requests in flight in a worker process beyond the loop's own call
//! (on the blocking pool, or waiting for an answer the app gives later),
//! on a board in the worker's row of the shared area (`worker_row`), so
//! that the supervisor can name them, and write their access-log lines,
//! when the worker dies with them (the request the loop itself runs is in
//! its `Spot`).
//!
//! The loop puts a request on the board when its handler returns without
//! an answer (or before a pool thread may run it); the entry goes when the
//! answer is queued or the connection closes. The entries are taken from
//! a bitmask word with a compare-and-swap; each entry is a `TextCell` with
//! its own sequence word, so the supervisor reads a settled text or none.
//! Past the last entry a request is counted only (`unlisted`). A request
//! answered in its handler's call (the common case) never touches it.

use crate::ops::access_log::AccessInfo;
use crate::ops::spot::Spotted;
use crate::ops::worker_row::{Row, TextCell, FLIGHT_ENTRIES, FLIGHT_ENTRY_WORDS, FLIGHT_WORDS};
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed};
use std::sync::Arc;

/// Where a request on the board waits for its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Waits {
    /// Queued for, or running on, the blocking pool.
    OnPool,
    /// The app answers later (a timer, a thread of its own, an event loop).
    #[default]
    Later,
}

impl Waits {
    fn word(self) -> &'static str {
        match self {
            Waits::OnPool => "pool",
            Waits::Later => "later",
        }
    }

    /// How a crash line says it.
    pub fn said(self) -> &'static str {
        match self {
            Waits::OnPool => "blocking pool",
            Waits::Later => "waiting for its answer",
        }
    }
}

/// The bitmask of entries taken.
const TAKEN: usize = 0;
/// Requests running without an entry.
const UNLISTED: usize = 1;

/// A request as the board keeps it: enough for a crash line and an
/// access-log line.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Flight {
    pub app: String,
    /// `ADDR:PORT`.
    pub client: String,
    pub method: String,
    /// The request target (path and query); cut when the entry is full.
    pub target: String,
    /// `HTTP/1.x`.
    pub protocol: String,
    pub waits: Waits,
}

impl Flight {
    /// Its entry's text: the fields separated by tabs (a tab inside one,
    /// which a request line cannot hold, becomes a space). The target comes
    /// last, so a cut shortens it only.
    fn text(&self) -> String {
        let clean = |s: &str| s.replace('\t', " ");
        [
            clean(&self.app),
            clean(&self.client),
            clean(&self.method),
            clean(&self.protocol),
            self.waits.word().to_string(),
            clean(&self.target),
        ]
        .join("\t")
    }

    fn parse(text: &str) -> Option<Flight> {
        let mut fields = text.splitn(6, '\t');
        let mut next = || fields.next().map(str::to_string);
        Some(Flight {
            app: next()?,
            client: next()?,
            method: next()?,
            protocol: next()?,
            waits: match next()?.as_str() {
                "pool" => Waits::OnPool,
                _ => Waits::Later,
            },
            target: next()?,
        })
    }

    /// The request a worker's loop was running (`Spot`), of app `app`.
    pub fn on_loop(app: &str, spotted: &Spotted) -> Flight {
        Flight {
            app: app.to_string(),
            client: spotted.client.clone(),
            method: spotted.method.clone(),
            target: spotted.path.clone(),
            protocol: spotted.protocol.clone(),
            waits: Waits::Later,
        }
    }

    /// What the access log needs of it: its app (the generation is not
    /// known), and no referer or user agent (neither is kept).
    pub fn access_info(&self) -> AccessInfo {
        AccessInfo {
            client: Arc::from(self.client.as_str()),
            method: self.method.clone(),
            target: self.target.clone(),
            protocol: self.protocol.clone(),
            referer: None,
            user_agent: None,
            app: Some((self.app.clone(), None)),
        }
    }
}

/// One worker's board: see the module's doc.
#[derive(Clone, Copy)]
pub struct Flights(&'static [AtomicU64]);

impl Row {
    /// The requests the worker's blocking pool runs: the board in its row
    /// (here, with the board, so the row's layout need not name it).
    pub fn flights(&self) -> Flights {
        Flights::over(self.flight_words())
    }
}

impl Flights {
    /// The board kept in `words` (`FLIGHT_WORDS` of them).
    pub fn over(words: &'static [AtomicU64]) -> Self {
        Flights(&words[..FLIGHT_WORDS])
    }

    fn cell(&self, i: usize) -> TextCell {
        let start = 2 + i * FLIGHT_ENTRY_WORDS;
        TextCell::over(&self.0[start..start + FLIGHT_ENTRY_WORDS])
    }

    /// Puts `flight` on the board until the returned guard drops.
    pub fn enter(self, flight: &Flight) -> OnBoard {
        let taken = &self.0[TAKEN];
        let mut mask = taken.load(Relaxed);
        loop {
            let free = (!mask).trailing_zeros() as usize;
            if free >= FLIGHT_ENTRIES {
                self.0[UNLISTED].fetch_add(1, Relaxed);
                return OnBoard {
                    board: self,
                    entry: None,
                };
            }
            match taken.compare_exchange_weak(mask, mask | 1 << free, Acquire, Relaxed) {
                Ok(_) => {
                    self.cell(free).write(&flight.text());
                    return OnBoard {
                        board: self,
                        entry: Some(free),
                    };
                }
                Err(now) => mask = now,
            }
        }
    }

    /// The requests on the board, and how many more ran unlisted.
    pub fn running(&self) -> (Vec<Flight>, u64) {
        let listed = (0..FLIGHT_ENTRIES)
            .map(|i| self.cell(i).read_settled())
            .filter(|text| !text.is_empty())
            .filter_map(|text| Flight::parse(&text))
            .collect();
        (listed, self.0[UNLISTED].load(Relaxed))
    }
}

/// A request on the board; dropping it takes it off.
pub struct OnBoard {
    board: Flights,
    entry: Option<usize>,
}

impl Drop for OnBoard {
    fn drop(&mut self) {
        match self.entry {
            Some(i) => {
                self.board.cell(i).write("");
                self.board.0[TAKEN].fetch_and(!(1 << i), AcqRel);
            }
            None => {
                self.board.0[UNLISTED].fetch_sub(1, Relaxed);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flight(n: usize) -> Flight {
        Flight {
            app: "python".into(),
            client: "127.0.0.1:5000".into(),
            method: "GET".into(),
            target: format!("/abort?n={n}"),
            protocol: "HTTP/1.1".into(),
            waits: if n.is_multiple_of(2) {
                Waits::OnPool
            } else {
                Waits::Later
            },
        }
    }

    #[test]
    fn a_request_is_on_the_board_while_its_guard_lives() {
        let board = Row::private().flights();
        let a = board.enter(&flight(1));
        let b = board.enter(&flight(2));
        let (running, unlisted) = board.running();
        assert_eq!(running, vec![flight(1), flight(2)]);
        assert_eq!(unlisted, 0);
        drop(a);
        assert_eq!(board.running().0, vec![flight(2)]);
        // The freed entry is taken again.
        let _c = board.enter(&flight(3));
        assert_eq!(board.running().0, vec![flight(3), flight(2)]);
        drop(b);
    }

    #[test]
    fn past_the_last_entry_requests_are_counted() {
        let board = Row::private().flights();
        let held: Vec<OnBoard> = (0..FLIGHT_ENTRIES + 2)
            .map(|n| board.enter(&flight(n)))
            .collect();
        let (running, unlisted) = board.running();
        assert_eq!((running.len(), unlisted), (FLIGHT_ENTRIES, 2));
        drop(held);
        assert_eq!(board.running(), (vec![], 0));
    }

    #[test]
    fn a_long_target_is_cut_and_a_tab_cannot_shift_the_fields() {
        let board = Row::private().flights();
        let mut long = flight(0);
        long.target = format!("/{}", "x".repeat(400));
        long.client = "a\tb".into();
        let _on = board.enter(&long);
        let seen = &board.running().0[0];
        assert_eq!(seen.client, "a b");
        assert_eq!(
            (seen.app.as_str(), seen.protocol.as_str()),
            ("python", "HTTP/1.1")
        );
        assert!(seen.target.starts_with("/xxx") && seen.target.len() < 200);
    }
}

//! The layout of process mode's shared area (`shm`): a header of host-wide
//! words, one row per worker process the supervisor can have at once, the
//! supervisor's cell (crashes, for status and metrics) and the retired
//! cell (the counters of workers that have ended), then one counters
//! snapshot per row (`stats::Counts` as JSON, for the others to add up).
//! A worker writes its own row (its pid, its phase, its loop's pulse, the
//! names of its apps, where it is stuck); the supervisor reads every row,
//! above all the row of a worker that has just died, to say what it was
//! serving. Every word is an atomic; text goes through [`TextCell`], a
//! sequence-numbered cell with one writer.

use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{fence, AtomicU64};

/// Words before the first row.
pub const HEADER_WORDS: usize = 16;
/// Words of one row.
pub const ROW_WORDS: usize = 256;
/// Words of the supervisor's and the retired cell, and of a snapshot.
const CELL_WORDS: usize = 8192;

/// The words of a loop's pulse (`watchdog::Beat`): the turn state, when
/// it was found stuck, and its spot (`spot::Spot`: sequence, slot, length,
/// method, meta, path, client).
pub const PULSE_WORDS: usize = 2 + SPOT_WORDS;
pub const SPOT_WORDS: usize = 5 + PATH_WORDS + CLIENT_WORDS;
/// Words of a spot's path: its first 96 bytes.
pub const PATH_WORDS: usize = 12;
/// Words of a spot's client address: 48 bytes.
pub const CLIENT_WORDS: usize = 6;

const PID: usize = 0;
const PHASE: usize = 1;
const RECYCLE: usize = 2;
const REQUESTS: usize = 3;
const OPEN: usize = 4;
const PLACE: usize = 5;
/// Its slots in the host-wide open-connection count.
const HELD: usize = 6;
/// Its bytes in the host-wide `--max-buffered` budget.
const BUFFERED: usize = 7;
const PULSE: usize = 8;
const NAMES: usize = PULSE + PULSE_WORDS;
const NAMES_WORDS: usize = 160;
const NOTE: usize = NAMES + NAMES_WORDS;
const NOTE_WORDS: usize = 18;
const HAZARD: usize = NOTE + NOTE_WORDS;
const HAZARD_WORDS: usize = 40;
const _: () = assert!(HAZARD + HAZARD_WORDS <= ROW_WORDS);

/// Words of a row's board of requests on the blocking pool
/// (`in_flight::Flights`): the bitmask of entries taken and the count of
/// requests running without one, then the entries.
pub const FLIGHT_WORDS: usize = 2 + FLIGHT_ENTRIES * FLIGHT_ENTRY_WORDS;
/// Entries of a board: requests it names at once (one bit each of its
/// first word).
pub const FLIGHT_ENTRIES: usize = 32;
/// Words of one entry (a sequence and a length word, then 176 bytes).
pub const FLIGHT_ENTRY_WORDS: usize = 24;

/// The words an area of `rows` rows needs: the header, the rows, the
/// supervisor's and the retired cell, a snapshot per row, then a board of
/// pool requests per row.
pub fn area_words(rows: usize) -> usize {
    flights_start(rows) + rows * FLIGHT_WORDS
}

fn flights_start(rows: usize) -> usize {
    cells_start(rows) + (2 + rows) * CELL_WORDS
}

fn cells_start(rows: usize) -> usize {
    HEADER_WORDS + rows * ROW_WORDS
}

/// The host-wide open-connection count and its waiting loops (header
/// words 0 and 1), for `OpenCount::shared`.
pub fn open_words(area: &'static [AtomicU64]) -> (&'static AtomicU64, &'static AtomicU64) {
    (&area[0], &area[1])
}

/// The host-wide count of buffered bytes (`--max-buffered`, header word 2).
pub fn buffered_word(area: &'static [AtomicU64]) -> &'static AtomicU64 {
    &area[2]
}

/// The session-ticket keys every worker shares (header words 4 to 12),
/// which the supervisor rotates (`listen::tls::tickets`).
pub fn ticket_words(area: &'static [AtomicU64]) -> &'static [AtomicU64] {
    &area[TICKET_KEYS..TICKET_KEYS + crate::listen::tls::tickets::WORDS]
}

const TICKET_KEYS: usize = 4;
const _: () = assert!(TICKET_KEYS + crate::listen::tls::tickets::WORDS <= HEADER_WORDS);

/// The area's rows (from its size).
fn rows_of(area: &'static [AtomicU64]) -> usize {
    area.len().saturating_sub(HEADER_WORDS + 2 * CELL_WORDS)
        / (ROW_WORDS + CELL_WORDS + FLIGHT_WORDS)
}

fn cell(area: &'static [AtomicU64], i: usize) -> Option<TextCell> {
    let start = cells_start(rows_of(area)) + i * CELL_WORDS;
    area.get(start..start + CELL_WORDS).map(TextCell)
}

/// What the supervisor writes for the workers to show: crashes by app
/// and by place.
pub fn supervisor_cell(area: &'static [AtomicU64]) -> Option<TextCell> {
    cell(area, 0)
}

/// The counters of every worker that has ended, added up (the supervisor
/// writes it; status and metrics add it to the live workers').
pub fn retired_cell(area: &'static [AtomicU64]) -> Option<TextCell> {
    cell(area, 1)
}

/// Where a worker process is in its life, as its row says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Started, loading its apps.
    Starting = 1,
    /// Serving: every app is mounted and its loop accepts.
    Ready = 2,
    /// Draining (told to stop, or at a limit of its own).
    Draining = 3,
}

/// Why a worker asks to be replaced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recycle {
    /// A replace reached `--max-generations`: a fresh worker frees the
    /// old generations.
    GenerationCap = 1,
    /// It served `--worker-max-requests`.
    MaxRequests = 2,
    /// SIGUSR2: a worker of the binary now at the path takes its place.
    Upgrade = 3,
    /// Every blocking-pool thread has run a job past its deadline for
    /// `--worker-timeout`.
    PoolHung = 4,
    /// An upgrade was abandoned: a worker of the new binary gives its
    /// place back to one of the running binary.
    Abandoned = 5,
}

impl Recycle {
    pub fn reason(self) -> &'static str {
        match self {
            Recycle::GenerationCap => "its apps reached --max-generations",
            Recycle::MaxRequests => "it served --worker-max-requests",
            Recycle::Upgrade => "SIGUSR2 upgrades the binary",
            Recycle::PoolHung => {
                "every thread of its blocking pool has run a job past its deadline for \
                 --worker-timeout"
            }
            Recycle::Abandoned => "the upgrade it came from was abandoned",
        }
    }
}

/// One worker's row.
#[derive(Clone, Copy)]
pub struct Row {
    words: &'static [AtomicU64],
    snapshot: &'static [AtomicU64],
    flights: &'static [AtomicU64],
}

impl Row {
    /// Row `i` of an area (`None` past its end).
    pub fn of(area: &'static [AtomicU64], i: usize) -> Option<Row> {
        let rows = rows_of(area);
        if i >= rows {
            return None;
        }
        let start = HEADER_WORDS + i * ROW_WORDS;
        let snap = cells_start(rows) + (2 + i) * CELL_WORDS;
        let flights = flights_start(rows) + i * FLIGHT_WORDS;
        Some(Row {
            words: area.get(start..start + ROW_WORDS)?,
            snapshot: area.get(snap..snap + CELL_WORDS)?,
            flights: area.get(flights..flights + FLIGHT_WORDS)?,
        })
    }

    /// A row of its own, for a process without a shared area (thread
    /// mode, tests): leaked, as the shared one is never unmapped.
    pub fn private() -> Row {
        let len = ROW_WORDS + 2 + FLIGHT_WORDS;
        let words: Vec<AtomicU64> = (0..len).map(|_| AtomicU64::new(0)).collect();
        let words: &'static [AtomicU64] = Box::leak(words.into_boxed_slice());
        Row {
            words: &words[..ROW_WORDS],
            snapshot: &words[ROW_WORDS..ROW_WORDS + 2],
            flights: &words[ROW_WORDS + 2..],
        }
    }

    /// The worker's counters, as it last published them.
    pub fn snapshot(&self) -> TextCell {
        TextCell(self.snapshot)
    }

    /// The `--workers` place this row's worker serves (the supervisor's
    /// index, stable across replacements).
    pub fn place(&self) -> usize {
        usize::try_from(self.words[PLACE].load(Relaxed)).unwrap_or(0)
    }

    pub fn set_place(&self, place: usize) {
        self.words[PLACE].store(place as u64, Relaxed);
    }

    /// Clears the row for a new worker (the supervisor, before it starts
    /// one on it).
    pub fn reset(&self) {
        let flights = self.flights.iter();
        for w in self
            .words
            .iter()
            .chain(self.snapshot.iter().take(2))
            .chain(flights)
        {
            w.store(0, Relaxed);
        }
    }

    pub fn pid(&self) -> u32 {
        u32::try_from(self.words[PID].load(Relaxed)).unwrap_or(0)
    }

    pub fn set_pid(&self, pid: u32) {
        self.words[PID].store(u64::from(pid), Relaxed);
    }

    pub fn phase(&self) -> Option<Phase> {
        match self.words[PHASE].load(Acquire) {
            1 => Some(Phase::Starting),
            2 => Some(Phase::Ready),
            3 => Some(Phase::Draining),
            _ => None,
        }
    }

    pub fn set_phase(&self, phase: Phase) {
        self.words[PHASE].store(phase as u64, Release);
    }

    /// Asks the supervisor for a replacement (the first reason stays).
    pub fn ask_recycle(&self, why: Recycle) {
        let _ = self.words[RECYCLE].compare_exchange(0, why as u64, Relaxed, Relaxed);
    }

    /// Takes a request for a replacement back (an upgrade was abandoned).
    pub fn clear_recycle(&self) {
        self.words[RECYCLE].store(0, Relaxed);
    }

    pub fn recycle(&self) -> Option<Recycle> {
        match self.words[RECYCLE].load(Relaxed) {
            1 => Some(Recycle::GenerationCap),
            2 => Some(Recycle::MaxRequests),
            3 => Some(Recycle::Upgrade),
            4 => Some(Recycle::PoolHung),
            5 => Some(Recycle::Abandoned),
            _ => None,
        }
    }

    pub fn requests(&self) -> u64 {
        self.words[REQUESTS].load(Relaxed)
    }

    pub fn set_requests(&self, n: u64) {
        self.words[REQUESTS].store(n, Relaxed);
    }

    /// Connections open at the worker's last report.
    pub fn open(&self) -> u64 {
        self.words[OPEN].load(Relaxed)
    }

    pub fn set_open(&self, n: u64) {
        self.words[OPEN].store(n, Relaxed);
    }

    /// Its slots in the host-wide open-connection count.
    pub fn held(&self) -> &'static AtomicU64 {
        &self.words[HELD]
    }

    /// Its bytes in the host-wide `--max-buffered` budget.
    pub fn buffered(&self) -> &'static AtomicU64 {
        &self.words[BUFFERED]
    }

    /// The words of the worker loop's pulse.
    pub fn pulse(&self) -> &'static [AtomicU64] {
        &self.words[PULSE..PULSE + PULSE_WORDS]
    }

    /// The worker's app names, by counters slot, one per line.
    pub fn names(&self) -> TextCell {
        TextCell(&self.words[NAMES..NAMES + NAMES_WORDS])
    }

    /// The plugin code the apps thread runs now ("what\tdigest"), empty
    /// when none: a worker that dies meanwhile died of that plugin.
    pub fn hazard(&self) -> TextCell {
        TextCell(&self.words[HAZARD..HAZARD + HAZARD_WORDS])
    }

    /// The words of the board of requests the worker's blocking pool runs
    /// (`FLIGHT_WORDS`; read as `in_flight::Flights` by `Row::flights`).
    pub fn flight_words(&self) -> &'static [AtomicU64] {
        self.flights
    }

    /// Where the worker's loop is stuck, as its watchdog said.
    pub fn note(&self) -> TextCell {
        TextCell(&self.words[NOTE..NOTE + NOTE_WORDS])
    }
}

/// A text of one writer and any readers over atomic words: a sequence
/// word (odd while a write is under way), a length word, then the bytes.
#[derive(Clone, Copy)]
pub struct TextCell(&'static [AtomicU64]);

impl TextCell {
    /// A cell over `words` (a sequence word, a length word, the bytes).
    pub fn over(words: &'static [AtomicU64]) -> Self {
        TextCell(words)
    }

    /// The most bytes it keeps.
    pub fn capacity(&self) -> usize {
        self.0.len().saturating_sub(2) * 8
    }

    /// Replaces the text (cut at the capacity).
    pub fn write(&self, text: &str) {
        let seq = self.0[0].load(Relaxed);
        self.0[0].store(seq.wrapping_add(1), Relaxed);
        fence(Release);
        let bytes = &text.as_bytes()[..text.len().min(self.capacity())];
        store_bytes(&self.0[2..], bytes);
        self.0[1].store(bytes.len() as u64, Relaxed);
        self.0[0].store(seq.wrapping_add(2), Release);
    }

    /// The text, or `None` if a write was under way.
    pub fn read(&self) -> Option<String> {
        let before = self.0[0].load(Acquire);
        if before & 1 == 1 {
            return None;
        }
        let len = usize::try_from(self.0[1].load(Relaxed)).unwrap_or(0);
        let bytes = load_bytes(&self.0[2..], len.min(self.capacity()));
        fence(Acquire);
        (self.0[0].load(Relaxed) == before).then(|| String::from_utf8_lossy(&bytes).into_owned())
    }

    /// The text, retrying reads that raced a write: a writer descheduled
    /// partway holds its cell odd for a while, so the retries yield, then
    /// sleep (at most about 20 ms in all) before giving up.
    pub fn read_settled(&self) -> String {
        for attempt in 0..48u32 {
            if let Some(text) = self.read() {
                return text;
            }
            if attempt < 8 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(std::time::Duration::from_micros(500));
            }
        }
        String::new()
    }
}

/// Packs `bytes` into `words`, little-endian, eight to a word.
#[inline]
pub fn store_bytes(words: &[AtomicU64], bytes: &[u8]) {
    let mut chunks = bytes.chunks_exact(8);
    let mut words = words.iter();
    // Chunks first: zip stops on them without taking another word.
    for (chunk, word) in (&mut chunks).zip(words.by_ref()) {
        let mut b = [0u8; 8];
        b.copy_from_slice(chunk);
        word.store(u64::from_le_bytes(b), Relaxed);
    }
    let rest = chunks.remainder();
    if let (Some(word), false) = (words.next(), rest.is_empty()) {
        let w = rest.iter().rev().fold(0, |w, &b| w << 8 | u64::from(b));
        word.store(w, Relaxed);
    }
}

/// The first `len` bytes packed in `words`.
pub fn load_bytes(words: &[AtomicU64], len: usize) -> Vec<u8> {
    let words = &words[..len.div_ceil(8).min(words.len())];
    let mut bytes = Vec::with_capacity(words.len() * 8);
    for word in words {
        bytes.extend_from_slice(&word.load(Relaxed).to_le_bytes());
    }
    bytes.truncate(len);
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_cell_keeps_what_was_written_and_cuts_at_its_capacity() {
        let row = Row::private();
        let names = row.names();
        assert_eq!(names.read().as_deref(), Some(""));
        names.write("article\nhello\n");
        assert_eq!(names.read_settled(), "article\nhello\n");
        let long = "x".repeat(names.capacity() + 100);
        names.write(&long);
        assert_eq!(names.read_settled().len(), names.capacity());
    }

    #[test]
    fn rows_of_an_area_do_not_overlap() {
        let words: Vec<AtomicU64> = (0..area_words(2)).map(|_| AtomicU64::new(0)).collect();
        let area: &'static [AtomicU64] = Box::leak(words.into_boxed_slice());
        let (a, b) = (Row::of(area, 0).unwrap(), Row::of(area, 1).unwrap());
        a.set_pid(11);
        b.set_pid(22);
        a.set_phase(Phase::Ready);
        b.ask_recycle(Recycle::MaxRequests);
        b.ask_recycle(Recycle::GenerationCap);
        assert_eq!((a.pid(), b.pid()), (11, 22));
        assert_eq!((a.phase(), b.phase()), (Some(Phase::Ready), None));
        assert_eq!(b.recycle(), Some(Recycle::MaxRequests));
        assert!(Row::of(area, 2).is_none());
        b.snapshot().write("{}");
        assert_eq!(a.snapshot().read_settled(), "");
        assert_eq!(b.snapshot().read_settled(), "{}");
        supervisor_cell(area).unwrap().write("s");
        retired_cell(area).unwrap().write("r");
        assert_eq!(b.snapshot().read_settled(), "{}");
        assert_eq!(supervisor_cell(area).unwrap().read_settled(), "s");
        b.reset();
        assert_eq!((b.pid(), b.recycle()), (0, None));
    }
}

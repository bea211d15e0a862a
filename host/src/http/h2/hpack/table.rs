//! The two tables of RFC 7541 §2.3: the static table (Appendix A) and a
//! dynamic table with the size accounting and evictions of §4.

use std::collections::VecDeque;

/// The static table (RFC 7541 Appendix A); index `i` is `STATIC[i - 1]`.
pub(super) const STATIC: [(&[u8], &[u8]); 61] = [
    (b":authority", b""),
    (b":method", b"GET"),
    (b":method", b"POST"),
    (b":path", b"/"),
    (b":path", b"/index.html"),
    (b":scheme", b"http"),
    (b":scheme", b"https"),
    (b":status", b"200"),
    (b":status", b"204"),
    (b":status", b"206"),
    (b":status", b"304"),
    (b":status", b"400"),
    (b":status", b"404"),
    (b":status", b"500"),
    (b"accept-charset", b""),
    (b"accept-encoding", b"gzip, deflate"),
    (b"accept-language", b""),
    (b"accept-ranges", b""),
    (b"accept", b""),
    (b"access-control-allow-origin", b""),
    (b"age", b""),
    (b"allow", b""),
    (b"authorization", b""),
    (b"cache-control", b""),
    (b"content-disposition", b""),
    (b"content-encoding", b""),
    (b"content-language", b""),
    (b"content-length", b""),
    (b"content-location", b""),
    (b"content-range", b""),
    (b"content-type", b""),
    (b"cookie", b""),
    (b"date", b""),
    (b"etag", b""),
    (b"expect", b""),
    (b"expires", b""),
    (b"from", b""),
    (b"host", b""),
    (b"if-match", b""),
    (b"if-modified-since", b""),
    (b"if-none-match", b""),
    (b"if-range", b""),
    (b"if-unmodified-since", b""),
    (b"last-modified", b""),
    (b"link", b""),
    (b"location", b""),
    (b"max-forwards", b""),
    (b"proxy-authenticate", b""),
    (b"proxy-authorization", b""),
    (b"range", b""),
    (b"referer", b""),
    (b"refresh", b""),
    (b"retry-after", b""),
    (b"server", b""),
    (b"set-cookie", b""),
    (b"strict-transport-security", b""),
    (b"transfer-encoding", b""),
    (b"user-agent", b""),
    (b"vary", b""),
    (b"via", b""),
    (b"www-authenticate", b""),
];

/// What a field has in common with a table's entries, by HPACK index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Match {
    /// No entry has the name.
    None,
    /// An entry has the name (another value).
    Name(usize),
    /// An entry has both name and value.
    Field(usize),
}

/// Looks `name` and `value` up in the static table (the first of each kind).
pub(super) fn find_static(name: &[u8], value: &[u8]) -> Match {
    let mut found = Match::None;
    for (i, &(n, v)) in STATIC.iter().enumerate() {
        if n == name {
            if v == value {
                return Match::Field(i + 1);
            }
            if found == Match::None {
                found = Match::Name(i + 1);
            }
        }
    }
    found
}

/// The size RFC 7541 §4.1 counts for an entry: name, value and 32.
pub(super) fn entry_size(name: &[u8], value: &[u8]) -> usize {
    name.len() + value.len() + 32
}

/// One dynamic table entry: name and value in one allocation.
#[derive(Debug)]
pub(super) struct Entry {
    bytes: Box<[u8]>,
    name_len: usize,
}

impl Entry {
    /// Copies a field into a new entry (one allocation).
    pub(super) fn new(name: &[u8], value: &[u8]) -> Self {
        let mut bytes = Vec::with_capacity(name.len() + value.len());
        bytes.extend_from_slice(name);
        bytes.extend_from_slice(value);
        Entry {
            bytes: bytes.into_boxed_slice(),
            name_len: name.len(),
        }
    }

    /// The entry's name.
    pub(super) fn name(&self) -> &[u8] {
        self.bytes.get(..self.name_len).unwrap_or_default()
    }

    /// The entry's value.
    pub(super) fn value(&self) -> &[u8] {
        self.bytes.get(self.name_len..).unwrap_or_default()
    }

    /// Its RFC 7541 §4.1 size.
    fn size(&self) -> usize {
        self.bytes.len() + 32
    }
}

/// A dynamic table (RFC 7541 §2.3.2): newest entry first, its size kept
/// within `max` by evicting the oldest entries (§4.4).
#[derive(Debug)]
pub(super) struct DynTable {
    entries: VecDeque<Entry>,
    size: usize,
    max: usize,
}

impl DynTable {
    /// An empty table that may hold `max` bytes (RFC sizes).
    pub(super) fn new(max: usize) -> Self {
        DynTable {
            entries: VecDeque::new(),
            size: 0,
            max,
        }
    }

    /// The entries' total RFC 7541 §4.1 size.
    pub(super) fn size(&self) -> usize {
        self.size
    }

    /// The table's current maximum size.
    pub(super) fn max(&self) -> usize {
        self.max
    }

    /// The entry at 0-based position `i`, 0 being the newest (HPACK index
    /// 62 in the joint address space).
    pub(super) fn get(&self, i: usize) -> Option<&Entry> {
        self.entries.get(i)
    }

    /// A new maximum size (a size update): evicts down to it (§4.3).
    pub(super) fn set_max(&mut self, max: usize) {
        self.max = max;
        self.evict_to(max);
        if self.entries.is_empty() {
            // An emptied table gives its slots back: a small setting keeps
            // little memory.
            self.entries.shrink_to_fit();
        }
    }

    /// Adds an entry as the newest, evicting the oldest to make room; an
    /// entry larger than the table empties it and is not added (§4.4).
    pub(super) fn push(&mut self, entry: Entry) {
        let size = entry.size();
        if size > self.max {
            self.entries.clear();
            self.size = 0;
            return;
        }
        self.evict_to(self.max - size);
        self.size += size;
        self.entries.push_front(entry);
    }

    /// Empties the table (an entry larger than the table was added).
    pub(super) fn clear(&mut self) {
        self.entries.clear();
        self.size = 0;
    }

    /// Evicts the oldest entries until the size is at most `limit`.
    fn evict_to(&mut self, limit: usize) {
        while self.size > limit {
            match self.entries.pop_back() {
                Some(old) => self.size -= old.size(),
                None => {
                    self.size = 0;
                    break;
                }
            }
        }
    }

    /// The entries, newest first, as owned pairs (for tests).
    #[cfg(test)]
    pub(super) fn entries(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        self.entries
            .iter()
            .map(|e| (e.name().to_vec(), e.value().to_vec()))
            .collect()
    }

    /// Looks a field up (newest entry first), with its HPACK index.
    pub(super) fn find(&self, name: &[u8], value: &[u8]) -> Match {
        let mut found = Match::None;
        for (i, e) in self.entries.iter().enumerate() {
            if e.name() == name {
                if e.value() == value {
                    return Match::Field(STATIC.len() + 1 + i);
                }
                if found == Match::None {
                    found = Match::Name(STATIC.len() + 1 + i);
                }
            }
        }
        found
    }
}

/// SETTINGS_HEADER_TABLE_SIZE's initial value (RFC 9113 §6.5.2): the
/// dynamic table's size limit until a SETTINGS frame says otherwise.
pub const DEFAULT_TABLE_SIZE: usize = 4096;

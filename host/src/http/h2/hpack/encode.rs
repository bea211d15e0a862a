//! Encoding our header blocks (RFC 7541 §6): the static table for names
//! and common fields, a dynamic table for small values that repeat across
//! responses, never-indexed literals for secrets (§7.1.3), and Huffman
//! coding where it is shorter.

use super::huffman;
use super::table::{entry_size, find_static, DynTable, Entry, Match, DEFAULT_TABLE_SIZE};

/// Values longer than this are not worth a dynamic table entry.
const MAX_INDEXED_VALUE: usize = 64;

/// Fields whose values are secrets: never indexed, here or by proxies.
const SENSITIVE: [&[u8]; 4] = [
    b"authorization",
    b"cookie",
    b"proxy-authorization",
    b"set-cookie",
];

/// Fields whose values change from one response to the next: indexing
/// them would only churn the table.
const VOLATILE: [&[u8]; 5] = [
    b"age",
    b"content-length",
    b"content-range",
    b"etag",
    b"last-modified",
];

/// A connection's header block encoder, with its dynamic table (the one
/// the peer's decoder mirrors).
#[derive(Debug)]
pub struct Encoder {
    table: DynTable,
    /// Size changes not yet signalled: the smallest since the last block,
    /// and the last (RFC 7541 §4.2).
    pending: Option<(usize, usize)>,
}

impl Default for Encoder {
    fn default() -> Self {
        Self::new()
    }
}

/// Appends `value` as an integer with a `prefix`-bit prefix (RFC 7541
/// §5.1), the first byte's other bits being `flags`.
pub(super) fn put_integer(out: &mut Vec<u8>, flags: u8, prefix: u8, value: usize) {
    let mask = u8::MAX >> (8 - prefix);
    if value < usize::from(mask) {
        out.push(flags | value as u8);
        return;
    }
    out.push(flags | mask);
    let mut rest = value - usize::from(mask);
    while rest >= 0x80 {
        out.push(0x80 | (rest & 0x7f) as u8);
        rest >>= 7;
    }
    out.push(rest as u8);
}

/// Appends a string literal (RFC 7541 §5.2), Huffman-coded when shorter.
fn put_string(out: &mut Vec<u8>, s: &[u8]) {
    let coded = huffman::encoded_len(s);
    if coded < s.len() {
        put_integer(out, 0x80, 7, coded);
        huffman::encode(s, out);
    } else {
        put_integer(out, 0x00, 7, s.len());
        out.extend_from_slice(s);
    }
}

/// Appends a literal field: `flags`/`prefix` pick the kind (§6.2), the
/// name by `name_index` when nonzero.
fn put_literal(
    out: &mut Vec<u8>,
    flags: u8,
    prefix: u8,
    name_index: usize,
    name: &[u8],
    value: &[u8],
) {
    put_integer(out, flags, prefix, name_index);
    if name_index == 0 {
        put_string(out, name);
    }
    put_string(out, value);
}

impl Encoder {
    /// An encoder with the peer's default table size (4096).
    pub fn new() -> Self {
        Encoder {
            table: DynTable::new(DEFAULT_TABLE_SIZE),
            pending: None,
        }
    }

    /// The peer's SETTINGS_HEADER_TABLE_SIZE changed. Our table takes
    /// `min(size, 4096)`, signalled at the start of the next block.
    pub fn set_peer_max_size(&mut self, size: usize) {
        let size = size.min(DEFAULT_TABLE_SIZE);
        self.pending = match self.pending {
            None if size == self.table.max() => None,
            None => Some((size, size)),
            Some((least, _)) => Some((least.min(size), size)),
        };
    }

    /// Our dynamic table's current size, in RFC 7541 §4.1 bytes.
    pub fn table_size(&self) -> usize {
        self.table.size()
    }

    /// The dynamic table (for tests).
    #[cfg(test)]
    pub(super) fn table(&self) -> &DynTable {
        &self.table
    }

    /// Starts a header block in `out`: the size updates due, if any.
    pub fn begin(&mut self, out: &mut Vec<u8>) {
        if let Some((least, last)) = self.pending.take() {
            if least < last {
                put_integer(out, 0x20, 5, least);
                self.table.set_max(least);
            }
            put_integer(out, 0x20, 5, last);
            self.table.set_max(last);
        }
    }

    /// Appends `:status`: one byte for the statuses the static table has
    /// (200, 204, 206, 304, 400, 404, 500), a literal otherwise.
    pub fn status(&mut self, status: u16, out: &mut Vec<u8>) {
        let mut digits = [0u8; 5];
        let mut n = status;
        let mut start = digits.len();
        loop {
            start -= 1;
            digits[start] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 || start == 0 {
                break;
            }
        }
        let value = &digits[start..];
        match find_static(b":status", value) {
            Match::Field(i) => put_integer(out, 0x80, 7, i),
            Match::Name(i) => put_literal(out, 0x00, 4, i, b":status", value),
            Match::None => put_literal(out, 0x00, 4, 0, b":status", value),
        }
    }

    /// Appends one field; `name` must be lowercase. Exact matches in
    /// either table become one index; small values of fields that repeat
    /// are added to the dynamic table; secrets are never indexed.
    pub fn field(&mut self, name: &[u8], value: &[u8], out: &mut Vec<u8>) {
        let found = match find_static(name, value) {
            Match::Field(i) => Match::Field(i),
            by_static => match self.table.find(name, value) {
                Match::Field(i) => Match::Field(i),
                Match::Name(i) if by_static == Match::None => Match::Name(i),
                _ => by_static,
            },
        };
        let name_index = match found {
            Match::Field(i) if !SENSITIVE.contains(&name) => {
                put_integer(out, 0x80, 7, i);
                return;
            }
            Match::Field(i) | Match::Name(i) => i,
            Match::None => 0,
        };
        if SENSITIVE.contains(&name) {
            put_literal(out, 0x10, 4, name_index, name, value);
        } else if value.len() <= MAX_INDEXED_VALUE
            && !VOLATILE.contains(&name)
            && entry_size(name, value) <= self.table.max()
        {
            put_literal(out, 0x40, 6, name_index, name, value);
            self.table.push(Entry::new(name, value));
        } else {
            put_literal(out, 0x00, 4, name_index, name, value);
        }
    }
}

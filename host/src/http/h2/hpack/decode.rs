//! Decoding header blocks (RFC 7541 §6): representations in, fields out
//! as borrowed slices, the dynamic table kept in step with the peer's.

use std::ops::Range;

use super::error::DecodeError;
use super::huffman;
use super::table::{entry_size, DynTable, Entry, STATIC};

/// The most scratch space kept between blocks; a block that needed more
/// gives the rest back.
const SCRATCH_KEEP: usize = 16 * 1024;

/// What a decoded header block came to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Decoded {
    /// How many fields the block held (all of them, past `max_list` too).
    pub fields: usize,
    /// The RFC 9113 §6.5.2 list size (name + value + 32 per field) of the
    /// whole block.
    pub list_size: usize,
    /// True when `list_size` passed `max_list`: `field` was not called for
    /// the field that passed it nor any after it.
    pub over_limit: bool,
}

/// A connection's header block decoder: the dynamic table the peer's
/// encoder fills, and scratch space for Huffman-coded strings.
#[derive(Debug)]
pub struct Decoder {
    table: DynTable,
    /// Our SETTINGS_HEADER_TABLE_SIZE: the most a size update may ask.
    max_size: usize,
    /// Our setting went below the table's size: the next block must start
    /// with a size update.
    update_due: bool,
    /// Huffman-decoded strings of the current field.
    scratch: Vec<u8>,
}

/// A string literal as read: in the block, or decoded into the scratch.
#[derive(Clone, Copy)]
enum Lit<'a> {
    Raw(&'a [u8]),
    Huffman(usize, usize),
}

/// A literal representation's name: by index, or a string literal.
#[derive(Clone, Copy)]
enum Name<'a> {
    Index(usize),
    Lit(Lit<'a>),
}

/// Reads representations off a block.
struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn peek(&self) -> Option<u8> {
        self.buf.get(self.pos).copied()
    }

    fn byte(&mut self) -> Result<u8, DecodeError> {
        let b = self.peek().ok_or(DecodeError::Truncated)?;
        self.pos += 1;
        Ok(b)
    }

    /// An integer with a `prefix`-bit prefix (RFC 7541 §5.1), below 2^32.
    fn integer(&mut self, prefix: u8) -> Result<usize, DecodeError> {
        let mask = u8::MAX >> (8 - prefix);
        let first = self.byte()? & mask;
        if first < mask {
            return Ok(usize::from(first));
        }
        let mut value = u64::from(mask);
        let mut shift = 0u32;
        loop {
            let b = self.byte()?;
            value += u64::from(b & 0x7f) << shift;
            if value > u64::from(u32::MAX) {
                return Err(DecodeError::IntegerOverflow);
            }
            if b & 0x80 == 0 {
                return usize::try_from(value).map_err(|_| DecodeError::IntegerOverflow);
            }
            shift += 7;
            if shift > 28 {
                // Five continuation bytes carry 35 bits: more are padding
                // with zeros or a number too large either way.
                return Err(DecodeError::IntegerOverflow);
            }
        }
    }

    /// A string literal (RFC 7541 §5.2); a Huffman-coded one is decoded
    /// onto the end of `scratch`.
    fn string(&mut self, scratch: &mut Vec<u8>) -> Result<Lit<'a>, DecodeError> {
        let huffman = self.peek().ok_or(DecodeError::Truncated)? & 0x80 != 0;
        let len = self.integer(7)?;
        if len > self.buf.len() {
            return Err(DecodeError::StringTooLong(len));
        }
        let end = self.pos.checked_add(len).ok_or(DecodeError::Truncated)?;
        let bytes = self.buf.get(self.pos..end).ok_or(DecodeError::Truncated)?;
        self.pos = end;
        if !huffman {
            return Ok(Lit::Raw(bytes));
        }
        let start = scratch.len();
        huffman::decode(bytes, scratch).map_err(DecodeError::Huffman)?;
        Ok(Lit::Huffman(start, scratch.len()))
    }
}

/// A literal's bytes, wherever they are.
fn resolve<'s>(lit: Lit<'s>, scratch: &'s [u8]) -> &'s [u8] {
    match lit {
        Lit::Raw(b) => b,
        Lit::Huffman(start, end) => scratch.get(Range { start, end }).unwrap_or_default(),
    }
}

/// The name and value at HPACK index `index` (1-based over the static
/// table, then the dynamic table newest first).
fn lookup(table: &DynTable, index: usize) -> Result<(&[u8], &[u8]), DecodeError> {
    if index == 0 {
        return Err(DecodeError::IndexZero);
    }
    if let Some(&(n, v)) = STATIC.get(index - 1) {
        return Ok((n, v));
    }
    table
        .get(index - 1 - STATIC.len())
        .map(|e| (e.name(), e.value()))
        .ok_or(DecodeError::IndexOutOfRange(index))
}

/// Counts a field and hands it on while the list is within `max_list`.
fn emit(
    out: &mut Decoded,
    max_list: usize,
    field: &mut dyn FnMut(&[u8], &[u8]),
    name: &[u8],
    value: &[u8],
) {
    out.fields += 1;
    out.list_size = out.list_size.saturating_add(entry_size(name, value));
    if out.list_size > max_list {
        out.over_limit = true;
    }
    if !out.over_limit {
        field(name, value);
    }
}

impl Decoder {
    /// A decoder whose peer may make the dynamic table up to `max_size`
    /// bytes: our SETTINGS_HEADER_TABLE_SIZE, which is also the table's
    /// size until a size update. A connection starts with
    /// `DEFAULT_TABLE_SIZE` (what the peer assumes until it has our
    /// SETTINGS) and calls `set_max_size` once the peer acknowledged
    /// another value.
    pub fn new(max_size: usize) -> Self {
        Decoder {
            table: DynTable::new(max_size),
            max_size,
            update_due: false,
            scratch: Vec::new(),
        }
    }

    /// Our SETTINGS_HEADER_TABLE_SIZE changed (call once the peer has
    /// acknowledged it). Below the table's current size, the peer's next
    /// block must start with a size update to at most `max_size`.
    pub fn set_max_size(&mut self, max_size: usize) {
        self.max_size = max_size;
        if max_size < self.table.max() {
            self.update_due = true;
        }
    }

    /// The dynamic table's current size, in RFC 7541 §4.1 bytes.
    pub fn table_size(&self) -> usize {
        self.table.size()
    }

    /// The dynamic table's current maximum size (the last size update).
    pub fn table_max_size(&self) -> usize {
        self.table.max()
    }

    /// The dynamic table (for tests).
    #[cfg(test)]
    pub(super) fn table(&self) -> &DynTable {
        &self.table
    }

    /// Decodes one whole header block (a HEADERS or PUSH_PROMISE fragment
    /// and its CONTINUATIONs, concatenated), calling `field(name, value)`
    /// for each field in order. Once the running list size passes
    /// `max_list`, `field` is called no more but decoding goes on to the
    /// end, so that the table stays in step with the peer's, and the result
    /// says `over_limit`. An error is a connection error
    /// (COMPRESSION_ERROR).
    pub fn decode(
        &mut self,
        block: &[u8],
        max_list: usize,
        field: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<Decoded, DecodeError> {
        let result = self.decode_block(block, max_list, field);
        if self.scratch.capacity() > SCRATCH_KEEP {
            self.scratch = Vec::new();
        }
        result
    }

    fn decode_block(
        &mut self,
        block: &[u8],
        max_list: usize,
        field: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<Decoded, DecodeError> {
        let mut cur = Cursor { buf: block, pos: 0 };
        let mut out = Decoded::default();
        let mut started = false;
        while let Some(b) = cur.peek() {
            if b & 0xe0 == 0x20 {
                // Dynamic table size update (§6.3): only before any field.
                if started {
                    return Err(DecodeError::SizeUpdateNotFirst);
                }
                let size = cur.integer(5)?;
                if size > self.max_size {
                    return Err(DecodeError::SizeUpdateTooLarge {
                        size,
                        max: self.max_size,
                    });
                }
                self.table.set_max(size);
                self.update_due = false;
                continue;
            }
            if self.update_due {
                return Err(DecodeError::SizeUpdateMissing { max: self.max_size });
            }
            started = true;
            if b & 0x80 != 0 {
                // Indexed header field (§6.1).
                let index = cur.integer(7)?;
                let (name, value) = lookup(&self.table, index)?;
                emit(&mut out, max_list, field, name, value);
                continue;
            }
            // Literal header field (§6.2): with incremental indexing
            // (01), without indexing (0000) or never indexed (0001).
            let indexing = b & 0xc0 == 0x40;
            let index = cur.integer(if indexing { 6 } else { 4 })?;
            self.scratch.clear();
            let name = if index == 0 {
                Name::Lit(cur.string(&mut self.scratch)?)
            } else {
                lookup(&self.table, index)?;
                Name::Index(index)
            };
            let value = cur.string(&mut self.scratch)?;
            let value = resolve(value, &self.scratch);
            let name = match name {
                Name::Index(i) => lookup(&self.table, i)?.0,
                Name::Lit(lit) => resolve(lit, &self.scratch),
            };
            if !indexing {
                emit(&mut out, max_list, field, name, value);
            } else if entry_size(name, value) > self.table.max() {
                // Larger than the table: it empties it (§4.4).
                emit(&mut out, max_list, field, name, value);
                self.table.clear();
            } else {
                let entry = Entry::new(name, value);
                self.table.push(entry);
                if let Some(e) = self.table.get(0) {
                    emit(&mut out, max_list, field, e.name(), e.value());
                }
            }
        }
        if self.update_due {
            return Err(DecodeError::SizeUpdateMissing { max: self.max_size });
        }
        Ok(out)
    }
}

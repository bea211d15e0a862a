//! Why a header block could not be decoded.

/// Why a header block could not be decoded (always a COMPRESSION_ERROR).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// An indexed representation named index 0 (RFC 7541 §6.1).
    #[error("header field index 0")]
    IndexZero,
    /// An index past the static and dynamic tables (RFC 7541 §2.3.3).
    #[error("header field index {0} is past the tables")]
    IndexOutOfRange(usize),
    /// An integer of 2^32 or more, or with too many continuation bytes.
    #[error("integer too large")]
    IntegerOverflow,
    /// The block ended inside a representation.
    #[error("header block ends inside a representation")]
    Truncated,
    /// A string literal's length is more than the whole block.
    #[error("string literal of {0} bytes is longer than its block")]
    StringTooLong(usize),
    /// A dynamic table size update above our SETTINGS_HEADER_TABLE_SIZE.
    #[error("dynamic table size update to {size} is above the limit {max}")]
    SizeUpdateTooLarge {
        /// The size the update asked for.
        size: usize,
        /// Our SETTINGS_HEADER_TABLE_SIZE.
        max: usize,
    },
    /// A dynamic table size update after a header field (RFC 7541 §4.2).
    #[error("dynamic table size update after a header field")]
    SizeUpdateNotFirst,
    /// Our setting went below the table's size and the next block did not
    /// start with the size update that must follow (RFC 7541 §4.2).
    #[error("header block lacks the dynamic table size update to at most {max}")]
    SizeUpdateMissing {
        /// Our SETTINGS_HEADER_TABLE_SIZE.
        max: usize,
    },
    /// A Huffman-coded string that is not valid (RFC 7541 §5.2).
    #[error("bad Huffman-coded string: {0}")]
    Huffman(&'static str),
}

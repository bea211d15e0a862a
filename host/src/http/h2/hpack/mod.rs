//! HPACK, HTTP/2's header compression (RFC 7541), free of sockets: a
//! `Decoder` for the header blocks a peer sends and an `Encoder` for ours.
//!
//! Each side keeps one dynamic table per connection and per direction
//! (`table`); strings may be Huffman-coded (`huffman`). A decoding error
//! is a connection error of type COMPRESSION_ERROR for the caller: the
//! table is out of step with the peer's from then on.

mod decode;
mod encode;
mod error;
mod huffman;
mod table;

#[cfg(test)]
mod tests;

pub use decode::{Decoded, Decoder};
pub use encode::Encoder;
pub use error::DecodeError;
pub use table::DEFAULT_TABLE_SIZE;

//! Incremental decoder for `Transfer-Encoding: chunked` (RFC 9112 §7.1).
//! Fed whatever bytes have arrived; keeps its place between calls.

use super::HttpError;

/// Longest chunk-size line, extensions included.
const MAX_SIZE_LINE: usize = 4096;
/// Largest trailer section.
const MAX_TRAILERS: usize = 16 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Size,
    Data(usize),
    DataCr,
    DataLf,
    Trailers,
    Done,
}

/// Decoder state for one chunked body.
#[derive(Debug, Clone)]
pub struct ChunkedDecoder {
    state: State,
    line: Vec<u8>,
    trailer_bytes: usize,
}

impl Default for ChunkedDecoder {
    fn default() -> Self {
        ChunkedDecoder {
            state: State::Size,
            line: Vec::new(),
            trailer_bytes: 0,
        }
    }
}

impl ChunkedDecoder {
    /// True once the last chunk and the trailers have been read.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Decodes from `input` into `out`, returning how many input bytes were
    /// consumed. Stops at the end of the body; bytes after it are not taken.
    pub fn decode(
        &mut self,
        input: &[u8],
        out: &mut Vec<u8>,
        max_body: usize,
    ) -> Result<usize, HttpError> {
        let mut i = 0;
        while i < input.len() && self.state != State::Done {
            match self.state {
                State::Size | State::Trailers => {
                    let b = input[i];
                    i += 1;
                    if b == b'\n' {
                        self.end_line(out.len(), max_body)?;
                    } else {
                        self.line_byte(b)?;
                    }
                }
                State::Data(left) => {
                    let take = left.min(input.len() - i);
                    out.extend_from_slice(&input[i..i + take]);
                    i += take;
                    self.state = if take == left {
                        State::DataCr
                    } else {
                        State::Data(left - take)
                    };
                }
                State::DataCr | State::DataLf => {
                    self.data_end(input[i])?;
                    i += 1;
                }
                State::Done => break,
            }
        }
        Ok(i)
    }

    /// One byte of a size or trailer line (not its LF), within the line's
    /// limit.
    #[inline]
    fn line_byte(&mut self, b: u8) -> Result<(), HttpError> {
        self.line.push(b);
        if self.state == State::Size && self.line.len() > MAX_SIZE_LINE {
            return Err(HttpError::Framing("chunk size line too long"));
        }
        if self.state == State::Trailers && self.trailer_bytes + self.line.len() > MAX_TRAILERS {
            return Err(HttpError::HeadTooLarge);
        }
        Ok(())
    }

    /// A size or trailer line's LF: the line must end in CRLF; then what
    /// it says, with `decoded` bytes of body so far.
    #[inline]
    fn end_line(&mut self, decoded: usize, max_body: usize) -> Result<(), HttpError> {
        if self.line.pop() != Some(b'\r') {
            return Err(HttpError::Framing("chunk line not ended by CRLF"));
        }
        if self.state == State::Size {
            self.end_size_line(decoded, max_body)
        } else {
            self.end_trailer_line()
        }
    }

    /// A chunk's size: its data next, or the trailers after the last chunk.
    #[inline]
    fn end_size_line(&mut self, decoded: usize, max_body: usize) -> Result<(), HttpError> {
        let size = parse_size(&self.line)?;
        self.line.clear();
        if decoded.saturating_add(size) > max_body {
            return Err(HttpError::BodyTooLarge);
        }
        self.state = if size == 0 {
            State::Trailers
        } else {
            State::Data(size)
        };
        Ok(())
    }

    /// One trailer field, or the empty line that ends the body.
    #[inline]
    fn end_trailer_line(&mut self) -> Result<(), HttpError> {
        let empty = self.line.is_empty();
        if !empty {
            check_trailer(&self.line)?;
        }
        self.trailer_bytes += self.line.len() + 2;
        self.line.clear();
        if self.trailer_bytes > MAX_TRAILERS {
            return Err(HttpError::HeadTooLarge);
        }
        if empty {
            self.state = State::Done;
        }
        Ok(())
    }

    /// The CR or the LF after a chunk's data.
    #[inline]
    fn data_end(&mut self, b: u8) -> Result<(), HttpError> {
        let want = if self.state == State::DataCr {
            b'\r'
        } else {
            b'\n'
        };
        if b != want {
            return Err(HttpError::Framing("chunk data not followed by CRLF"));
        }
        self.state = if want == b'\r' {
            State::DataLf
        } else {
            State::Size
        };
        Ok(())
    }
}

/// A trailer field must look like a header field (RFC 9112 §7.1.2): a
/// token, a colon, then visible characters, spaces and tabs.
fn check_trailer(line: &[u8]) -> Result<(), HttpError> {
    let bad = HttpError::Framing("malformed trailer field");
    let colon = line.iter().position(|&b| b == b':').ok_or(bad.clone())?;
    let (name, value) = (&line[..colon], &line[colon + 1..]);
    let token = |b: &u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(b);
    if name.is_empty() || !name.iter().all(token) {
        return Err(bad);
    }
    if value.iter().any(|&b| (b < 0x20 && b != b'\t') || b == 0x7f) {
        return Err(bad);
    }
    Ok(())
}

fn parse_size(line: &[u8]) -> Result<usize, HttpError> {
    let mut parts = line.splitn(2, |&b| b == b';');
    let mut digits = parts.next().unwrap_or_default();
    if parts.next().is_some() {
        // Whitespace may stand before an extension's `;` (RFC 9112 §7.1.1, BWS).
        while let [rest @ .., b' ' | b'\t'] = digits {
            digits = rest;
        }
    } else {
        digits = digits.strip_suffix(b" ").unwrap_or(digits);
    }
    if digits.is_empty() || digits.len() > 15 {
        return Err(HttpError::Framing("invalid chunk size"));
    }
    digits.iter().try_fold(0usize, |n, &b| {
        let d = (b as char)
            .to_digit(16)
            .ok_or(HttpError::Framing("invalid chunk size"))?;
        Ok(n * 16 + d as usize)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(input: &[u8]) -> Result<(Vec<u8>, usize, bool), HttpError> {
        let mut d = ChunkedDecoder::default();
        let mut out = Vec::new();
        let n = d.decode(input, &mut out, 1 << 20)?;
        Ok((out, n, d.is_done()))
    }

    #[test]
    fn decodes_chunks_and_stops_at_the_end() {
        let raw = b"4\r\nWiki\r\n5;ext=1\r\npedia\r\n0\r\nX-T: 1\r\n\r\nNEXT";
        let (out, n, done) = decode_all(raw).unwrap();
        assert_eq!(out, b"Wikipedia");
        assert!(done);
        assert_eq!(&raw[n..], b"NEXT");
    }

    #[test]
    fn whitespace_before_an_extension_is_allowed() {
        for raw in [
            &b"5\t;a=b\r\npedia\r\n0\r\n\r\n"[..],
            b"5 \t ;a\r\npedia\r\n0\r\n\r\n",
        ] {
            let (out, _, done) = decode_all(raw).unwrap();
            assert_eq!((out.as_slice(), done), (&b"pedia"[..], true));
        }
        assert!(decode_all(b"5\t\r\npedia\r\n0\r\n\r\n").is_err());
    }

    #[test]
    fn any_split_gives_the_same_body() {
        let raw = b"3\r\nabc\r\na\r\n0123456789\r\n0\r\n\r\n";
        for split in 0..raw.len() {
            let mut d = ChunkedDecoder::default();
            let mut out = Vec::new();
            let a = d.decode(&raw[..split], &mut out, 100).unwrap();
            assert_eq!(a, split);
            d.decode(&raw[split..], &mut out, 100).unwrap();
            assert!(d.is_done());
            assert_eq!(out, b"abc0123456789");
        }
    }

    #[test]
    fn trailers_are_checked_and_bounded() {
        assert!(decode_all(b"0\r\nX-T: ok\r\n\r\n").unwrap().2);
        assert!(decode_all(b"0\r\nno colon\r\n\r\n").is_err());
        assert!(decode_all(b"0\r\nX-T: a\x00b\r\n\r\n").is_err());
        let mut endless = b"0\r\nX-T: ".to_vec();
        endless.extend(std::iter::repeat_n(b'a', MAX_TRAILERS + 10));
        assert_eq!(decode_all(&endless).err(), Some(HttpError::HeadTooLarge));
    }

    #[test]
    fn rejects_bad_framing() {
        assert!(decode_all(b"zz\r\n").is_err());
        assert!(decode_all(b"3\r\nabcX\r\n").is_err());
        assert!(decode_all(b"3\nabc").is_err());
        let mut d = ChunkedDecoder::default();
        assert_eq!(
            d.decode(b"ff\r\n", &mut Vec::new(), 10),
            Err(HttpError::BodyTooLarge)
        );
    }
}

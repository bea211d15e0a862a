//! Fuzzes the request reader (head parser, framing, chunked decoder and the
//! buffer handling of a connection): the first byte of the input chooses
//! how the rest is split into reads; no input may panic, and whatever is
//! read must be consumable.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::io::{self, Read};
use stoa::http::reader::{BufPool, RequestReader};
use stoa::settings::ConnParams;

struct Chunks<'a> {
    data: &'a [u8],
    step: usize,
}

impl Read for Chunks<'_> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if self.data.is_empty() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let n = out.len().min(self.data.len()).min(self.step);
        out[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

fuzz_target!(|input: &[u8]| {
    let Some((&first, rest)) = input.split_first() else {
        return;
    };
    let params = ConnParams {
        max_head: 2048,
        max_body: 4096,
        max_request_line: 512,
        max_header_field: 512,
        ..ConnParams::default()
    };
    let step = usize::from(first % 64) + 1;
    let mut reader = RequestReader::default();
    let mut pool = BufPool::default();
    let mut src = Chunks { data: rest, step };
    for _ in 0..rest.len() / step + 2 {
        reader.fill(&mut src, &params, false, &mut pool);
        loop {
            match reader.next_request(&params) {
                Ok(true) => {
                    let (head, buf, body) = reader.parts().expect("ready request has parts");
                    assert!(head.len <= buf.len());
                    assert!(body.len() <= params.max_body);
                    reader.consume();
                }
                Ok(false) => break,
                Err(_) => return,
            }
        }
    }
});

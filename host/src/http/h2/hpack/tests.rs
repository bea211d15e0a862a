//! HPACK's tests: RFC 7541 Appendix C, the malformed blocks h2spec sends,
//! the list size cut, encoder round trips and a fuzz run.

use std::time::{Duration, Instant};

use super::encode::put_integer;
use super::{huffman, DecodeError, Decoded, Decoder, Encoder, DEFAULT_TABLE_SIZE};

type Fields = Vec<(Vec<u8>, Vec<u8>)>;

/// Bytes from hex digits, spaces ignored.
fn hex(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s
        .bytes()
        .filter(|b| !b.is_ascii_whitespace())
        .map(|b| match b {
            b'0'..=b'9' => b - b'0',
            b'a'..=b'f' => b - b'a' + 10,
            _ => panic!("not a hex digit: {b}"),
        })
        .collect();
    assert_eq!(digits.len() % 2, 0, "odd number of hex digits");
    digits.chunks(2).map(|p| p[0] << 4 | p[1]).collect()
}

/// Decodes a block with no list limit, collecting the fields.
fn decode(dec: &mut Decoder, block: &[u8]) -> Result<Fields, DecodeError> {
    let mut fields = Fields::new();
    let got = dec.decode(block, usize::MAX, &mut |n, v| {
        fields.push((n.to_vec(), v.to_vec()))
    })?;
    assert_eq!(got.fields, fields.len());
    assert!(!got.over_limit);
    Ok(fields)
}

/// Owned pairs from string pairs.
fn pairs(list: &[(&str, &str)]) -> Fields {
    list.iter()
        .map(|(n, v)| (n.as_bytes().to_vec(), v.as_bytes().to_vec()))
        .collect()
}

/// Decodes `block` and checks its fields, the table's entries (newest
/// first) and the table's size.
fn check(
    dec: &mut Decoder,
    block: &str,
    fields: &[(&str, &str)],
    table: &[(&str, &str)],
    size: usize,
) {
    let got = decode(dec, &hex(block)).expect("block decodes");
    assert_eq!(got, pairs(fields));
    assert_eq!(dec.table().entries(), pairs(table));
    assert_eq!(dec.table_size(), size);
}

// RFC 7541 C.2: one field each, fresh decoders.

#[test]
fn c2_1_literal_with_indexing() {
    let mut dec = Decoder::new(DEFAULT_TABLE_SIZE);
    let block = "400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572";
    let field = [("custom-key", "custom-header")];
    check(&mut dec, block, &field, &field, 55);
}

#[test]
fn c2_2_literal_without_indexing() {
    let mut dec = Decoder::new(DEFAULT_TABLE_SIZE);
    let block = "040c 2f73 616d 706c 652f 7061 7468";
    check(&mut dec, block, &[(":path", "/sample/path")], &[], 0);
}

#[test]
fn c2_3_literal_never_indexed() {
    let mut dec = Decoder::new(DEFAULT_TABLE_SIZE);
    let block = "1008 7061 7373 776f 7264 0673 6563 7265 74";
    check(&mut dec, block, &[("password", "secret")], &[], 0);
}

#[test]
fn c2_4_indexed() {
    let mut dec = Decoder::new(DEFAULT_TABLE_SIZE);
    check(&mut dec, "82", &[(":method", "GET")], &[], 0);
}

// RFC 7541 C.3 and C.4: three requests on one connection.

const REQ1: [(&str, &str); 4] = [
    (":method", "GET"),
    (":scheme", "http"),
    (":path", "/"),
    (":authority", "www.example.com"),
];
const REQ2: [(&str, &str); 5] = [
    (":method", "GET"),
    (":scheme", "http"),
    (":path", "/"),
    (":authority", "www.example.com"),
    ("cache-control", "no-cache"),
];
const REQ3: [(&str, &str); 5] = [
    (":method", "GET"),
    (":scheme", "https"),
    (":path", "/index.html"),
    (":authority", "www.example.com"),
    ("custom-key", "custom-value"),
];
const REQ_T1: [(&str, &str); 1] = [(":authority", "www.example.com")];
const REQ_T2: [(&str, &str); 2] = [
    ("cache-control", "no-cache"),
    (":authority", "www.example.com"),
];
const REQ_T3: [(&str, &str); 3] = [
    ("custom-key", "custom-value"),
    ("cache-control", "no-cache"),
    (":authority", "www.example.com"),
];

#[test]
fn c3_requests() {
    let mut dec = Decoder::new(DEFAULT_TABLE_SIZE);
    let b1 = "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d";
    check(&mut dec, b1, &REQ1, &REQ_T1, 57);
    let b2 = "8286 84be 5808 6e6f 2d63 6163 6865";
    check(&mut dec, b2, &REQ2, &REQ_T2, 110);
    let b3 = "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65";
    check(&mut dec, b3, &REQ3, &REQ_T3, 164);
}

#[test]
fn c4_requests_huffman() {
    let mut dec = Decoder::new(DEFAULT_TABLE_SIZE);
    let b1 = "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff";
    check(&mut dec, b1, &REQ1, &REQ_T1, 57);
    let b2 = "8286 84be 5886 a8eb 1064 9cbf";
    check(&mut dec, b2, &REQ2, &REQ_T2, 110);
    let b3 = "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf";
    check(&mut dec, b3, &REQ3, &REQ_T3, 164);
}

// RFC 7541 C.5 and C.6: three responses, table size 256, evictions.

const DATE1: &str = "Mon, 21 Oct 2013 20:13:21 GMT";
const DATE2: &str = "Mon, 21 Oct 2013 20:13:22 GMT";
const LOCATION: &str = "https://www.example.com";
const COOKIE: &str = "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1";

fn responses(blocks: [&str; 3]) {
    let mut dec = Decoder::new(256);
    let r1 = [
        (":status", "302"),
        ("cache-control", "private"),
        ("date", DATE1),
        ("location", LOCATION),
    ];
    let t1 = [
        ("location", LOCATION),
        ("date", DATE1),
        ("cache-control", "private"),
        (":status", "302"),
    ];
    check(&mut dec, blocks[0], &r1, &t1, 222);
    let r2 = [
        (":status", "307"),
        ("cache-control", "private"),
        ("date", DATE1),
        ("location", LOCATION),
    ];
    let t2 = [
        (":status", "307"),
        ("location", LOCATION),
        ("date", DATE1),
        ("cache-control", "private"),
    ];
    check(&mut dec, blocks[1], &r2, &t2, 222);
    let r3 = [
        (":status", "200"),
        ("cache-control", "private"),
        ("date", DATE2),
        ("location", LOCATION),
        ("content-encoding", "gzip"),
        ("set-cookie", COOKIE),
    ];
    let t3 = [
        ("set-cookie", COOKIE),
        ("content-encoding", "gzip"),
        ("date", DATE2),
    ];
    check(&mut dec, blocks[2], &r3, &t3, 215);
}

#[test]
fn c5_responses() {
    responses([
        "4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133
         2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70
         6c65 2e63 6f6d",
        "4803 3330 37c1 c0bf",
        "88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d
         54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049
         5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e
         3d31",
    ]);
}

#[test]
fn c6_responses_huffman() {
    responses([
        "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6
         2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
        "4883 640e ffc1 c0bf",
        "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab
         77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f
         9587 3160 65c0 03ed 4ee5 b106 3d50 07",
    ]);
}

// What h2spec sends (hpack sections and the HTTP/2 COMPRESSION_ERROR cases).

#[test]
fn index_zero() {
    let mut dec = Decoder::new(DEFAULT_TABLE_SIZE);
    assert_eq!(decode(&mut dec, &[0x80]), Err(DecodeError::IndexZero));
}

#[test]
fn index_past_the_tables() {
    let mut dec = Decoder::new(DEFAULT_TABLE_SIZE);
    assert_eq!(
        decode(&mut dec, &[0xbe]),
        Err(DecodeError::IndexOutOfRange(62))
    );
    // A literal's name index too.
    let mut dec = Decoder::new(DEFAULT_TABLE_SIZE);
    assert_eq!(
        decode(&mut dec, &[0x7e, 0x01, b'x']),
        Err(DecodeError::IndexOutOfRange(62))
    );
    // One entry: 62 is valid, 63 is not.
    let mut dec = Decoder::new(DEFAULT_TABLE_SIZE);
    assert!(decode(&mut dec, &hex("4001 6101 62 be")).is_ok());
    assert_eq!(
        decode(&mut dec, &[0xbf]),
        Err(DecodeError::IndexOutOfRange(63))
    );
}

#[test]
fn size_update_above_setting() {
    let mut dec = Decoder::new(DEFAULT_TABLE_SIZE);
    let mut block = Vec::new();
    put_integer(&mut block, 0x20, 5, 4097);
    assert_eq!(
        decode(&mut dec, &block),
        Err(DecodeError::SizeUpdateTooLarge {
            size: 4097,
            max: 4096
        })
    );
}

#[test]
fn size_update_after_field() {
    let mut dec = Decoder::new(DEFAULT_TABLE_SIZE);
    assert_eq!(
        decode(&mut dec, &[0x82, 0x20]),
        Err(DecodeError::SizeUpdateNotFirst)
    );
    // Two at the start are fine (§4.2: smallest, then final).
    let mut dec = Decoder::new(DEFAULT_TABLE_SIZE);
    let fields = decode(&mut dec, &hex("20 3fe1 1f 82")).expect("decodes");
    assert_eq!(fields, pairs(&[(":method", "GET")]));
}

#[test]
fn size_update_due_after_lower_setting() {
    let mut dec = Decoder::new(DEFAULT_TABLE_SIZE);
    decode(&mut dec, &hex("4001 6101 62")).expect("decodes");
    assert_eq!(dec.table_size(), 34);
    dec.set_max_size(16);
    assert_eq!(
        decode(&mut dec, &[0x82]),
        Err(DecodeError::SizeUpdateMissing { max: 16 })
    );
    let mut dec = Decoder::new(DEFAULT_TABLE_SIZE);
    decode(&mut dec, &hex("4001 6101 62")).expect("decodes");
    dec.set_max_size(16);
    decode(&mut dec, &[0x30, 0x82]).expect("decodes");
    assert_eq!((dec.table_size(), dec.table_max_size()), (0, 16));
    // Later blocks need none.
    decode(&mut dec, &[0x82]).expect("decodes");
}

/// A literal field without indexing, name "a", value Huffman-coded bytes.
fn huffman_value(coded: &[u8]) -> Vec<u8> {
    let mut block = vec![0x00, 0x01, b'a'];
    put_integer(&mut block, 0x80, 7, coded.len());
    block.extend_from_slice(coded);
    block
}

#[test]
fn huffman_eos_inside() {
    let mut dec = Decoder::new(DEFAULT_TABLE_SIZE);
    // 32 ones: EOS (30) then two bits.
    let got = decode(&mut dec, &huffman_value(&[0xff; 4]));
    assert!(matches!(got, Err(DecodeError::Huffman(_))), "{got:?}");
    // EOS after a symbol: "a" is 00011, then 30 ones, then 5 of padding.
    let got = decode(&mut dec, &huffman_value(&[0x1f, 0xff, 0xff, 0xff, 0xff]));
    assert!(matches!(got, Err(DecodeError::Huffman(_))), "{got:?}");
}

#[test]
fn huffman_padding_too_long() {
    let mut dec = Decoder::new(DEFAULT_TABLE_SIZE);
    // "a" (00011) and 11 bits of ones.
    let got = decode(&mut dec, &huffman_value(&[0x1f, 0xff]));
    assert_eq!(got, Err(DecodeError::Huffman("padding longer than 7 bits")));
    // Eight bits of ones alone.
    let got = decode(&mut dec, &huffman_value(&[0xff]));
    assert_eq!(got, Err(DecodeError::Huffman("padding longer than 7 bits")));
}

#[test]
fn huffman_padding_with_zero() {
    let mut dec = Decoder::new(DEFAULT_TABLE_SIZE);
    // "a" (00011) padded with 000.
    let got = decode(&mut dec, &huffman_value(&[0x18]));
    assert_eq!(
        got,
        Err(DecodeError::Huffman("padding is not a prefix of EOS"))
    );
    // Padded with 110.
    let got = decode(&mut dec, &huffman_value(&[0x1e]));
    assert!(matches!(got, Err(DecodeError::Huffman(_))), "{got:?}");
    // Padded right: 111.
    let got = decode(&mut dec, &huffman_value(&[0x1f])).expect("decodes");
    assert_eq!(got, pairs(&[("a", "a")]));
}

#[test]
fn huffman_round_trip() {
    let all: Vec<u8> = (0..=255u8).collect();
    let samples: [&[u8]; 5] = [b"", b"a", b"www.example.com", b"\xff\x00\xfe", &all];
    for s in samples {
        let mut coded = Vec::new();
        huffman::encode(s, &mut coded);
        assert_eq!(coded.len(), huffman::encoded_len(s));
        let mut back = Vec::new();
        huffman::decode(&coded, &mut back).expect("decodes");
        assert_eq!(back, s);
    }
    let mut coded = Vec::new();
    huffman::encode(b"www.example.com", &mut coded);
    assert_eq!(coded, hex("f1e3 c2e5 f23a 6ba0 ab90 f4ff"));
}

#[test]
fn integers() {
    // RFC 7541 C.1: 10 and 1337 on 5 bits, 42 on 8.
    let mut out = Vec::new();
    put_integer(&mut out, 0, 5, 10);
    put_integer(&mut out, 0, 5, 1337);
    put_integer(&mut out, 0, 8, 42);
    assert_eq!(out, [10, 31, 154, 10, 42]);
    let mut dec = Decoder::new(DEFAULT_TABLE_SIZE);
    // 2^32 as an index.
    let mut block = Vec::new();
    put_integer(&mut block, 0x80, 7, 1 << 32);
    assert_eq!(decode(&mut dec, &block), Err(DecodeError::IntegerOverflow));
    // Just under: a valid integer, an index past the tables.
    let mut block = Vec::new();
    put_integer(&mut block, 0x80, 7, u32::MAX as usize);
    assert_eq!(
        decode(&mut dec, &block),
        Err(DecodeError::IndexOutOfRange(u32::MAX as usize))
    );
    // Endless zero continuation bytes.
    let mut block = vec![0xff];
    block.extend_from_slice(&[0x80; 20]);
    block.push(0);
    assert_eq!(decode(&mut dec, &block), Err(DecodeError::IntegerOverflow));
}

#[test]
fn truncated_and_too_long() {
    let mut dec = Decoder::new(DEFAULT_TABLE_SIZE);
    assert_eq!(decode(&mut dec, &[0xff]), Err(DecodeError::Truncated));
    assert_eq!(decode(&mut dec, &[0xff, 0x80]), Err(DecodeError::Truncated));
    assert_eq!(decode(&mut dec, &[0x40]), Err(DecodeError::Truncated));
    assert_eq!(
        decode(&mut dec, &[0x40, 0x01, b'a', 0x05, b'b']),
        Err(DecodeError::Truncated)
    );
    // A length no block of this size could hold.
    assert_eq!(
        decode(&mut dec, &[0x40, 0x05, b'a']),
        Err(DecodeError::StringTooLong(5))
    );
    assert_eq!(
        decode(&mut dec, &[0x41, 0x02, b'a']),
        Err(DecodeError::Truncated)
    );
    let mut block = vec![0x00];
    put_integer(&mut block, 0x00, 7, 1 << 30);
    assert_eq!(
        decode(&mut dec, &block),
        Err(DecodeError::StringTooLong(1 << 30))
    );
}

#[test]
fn entry_larger_than_table_empties_it() {
    let mut dec = Decoder::new(256);
    decode(&mut dec, &hex("4001 6101 62")).expect("decodes");
    assert_eq!(dec.table_size(), 34);
    let mut block = vec![0x40, 0x01, b'b'];
    put_integer(&mut block, 0, 7, 300);
    block.extend_from_slice(&[b'v'; 300]);
    let fields = decode(&mut dec, &block).expect("decodes");
    assert_eq!(fields.len(), 1);
    assert_eq!(fields[0].1.len(), 300);
    assert_eq!(dec.table_size(), 0);
    assert!(dec.table().entries().is_empty());
}

#[test]
fn list_size_cut_hpack_bomb() {
    let mut dec = Decoder::new(DEFAULT_TABLE_SIZE);
    let mut block = vec![0x40, 0x01, b'x'];
    put_integer(&mut block, 0, 7, 4000);
    block.extend_from_slice(&[b'v'; 4000]);
    block.extend_from_slice(&[0xbe; 1000]);
    let entry = 4000 + 1 + 32;
    let mut calls = 0usize;
    let mut total = 0usize;
    let start = Instant::now();
    let got = dec
        .decode(&block, 16384, &mut |n, v| {
            calls += 1;
            total += n.len() + v.len() + 32;
            assert!(total <= 16384, "field called past the limit");
        })
        .expect("decodes");
    assert!(start.elapsed() < Duration::from_secs(1));
    assert_eq!(
        got,
        Decoded {
            fields: 1001,
            list_size: 1001 * entry,
            over_limit: true
        }
    );
    assert_eq!(calls, 16384 / entry);
    assert_eq!(dec.table_size(), entry);
    // The table is still in step: the next block's reference decodes.
    let mut seen = Fields::new();
    let got = dec
        .decode(&[0xbe], 16384, &mut |n, v| {
            seen.push((n.to_vec(), v.to_vec()))
        })
        .expect("decodes");
    assert!(!got.over_limit);
    assert_eq!(seen, vec![(b"x".to_vec(), vec![b'v'; 4000])]);
}

/// A response's fields: a dozen, some repeating across responses.
fn response_fields(n: usize) -> Fields {
    let list = [
        ("server", "stoa".to_string()),
        ("date", "Tue, 03 Mar 2026 10:00:00 GMT".to_string()),
        ("content-type", "text/html; charset=utf-8".to_string()),
        ("content-length", format!("{}", 1000 + n)),
        ("cache-control", "no-cache".to_string()),
        ("vary", "accept-encoding".to_string()),
        ("content-encoding", "gzip".to_string()),
        ("set-cookie", format!("session=abc{n}; Path=/; HttpOnly")),
        ("etag", format!("\"v{n}\"")),
        ("x-frame-options", "DENY".to_string()),
        ("strict-transport-security", "max-age=31536000".to_string()),
        ("x-long", "y".repeat(200)),
        ("accept-encoding", "gzip, deflate".to_string()),
    ];
    list.iter()
        .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
        .collect()
}

/// Encodes a response: `:status` then `fields`.
fn encode_response(enc: &mut Encoder, status: u16, fields: &Fields) -> Vec<u8> {
    let mut out = Vec::new();
    enc.begin(&mut out);
    enc.status(status, &mut out);
    for (n, v) in fields {
        enc.field(n, v, &mut out);
    }
    out
}

#[test]
fn encoder_round_trip() {
    let mut enc = Encoder::new();
    let mut dec = Decoder::new(DEFAULT_TABLE_SIZE);
    let mut sizes = Vec::new();
    for (n, status) in [(0, 200), (1, 200), (2, 302), (3, 999)] {
        let fields = response_fields(n);
        let block = encode_response(&mut enc, status, &fields);
        sizes.push(block.len());
        let got = decode(&mut dec, &block).expect("decodes");
        let mut want = vec![(b":status".to_vec(), status.to_string().into_bytes())];
        want.extend(fields);
        assert_eq!(got, want);
        assert_eq!(dec.table().entries(), enc.table().entries());
        assert_eq!(dec.table_size(), enc.table_size());
    }
    // The second block refers to the first's entries: ten bytes or so
    // each saved (a 200-byte value and the changing ones stay literal).
    assert!(sizes[1] + 90 <= sizes[0], "{sizes:?}");
    // :status 200 is one byte.
    let mut out = Vec::new();
    enc.status(200, &mut out);
    assert_eq!(out, [0x88]);
}

#[test]
fn encoder_never_indexes_secrets() {
    let mut enc = Encoder::new();
    for name in ["set-cookie", "cookie", "authorization"] {
        let mut out = Vec::new();
        enc.field(name.as_bytes(), b"secret", &mut out);
        assert_eq!(out[0] & 0xf0, 0x10, "{name}: never indexed");
    }
    let mut out = Vec::new();
    enc.field(b"x-custom", &[b'z'; 65], &mut out);
    assert_eq!(out[0], 0x00, "long values are not indexed");
    assert_eq!(enc.table_size(), 0);
}

#[test]
fn encoder_size_updates() {
    let mut enc = Encoder::new();
    let mut dec = Decoder::new(DEFAULT_TABLE_SIZE);
    let fields = response_fields(0);
    decode(&mut dec, &encode_response(&mut enc, 200, &fields)).expect("decodes");
    assert!(dec.table_size() > 0);
    // Down to 0: the next block starts with an update to 0.
    enc.set_peer_max_size(0);
    dec.set_max_size(0);
    let block = encode_response(&mut enc, 200, &fields);
    assert_eq!(block[0], 0x20);
    decode(&mut dec, &block).expect("decodes");
    assert_eq!((dec.table_size(), enc.table_size()), (0, 0));
    // Back up: an update to 4096, and the table fills again.
    enc.set_peer_max_size(65536);
    dec.set_max_size(DEFAULT_TABLE_SIZE);
    let block = encode_response(&mut enc, 200, &fields);
    assert_eq!(block[..3], [0x3f, 0xe1, 0x1f]);
    decode(&mut dec, &block).expect("decodes");
    assert!(dec.table_size() > 0);
    assert_eq!(dec.table().entries(), enc.table().entries());
    // Down and up between two blocks: both updates, smallest first.
    enc.set_peer_max_size(0);
    enc.set_peer_max_size(4096);
    let block = encode_response(&mut enc, 200, &fields);
    assert_eq!(block[..4], [0x20, 0x3f, 0xe1, 0x1f]);
    decode(&mut dec, &block).expect("decodes");
    assert_eq!(dec.table().entries(), enc.table().entries());
    // No change, no update.
    enc.set_peer_max_size(4096);
    let block = encode_response(&mut enc, 200, &fields);
    assert_eq!(block[0], 0x88);
}

/// xorshift64: a fixed, dependency-free stream of pseudo-random numbers.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[test]
fn fuzz_never_panics() {
    let seeds = [
        hex("8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff"),
        hex("4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005"),
        hex("400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572"),
        hex("3fe1 1f82 be"),
    ];
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut dec = Decoder::new(DEFAULT_TABLE_SIZE);
    let mut block = Vec::new();
    for i in 0..20_000 {
        block.clear();
        if i % 2 == 0 {
            let len = (rng.next() % 64) as usize;
            block.extend((0..len).map(|_| rng.next() as u8));
        } else {
            // A valid block with a few bytes changed.
            block.extend_from_slice(&seeds[(rng.next() % 4) as usize]);
            for _ in 0..1 + rng.next() % 3 {
                let at = (rng.next() as usize) % block.len();
                block[at] = rng.next() as u8;
            }
        }
        let max_list = (rng.next() % 8192) as usize;
        let result = dec.decode(&block, max_list, &mut |_, _| {});
        assert!(dec.table_size() <= DEFAULT_TABLE_SIZE);
        if result.is_err() {
            // The connection would be gone: start afresh.
            dec = Decoder::new(DEFAULT_TABLE_SIZE);
        }
    }
}

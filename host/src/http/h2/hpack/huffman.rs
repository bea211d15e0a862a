//! HPACK's Huffman code (RFC 7541 §5.2, Appendix B). The code table is a
//! dependency's (host/Cargo.toml); the decoder is ours: a state machine
//! built from that table at compile time, reading four bits per step.
//!
//! States are the internal nodes of the code tree (256 of them for 257
//! symbols, the root being state 0). For each state and nibble the table
//! holds the state after those four bits, and the symbol completed on the
//! way if any (codes are at least five bits long, so at most one). At the
//! end of a string the state tells whether the leftover bits are valid
//! padding: at most seven bits, all ones (a prefix of EOS).

use httlib_huffman::encoder::table::ENCODE_TABLE;

/// The EOS symbol (256): never valid inside a string.
const EOS: usize = 256;
/// A tree child that is a leaf (its symbol in the low bits).
const LEAF: u16 = 0x8000;
/// A step completes a symbol.
const EMIT: u8 = 1;
/// A step reaches EOS: the string is invalid.
const FAIL: u8 = 2;

/// How a string may end in a state.
const END_OK: u8 = 0;
const END_LONG: u8 = 1;
const END_NOT_ONES: u8 = 2;

/// One transition: from a state, on a nibble.
#[derive(Clone, Copy)]
struct Step {
    next: u8,
    flags: u8,
    symbol: u8,
}

/// The decoding machine: 256 states × 16 nibbles, and how each state may
/// end a string.
struct Machine {
    steps: [[Step; 16]; 256],
    end: [u8; 256],
}

/// The code tree: `tree[node][bit]` is the child node's number, or
/// `LEAF | symbol`; plus each internal node's depth and whether its path is
/// all ones. A table that is not a complete prefix code fails the build.
const fn build_tree() -> ([[u16; 2]; 256], [u8; 256], [bool; 256]) {
    let mut tree = [[0u16; 2]; 256];
    let mut depth = [0u8; 256];
    let mut ones = [false; 256];
    ones[0] = true;
    let mut count = 1usize;
    let mut symbol = 0usize;
    while symbol < ENCODE_TABLE.len() {
        let (len, code) = ENCODE_TABLE[symbol];
        assert!(len >= 5 && len <= 30, "code length out of range");
        let mut node = 0usize;
        let mut i = len;
        while i > 1 {
            i -= 1;
            let bit = ((code >> i) & 1) as usize;
            let child = tree[node][bit];
            assert!(child & LEAF == 0, "a code is a prefix of another");
            if child == 0 {
                assert!(count < 256, "too many internal nodes");
                tree[node][bit] = count as u16;
                depth[count] = depth[node] + 1;
                ones[count] = ones[node] && bit == 1;
                node = count;
                count += 1;
            } else {
                node = child as usize;
            }
        }
        let bit = (code & 1) as usize;
        assert!(tree[node][bit] == 0, "two codes are the same");
        tree[node][bit] = LEAF | symbol as u16;
        symbol += 1;
    }
    assert!(count == 256, "the code tree is not complete");
    let mut n = 0;
    while n < 256 {
        assert!(
            tree[n][0] != 0 && tree[n][1] != 0,
            "the code tree has a gap"
        );
        n += 1;
    }
    (tree, depth, ones)
}

/// Builds the machine from the tree.
const fn build_machine() -> Machine {
    let (tree, depth, ones) = build_tree();
    let mut steps = [[Step {
        next: 0,
        flags: 0,
        symbol: 0,
    }; 16]; 256];
    let mut end = [END_OK; 256];
    let mut state = 0usize;
    while state < 256 {
        end[state] = if state == 0 {
            END_OK
        } else if !ones[state] {
            END_NOT_ONES
        } else if depth[state] > 7 {
            END_LONG
        } else {
            END_OK
        };
        let mut nibble = 0usize;
        while nibble < 16 {
            let mut node = state;
            let mut flags = 0u8;
            let mut symbol = 0u8;
            let mut k = 4;
            while k > 0 {
                k -= 1;
                let child = tree[node][(nibble >> k) & 1];
                if child & LEAF != 0 {
                    let sym = (child & !LEAF) as usize;
                    if sym == EOS {
                        flags = FAIL;
                        node = 0;
                        break;
                    }
                    assert!(flags & EMIT == 0, "two symbols in one nibble");
                    flags |= EMIT;
                    symbol = sym as u8;
                    node = 0;
                } else {
                    node = child as usize;
                }
            }
            steps[state][nibble] = Step {
                next: node as u8,
                flags,
                symbol,
            };
            nibble += 1;
        }
        state += 1;
    }
    Machine { steps, end }
}

static MACHINE: Machine = build_machine();

/// Decodes the Huffman-coded `src`, appending to `dst`. Checks §5.2:
/// no EOS inside, padding of at most seven bits, all ones.
pub(super) fn decode(src: &[u8], dst: &mut Vec<u8>) -> Result<(), &'static str> {
    // Codes are at least 5 bits: at most 8 symbols per 5 bytes.
    dst.reserve(src.len() * 8 / 5 + 1);
    let m = &MACHINE;
    let mut state = 0usize;
    for &byte in src {
        for nibble in [byte >> 4, byte & 0x0f] {
            let step = m.steps[state][usize::from(nibble)];
            if step.flags & FAIL != 0 {
                return Err("EOS inside the string");
            }
            if step.flags & EMIT != 0 {
                dst.push(step.symbol);
            }
            state = usize::from(step.next);
        }
    }
    match m.end[state] {
        END_OK => Ok(()),
        END_LONG => Err("padding longer than 7 bits"),
        _ => Err("padding is not a prefix of EOS"),
    }
}

/// The length of `src` Huffman-coded, in bytes.
pub(super) fn encoded_len(src: &[u8]) -> usize {
    let bits: usize = src
        .iter()
        .map(|&b| usize::from(ENCODE_TABLE[usize::from(b)].0))
        .sum();
    bits.div_ceil(8)
}

/// Appends `src` Huffman-coded to `dst`, padded with ones.
pub(super) fn encode(src: &[u8], dst: &mut Vec<u8>) {
    let mut acc: u64 = 0;
    let mut bits: u32 = 0;
    for &b in src {
        let (len, code) = ENCODE_TABLE[usize::from(b)];
        acc = (acc << len) | u64::from(code);
        bits += u32::from(len);
        while bits >= 8 {
            bits -= 8;
            dst.push((acc >> bits) as u8);
        }
    }
    if bits > 0 {
        dst.push(((acc << (8 - bits)) as u8) | (0xff >> bits));
    }
}

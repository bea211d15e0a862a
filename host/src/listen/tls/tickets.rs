//! Session-ticket keys that every worker of a host shares, so a client
//! resumes whichever worker takes its next connection, rotated every
//! `PERIOD` with the key before last erased (a ticket outlives its key by
//! one period at most).
//!
//! The keys live in words: the current period's index, then two key
//! slots, the period's key in slot `index % 2` and the previous period's
//! in the other. In process mode they are words of the shared area,
//! written by the supervisor alone (`rotate`, on its tick) and read by the
//! workers; in thread mode the process's own words, which the ticketer
//! rotates itself. A ticket is `index ‖ nonce ‖ ChaCha20-Poly1305(state)`;
//! one whose period is neither the current nor the previous, or that does
//! not open (a key being rotated as it was read included), is refused and
//! the client makes a full handshake.

use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, CHACHA20_POLY1305, NONCE_LEN};
use ring::rand::{SecureRandom, SystemRandom};
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::Mutex;

/// How long a key makes tickets.
pub const PERIOD_SECS: u64 = 6 * 3600;
/// The words the keys take: the index and two slots of 32 bytes.
pub const WORDS: usize = 1 + 2 * KEY_WORDS;
const KEY_WORDS: usize = 4;

/// The period of the wall-clock time now (never 0: 0 means no key yet).
fn period_now() -> u64 {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    (secs / PERIOD_SECS).max(1)
}

/// Makes the current period's key if it is not made yet (a new random
/// key in the slot of the key before last, which is erased), and says
/// whether it did. `keys` must have `WORDS` words and one writer.
pub fn rotate(keys: &[AtomicU64]) -> bool {
    let now = period_now();
    if keys.len() < WORDS || keys[0].load(Acquire) >= now {
        return false;
    }
    let mut key = [0u8; 8 * KEY_WORDS];
    if SystemRandom::new().fill(&mut key).is_err() {
        log::error!("TLS session tickets: no random bytes for a new key; keeping the old one");
        return false;
    }
    let slot = slot_of(now);
    for (i, chunk) in key.chunks(8).enumerate() {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        keys[slot + i].store(u64::from_le_bytes(word), Relaxed);
    }
    keys[0].store(now, Release);
    true
}

/// The first word of period `index`'s key slot.
fn slot_of(index: u64) -> usize {
    1 + (index % 2) as usize * KEY_WORDS
}

/// Period `index`'s key as the words hold it now.
fn key_of(keys: &[AtomicU64], index: u64) -> Option<LessSafeKey> {
    let slot = slot_of(index);
    let mut bytes = [0u8; 8 * KEY_WORDS];
    for (i, chunk) in bytes.chunks_mut(8).enumerate() {
        chunk.copy_from_slice(&keys.get(slot + i)?.load(Relaxed).to_le_bytes());
    }
    UnboundKey::new(&CHACHA20_POLY1305, &bytes)
        .ok()
        .map(LessSafeKey::new)
}

/// The ticketer over a set of key words.
pub struct SharedTickets {
    keys: &'static [AtomicU64],
    /// True in thread mode: the ticketer rotates its own keys (under the
    /// lock, its only writer); false in a worker process (the supervisor
    /// does).
    rotates: bool,
    lock: Mutex<()>,
    rng: SystemRandom,
}

impl std::fmt::Debug for SharedTickets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedTickets")
            .field("rotates", &self.rotates)
            .finish_non_exhaustive()
    }
}

impl SharedTickets {
    /// Tickets over `keys` (`WORDS` words), which the supervisor rotates.
    pub fn shared(keys: &'static [AtomicU64]) -> Self {
        SharedTickets {
            keys,
            rotates: false,
            lock: Mutex::new(()),
            rng: SystemRandom::new(),
        }
    }

    /// Tickets over keys of this process alone, which it rotates.
    pub fn own() -> Self {
        let keys: Vec<AtomicU64> = (0..WORDS).map(|_| AtomicU64::new(0)).collect();
        SharedTickets {
            keys: Vec::leak(keys),
            rotates: true,
            lock: Mutex::new(()),
            rng: SystemRandom::new(),
        }
    }
}

impl rustls::server::ProducesTickets for SharedTickets {
    fn enabled(&self) -> bool {
        true
    }

    fn lifetime(&self) -> u32 {
        PERIOD_SECS as u32
    }

    fn encrypt(&self, plain: &[u8]) -> Option<Vec<u8>> {
        if self.rotates {
            let _only = self.lock.lock().ok()?;
            rotate(self.keys);
        }
        let index = self.keys.first()?.load(Acquire);
        if index == 0 {
            return None;
        }
        let key = key_of(self.keys, index)?;
        let mut nonce = [0u8; NONCE_LEN];
        self.rng.fill(&mut nonce).ok()?;
        let mut ticket = Vec::with_capacity(8 + NONCE_LEN + plain.len() + 16);
        ticket.extend_from_slice(&index.to_be_bytes());
        ticket.extend_from_slice(&nonce);
        let mut sealed = plain.to_vec();
        key.seal_in_place_append_tag(
            Nonce::assume_unique_for_key(nonce),
            Aad::from(&ticket[..8]),
            &mut sealed,
        )
        .ok()?;
        ticket.extend_from_slice(&sealed);
        Some(ticket)
    }

    fn decrypt(&self, cipher: &[u8]) -> Option<Vec<u8>> {
        let (index, rest) = cipher.split_first_chunk::<8>()?;
        let (nonce, sealed) = rest.split_first_chunk::<NONCE_LEN>()?;
        let index = u64::from_be_bytes(*index);
        let current = self.keys.first()?.load(Acquire);
        if index == 0 || (index != current && index.checked_add(1) != Some(current)) {
            return None;
        }
        let key = key_of(self.keys, index)?;
        let mut opened = sealed.to_vec();
        let aad = Aad::from(&cipher[..8]);
        let plain = key
            .open_in_place(Nonce::assume_unique_for_key(*nonce), aad, &mut opened)
            .ok()?;
        let n = plain.len();
        opened.truncate(n);
        Some(opened)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::server::ProducesTickets;

    #[test]
    fn a_ticket_opens_in_another_ticketer_over_the_same_keys_only() {
        let own = SharedTickets::own();
        let ticket = own.encrypt(b"session state").expect("sealed");
        let reader = SharedTickets::shared(own.keys);
        assert_eq!(
            reader.decrypt(&ticket).as_deref(),
            Some(&b"session state"[..])
        );
        let other = SharedTickets::own();
        other.encrypt(b"x").expect("its own key");
        assert_eq!(other.decrypt(&ticket), None);
        let mut bent = ticket.clone();
        let last = bent.len() - 1;
        bent[last] ^= 1;
        assert_eq!(reader.decrypt(&bent), None);
        assert_eq!(reader.decrypt(&ticket[..10]), None);
    }

    #[test]
    fn a_ticket_of_the_period_before_last_is_refused() {
        let own = SharedTickets::own();
        let ticket = own.encrypt(b"s").expect("sealed");
        // Two rotations later (the index moved on twice) it is refused,
        // as its key is gone.
        let index = own.keys[0].load(Acquire);
        own.keys[0].store(index + 2, Release);
        assert_eq!(own.decrypt(&ticket), None);
        own.keys[0].store(index + 1, Release);
        assert!(own.decrypt(&ticket).is_some());
    }
}

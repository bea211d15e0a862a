//! The event loop's spare read and write buffers.

use super::READ_CHUNK;
use crate::budget::Budget;

/// Spare read and write buffers of one event loop. Buffers belong to busy
/// connections: an idle keep-alive connection gives its buffers back, so
/// thousands of idle connections cost little more than their slab entries.
/// A read buffer grown past `READ_CHUNK` (a body, a long head) draws the
/// growth from the host's `Budget`.
#[derive(Default)]
pub struct BufPool {
    read: Vec<Vec<u8>>,
    write: Vec<Vec<u8>>,
    budget: Budget,
}

/// Spare buffers kept per loop; more are freed.
const POOL_MAX: usize = 256;

impl BufPool {
    /// A pool whose grown buffers draw on `budget`.
    pub fn with_budget(budget: Budget) -> Self {
        BufPool {
            budget,
            ..BufPool::default()
        }
    }

    /// The budget grown buffers draw on.
    pub fn budget(&self) -> &Budget {
        &self.budget
    }

    /// A read buffer of `READ_CHUNK` initialised bytes.
    pub fn take_read(&mut self) -> Vec<u8> {
        self.read.pop().unwrap_or_else(|| vec![0; READ_CHUNK])
    }

    /// An empty write buffer.
    pub fn take_write(&mut self) -> Vec<u8> {
        self.write.pop().unwrap_or_default()
    }

    pub(super) fn give_read(&mut self, buf: Vec<u8>) {
        // Only standard-size buffers are kept; a grown one is freed.
        if buf.len() == READ_CHUNK && self.read.len() < POOL_MAX {
            self.read.push(buf);
        }
    }

    /// Spare write buffers held (for tests).
    #[cfg(test)]
    pub(crate) fn spare_writes(&self) -> usize {
        self.write.len()
    }

    /// Takes back a write buffer (cleared; an oversized one is freed).
    pub fn give_write(&mut self, mut buf: Vec<u8>) {
        if buf.capacity() > 0 && buf.capacity() <= 4 * READ_CHUNK && self.write.len() < POOL_MAX {
            buf.clear();
            self.write.push(buf);
        }
    }
}

//! The provided-buffer ring multishot receives take their buffers from
//! (`IORING_REGISTER_PBUF_RING`, 5.19): `COUNT` buffers of `SIZE` bytes in
//! one allocation, and the ring of entries the kernel picks them from. A
//! completion names the buffer it filled; the loop copies the bytes out
//! and gives the buffer back (`recycle`), publishing the new tail once per
//! turn (`publish`).

use io_uring::types::BufRingEntry;
use io_uring::IoUring;
use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::io;
use std::sync::atomic::{AtomicU16, Ordering};

/// How many buffers (2 MiB in all, per loop): one for each of a thousand
/// connections that receive in the same turn. A connection that finds
/// none gets `ENOBUFS` and is re-armed the next turn (every buffer is
/// copied out and given back within the turn it filled); with 256 the
/// re-arms cost 1.5x epoll's CPU per request at 1000 connections
/// (benches/RESULTS.md).
pub const COUNT: u16 = 1024;
/// Each buffer's size: a request head in one (a larger request takes
/// several; a fast sender gets its own buffer: `book::Recv`).
pub const SIZE: usize = 2048;
/// The buffer group the receives name.
pub const GROUP: u16 = 0;

const PAGE: usize = 4096;

pub struct BufRing {
    /// `COUNT` entries, page-aligned, shared with the kernel.
    entries: *mut BufRingEntry,
    /// `COUNT * SIZE` bytes the kernel writes into.
    bufs: *mut u8,
    /// The next tail to publish.
    tail: u16,
    /// False once the kernel may still hold the memory past our drop (the
    /// ring went away with receives in flight): then it is leaked.
    freeable: bool,
}

// SAFETY: the pointers are owned allocations that only this value (and the
// kernel, through the ring it is registered with) touches; moving the
// value to another thread moves that ownership with it.
unsafe impl Send for BufRing {}

fn entries_layout() -> Layout {
    // COUNT * 16 bytes, page-aligned as the kernel requires.
    Layout::from_size_align(
        usize::from(COUNT) * std::mem::size_of::<BufRingEntry>(),
        PAGE,
    )
    .expect("a valid layout for the buffer ring")
}

fn bufs_layout() -> Layout {
    Layout::from_size_align(usize::from(COUNT) * SIZE, PAGE).expect("a valid layout for buffers")
}

impl BufRing {
    /// Allocates the buffers and registers them with `ring` as `GROUP`.
    pub fn register(ring: &IoUring) -> io::Result<Self> {
        // SAFETY: both layouts have a non-zero size.
        let entries = unsafe { alloc_zeroed(entries_layout()) }.cast::<BufRingEntry>();
        // SAFETY: as above.
        let bufs = unsafe { alloc_zeroed(bufs_layout()) };
        if entries.is_null() || bufs.is_null() {
            // SAFETY: each pointer, if not null, came from `alloc_zeroed`
            // with its layout and is freed once.
            unsafe {
                if !entries.is_null() {
                    dealloc(entries.cast(), entries_layout());
                }
                if !bufs.is_null() {
                    dealloc(bufs, bufs_layout());
                }
            }
            return Err(io::ErrorKind::OutOfMemory.into());
        }
        // Faulted in now: the buffers are the loop's fixed cost (its idle
        // RSS shows them), not memory a burst of traffic brings.
        // (Volatile: a plain zeroing of zeroed memory is optimised away.)
        for page in (0..bufs_layout().size()).step_by(PAGE) {
            // SAFETY: `page` is inside the live allocation of `bufs`.
            unsafe { std::ptr::write_volatile(bufs.add(page), 0) };
        }
        let mut ring_bufs = BufRing {
            entries,
            bufs,
            tail: 0,
            freeable: true,
        };
        for bid in 0..COUNT {
            ring_bufs.recycle(bid);
        }
        ring_bufs.publish();
        // SAFETY: `entries` is a page-aligned allocation of COUNT entries
        // that lives until `drop`, which runs after the ring is gone or
        // leaks it (`freeable`).
        unsafe {
            ring.submitter()
                .register_buf_ring_with_flags(entries as u64, COUNT, GROUP, 0)
        }?;
        Ok(ring_bufs)
    }

    /// The `len` bytes the kernel wrote into buffer `bid`.
    pub fn bytes(&self, bid: u16, len: usize) -> &[u8] {
        let bid = usize::from(bid % COUNT);
        let len = len.min(SIZE);
        // SAFETY: buffer `bid` lies inside the allocation; the kernel
        // handed it back with this completion and does not write to it
        // until `recycle` puts it in the ring again.
        unsafe { std::slice::from_raw_parts(self.bufs.add(bid * SIZE), len) }
    }

    /// Puts buffer `bid` back in the ring (seen by the kernel at `publish`).
    pub fn recycle(&mut self, bid: u16) {
        let bid = bid % COUNT;
        let index = usize::from(self.tail % COUNT);
        // SAFETY: `index` < COUNT, inside the entries allocation; the
        // kernel reads entries only up to the published tail, which does
        // not cover this one yet.
        unsafe {
            let entry = &mut *self.entries.add(index);
            entry.set_addr(self.bufs.add(usize::from(bid) * SIZE) as u64);
            entry.set_len(SIZE as u32);
            entry.set_bid(bid);
        }
        self.tail = self.tail.wrapping_add(1);
    }

    /// Tells the kernel of the buffers recycled since the last time.
    pub fn publish(&mut self) {
        // SAFETY: the tail field overlays the first entry's reserved
        // field, inside the allocation, aligned for a u16; the kernel
        // reads it concurrently, hence the atomic release store.
        unsafe {
            let tail = BufRingEntry::tail(self.entries).cast_mut();
            AtomicU16::from_ptr(tail).store(self.tail, Ordering::Release);
        }
    }

    /// Leaks the memory at drop: the kernel may write into it still.
    pub fn leak(&mut self) {
        self.freeable = false;
    }
}

impl Drop for BufRing {
    fn drop(&mut self) {
        if !self.freeable {
            return;
        }
        // SAFETY: both came from `alloc_zeroed` with these layouts and are
        // freed once; the ring they were registered with is gone (the
        // poller drops its ring first, and leaks these if receives were
        // still in flight).
        unsafe {
            dealloc(self.entries.cast(), entries_layout());
            dealloc(self.bufs, bufs_layout());
        }
    }
}

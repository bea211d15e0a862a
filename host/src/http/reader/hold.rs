//! What a reader's buffers hold of the host's budget: everything past the
//! first `READ_CHUNK` of its read buffer, and its decoded chunked body.

use super::{RequestReader, READ_CHUNK};
use crate::budget::{Budget, Reservation};

impl RequestReader {
    /// Reserves what buffers of `buf_len` and `body_cap` bytes hold past
    /// the first `READ_CHUNK`; false if the budget has no room.
    pub(super) fn hold_for(&mut self, buf_len: usize, body_cap: usize, budget: &Budget) -> bool {
        hold_for(&mut self.hold, buf_len, body_cap, budget)
    }

    /// Brings the reservation down to what the buffers hold now.
    pub(super) fn rehold(&mut self) {
        let bytes = beyond_first_chunk(self.buf.len(), self.body.capacity());
        if let Some(hold) = &mut self.hold {
            hold.force(bytes);
        }
    }

    /// Bytes held of the budget (for tests and status).
    pub fn held(&self) -> usize {
        self.hold.as_ref().map_or(0, Reservation::bytes)
    }
}

/// What a read buffer of `buf_len` bytes and a decoded body of `body_cap`
/// hold of the budget: all but the first `READ_CHUNK` every busy
/// connection has.
fn beyond_first_chunk(buf_len: usize, body_cap: usize) -> usize {
    buf_len.saturating_sub(READ_CHUNK) + body_cap
}

/// Sets `hold` to what buffers of `buf_len` and `body_cap` bytes hold past
/// the first `READ_CHUNK` (taking a reservation on `budget` the first
/// time); false if the budget has no room.
pub(super) fn hold_for(
    hold: &mut Option<Reservation>,
    buf_len: usize,
    body_cap: usize,
    budget: &Budget,
) -> bool {
    let bytes = beyond_first_chunk(buf_len, body_cap);
    match hold {
        Some(hold) => hold.set(bytes),
        None if bytes == 0 => true,
        None => hold.insert(budget.reservation()).set(bytes),
    }
}

//! What the host advertises of an HTTP/2 connection's limits in its
//! SETTINGS.

use super::frame::{setting, MIN_MAX_FRAME};
pub use crate::settings::H2Params;

/// The SETTINGS the host opens a connection with: each limit that differs
/// from HTTP/2's default, and no server push.
pub fn advertised(p: &H2Params) -> Vec<(u16, u32)> {
    let mut s = vec![
        (setting::MAX_CONCURRENT_STREAMS, p.max_concurrent_streams),
        (setting::ENABLE_PUSH, 0),
        (setting::MAX_HEADER_LIST_SIZE, p.max_header_list),
    ];
    if p.stream_window != 65_535 {
        s.push((setting::INITIAL_WINDOW_SIZE, p.stream_window));
    }
    if p.max_frame_size as usize != MIN_MAX_FRAME {
        s.push((setting::MAX_FRAME_SIZE, p.max_frame_size));
    }
    if p.header_table_size != 4096 {
        s.push((setting::HEADER_TABLE_SIZE, p.header_table_size));
    }
    s
}

//! The limits one HTTP/2 connection is held to (`--h2-*`).

/// An HTTP/2 connection's limits (`--h2-*`, and the HTTP/1.1 limits that
/// mean the same: `--max-head` is the header list's size).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct H2Params {
    /// Streams a client may have open at once (SETTINGS_MAX_CONCURRENT_STREAMS).
    pub max_concurrent_streams: u32,
    /// What a client may send on a stream before the host opens its window
    /// again (SETTINGS_INITIAL_WINDOW_SIZE).
    pub stream_window: u32,
    /// What a client may send on the whole connection before the host
    /// opens its window again.
    pub conn_window: u32,
    /// The largest frame payload the host takes (SETTINGS_MAX_FRAME_SIZE).
    pub max_frame_size: u32,
    /// The HPACK table the client's encoder may use (SETTINGS_HEADER_TABLE_SIZE).
    pub header_table_size: u32,
    /// The largest header list, counted as RFC 9113 §6.5.2 counts it
    /// (SETTINGS_MAX_HEADER_LIST_SIZE; `--max-head`).
    pub max_header_list: u32,
    /// Header fields a request may have (`--max-headers`).
    pub max_headers: usize,
    /// Resets a client may cause a second (streams it resets before their
    /// answer, streams refused), and in a burst.
    pub reset_rate: u32,
    pub reset_burst: u32,
    /// Control frames a client may send a second (SETTINGS, PING, PRIORITY,
    /// RST_STREAM, empty DATA and CONTINUATION, tiny WINDOW_UPDATEs,
    /// unknown types), and in a burst.
    pub control_rate: u32,
    pub control_burst: u32,
}

impl Default for H2Params {
    fn default() -> Self {
        H2Params {
            max_concurrent_streams: 100,
            stream_window: 64 * 1024,
            conn_window: 1024 * 1024,
            max_frame_size: 16_384,
            header_table_size: 4096,
            max_header_list: 64 * 1024,
            max_headers: 100,
            reset_rate: 100,
            reset_burst: 200,
            control_rate: 1000,
            control_burst: 1000,
        }
    }
}

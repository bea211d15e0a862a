//! One mistake in the configuration file, and where it points: what the
//! readers of the file's parts (the flags' keys in `config`, the
//! `[apps.NAME]` tables, the `[tls."ADDR"]` tables) report, and what
//! `file_map` turns into a line and column.

/// One mistake in the file: the key's dotted name, where it points, and
/// what is wrong.
pub(super) struct Problem {
    /// `poller`, `apps.demo.mount`.
    pub key: String,
    /// The key itself (an unknown key) or its value (a bad value).
    pub at: At,
    pub text: String,
}

/// What a problem's line and column point at.
#[derive(Clone, Copy)]
pub(super) enum At {
    Key,
    Value,
    /// The item of an array value.
    Item(usize),
}

impl Problem {
    pub(super) fn key(key: impl Into<String>, text: impl Into<String>) -> Self {
        Problem {
            key: key.into(),
            at: At::Key,
            text: text.into(),
        }
    }

    pub(super) fn value(key: impl Into<String>, text: impl Into<String>) -> Self {
        Problem {
            key: key.into(),
            at: At::Value,
            text: text.into(),
        }
    }
}

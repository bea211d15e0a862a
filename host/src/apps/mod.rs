//! The apps wing: everything about plugins over time. `plugin_copy` makes
//! the sealed private copy that is loaded, `elf_check` and `probe` vet it
//! (structure, then a load in a child process), `loader` opens one library
//! and checks its ABI, `registry` follows the apps directory (generations,
//! refusals, rescans), `services` are the host functions plugins call
//! (timers, the blocking pool), `pool` the blocking pool with per-app shares,
//! `retire` calls a generation's retire hook once nothing holds it.
//! `error` says why a plugin is refused (`LoadError`), `abi_report` finds
//! the first difference in abi_stable's layout report, `fingerprint` what
//! a file's bytes are (a file back with the same bytes keeps its generation),
//! `overlap` which mounts take paths from another app.

pub(crate) mod abi_report;
pub(crate) mod dir;
pub(crate) mod elf_check;
pub(crate) mod error;
pub(crate) mod fingerprint;
pub(crate) mod loader;
pub(crate) mod mounts;
pub(crate) mod overlap;
pub mod plugin_copy;
pub(crate) mod pool;
pub mod probe;
pub(crate) mod quarantine;
pub(crate) mod registry;
pub(crate) mod retire;
pub(crate) mod services;
pub(crate) mod watcher;

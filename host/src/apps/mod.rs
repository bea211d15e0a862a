//! The apps wing: everything about plugins over time. `plugin_copy` makes
//! the sealed private copy that is loaded, `elf_check` and `probe` vet it
//! (structure, then a load in a child process), `loader` opens one library
//! and checks its ABI, `registry` follows the apps directory (generations,
//! refusals, rescans), `services` are the host functions plugins call
//! (timers, the blocking pool), `pool` the blocking pool with per-app shares.
//! `error` says why a plugin is refused (`LoadError`), `abi_report` finds
//! the first difference in abi_stable's layout report.

pub mod abi_report;
pub mod dir;
pub mod elf_check;
pub mod error;
pub mod loader;
pub mod plugin_copy;
pub mod pool;
pub mod probe;
pub mod registry;
pub mod services;
pub mod watcher;

//! The apps wing: everything about plugins over time. `loader` opens one
//! library and checks its ABI, `registry` follows the apps directory
//! (generations, refusals, rescans), `services` are the host functions
//! plugins call (timers, the blocking pool).

pub mod loader;
pub mod registry;
pub mod services;

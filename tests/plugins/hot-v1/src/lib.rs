//! Test-only plugin: the app `hot` at `/hot`, answering `v1` (its twin
//! `hot-v2` answers `v2`; both share `hot.rs`).

const BODY: &str = "v1";

include!("hot.rs");

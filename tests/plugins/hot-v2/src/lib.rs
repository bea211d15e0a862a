//! Test-only plugin: the app `hot` at `/hot`, answering `v2` (its twin
//! `hot-v1` answers `v1`; both share `hot.rs`).

const BODY: &str = "v2";

include!("../../hot-v1/src/hot.rs");

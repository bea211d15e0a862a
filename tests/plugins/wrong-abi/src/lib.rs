//! Test-only plugin built against an incompatible app ABI: it exports an
//! abi_stable root module under the same names as stoa-app-api's
//! (`BASE_NAME`/`NAME` = "stoa_app", the same app-api version, so the
//! version check passes) but with another layout,
//! a prefix struct holding one `extern "C" fn() -> u32`. The host's layout
//! check must refuse it before calling anything in it.

use abi_stable::{
    declare_root_module_statics, export_root_module, library::RootModule,
    prefix_type::PrefixTypeTrait, sabi_types::VersionStrings, StableAbi,
};

/// The impostor root module.
#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = ImpostorModuleRef)))]
#[sabi(missing_field(panic))]
pub struct ImpostorModule {
    /// Not a Stoa entry point: the host must never call it.
    #[sabi(last_prefix_field)]
    pub answer: extern "C" fn() -> u32,
}

impl RootModule for ImpostorModuleRef {
    declare_root_module_statics! {ImpostorModuleRef}
    const BASE_NAME: &'static str = "stoa_app";
    const NAME: &'static str = "stoa_app";
    const VERSION_STRINGS: VersionStrings =
        <stoa_app_api::abi::AppModuleRef as RootModule>::VERSION_STRINGS;
}

extern "C" fn answer() -> u32 {
    42
}

/// Exports the impostor under abi_stable's root-module symbol.
#[export_root_module]
pub fn stoa_root_module() -> ImpostorModuleRef {
    ImpostorModule { answer }.leak_into_prefix()
}

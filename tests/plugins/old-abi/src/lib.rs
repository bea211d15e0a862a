//! Test-only plugin standing for one built against stoa-app-api 0.1.0, the
//! app ABI before it could evolve: its library header names the root
//! module `stoa_app` with version 0.1.0, which is of another 0.minor line
//! than the host's. The host's version check must refuse it, naming both
//! versions, before it looks at the layout (which is not 0.1.0's either:
//! only the header's version matters here).

use abi_stable::{
    declare_root_module_statics, export_root_module, library::RootModule,
    prefix_type::PrefixTypeTrait, sabi_types::VersionStrings, StableAbi,
};

/// The root module: never called by a host that checks versions.
#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = OldModuleRef)))]
#[sabi(missing_field(panic))]
pub struct OldModule {
    #[sabi(last_prefix_field)]
    pub answer: extern "C" fn() -> u32,
}

impl RootModule for OldModuleRef {
    declare_root_module_statics! {OldModuleRef}
    const BASE_NAME: &'static str = "stoa_app";
    const NAME: &'static str = "stoa_app";
    /// The version of stoa-app-api this plugin claims to be built against.
    const VERSION_STRINGS: VersionStrings = VersionStrings::new("0.1.0");
}

extern "C" fn answer() -> u32 {
    0
}

/// Exports the module under abi_stable's root-module symbol.
#[export_root_module]
pub fn stoa_root_module() -> OldModuleRef {
    OldModule { answer }.leak_into_prefix()
}

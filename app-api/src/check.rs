//! The host's check of a plugin's root module: abi_stable's layout check,
//! with one difference allowed that abi_stable itself refuses.
//!
//! abi_stable compares the host's layouts (the "interface") with the
//! plugin's and lets a plugin's prefix type have *more* fields than the
//! host's (a newer library in an older program), but not fewer. Stoa wants
//! the other direction: a plugin built against an earlier app-api of the
//! same line (whose prefix types stop earlier) keeps loading in a newer
//! host. So a report whose every difference is "a prefix type of the
//! plugin has fewer fields than the host's" is accepted; the host reads an
//! appended field only through its accessor, which consults the plugin's
//! own field metadata and answers `None` for a field the plugin lacks.
//! Any other difference is abi_stable's refusal, unchanged.

use crate::abi::AppModuleRef;
use abi_stable::abi_stability::abi_checking::{
    check_layout_compatibility, AbiInstability, AbiInstabilityError, AbiInstabilityErrors,
};
use abi_stable::library::{LibHeader, LibraryError};
use abi_stable::type_layout::{TLData, TLFieldOrFunction, TypeLayout};
use abi_stable::StableAbi;

/// The plugin's root module, if its layouts are the host's or an earlier
/// version's of them (see the module's docs). The version is checked
/// before this (by the host, see COMPATIBILITY.md).
pub fn root_module(header: &'static LibHeader) -> Result<AppModuleRef, LibraryError> {
    let Some(found) = header.layout() else {
        return header.check_layout::<AppModuleRef>();
    };
    let expected = <AppModuleRef as StableAbi>::LAYOUT;
    match check_layout_compatibility(expected, found) {
        Err(report) if only_shorter_prefixes(&report) => {
            // SAFETY: abi_stable compared every type the root module
            // reaches and found no difference but prefix types of the
            // plugin that stop before the host's (an earlier app-api):
            // every field both have agrees, and the host reads a field the
            // plugin may lack only through its accessor, which checks the
            // plugin's field metadata (`missing_field(option)`).
            unsafe { header.unchecked_layout::<AppModuleRef>() }
                .map_err(|e| e.into_library_error::<AppModuleRef>())
        }
        // Identical layouts, or a real difference: abi_stable's own check
        // (and its report).
        _ => header.check_layout::<AppModuleRef>(),
    }
}

/// True if every difference in `report` is a prefix type of the plugin
/// with fewer fields than the host's.
pub fn only_shorter_prefixes(report: &AbiInstabilityErrors) -> bool {
    report
        .errors
        .iter()
        .all(|error| is_shorter_prefix(report.interface, error))
}

/// True if `error` holds nothing but "a prefix type of the plugin has
/// fewer fields than the host's" (an empty entry counts as that too).
pub fn is_shorter_prefix(interface: &'static TypeLayout, error: &AbiInstabilityError) -> bool {
    let layout = match error.stack_trace.as_slice().last() {
        Some(step) => match &step.expected {
            TLFieldOrFunction::Field(field) => field.layout(),
            TLFieldOrFunction::Function(_) => return error.errs.is_empty(),
        },
        None => interface,
    };
    let prefix = matches!(layout.data(), TLData::PrefixType(_));
    error.errs.iter().all(|e| match e {
        AbiInstability::FieldCountMismatch(v) => prefix && v.expected > v.found,
        _ => false,
    })
}

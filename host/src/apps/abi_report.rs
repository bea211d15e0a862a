//! The first difference between two ABI layouts, for the one refusal line:
//! the type (as stoa-app-api declares it), the field of that type whose
//! layout differs, and what differs. abi_stable hands the host its layout
//! report only as text (many lines, logged at debug level), so the check
//! is run again here for the report's structure.

use crate::apps::error::AbiMismatch;
use abi_stable::abi_stability::abi_checking::{
    check_layout_compatibility, AbiInstability, ExpectedFound,
};
use abi_stable::type_layout::{TLFieldOrFunction, TypeLayout};
use std::fmt::{Debug, Display};
use stoa_app_api::check::is_shorter_prefix;

/// The first difference of `found` (a plugin's root module) from
/// `expected` (the host's); `None` if they are compatible or the report
/// names no difference.
pub fn first_mismatch(
    expected: &'static TypeLayout,
    found: &'static TypeLayout,
) -> Option<AbiMismatch> {
    let report = check_layout_compatibility(expected, found).err()?;
    let at = report
        .errors
        .iter()
        .find(|e| !e.errs.is_empty() && !is_shorter_prefix(report.interface, e))?;
    let what = describe(at.errs.first()?);
    let trace = at.stack_trace.as_slice();
    let Some((last, outer)) = trace.split_last() else {
        let ty = report.interface.full_type().to_string();
        return Some(AbiMismatch {
            ty,
            field: None,
            what,
        });
    };
    // The type holding the field: the one the previous step went into.
    let ty = match outer.last() {
        Some(step) => type_of(&step.expected),
        None => report.interface.full_type().to_string(),
    };
    Some(AbiMismatch {
        ty,
        field: Some(name_of(&last.expected)),
        what,
    })
}

/// The type of one step of the report's path.
fn type_of(step: &TLFieldOrFunction) -> String {
    match step {
        TLFieldOrFunction::Field(field) => field.full_type().to_string(),
        TLFieldOrFunction::Function(function) => format!("fn {}", function.name),
    }
}

/// The name of one step of the report's path.
fn name_of(step: &TLFieldOrFunction) -> String {
    match step {
        TLFieldOrFunction::Field(field) => field.name().to_string(),
        TLFieldOrFunction::Function(function) => function.name.to_string(),
    }
}

/// One difference in a few words, on one line (abi_stable's wording).
fn describe(error: &AbiInstability) -> String {
    let text = shown_difference(error)
        .or_else(|| debugged_difference(error))
        .unwrap_or_else(|| unnamed_difference(error));
    one_line(&text)
}

/// A difference whose two sides abi_stable displays.
fn shown_difference(error: &AbiInstability) -> Option<String> {
    use AbiInstability as AI;
    Some(match error {
        AI::Name(v) => shown("mismatched type", v),
        AI::Package(v) => shown("mismatched package", v),
        AI::PackageVersion(v) => shown("incompatible package versions", v),
        AI::Size(v) => shown("incompatible type size", v),
        AI::Alignment(v) => shown("incompatible type alignment", v),
        AI::NonZeroness(v) => shown("mismatched non-zeroness", v),
        AI::MismatchedPrefixSize(v) => shown("prefix types have a different prefix", v),
        AI::GenericParamCount(v) => shown("incompatible number of generic parameters", v),
        AI::FieldCountMismatch(v) => shown("different number of fields", v),
        AI::TooManyVariants(v) => shown("too many variants", v),
        AI::UnexpectedField(v) => {
            let names = ExpectedFound {
                expected: v.expected.name(),
                found: v.found.name(),
            };
            shown("unexpected field", &names)
        }
        _ => return None,
    })
}

/// A difference whose two sides are shown in their debug form.
fn debugged_difference(error: &AbiInstability) -> Option<String> {
    use AbiInstability as AI;
    Some(match error {
        AI::MismatchedPrimitive(v) => debugged("incompatible primitive", v),
        AI::TLDataDiscriminant(v) => debugged("incompatible kind of type", v),
        AI::UnexpectedVariant(v) => debugged("unexpected variant", v),
        AI::ReprAttr(v) => debugged("incompatible repr attributes", v),
        AI::EnumDiscriminant(v) => debugged("different discriminants", v),
        AI::MismatchedExhaustiveness(v) => {
            debugged("enums differ in whether they are exhaustive", v)
        }
        _ => return None,
    })
}

/// Any other difference, by the name of its kind only.
fn unnamed_difference(error: &AbiInstability) -> String {
    let text = format!("{error:?}");
    let kind = text.split(['(', ' ', '{']).next().unwrap_or("unknown");
    format!("{kind} mismatch")
}

fn shown<T: Display>(what: &str, v: &ExpectedFound<T>) -> String {
    format!("{what}: expected {}, found {}", v.expected, v.found)
}

fn debugged<T: Debug>(what: &str, v: &ExpectedFound<T>) -> String {
    format!("{what}: expected {:?}, found {:?}", v.expected, v.found)
}

/// Runs of whitespace (newlines included) as one space.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_kept_on_one_line() {
        assert_eq!(one_line("a\n  b\tc "), "a b c");
    }

    #[test]
    fn a_layout_has_no_difference_from_itself() {
        use abi_stable::StableAbi;
        use stoa_app_api::abi::AppModuleRef;
        let layout = <AppModuleRef as StableAbi>::LAYOUT;
        assert_eq!(first_mismatch(layout, layout), None);
    }

    /// A root module of another layout, as the wrong-abi test plugin has.
    mod impostor {
        #![allow(dead_code)] // only the layout is used: the field is never read
        use abi_stable::StableAbi;

        #[repr(C)]
        #[derive(StableAbi)]
        #[sabi(kind(Prefix(prefix_ref = ImpostorRef)))]
        #[sabi(missing_field(panic))]
        pub struct Impostor {
            #[sabi(last_prefix_field)]
            pub answer: extern "C" fn() -> u32,
        }
    }

    #[test]
    fn another_root_module_is_named_with_its_holder_and_field() {
        use abi_stable::StableAbi;
        use stoa_app_api::abi::AppModuleRef;
        let expected = <AppModuleRef as StableAbi>::LAYOUT;
        let found = <impostor::ImpostorRef as StableAbi>::LAYOUT;
        let m = first_mismatch(expected, found).expect("a difference");
        assert_eq!(m.ty, "PrefixRef<'a, AppModule>");
        assert_eq!(m.field.as_deref(), Some("0"));
        assert_eq!(
            m.what,
            "mismatched type: expected AppModule, found Impostor"
        );
    }
}

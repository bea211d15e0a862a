//! What `export_app!` expands to at run time: the FFI entry points' bodies,
//! the panic firewall and the log forwarding.
//!
//! A panic that reaches an `extern "C"` function or an abi_stable shim
//! aborts the whole host process, so every call into app code is wrapped in
//! `catch_unwind`. The responder is dropped while unwinding, and tells the
//! host so: it answers 500 "app NAME panicked".

use crate::abi::{HostRef, InitContextRef, LogLevel, Request, ResponderBox};
use crate::app::{App, Responder};
use crate::context::{Context, Settings};
use abi_stable::std_types::{ROption, RResult, RStr, RString, RVec};
use std::cell::RefCell;
use std::fmt::Display;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::OnceLock;

/// The app instance of one plugin library (one app per library).
pub type AppSlot = OnceLock<Box<dyn App>>;

thread_local! {
    /// The message of the panic this thread is unwinding from, if any, for
    /// the responder dropped on the way (`Responder`'s `Drop`).
    static LAST_PANIC: RefCell<String> = const { RefCell::new(String::new()) };
}

/// The message of the panic this thread is unwinding from.
pub(crate) fn last_panic() -> String {
    LAST_PANIC
        .try_with(|m| m.borrow().clone())
        .unwrap_or_default()
}

/// Runs the plugin's constructor once, after wiring its logging to the
/// host. `make` may refuse (bad settings, say): its error is the app's
/// refusal, which the host logs naming the app. The context is read here
/// and not kept (it is valid only during the call).
pub fn init<A: App, E: Display>(
    context: InitContextRef<'_>,
    name: &'static str,
    slot: &AppSlot,
    make: impl FnOnce(&Context) -> Result<A, E>,
) -> RResult<(), RString> {
    install_services(context.host(), name);
    install_panic_hook(name);
    if slot.get().is_some() {
        return RResult::ROk(());
    }
    let settings = match Settings::from_json(context.settings_json().as_str()) {
        Ok(settings) => settings,
        Err(e) => return RResult::RErr(RString::from(e.to_string())),
    };
    let previous = context
        .previous_state()
        .and_then(|s| s.into_option())
        .map(|s| s.as_slice().to_vec());
    let context = Context::new(name, settings, previous);
    match catch_unwind(AssertUnwindSafe(|| make(&context))) {
        Ok(Ok(app)) => {
            let _ = slot.set(Box::new(app));
            RResult::ROk(())
        }
        Ok(Err(e)) => RResult::RErr(RString::from(e.to_string())),
        Err(payload) => RResult::RErr(RString::from(format!(
            "the app's constructor panicked: {}",
            panic_message(&*payload)
        ))),
    }
}

/// `init` for a constructor that cannot refuse.
pub fn init_infallible<A: App>(
    context: InitContextRef<'_>,
    name: &'static str,
    slot: &AppSlot,
    make: impl FnOnce(&Context) -> A,
) -> RResult<(), RString> {
    init(context, name, slot, |c| {
        Ok::<A, std::convert::Infallible>(make(c))
    })
}

/// Wires the plugin's `log` records and `host()` to the host's services.
pub(crate) fn install_services(host: HostRef, name: &'static str) {
    install_logger(host, name);
    crate::host::install(host);
}

/// Keeps the message of the panic this thread is unwinding from.
pub(crate) fn remember_panic(message: String) {
    let _ = LAST_PANIC.try_with(|m| *m.borrow_mut() = message);
}

/// Logs a panic in app code with its location, and keeps its message for
/// the responder that unwinding drops.
fn install_panic_hook(name: &'static str) {
    std::panic::set_hook(Box::new(move |info| {
        let location = info
            .location()
            .map_or_else(String::new, |l| format!(" at {}:{}", l.file(), l.line()));
        let message = panic_message(info.payload());
        log::error!(target: name, "app panicked{location}: {message}");
        remember_panic(message);
    }));
}

/// Calls the app's handler behind the panic firewall.
pub fn handle(slot: &AppSlot, name: &'static str, request: &Request<'_>, raw: ResponderBox) {
    let Some(app) = slot.get() else {
        log::error!(target: name, "request before init; answering 500");
        drop(raw);
        return;
    };
    let responder = Responder::from_raw(raw);
    if catch_unwind(AssertUnwindSafe(|| app.handle(request, responder))).is_err() {
        // The panic hook has logged the message and location; the responder
        // was dropped while unwinding and told the host the app panicked.
        log::debug!(target: name, "handler panic contained");
    }
}

/// Calls the app's `retire` hook behind the panic firewall.
pub fn retire(slot: &AppSlot) {
    if let Some(app) = slot.get() {
        let _ = catch_unwind(AssertUnwindSafe(|| app.retire()));
    }
}

/// Asks the app for the state to hand to its successor, behind the panic
/// firewall (a panic hands nothing over).
pub fn handover(slot: &AppSlot) -> ROption<RVec<u8>> {
    slot.get()
        .and_then(|app| catch_unwind(AssertUnwindSafe(|| app.handover())).ok())
        .flatten()
        .map(RVec::from)
        .into()
}

/// Asks the app whether this request blocks; a panic counts as "no".
pub fn blocks(slot: &AppSlot, request: &Request<'_>) -> bool {
    slot.get()
        .is_some_and(|app| catch_unwind(AssertUnwindSafe(|| app.blocks(request))).unwrap_or(false))
}

/// Asks the app whether it reads this request's body as it arrives; a
/// panic counts as "no".
pub fn reads_body(slot: &AppSlot, request: &Request<'_>) -> bool {
    slot.get().is_some_and(|app| {
        catch_unwind(AssertUnwindSafe(|| app.reads_body(request))).unwrap_or(false)
    })
}

/// Runs app code that is not a handler (a timer or job callback) behind the
/// panic firewall; returns false if it panicked.
pub fn guard(f: impl FnOnce()) -> bool {
    catch_unwind(AssertUnwindSafe(f)).is_ok()
}

pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(non-string panic payload)".to_string()
    }
}

/// Forwards this plugin's `log` records to the host. The plugin links its own
/// copy of `log`, whose logger is unset (level OFF) until this runs.
struct Forward {
    host: HostRef,
    target: &'static str,
}

impl log::Log for Forward {
    fn enabled(&self, metadata: &log::Metadata) -> bool {
        (metadata.level() as LogLevel) <= self.host.log_max_level()
    }

    fn log(&self, record: &log::Record) {
        if self.enabled(record.metadata()) {
            let message = record.args().to_string();
            (self.host.log())(
                record.level() as LogLevel,
                RStr::from(self.target),
                RStr::from(message.as_str()),
            );
        }
    }

    fn flush(&self) {}
}

fn install_logger(host: HostRef, target: &'static str) {
    let max = match host.log_max_level() {
        0 => log::LevelFilter::Off,
        1 => log::LevelFilter::Error,
        2 => log::LevelFilter::Warn,
        3 => log::LevelFilter::Info,
        4 => log::LevelFilter::Debug,
        _ => log::LevelFilter::Trace,
    };
    if log::set_boxed_logger(Box::new(Forward { host, target })).is_ok() {
        log::set_max_level(max);
    }
}

/// Exports an `App` as a Stoa plugin. The crate must be a `cdylib` and list
/// `abi_stable` among its dependencies. `new` builds the app from its
/// [`Context`](crate::Context) (settings, handed-over state); `try_new`
/// may refuse with an error (`Result<A, E: Display>`), which the host logs
/// as the app's refusal and does not mount the app. An app renamed lists
/// its old names after its name (`formerly: ["old"],`): configurations
/// that still say `[apps.old]` or `--mount old=...` keep configuring it.
///
/// ```
/// struct Hello;
/// impl stoa_app_api::App for Hello {}
///
/// stoa_app_api::export_app! {
///     name: "hello",
///     mount: "/hello",
///     new: |_context| Hello,
/// }
/// # fn main() {}
/// ```
///
/// A renamed app, which a host finds under its old name too:
///
/// ```
/// struct Python;
/// impl stoa_app_api::App for Python {}
///
/// stoa_app_api::export_app! {
///     name: "python",
///     formerly: ["wsgi"],
///     mount: "/wsgi",
///     new: |_context| Python,
/// }
/// # fn main() {
/// assert_eq!(__stoa_root_module().formerly(), ["wsgi"]);
/// # }
/// ```
#[macro_export]
macro_rules! export_app {
    (name: $name:expr, $(formerly: [$($old:expr),* $(,)?],)? mount: $mount:expr, new: $new:expr $(,)?) => {
        $crate::export_app!(@module $name, [$($($old),*)?], $mount, init_infallible, $new);
    };
    (name: $name:expr, $(formerly: [$($old:expr),* $(,)?],)? mount: $mount:expr, try_new: $new:expr $(,)?) => {
        $crate::export_app!(@module $name, [$($($old),*)?], $mount, init, $new);
    };
    (@module $name:expr, [$($old:expr),*], $mount:expr, $init:ident, $new:expr) => {
        #[doc(hidden)]
        const __STOA_FORMER_NAMES: &[$crate::abi_stable::std_types::RStr<'static>] =
            &[$($crate::abi_stable::std_types::RStr::from_str($old)),*];

        #[doc(hidden)]
        static __STOA_APP: $crate::export::AppSlot = ::std::sync::OnceLock::new();

        #[doc(hidden)]
        extern "C" fn __stoa_init(
            context: $crate::abi::InitContextRef,
        ) -> $crate::abi_stable::std_types::RResult<(), $crate::abi_stable::std_types::RString> {
            $crate::export::$init(context, $name, &__STOA_APP, $new)
        }

        #[doc(hidden)]
        extern "C" fn __stoa_handle(
            request: &$crate::abi::Request<'_>,
            responder: $crate::abi::ResponderBox,
        ) {
            $crate::export::handle(&__STOA_APP, $name, request, responder)
        }

        #[doc(hidden)]
        extern "C" fn __stoa_blocks(request: &$crate::abi::Request<'_>) -> bool {
            $crate::export::blocks(&__STOA_APP, request)
        }

        #[doc(hidden)]
        extern "C" fn __stoa_reads_body(request: &$crate::abi::Request<'_>) -> bool {
            $crate::export::reads_body(&__STOA_APP, request)
        }

        extern "C" fn __stoa_retire() {
            $crate::export::retire(&__STOA_APP)
        }

        #[doc(hidden)]
        extern "C" fn __stoa_handover() -> $crate::abi_stable::std_types::ROption<
            $crate::abi_stable::std_types::RVec<u8>,
        > {
            $crate::export::handover(&__STOA_APP)
        }

        #[doc(hidden)]
        #[::abi_stable::export_root_module]
        pub fn __stoa_root_module() -> $crate::abi::AppModuleRef {
            use $crate::abi_stable::prefix_type::PrefixTypeTrait;
            $crate::abi::AppModule {
                name: $crate::abi_stable::std_types::RStr::from_str($name),
                version: $crate::abi_stable::std_types::RStr::from_str(env!("CARGO_PKG_VERSION")),
                default_mount: $crate::abi_stable::std_types::RStr::from_str($mount),
                init: __stoa_init,
                handle: __stoa_handle,
                blocks: __stoa_blocks,
                retire: __stoa_retire,
                handover: __stoa_handover,
                reads_body: __stoa_reads_body,
                former_names: $crate::abi_stable::std_types::RSlice::from_slice(
                    __STOA_FORMER_NAMES,
                ),
            }
            .leak_into_prefix()
        }
    };
}

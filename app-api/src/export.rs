//! What `export_app!` expands to at run time: the FFI entry points' bodies,
//! the panic firewall and the log forwarding.
//!
//! A panic that reaches an `extern "C"` function or an abi_stable shim
//! aborts the whole host process, so every call into app code is wrapped in
//! `catch_unwind`. The responder is dropped while unwinding, which makes the
//! host answer 500.

use crate::abi::{AppInfo, HostRef, LogLevel, Request, ResponderBox};
use crate::app::{App, Responder};
use abi_stable::std_types::{RResult, RStr, RString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::OnceLock;

/// The app instance of one plugin library (one app per library).
pub type AppSlot = OnceLock<Box<dyn App>>;

/// Builds the app's self-description.
pub fn info(name: &str, version: &str, mount: &str) -> AppInfo {
    AppInfo {
        name: RString::from(name),
        version: RString::from(version),
        default_mount: RString::from(mount),
    }
}

/// Runs the plugin's constructor once, after wiring its logging to the host.
pub fn init(
    host: HostRef,
    name: &'static str,
    slot: &AppSlot,
    make: impl FnOnce() -> Box<dyn App>,
) -> RResult<(), RString> {
    install_logger(host, name);
    crate::host::install(host);
    std::panic::set_hook(Box::new(move |info| {
        let location = info
            .location()
            .map_or_else(String::new, |l| format!(" at {}:{}", l.file(), l.line()));
        log::error!(target: name, "app panicked{location}: {}", panic_message(info.payload()));
    }));
    if slot.get().is_some() {
        return RResult::ROk(());
    }
    match catch_unwind(AssertUnwindSafe(make)) {
        Ok(app) => {
            let _ = slot.set(app);
            RResult::ROk(())
        }
        Err(payload) => RResult::RErr(RString::from(format!(
            "the app's constructor panicked: {}",
            panic_message(&*payload)
        ))),
    }
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
        // was dropped while unwinding, so the client gets a 500.
        log::debug!(target: name, "handler panic contained");
    }
}

/// Asks the app whether this request blocks; a panic counts as "no".
pub fn blocks(slot: &AppSlot, request: &Request<'_>) -> bool {
    slot.get()
        .is_some_and(|app| catch_unwind(AssertUnwindSafe(|| app.blocks(request))).unwrap_or(false))
}

/// Runs app code that is not a handler (a timer or job callback) behind the
/// panic firewall; returns false if it panicked.
pub fn guard(f: impl FnOnce()) -> bool {
    catch_unwind(AssertUnwindSafe(f)).is_ok()
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
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
/// `abi_stable` among its dependencies.
///
/// ```ignore
/// stoa_app_api::export_app! {
///     name: "hello",
///     mount: "/hello",
///     new: || Hello,
/// }
/// ```
#[macro_export]
macro_rules! export_app {
    (name: $name:expr, mount: $mount:expr, new: $new:expr $(,)?) => {
        #[doc(hidden)]
        static __STOA_APP: $crate::export::AppSlot = ::std::sync::OnceLock::new();

        #[doc(hidden)]
        extern "C" fn __stoa_info() -> $crate::abi::AppInfo {
            $crate::export::info($name, env!("CARGO_PKG_VERSION"), $mount)
        }

        #[doc(hidden)]
        extern "C" fn __stoa_init(
            host: $crate::abi::HostRef,
        ) -> $crate::abi_stable::std_types::RResult<(), $crate::abi_stable::std_types::RString> {
            $crate::export::init(host, $name, &__STOA_APP, || {
                ::std::boxed::Box::new(($new)()) as ::std::boxed::Box<dyn $crate::App>
            })
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
        #[::abi_stable::export_root_module]
        pub fn __stoa_root_module() -> $crate::abi::AppModuleRef {
            use $crate::abi_stable::prefix_type::PrefixTypeTrait;
            $crate::abi::AppModule {
                info: __stoa_info,
                init: __stoa_init,
                handle: __stoa_handle,
                blocks: __stoa_blocks,
            }
            .leak_into_prefix()
        }
    };
}

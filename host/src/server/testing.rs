//! What the server's unit tests share: settings at the defaults, a worker's
//! handles over them, an app built into the test binary (no library file),
//! and a capture of the log lines a test's own thread writes.

use super::handles::Handles;
use super::spares::Spares;
use crate::apps::loader::{in_process, LoadedApp};
use crate::apps::mounts::MountTable;
use crate::apps::registry::{AppState, AppTable};
use crate::budget::Budget;
use crate::control::Control;
use crate::open_count::OpenCount;
use crate::ops::watchdog::Board;
use crate::ops::worker_row::Row;
use crate::poller::Wake;
use crate::settings::{AppLimits, ConnParams, NetList, Overload, Settings, WsParams};
use crate::stats::Stats;
use abi_stable::prefix_type::PrefixTypeTrait;
use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::std_types::{ROption, RResult, RSlice, RStr, RString, RVec};
use std::cell::RefCell;
use std::io;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use stoa_app_api::abi::{
    AppModule, InitContextRef, RawWsSession, RawWsSession_TO, Request, ResponderBox, WsSenderBox,
};
use stoa_app_api::Response;

/// A waker for an inbox no poller waits on.
pub struct NoWake;

impl Wake for NoWake {
    fn wake(&self) -> io::Result<()> {
        Ok(())
    }
}

/// The settings at their defaults, for one worker with a cap of
/// `max_connections` and `overload` past it.
pub fn settings(max_connections: usize, overload: Overload) -> Settings {
    let second = Duration::from_secs(1);
    Settings {
        conn: ConnParams::default(),
        ws: WsParams::default(),
        app_body_limits: None,
        app_stream_limits: None,
        shortest_app_timeout: second,
        max_connections,
        overload,
        loop_block_warn: second,
        hsts: None,
        https_redirect: false,
        poller: "test",
        status_allow: NetList::default(),
        trusted_proxies: NetList::default(),
        h2: crate::settings::H2Params::default(),
        h2c: true,
    }
}

/// One worker's handles over `settings`, with `apps` mounted, no pool (a
/// handler runs on the loop), no access log and no budget limit.
pub fn handles(settings: Settings, apps: Vec<Arc<LoadedApp>>) -> Arc<Handles> {
    handles_for(1, settings, apps)
}

/// The handles `workers` loops share (one count of open connections).
pub fn handles_for(workers: usize, settings: Settings, apps: Vec<Arc<LoadedApp>>) -> Arc<Handles> {
    let second = Duration::from_secs(1);
    let stats = Stats::new(workers);
    let open = OpenCount::new(settings.max_connections);
    for app in &apps {
        stats.slot(&app.name);
    }
    Arc::new(Handles {
        settings: Arc::new(settings),
        apps: AppTable::new(AppState {
            mounts: MountTable::new(apps),
            ..AppState::default()
        }),
        pool: None,
        access_log: None,
        control: Arc::new(Control::default()),
        board: Arc::new(Board::new(
            (0..workers).map(|_| Row::private()).collect(),
            second,
            second,
            Vec::new(),
            0,
        )),
        stats: Arc::new(stats),
        budget: Budget::unlimited(),
        peers: None,
        open,
        spares: Spares::new(workers),
        tls: None,
    })
}

/// The test app, mounted at `mount` with its own `limits`. By its
/// PATH_INFO: `/status/N` answers status N; `/later` keeps its responder
/// (`kept_responder`) unanswered; `/stream...` reads its body as it
/// arrives; `/ws` accepts a WebSocket (`sessions_opened`); anything else answers 200 `app saw SCRIPT_NAME|PATH_INFO`.
pub fn app(mount: &str, limits: AppLimits) -> Arc<LoadedApp> {
    let module = AppModule {
        name: RStr::from_str("probe"),
        version: RStr::from_str("1.0.0"),
        default_mount: RStr::from_str("/probe"),
        init: probe_init,
        handle: probe_handle,
        blocks: probe_blocks,
        retire: probe_retire,
        handover: probe_handover,
        reads_body: probe_reads_body,
        former_names: RSlice::from_slice(&[]),
    }
    .leak_into_prefix();
    Arc::new(in_process(module, mount, limits))
}

thread_local! {
    /// The responder the test app kept on this thread (`/later`).
    static KEPT: RefCell<Option<ResponderBox>> = const { RefCell::new(None) };
}

/// The test app's WebSocket session (`/ws`): notes on this thread that it
/// was opened, and ignores what comes.
struct Opened;

thread_local! {
    /// How many of the test app's WebSocket sessions were opened on this
    /// thread.
    static OPENED: RefCell<usize> = const { RefCell::new(0) };
}

/// How many of the test app's WebSocket sessions this thread has opened.
pub fn sessions_opened() -> usize {
    OPENED.with(|o| *o.borrow())
}

impl RawWsSession for Opened {
    fn on_open(&mut self, _sender: WsSenderBox) {
        OPENED.with(|o| *o.borrow_mut() += 1);
    }

    fn on_message(&mut self, _kind: u8, _data: RSlice<'_, u8>) {}

    fn on_close(&mut self, _code: u16, _reason: RStr<'_>) {}
}

/// The responder the test app kept on this thread, if any.
pub fn kept_responder() -> Option<ResponderBox> {
    KEPT.with(|k| k.borrow_mut().take())
}

extern "C" fn probe_init(_context: InitContextRef<'_>) -> RResult<(), RString> {
    RResult::ROk(())
}

extern "C" fn probe_handle(request: &Request<'_>, responder: ResponderBox) {
    let path = request.path_info.as_str();
    if path == "/later" {
        KEPT.with(|k| *k.borrow_mut() = Some(responder));
        return;
    }
    if path == "/ws" {
        let session = RawWsSession_TO::from_value(Opened, TD_Opaque);
        responder.accept_websocket(session);
        return;
    }
    let response = match path.strip_prefix("/status/") {
        Some(n) => Response::text(n.parse().unwrap_or(200), "status"),
        None => Response::text(200, &format!("app saw {}|{path}", request.script_name)),
    };
    responder.respond(response);
}

extern "C" fn probe_blocks(_request: &Request<'_>) -> bool {
    false
}

extern "C" fn probe_retire() {}

extern "C" fn probe_handover() -> ROption<RVec<u8>> {
    ROption::RNone
}

extern "C" fn probe_reads_body(request: &Request<'_>) -> bool {
    request.path_info.as_str().starts_with("/stream")
}

/// Runs `f` and returns the log lines this thread wrote meanwhile (the
/// capture is installed on first use, for every level; other threads'
/// lines are not kept).
pub fn logged(f: impl FnOnce()) -> Vec<String> {
    static INSTALLED: OnceLock<bool> = OnceLock::new();
    let installed = *INSTALLED.get_or_init(|| {
        let ok = log::set_logger(&Capture).is_ok();
        if ok {
            log::set_max_level(log::LevelFilter::Trace);
        }
        ok
    });
    assert!(installed, "another logger is installed");
    LINES.with(|l| l.borrow_mut().clear());
    LINES.with(|l| l.borrow_mut().push(None));
    f();
    LINES.with(|l| l.borrow_mut().drain(..).flatten().collect())
}

thread_local! {
    /// This thread's captured lines; empty (not capturing) until
    /// `logged` marks it with a first `None`.
    static LINES: RefCell<Vec<Option<String>>> = const { RefCell::new(Vec::new()) };
}

struct Capture;

impl log::Log for Capture {
    fn enabled(&self, _metadata: &log::Metadata<'_>) -> bool {
        true
    }

    fn log(&self, record: &log::Record<'_>) {
        let _ = LINES.try_with(|l| {
            let mut l = l.borrow_mut();
            if !l.is_empty() {
                l.push(Some(format!("{} {}", record.level(), record.args())));
            }
        });
    }

    fn flush(&self) {}
}

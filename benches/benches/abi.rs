//! The cost of one request through the plugin ABI against the same handler
//! called directly. The plugin is the real `libarticle.so`, loaded and
//! checked by abi_stable as the host loads it; the direct calls use the
//! `article` crate's rlib.

use abi_stable::library::lib_header_from_path;
use abi_stable::prefix_type::PrefixTypeTrait;
use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::std_types::{ROption, RSlice, RStr, RString};
use article::ArticleApp;
use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use std::path::PathBuf;
use stoa_app_api::abi::{
    AppModuleRef, HeaderRef, HostModule, HostRef, InitContext, LogLevel, RawResponder,
    RawResponder_TO, Request, StreamBox, TaskBox, WsSessionBox,
};
use stoa_app_api::{App, Responder, Response};

/// Takes the answer and drops it, as the host drops it after serialising.
struct BenchResponder;

impl RawResponder for BenchResponder {
    fn respond(self, response: Response) {
        black_box(&response);
    }

    fn panicked(self, message: RString) {
        panic!("the article app panicked: {message}");
    }

    fn start_stream(self, _head: Response, _length: ROption<u64>) -> StreamBox {
        stoa_app_api::abi::closed_stream()
    }

    fn read_body(self, sink: stoa_app_api::abi::BodySinkBox) {
        drop(sink);
    }

    fn accept_websocket(self, session: WsSessionBox) {
        drop(session);
    }
}

extern "C" fn no_log(_: LogLevel, _: RStr<'_>, _: RStr<'_>) {}
extern "C" fn no_timer(_: u64, task: TaskBox) {
    drop(task);
}
extern "C" fn no_pool(task: TaskBox) -> bool {
    drop(task);
    false
}

/// Host services that do nothing (the article app uses none of them).
fn host() -> HostRef {
    HostModule {
        log_max_level: 0,
        log: no_log,
        call_later: no_timer,
        spawn_blocking: no_pool,
    }
    .leak_into_prefix()
}

/// libarticle.so from the build this bench belongs to: `target/<profile>/`
/// (cargo build) or its `deps/` (built as this bench's dev-dependency).
fn plugin_path() -> PathBuf {
    if let Some(p) = std::env::var_os("STOA_ARTICLE_SO") {
        return p.into();
    }
    let exe = std::env::current_exe().expect("bench executable path");
    let deps = exe.parent().expect("bench lives in target/<profile>/deps");
    let candidates = [deps.join("libarticle.so"), deps.join("../libarticle.so")];
    candidates
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .unwrap_or_else(|| {
            panic!(
                "libarticle.so not found in {}; run cargo build --release",
                deps.display()
            )
        })
}

fn benches(c: &mut Criterion) {
    let path = plugin_path();
    let module = lib_header_from_path(&path)
        .and_then(|h| h.init_root_module::<AppModuleRef>())
        .unwrap_or_else(|e| panic!("loading {}: {e}", path.display()));
    let context = InitContext {
        host: host(),
        settings_json: RStr::from("{}"),
        previous_state: ROption::RNone,
    };
    if let abi_stable::std_types::RResult::RErr(e) = module.construct(context) {
        panic!("article init: {e}");
    }
    let headers = [
        HeaderRef {
            name: RStr::from("Host"),
            value: RSlice::from_slice(b"127.0.0.1:8000"),
        },
        HeaderRef {
            name: RStr::from("User-Agent"),
            value: RSlice::from_slice(b"stoa-bench"),
        },
        HeaderRef {
            name: RStr::from("Accept"),
            value: RSlice::from_slice(b"*/*"),
        },
    ];
    let request = Request {
        method: RStr::from("GET"),
        version_minor: 1,
        scheme: RStr::from("http"),
        server_name: RStr::from("127.0.0.1"),
        server_port: 8000,
        peer: RStr::from("127.0.0.1:40000"),
        script_name: RStr::from("/article"),
        path_info: RStr::from(""),
        query: RStr::from(""),
        headers: RSlice::from_slice(&headers),
        body: RSlice::from_slice(&[]),
    };
    let app = ArticleApp::new();
    let mut g = c.benchmark_group("article");
    g.bench_function("plugin ABI: handle + responder", |b| {
        let handle = module.handle();
        b.iter(|| {
            handle(
                black_box(&request),
                RawResponder_TO::from_value(BenchResponder, TD_Opaque),
            )
        })
    });
    g.bench_function("direct: App::handle + responder", |b| {
        b.iter(|| {
            let responder =
                Responder::from_raw(RawResponder_TO::from_value(BenchResponder, TD_Opaque));
            app.handle(black_box(&request), responder)
        })
    });
    g.bench_function("direct: App::call", |b| {
        b.iter(|| app.call(black_box(&request)))
    });
    g.finish();
}

criterion_group!(abi, benches);
criterion_main!(abi);

//! The lifespan of an ASGI application and its refusals: each worker
//! process runs its own (in process mode); shutdown runs
//! when the host stops gracefully; a failing startup refuses the app,
//! naming its message, while the native apps serve; with `lifespan = "on"`
//! an application that raises on the lifespan scope is refused, with
//! `"auto"` it is served; a callable that does not fit `interface` is
//! refused naming the setting.

use crate::asgi_host::{fastapi, one_app, start_text, wait_seen};
use crate::bridge::{json, require_python, Bridge};
use crate::client::get;
use crate::loading::install_a_new_generation;
use rustix::process::Signal;
use std::time::Duration;

/// A hot replace of the bridge: the new generation starts a loop of its
/// own and runs startup again; the old one's shutdown completes on its own
/// loop (its retire does not hang), and the new one serves, client-gone
/// notices included.
fn a_hot_replace_runs_a_new_loop_and_retires_the_old(poller: &str) {
    let bridge = fastapi(poller, "/api", &[]);
    let server = &bridge.server;
    assert_eq!(server.get("/api/hello").text(), "Hello World!");
    install_a_new_generation(server);
    assert_eq!(
        server.log_lines(&["ASGI event loop: "]).len(),
        2,
        "{}",
        server.log()
    );
    assert!(
        server.wait_log(&["lifespan shutdown complete"]),
        "{}",
        server.log()
    );
    assert!(
        !server.log_contains("retire still running"),
        "{}",
        server.log()
    );
    assert_eq!(server.get("/api/hello").text(), "Hello World!");
    let state = json(&server.get("/api/state").body);
    assert!(state.is_object(), "{state}");
    let mut c = server.connect();
    c.send(&get("/api/wait-disconnect?tag=g2"));
    assert!(
        wait_seen(&bridge, "/api/seen", "waiting g2"),
        "{}",
        server.log()
    );
    drop(c);
    assert!(
        wait_seen(&bridge, "/api/seen", "disconnected g2"),
        "{}",
        server.log()
    );
    assert!(
        !server.log_contains("event loop was blocked"),
        "{}",
        server.log()
    );
}

fn shutdown_runs_when_the_host_stops(poller: &str) {
    let mut bridge = fastapi(poller, "/api", &[]);
    assert_eq!(bridge.server.get("/api/hello").text(), "Hello World!");
    bridge.server.signal(Signal::TERM);
    let exit = bridge.server.wait_exit(Duration::from_secs(15));
    assert_eq!(
        exit.and_then(|e| e.code()),
        Some(0),
        "{}",
        bridge.server.log()
    );
    assert!(
        bridge.server.log_contains("fastapp lifespan shutdown"),
        "{}",
        bridge.server.log()
    );
}

/// A host with `optional = true` serving `text`'s application at `/py`,
/// expected to refuse it: the log has a line with
/// `app python failed to initialise` and `names` ("" for any), and a line (the same or
/// one of a traceback) with `message`; the native app answers, and
/// nothing at `/py`.
fn refused(poller: &str, text: &str, names: &str, message: &str) -> Bridge {
    let bridge = start_text(poller, text, &[]);
    let server = &bridge.server;
    assert!(
        server.wait_log(&["app python failed to initialise", names]),
        "no refusal naming {names:?}:\n{}",
        server.log()
    );
    assert!(
        server.wait_log(&[message]),
        "no {message:?}:\n{}",
        server.log()
    );
    assert_eq!(server.get("/demo/justnow/").status, 200);
    assert_eq!(server.get("/py/hello").status, 404);
    bridge
}

/// `module` as an ASGI app at `/py` with the `settings` lines, optional.
fn optional_app(module: &str, settings: &str) -> String {
    one_app("/py", module, "optional = true", settings)
}

fn a_failing_startup_refuses_the_app(poller: &str) {
    require_python(&["fastapi"]);
    refused(
        poller,
        &optional_app("broken_startup:app", ""),
        "",
        "the database is unreachable: startup failed on purpose",
    );
}

fn lifespan_on_refuses_an_app_without_one_and_auto_serves_it(poller: &str) {
    refused(
        poller,
        &optional_app("pureasgi:application", "lifespan = \"on\""),
        "",
        "pureasgi does not handle lifespan",
    );
    for setting in ["lifespan = \"auto\"", "lifespan = \"off\""] {
        let bridge = start_text(
            poller,
            &one_app("/py", "pureasgi:application", "", setting),
            &[],
        );
        let r = bridge.server.get("/py/hello");
        assert_eq!(
            (r.status, r.text()),
            (200, "pure hello"),
            "{setting}: {r:?}"
        );
    }
    // One that supports it is served with "on".
    let text = one_app("/py", "pureasgi:strict", "", "lifespan = \"on\"");
    let bridge = start_text(poller, &text, &[]);
    assert_eq!(bridge.server.get("/py/hello").text(), "pure hello");
}

fn a_callable_of_the_other_interface_is_refused_naming_it(poller: &str) {
    // A WSGI callable declared ASGI.
    let text = optional_app("pureasgi:wsgi_app", "");
    refused(poller, &text, "interface", "pureasgi:wsgi_app");
    // An ASGI callable declared WSGI.
    let text = optional_app("pureasgi:application", "")
        .replace("interface = \"asgi\"", "interface = \"wsgi\"");
    refused(poller, &text, "interface", "pureasgi:application");
}

/// In process mode each worker process starts its own interpreter, loop
/// and lifespan.
fn each_worker_process_has_its_loop_and_lifespan(poller: &str) {
    let bridge = fastapi(
        poller,
        "/api",
        &["--worker-mode", "process", "--workers", "2"],
    );
    let server = &bridge.server;
    let loops = server.wait_lines(&["ASGI event loop: "], 2);
    assert_eq!(loops.len(), 2, "{}", server.log());
    let startups = server.wait_lines(&["fastapp lifespan startup"], 2);
    assert_eq!(startups.len(), 2, "{}", server.log());
    for _ in 0..4 {
        let r = server.get("/api/state");
        assert_eq!(json(&r.body)["started"], "yes", "{r:?}");
        assert_eq!(server.get("/api/hello").text(), "Hello World!");
    }
}

matrix!(
    each_worker_process_has_its_loop_and_lifespan,
    a_hot_replace_runs_a_new_loop_and_retires_the_old,
    shutdown_runs_when_the_host_stops,
    a_failing_startup_refuses_the_app,
    lifespan_on_refuses_an_app_without_one_and_auto_serves_it,
    a_callable_of_the_other_interface_is_refused_naming_it
);

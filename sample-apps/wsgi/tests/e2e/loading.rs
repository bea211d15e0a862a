//! Loading: an exception at import refuses the app (named in the log) and
//! the host serves the others; C extension modules import (libpython's
//! symbols are global); a hot replace of the plugin reuses the running
//! interpreter.

use crate::harness::{plugins, wait_until, Server};
use crate::wsgi::{test_apps, Wsgi};
use std::time::Duration;

fn import_error_refuses_the_app(poller: &str) {
    let wsgi = Wsgi::start_optional(poller, "broken:application", &test_apps(), "/py");
    let server = &wsgi.server;
    assert!(
        server.wait_log(&[
            "app wsgi failed to initialise",
            "broken:application",
            "ImportError"
        ]),
        "{}",
        server.log()
    );
    assert!(server.wait_log(&["broken on purpose: the wsgi app must be refused"]));
    assert_eq!(server.get("/demo/justnow/").status, 200);
    assert_eq!(server.get("/py/").status, 404);
}

fn c_extension_modules_import(poller: &str) {
    let wsgi = Wsgi::start(poller, "sitecheck:application", &test_apps(), "/py", &[]);
    let r = wsgi.server.get("/py/");
    assert_eq!((r.status, r.text()), (200, "extensions imported"), "{r:?}");
}

/// A new generation of the plugin finds the interpreter running and the
/// application's module imported: its state (the close() count) goes on.
fn hot_replace_keeps_the_interpreter(poller: &str) {
    let wsgi = Wsgi::start(poller, "pep3333:application", &test_apps(), "/pep", &[]);
    let server = &wsgi.server;
    assert_eq!(server.get("/pep/chunks").text(), "one,two,three");
    assert_eq!(server.get("/pep/closed").text(), "1");
    install_a_new_generation(server);
    assert_eq!(server.get("/pep/chunks").text(), "one,two,three");
    assert_eq!(server.get("/pep/closed").text(), "2");
}

/// Installs the bridge again (a byte past its end, under a new inode: the
/// very same bytes would keep the mounted generation) and waits until the
/// host has replaced generation 1 and retired it.
pub fn install_a_new_generation(server: &Server) {
    let dir = server.apps_dir();
    let file = plugins()["wsgi"]
        .file_name()
        .expect("a file name")
        .to_owned();
    let tmp = dir.join(".wsgi.so.new");
    let mut bytes = std::fs::read(&plugins()["wsgi"]).expect("read the plugin");
    bytes.push(0);
    std::fs::write(&tmp, &bytes).expect("write the copy");
    std::fs::rename(&tmp, dir.join(&file)).expect("install the copy");
    let replaced = wait_until(Duration::from_secs(15), || {
        !server.log_lines(&["replaced app wsgi"]).is_empty()
    });
    assert!(replaced, "no replace logged:\n{}", server.log());
    assert!(
        server.wait_log(&["retired app wsgi generation 1"]),
        "{}",
        server.log()
    );
}

matrix!(
    import_error_refuses_the_app,
    c_extension_modules_import,
    hot_replace_keeps_the_interpreter
);

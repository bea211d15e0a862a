//! Loading: an exception at import refuses the app (named in the log) and
//! the host serves the others; C extension modules import (libpython's
//! symbols are global); a hot replace of the plugin reuses the running
//! interpreter.

use crate::bridge::{test_apps, Bridge};
use crate::harness::{plugins, wait_until, Server};
use std::time::Duration;

fn import_error_refuses_the_app(poller: &str) {
    let bridge = Bridge::start_optional(poller, "broken:application", &test_apps(), "/py");
    let server = &bridge.server;
    assert!(
        server.wait_log(&[
            "app python failed to initialise",
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
    let bridge = Bridge::start(poller, "sitecheck:application", &test_apps(), "/py", &[]);
    let r = bridge.server.get("/py/");
    assert_eq!((r.status, r.text()), (200, "extensions imported"), "{r:?}");
}

/// A new generation of the plugin finds the interpreter running and the
/// application's module imported: its state (the close() count) goes on.
fn hot_replace_keeps_the_interpreter(poller: &str) {
    let bridge = Bridge::start(poller, "pep3333:application", &test_apps(), "/pep", &[]);
    let server = &bridge.server;
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
    let file = plugins()["python"]
        .file_name()
        .expect("a file name")
        .to_owned();
    let tmp = dir.join(".python.so.new");
    let mut bytes = std::fs::read(&plugins()["python"]).expect("read the plugin");
    bytes.push(0);
    std::fs::write(&tmp, &bytes).expect("write the copy");
    std::fs::rename(&tmp, dir.join(&file)).expect("install the copy");
    let replaced = wait_until(Duration::from_secs(15), || {
        !server.log_lines(&["replaced app python"]).is_empty()
    });
    assert!(replaced, "no replace logged:\n{}", server.log());
    assert!(
        server.wait_log(&["retired app python generation 1"]),
        "{}",
        server.log()
    );
}

matrix!(
    import_error_refuses_the_app,
    c_extension_modules_import,
    hot_replace_keeps_the_interpreter
);

/// A configuration written when the bridge was the app `wsgi` (its table
/// `[apps.wsgi]`, a `--mount wsgi=` flag) still configures it: its mount
/// and settings are honoured, and the host warns with the new name.
/// Backend-free (the loader's), so one backend.
#[test]
fn a_configuration_that_still_says_wsgi_configures_the_bridge() {
    crate::bridge::require_python(&[]);
    let (_config, path) = former_config("/old");
    let server = Server::launch("epoll")
        .apps(&["python"])
        .args(&["--config", &path, "--mount", "wsgi=/flag"])
        .start();
    let warning = "the configuration names it \"wsgi\", its former name; \
                   its name is now \"python\"";
    assert!(server.wait_log(&["WARN", warning]), "{}", server.log());
    // The flag's mount wins over the table's, as for any app; the
    // settings come from `[apps.wsgi.settings]`.
    let ok = wait_until(Duration::from_secs(60), || {
        server.get("/flag/chunks").text() == "one,two,three"
    });
    assert!(ok, "{}", server.log());
    assert_eq!(server.get("/old/chunks").status, 404);
}

/// `[apps.wsgi]` at `mount` serving the PEP 3333 test application.
fn former_config(mount: &str) -> (crate::harness::TempDir, String) {
    let dir = crate::harness::TempDir::new("wsgi-config");
    let path = dir.path().join("stoa.toml");
    let text = format!(
        "[apps.wsgi]\nmount = {mount:?}\n[apps.wsgi.settings]\nmodule = \"pep3333:application\"\n\
         python_path = [{:?}]\n",
        test_apps().display().to_string()
    );
    std::fs::write(&path, text).expect("write the configuration file");
    (dir, path.display().to_string())
}

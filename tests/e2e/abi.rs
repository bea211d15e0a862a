//! The app ABI across versions (app-api's COMPATIBILITY.md): a plugin built
//! against the previous compatible stoa-app-api (tests/abi-previous) loads
//! in this host, receives its settings and answers; one built against an
//! incompatible app-api is refused with a line naming both versions; a
//! panic and a dropped responder answer 500 with their own words; apps'
//! settings come from the configuration file and a constructor may refuse
//! them.

use crate::common::config_file as config;
use crate::harness::Server;

matrix!(
    a_plugin_built_against_the_previous_app_api_is_served,
    an_incompatible_app_api_is_refused_naming_both_versions,
    a_panic_and_a_dropped_responder_answer_differently,
    settings_reach_the_constructor,
    a_constructor_refuses_bad_settings,
);

fn a_plugin_built_against_the_previous_app_api_is_served(poller: &str) {
    let (_dir, file) = config("[apps.previous.settings]\ngreeting = \"salut\"\n");
    let server = Server::launch(poller)
        .apps(&["abi-previous", "article"])
        .env("STOA_CONFIG", &file)
        .start();
    let r = server.get("/previous");
    assert_eq!(
        (r.status, r.text()),
        (200, "built against stoa-app-api 0.2.0, greeting salut"),
        "{}",
        server.log()
    );
    let r = server.get("/previous/panic");
    assert_eq!(
        (r.status, r.text().trim_end()),
        (500, "500 Internal Server Error: app previous panicked")
    );
    let r = server.get("/previous/drop");
    assert_eq!(
        (r.status, r.text().trim_end()),
        (500, "500 Internal Server Error: the app did not answer")
    );
    assert_eq!(server.get("/article").status, 200);
}

fn an_incompatible_app_api_is_refused_naming_both_versions(poller: &str) {
    let server = Server::start(poller, &["old-abi", "article"], &[]);
    assert!(
        server.wait_log(&["refused plugin", "libstoa_test_old_abi.so"]),
        "{}",
        server.log()
    );
    let lines = server.log_lines(&["refused plugin", "libstoa_test_old_abi.so"]);
    assert_eq!(lines.len(), 1, "{lines:#?}");
    let host = format!("host expects {}", stoa_app_api::VERSION);
    assert!(
        lines[0].contains("incompatible app ABI version (plugin 0.1.0, ")
            && lines[0].contains(&host),
        "{lines:#?}"
    );
    assert_eq!(server.get("/article").status, 200);
}

fn a_panic_and_a_dropped_responder_answer_differently(poller: &str) {
    let server = Server::start(poller, &["misbehave"], &[]);
    let r = server.get("/_test/panic");
    assert_eq!(
        (r.status, r.text().trim_end()),
        (500, "500 Internal Server Error: app misbehave panicked")
    );
    assert!(
        server.wait_log(&["ERROR", "app misbehave panicked: misbehave: asked to panic"]),
        "{}",
        server.log()
    );
    let r = server.get("/_test/drop");
    assert_eq!(
        (r.status, r.text().trim_end()),
        (500, "500 Internal Server Error: the app did not answer")
    );
    // A panic on the app's own thread, holding the responder, is one too.
    let r = server.get("/_test/panic-later");
    assert_eq!(
        r.text().trim_end(),
        "500 Internal Server Error: app misbehave panicked"
    );
    // The log is read by another thread: wait for the second line.
    let both = crate::harness::wait_until(std::time::Duration::from_secs(5), || {
        server.log_lines(&["app misbehave panicked"]).len() == 2
    });
    assert!(both, "{}", server.log());
}

fn settings_reach_the_constructor(poller: &str) {
    let text = "[apps.hello-project.settings]\nallowed_hosts = [\"example.org\"]\n";
    let (_dir, file) = config(text);
    let server = Server::launch(poller)
        .apps(&["hello-project"])
        .env("STOA_CONFIG", &file)
        .start();
    let mut c = server.connect();
    let r = c.request(b"GET / HTTP/1.1\r\nHost: example.org\r\n\r\n");
    assert_eq!(r.status, 200, "{}", server.log());
    // The default list is replaced: localhost is no longer allowed.
    let r = c.request(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n");
    assert_eq!(r.status, 400);
}

fn a_constructor_refuses_bad_settings(poller: &str) {
    // Optional: the host starts without it (a required app refused is a
    // start-up error).
    let text =
        "[apps.hello-project]\noptional = true\n[apps.hello-project.settings]\nallowed_hosts = 5\n";
    let (_dir, file) = config(text);
    let server = Server::launch(poller)
        .apps(&["hello-project", "article"])
        .env("STOA_CONFIG", &file)
        .start();
    assert!(
        server.wait_log(&[
            "app hello-project failed to initialise: setting `allowed_hosts`: expected a list of strings, got 5"
        ]),
        "{}",
        server.log()
    );
    assert_eq!(server.get("/").status, 404);
    assert_eq!(server.get("/article").status, 200);
}

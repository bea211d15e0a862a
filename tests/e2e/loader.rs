//! The plugin loader: good apps are loaded and logged, every bad file in the
//! apps directory (not a library, a library that is not a Stoa app, an app
//! built against an incompatible ABI, a mount clash) is refused with one
//! log line while the others are served, `--mount` moves an app, and an
//! empty directory still gives a running server.

use crate::client::get;
use crate::harness::{Server, SAMPLE_APPS};

matrix!(
    loaded_apps_are_logged,
    bad_files_are_refused_one_line_each,
    incompatible_abi_is_refused,
    mount_clash_refuses_the_second_app,
    mount_flag_moves_an_app,
    empty_apps_dir_answers_404_with_a_warning,
    plugin_logs_reach_the_host_log,
);

/// The one "refused plugin" line naming `file`, with its reason.
fn refusal(server: &Server, file: &str) -> String {
    let path = server.apps_dir().join(file);
    let path = path.display().to_string();
    assert!(
        server.wait_log(&["refused plugin", &path]),
        "no refusal for {file}"
    );
    let lines = server.log_lines(&["refused plugin", &path]);
    assert_eq!(lines.len(), 1, "one line for {file}: {lines:#?}");
    let reason = lines[0]
        .split_once(&format!("{path}: "))
        .map(|(_, r)| r.trim().to_string())
        .unwrap_or_default();
    assert!(!reason.is_empty(), "no reason given: {}", lines[0]);
    assert!(!reason.contains('\n'));
    reason
}

fn loaded_apps_are_logged(poller: &str) {
    let server = Server::samples(poller);
    let dir = server.apps_dir();
    for (name, mount, file) in [
        ("hello-project", "/", "libhello_project.so"),
        ("article", "/article", "libarticle.so"),
        ("environ", "/_environ", "libenviron.so"),
    ] {
        let line = format!(
            "loaded app {name} 0.1.0 at {mount} from {}",
            dir.join(file).display()
        );
        assert!(
            server.wait_log(&[&line]),
            "no {line:?} in\n{}",
            server.log()
        );
        assert!(server.log_lines(&[&line])[0].contains("INFO"));
    }
    assert!(server.log_lines(&["refused plugin"]).is_empty());
}

fn bad_files_are_refused_one_line_each(poller: &str) {
    let mut apps = SAMPLE_APPS.to_vec();
    apps.extend(["not-stoa", "wrong-abi"]);
    let mut launch = Server::launch(poller)
        .apps(&apps)
        .file("x.so", b"this is a text file, not a shared library\n")
        .file("notes.txt", b"not a plugin: wrong extension, ignored\n");
    // A real C library too, when the system has one.
    let libz = [
        "/lib/x86_64-linux-gnu/libz.so.1",
        "/usr/lib/x86_64-linux-gnu/libz.so.1",
    ]
    .into_iter()
    .find_map(|p| std::fs::read(p).ok());
    if let Some(bytes) = &libz {
        launch = launch.file("libz-copy.so", bytes);
    } else {
        eprintln!("no system libz found: testing the Rust non-Stoa cdylib only");
    }
    let server = launch.start();

    let reason = refusal(&server, "x.so");
    assert!(reason.to_lowercase().contains("shared library"), "{reason}");
    let reason = refusal(&server, "libstoa_test_not_stoa.so");
    assert!(reason.to_lowercase().contains("not a stoa app"), "{reason}");
    let reason = refusal(&server, "libstoa_test_wrong_abi.so");
    assert!(reason.contains("incompatible"), "{reason}");
    let mut expected = 3;
    if libz.is_some() {
        let reason = refusal(&server, "libz-copy.so");
        assert!(reason.to_lowercase().contains("not a stoa app"), "{reason}");
        expected += 1;
    }
    let refused = server.log_lines(&["refused plugin"]);
    assert_eq!(refused.len(), expected, "{refused:#?}");
    assert!(refused.iter().all(|l| !l.contains("notes.txt")));
    assert_eq!(server.log_lines(&["loaded app"]).len(), 3);

    let mut c = server.connect();
    assert_eq!(c.request(&get("/hello/")).text(), "Hello World!");
    assert_eq!(c.request(&get("/article")).body.len(), 49);
    assert_eq!(c.request(&get("/_environ")).status, 200);
}

fn incompatible_abi_is_refused(poller: &str) {
    let server = Server::start(poller, &["wrong-abi", "article"], &[]);
    let reason = refusal(&server, "libstoa_test_wrong_abi.so");
    assert!(reason.starts_with("incompatible app ABI"), "{reason}");
    // The first difference: the type and field, what the plugin has there.
    assert!(
        reason.contains("type PrefixRef<'a, AppModule> field `0` differs from stoa-app-api")
            && reason.contains("expected AppModule, found ImpostorModule"),
        "{reason}"
    );
    // One line at the default level: the layout report is for debug.
    assert!(!server.log().contains("Layout"), "{}", server.log());
    assert_eq!(server.get("/article").status, 200);
}

fn mount_clash_refuses_the_second_app(poller: &str) {
    // Files load in name order: libarticle.so takes /_environ first.
    let server = Server::start(poller, SAMPLE_APPS, &["--mount", "article=/_environ"]);
    let reason = refusal(&server, "libenviron.so");
    assert!(reason.contains("/_environ"), "{reason}");
    assert!(reason.contains("article"), "{reason}");
    assert_eq!(server.log_lines(&["refused plugin"]).len(), 1);
    let r = server.get("/_environ");
    assert_eq!((r.status, r.body.len()), (200, 49));
    assert_eq!(server.get("/hello/").text(), "Hello World!");
}

fn mount_flag_moves_an_app(poller: &str) {
    let server = Server::start(poller, SAMPLE_APPS, &["--mount", "article=/news/"]);
    let file = server.apps_dir().join("libarticle.so");
    let line = format!("loaded app article 0.1.0 at /news from {}", file.display());
    assert!(server.wait_log(&[&line]), "{}", server.log());
    let r = server.get("/news");
    assert_eq!((r.status, r.body.len()), (200, 49));
    assert_eq!(r.header("Content-Type"), Some("application/json"));
    // /article is no longer the article app: hello-project's 404 page.
    let r = server.get("/article");
    assert_eq!(r.status, 404);
    assert_eq!(r.header("Content-Type"), Some("text/html; charset=utf-8"));
}

fn empty_apps_dir_answers_404_with_a_warning(poller: &str) {
    let server = Server::start(poller, &[], &[]);
    let dir = server.apps_dir().display().to_string();
    assert!(server.wait_log(&["WARN", &dir]), "{}", server.log());
    let mut c = server.connect();
    for path in ["/", "/hello/", "/article"] {
        let r = c.request(&get(path));
        assert_eq!((r.status, r.reason.as_str()), (404, "Not Found"), "{path}");
        assert!(!r.body.is_empty(), "{path}");
    }
}

fn plugin_logs_reach_the_host_log(poller: &str) {
    let server = Server::start(poller, &["misbehave"], &[]);
    assert_eq!(server.get("/_test/drop").status, 500);
    assert!(
        server.wait_log(&["INFO", "misbehave", "dropping a responder on purpose"]),
        "{}",
        server.log()
    );
}

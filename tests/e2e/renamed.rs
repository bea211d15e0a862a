//! An app renamed in a new build (`export_app!`'s `formerly`): a
//! configuration that still says its former name keeps configuring it
//! (mount, settings, `--mount`), with a warning naming the new name; a
//! configuration that names it both ways is refused. The test plugin
//! `renamed` was `old-name`. Backend-free (the loader's), so one backend.

use crate::common::config_file as config;
use crate::harness::Server;

const WARNING: &str = "the configuration names it \"old-name\", its former name; \
                       its name is now \"renamed\"";

#[test]
fn a_table_under_the_former_name_configures_the_app() {
    let text = "[apps.old-name]\nmount = \"/here\"\n[apps.old-name.settings]\ngreeting = \"hi\"\n";
    let (_dir, file) = config(text);
    let server = Server::launch("epoll")
        .apps(&["renamed", "article"])
        .env("STOA_CONFIG", &file)
        .start();
    let r = server.get("/here");
    assert_eq!(
        (r.status, r.text()),
        (200, "renamed, greeting hi"),
        "{}",
        server.log()
    );
    assert_eq!(server.get("/renamed").status, 404, "{}", server.log());
    assert!(
        server.wait_log(&["WARN", "app renamed", WARNING]),
        "{}",
        server.log()
    );
}

#[test]
fn a_mount_flag_under_the_former_name_mounts_the_app() {
    let server = Server::launch("epoll")
        .apps(&["renamed"])
        .args(&["--mount", "old-name=/there"])
        .start();
    let r = server.get("/there");
    assert_eq!(
        (r.status, r.text()),
        (200, "renamed, greeting none"),
        "{}",
        server.log()
    );
    assert!(server.wait_log(&["WARN", WARNING]), "{}", server.log());
}

#[test]
fn the_app_under_its_own_name_gets_no_warning() {
    let (_dir, file) = config("[apps.renamed.settings]\ngreeting = \"hey\"\n");
    let server = Server::launch("epoll")
        .apps(&["renamed"])
        .env("STOA_CONFIG", &file)
        .start();
    let r = server.get("/renamed");
    assert_eq!((r.status, r.text()), (200, "renamed, greeting hey"));
    // The start-up log is complete once the host listens.
    assert!(!server.log_contains("former name"), "{}", server.log());
}

#[test]
fn both_names_at_once_are_refused() {
    let text =
        "[apps.renamed.settings]\ngreeting = \"a\"\n[apps.old-name.settings]\ngreeting = \"b\"\n";
    let (_dir, file) = config(text);
    let (_, log) = Server::launch("epoll")
        .apps(&["renamed"])
        .env("STOA_CONFIG", &file)
        .refused();
    assert!(
        log.contains("\"old-name\" is the former name of app \"renamed\"")
            && log.contains("keep only [apps.renamed]"),
        "{log}"
    );
}

#[test]
fn a_former_name_is_no_app_of_its_own() {
    // `old-name` is no longer a loaded app's name: a typo near it is still
    // named against the app's name.
    let (_, log) = Server::launch("epoll")
        .apps(&["renamed"])
        .args(&["--mount", "renamd=/x"])
        .refused();
    assert!(
        log.contains("--mount renamd=/x: no app named \"renamd\" (did you mean \"renamed\"?); loaded: renamed"),
        "{log}"
    );
}

//! The article app's REST collection at `/article/items`, kept in SQLite:
//! create, read, update, delete, the 404/400/405/409/413 answers, and
//! items that survive a hot replace of the app and a restart of the host.
//! The database path reaches the app through `--config` with
//! `[apps.article.settings] db = ...`, in the test's temp dir.

use crate::client::{request, with_body, Client, Response};
use crate::common::{bytes, install_atomically, wait_log, HOT_WAIT};
use crate::harness::{plugins, wait_until, Server, TempDir};
use rustix::process::Signal;
use std::path::Path;

matrix!(
    items_create_read_update_delete,
    items_refuse_what_rest_refuses,
    items_survive_a_hot_replace_and_a_restart,
);

/// A server with the article app, its items in `dir/items.db`.
fn start(poller: &str, dir: &Path) -> Server {
    let config = dir.join("stoa.toml");
    let db = dir.join("items.db");
    let text = format!(
        "[apps.article.settings]\ndb = \"{}\"\nmax_item_bytes = 1024\n",
        db.display()
    );
    std::fs::write(&config, text).expect("write the config");
    let config = config.display().to_string();
    Server::launch(poller)
        .apps(&["article"])
        .args(&["--config", &config])
        .start()
}

fn send(c: &mut Client, method: &str, path: &str, body: &str) -> Response {
    let length = format!("Content-Length: {}", body.len());
    let headers = ["Content-Type: application/json", length.as_str()];
    c.request(&with_body(method, path, &headers, body.as_bytes()))
}

fn json(r: &Response) -> serde_json::Value {
    serde_json::from_slice(&r.body).unwrap_or_else(|e| panic!("{e}: {r:?}"))
}

fn items_create_read_update_delete(poller: &str) {
    let tmp = TempDir::new("items-crud");
    let server = start(poller, tmp.path());
    let mut c = server.connect();
    let r = send(&mut c, "GET", "/article/items", "");
    assert_eq!((r.status, r.text()), (200, "[]"));
    let r = send(
        &mut c,
        "POST",
        "/article/items",
        r#"{"name":"a","body":"one"}"#,
    );
    assert_eq!(r.status, 201, "{r:?}");
    assert_eq!(r.header("Content-Type"), Some("application/json"));
    let id = json(&r)["id"].as_i64().expect("an id");
    let at = format!("/article/items/{id}");
    assert_eq!(r.header("Location"), Some(at.as_str()));
    let r = send(&mut c, "GET", &at, "");
    assert_eq!(
        json(&r),
        serde_json::json!({"id": id, "name": "a", "body": "one"})
    );
    let r = send(&mut c, "PUT", &at, r#"{"name":"a","body":"two"}"#);
    assert_eq!((r.status, json(&r)["body"].as_str()), (200, Some("two")));
    let r = send(&mut c, "GET", "/article/items", "");
    assert_eq!(json(&r).as_array().map(Vec::len), Some(1));
    let r = send(&mut c, "DELETE", &at, "");
    assert_eq!((r.status, r.body.len()), (204, 0));
    assert_eq!(send(&mut c, "GET", &at, "").status, 404);
    // The article itself is unchanged.
    let r = send(&mut c, "GET", "/article", "");
    assert_eq!((r.status, r.body.len()), (200, 49));
}

fn items_refuse_what_rest_refuses(poller: &str) {
    let tmp = TempDir::new("items-refuse");
    let server = start(poller, tmp.path());
    let mut c = server.connect();
    for path in ["/article/items/1", "/article/items/x", "/article/items/1/y"] {
        assert_eq!(send(&mut c, "GET", path, "").status, 404, "{path}");
    }
    assert_eq!(
        send(
            &mut c,
            "PUT",
            "/article/items/9",
            r#"{"name":"n","body":"b"}"#
        )
        .status,
        404
    );
    assert_eq!(send(&mut c, "DELETE", "/article/items/9", "").status, 404);
    for bad in ["{nope", r#"{"name":"n"}"#, r#"{"name":1,"body":"b"}"#, "[]"] {
        assert_eq!(
            send(&mut c, "POST", "/article/items", bad).status,
            400,
            "{bad}"
        );
    }
    let r = send(&mut c, "DELETE", "/article/items", "");
    assert_eq!(
        (r.status, r.header("Allow")),
        (405, Some("GET, HEAD, POST"))
    );
    let r = c.request(&request(
        "PATCH",
        "/article/items/1",
        &["Content-Length: 0"],
    ));
    assert_eq!(
        (r.status, r.header("Allow")),
        (405, Some("GET, HEAD, PUT, DELETE"))
    );
    let item = r#"{"name":"same","body":"b"}"#;
    assert_eq!(send(&mut c, "POST", "/article/items", item).status, 201);
    assert_eq!(send(&mut c, "POST", "/article/items", item).status, 409);
    let big = format!(r#"{{"name":"big","body":"{}"}}"#, "x".repeat(2000));
    assert_eq!(send(&mut c, "POST", "/article/items", &big).status, 413);
}

fn items_survive_a_hot_replace_and_a_restart(poller: &str) {
    let tmp = TempDir::new("items-kept");
    let mut server = start(poller, tmp.path());
    let mut c = server.connect();
    let r = send(
        &mut c,
        "POST",
        "/article/items",
        r#"{"name":"kept","body":"1"}"#,
    );
    assert_eq!(r.status, 201, "{r:?}");
    // A new generation of the app from the same file: the items are there.
    // (A byte past the library's end makes other bytes: the same bytes
    // would keep the mounted generation.)
    let file = plugins()["article"]
        .file_name()
        .expect("a file name")
        .to_owned();
    let file = file.to_str().expect("utf-8 name");
    let mut other = bytes("article");
    other.push(0);
    install_atomically(&server.apps_dir(), file, &other);
    wait_log(&server, &["replaced app article"]);
    let r = server.get("/article/items");
    assert_eq!(json(&r)[0]["name"], "kept", "{r:?}");
    let r = send(
        &mut server.connect(),
        "POST",
        "/article/items",
        r#"{"name":"two","body":"2"}"#,
    );
    assert_eq!(r.status, 201, "{r:?}");
    server.signal(Signal::TERM);
    assert!(server.wait_exit(HOT_WAIT).is_some_and(|s| s.success()));
    // A new host on the same database.
    let again = start(poller, tmp.path());
    let names = || {
        let r = again.get("/article/items");
        json(&r)
            .as_array()
            .map(|a| a.iter().map(|i| i["name"].clone()).collect::<Vec<_>>())
    };
    assert!(wait_until(HOT_WAIT, || names().is_some()));
    assert_eq!(names(), Some(vec!["kept".into(), "two".into()]));
}

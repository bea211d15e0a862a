//! A Python request that ends its process, in the default worker mode
//! (process mode, no `--worker-mode` given): `os.abort()` on the blocking
//! pool costs its own request and its worker's connections. The other
//! worker answers meanwhile, the supervisor's line names the app and the
//! request, the lost request has an access-log line with status 502, and a
//! new worker serves Python again.

use crate::bridge::{config, test_apps};
use crate::harness::{wait_until, Server};
use std::collections::BTreeSet;
use std::time::Duration;

matrix!(an_abort_in_a_python_request_costs_only_its_worker);

/// How long a new worker (a fresh interpreter) may take to serve.
const RESPAWN: Duration = Duration::from_secs(30);

fn an_abort_in_a_python_request_costs_only_its_worker(poller: &str) {
    let (_config, path) = config("crash:application", &test_apps(), "/py", "");
    let server = Server::launch(poller)
        .apps(&["python", "demo"])
        .default_worker_mode()
        .access_log()
        .args(&[
            "--config",
            &path,
            "--workers",
            "2",
            "--quarantine-after",
            "0",
        ])
        .shell("ulimit -c 0")
        .start();
    assert!(server.wait_log(&["supervisor: 2 worker process(es)"]));
    let pids = |server: &Server| -> BTreeSet<String> {
        (0..16)
            .map(|_| server.get("/py/pid"))
            .filter(|r| r.status == 200)
            .map(|r| String::from_utf8_lossy(&r.body).into_owned())
            .collect()
    };
    let mut before = BTreeSet::new();
    assert!(
        wait_until(RESPAWN, || {
            before.extend(pids(&server));
            before.len() == 2
        }),
        "two Python workers never answered: {before:?}"
    );
    let mut conn = server.connect();
    conn.send(b"GET /py/abort HTTP/1.1\r\nHost: localhost\r\n\r\n");
    // Closed unanswered: the process died with the request.
    conn.assert_closed();
    let line = "was killed by signal 6 (SIGABRT); in flight: 1 request(s): \
                python GET /py/abort (blocking pool)";
    assert!(
        server.wait_log(&[line]),
        "no line {line:?}:\n{}",
        server.log()
    );
    // The other worker answered all along; a new one joins it.
    assert_eq!(server.get("/py/pid").status, 200);
    let replaced = server.wait_log(&["replaced by pid"]);
    assert!(replaced, "{}", server.log());
    let mut after = BTreeSet::new();
    assert!(
        wait_until(RESPAWN, || {
            after.extend(pids(&server).into_iter().filter(|p| !before.contains(p)));
            !after.is_empty()
        }),
        "no new Python worker answered: {}",
        server.log()
    );
    let lost = "\"GET /py/abort HTTP/1.1\" 502 0 \"-\" \"-\" app=python gen=-";
    assert!(
        server.wait_access_log(&[lost]),
        "no line {lost:?} in the access log:\n{}",
        server.access_log_text()
    );
}

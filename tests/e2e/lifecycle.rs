//! The app lifecycle across generations: `App::retire` runs exactly once
//! per generation, only after the generation's last in-flight request
//! (deferred on host timers, or on the blocking pool) has been answered,
//! and at a graceful shutdown for the generation still mounted; and
//! `App::handover` carries state to the successor's constructor (the `hot`
//! test app's request counter survives a hot replace).
//!
//! The test plugins `hot-v1` and `hot-v2` (both the app `hot`) append
//! `retire v1` / `retire v2` to the file `STOA_TEST_RETIRE_FILE` names.

use crate::client::get;
use crate::common::{bytes, fetch, install_atomically, wait_body, wait_log, HOT, HOT_WAIT};
use crate::harness::{wait_until, Server, TempDir};
use rustix::process::Signal;
use std::path::Path;
use std::time::Duration;

matrix!(
    retire_runs_once_after_the_last_request,
    a_counter_survives_a_hot_replace,
);

/// The retire lines written so far.
fn retired(file: &Path) -> Vec<String> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

fn retire_runs_once_after_the_last_request(poller: &str) {
    let tmp = TempDir::new("retire");
    let file = tmp.path().join("retired");
    let release = tmp.path().join("release");
    let mut server = Server::launch(poller)
        .file(HOT, &bytes("hot-v1"))
        .env("STOA_TEST_RETIRE_FILE", &file.display().to_string())
        .start();
    wait_body(&server, "/hot", "v1");
    // Two requests v1 holds until `release` exists: one deferred on host
    // timers, one on the blocking pool.
    let until = release.display();
    let mut deferred = server.connect();
    deferred.send(&get(&format!("/hot/hold?until={until}")));
    let mut blocking = server.connect();
    blocking.send(&get(&format!("/hot/hold-blocking?until={until}")));
    wait_log(&server, &["hot v1 holds /hot/hold"]);
    wait_log(&server, &["hot v1 holds /hot/hold-blocking"]);

    install_atomically(&server.apps_dir(), HOT, &bytes("hot-v2"));
    wait_body(&server, "/hot", "v2");
    // Replaced, but two requests are still in flight on v1.
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(retired(&file), Vec::<String>::new(), "retired too early");
    assert!(server.log_lines(&["retired app hot"]).is_empty());

    std::fs::write(&release, b"").expect("release the held requests");
    for c in [&mut deferred, &mut blocking] {
        let r = c.read_response();
        assert_eq!((r.status, r.text()), (200, "v1 held"));
    }
    let once = wait_until(HOT_WAIT, || !retired(&file).is_empty());
    assert!(once, "v1 was not retired after its last request");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(retired(&file), ["retire v1"]);
    wait_log(&server, &["retired app hot generation 1"]);

    // A graceful shutdown retires the generation still mounted, once.
    server.signal(Signal::TERM);
    let status = server.wait_exit(HOT_WAIT).expect("the server exits");
    assert!(status.success(), "{status:?}");
    assert_eq!(retired(&file), ["retire v1", "retire v2"]);
    assert_eq!(server.log_lines(&["retired app hot"]).len(), 2);
}

fn a_counter_survives_a_hot_replace(poller: &str) {
    let server = Server::launch(poller).file(HOT, &bytes("hot-v1")).start();
    wait_body(&server, "/hot", "v1");
    for n in 1..=3 {
        assert_eq!(fetch(&server, "/hot/count"), (200, format!("v1 {n}")));
    }
    install_atomically(&server.apps_dir(), HOT, &bytes("hot-v2"));
    wait_body(&server, "/hot", "v2");
    assert_eq!(fetch(&server, "/hot/count"), (200, "v2 4".to_string()));
    assert_eq!(fetch(&server, "/hot/count"), (200, "v2 5".to_string()));
    wait_log(
        &server,
        &["app hot generation 1 hands 8 byte(s) over to generation 2"],
    );
}

//! `--bind unix:PATH`: the sample apps served through `curl --unix-socket`
//! beside a TCP address (several `--bind` values listen on all), the
//! socket's file mode, a stale socket file replaced and a live one
//! refused, the file removed at exit, and what apps see as the peer.

use crate::harness::{Server, TempDir, WAIT};
use rustix::process::Signal;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

matrix!(
    sample_apps_are_served_over_a_unix_socket_beside_tcp,
    the_socket_has_its_mode_and_is_removed_at_exit,
    a_stale_socket_is_replaced_and_a_live_one_refused,
);

/// `curl --unix-socket SOCK http://localhost/PATH`: status and body.
fn curl(sock: &Path, path: &str) -> (u16, String) {
    let out = Command::new("curl")
        .args([
            "-s",
            "-m",
            "10",
            "-o",
            "-",
            "-w",
            "\n%{http_code}",
            "--unix-socket",
        ])
        .arg(sock)
        .arg(format!("http://localhost{path}"))
        .output()
        .expect("curl is needed for the Unix socket tests (apt-get install -y curl)");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
    (code.trim().parse().unwrap_or(0), body.to_string())
}

fn sample_apps_are_served_over_a_unix_socket_beside_tcp(poller: &str) {
    let dir = TempDir::new("unix");
    let sock = dir.path().join("stoa.sock");
    let bind = format!("unix:{}", sock.display());
    let server = Server::launch(poller)
        .apps(&["hello-project", "article", "environ"])
        .args(&["--bind", &bind])
        .start();
    // The start waits for the first "listening on" line, not this one.
    let line = format!("listening on {bind}\n");
    assert!(
        server.stdout.wait(WAIT, |t| t.contains(&line)),
        "{}",
        server.stdout.text()
    );
    assert_eq!(
        curl(&sock, "/article"),
        (
            200,
            r#"{"Name":"A Royal Baby","Body":"A slow news week"}"#.to_string()
        )
    );
    assert_eq!(curl(&sock, "/hello/"), (200, "Hello World!".to_string()));
    // The TCP address serves as well.
    assert_eq!(server.get("/article").status, 200);
    let (status, environ) = curl(&sock, "/_environ/x");
    assert_eq!(status, 200);
    let v: serde_json::Value = serde_json::from_str(&environ).expect("environ JSON");
    assert_eq!(v["remote_addr"], "unix:", "{environ}");
    assert_eq!(v["server_name"], "localhost", "{environ}");
    // A Unix peer is on this machine: status is open to it.
    assert_eq!(curl(&sock, "/.well-known/stoa/status").0, 200);
}

fn the_socket_has_its_mode_and_is_removed_at_exit(poller: &str) {
    let dir = TempDir::new("unix-mode");
    for (flags, mode) in [(&[][..], 0o660), (&["--unix-mode", "666"][..], 0o666)] {
        let sock = dir.path().join("mode.sock");
        let bind = format!("unix:{}", sock.display());
        let mut server = Server::launch(poller)
            .apps(&["article"])
            .args(&["--bind", &bind])
            .args(flags)
            .start();
        let meta = std::fs::metadata(&sock).expect("the socket file");
        assert_eq!(meta.permissions().mode() & 0o777, mode, "{flags:?}");
        server.signal(Signal::TERM);
        assert!(server.wait_exit(Duration::from_secs(20)).is_some());
        assert!(!sock.exists(), "the socket file outlived the server");
    }
}

fn a_stale_socket_is_replaced_and_a_live_one_refused(poller: &str) {
    let dir = TempDir::new("unix-stale");
    let sock = dir.path().join("stale.sock");
    let bind = format!("unix:{}", sock.display());
    // A socket file nobody listens on any more, as a killed server leaves.
    drop(std::os::unix::net::UnixListener::bind(&sock).expect("bind"));
    assert!(sock.exists());
    let server = Server::launch(poller)
        .apps(&["article"])
        .args(&["--bind", &bind])
        .start();
    assert_eq!(curl(&sock, "/article").0, 200);
    // Another server on the same path is refused; the first serves on.
    let (_, log) = Server::launch(poller)
        .apps(&["article"])
        .args(&["--bind", &bind])
        .refused();
    assert!(
        log.contains(&format!("cannot bind {bind}: address already in use")),
        "{log}"
    );
    assert_eq!(curl(&sock, "/article").0, 200);
    drop(server);
}

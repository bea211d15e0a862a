//! No silent surprises for an operator: an address another server listens
//! on, a mount for an app that is not there, a refused plugin under
//! `--strict-plugins`, a zero or oversized value are errors that name the
//! flag; sizes and durations take units, `--bind` takes the forms people
//! type, every flag reads `STOA_<NAME>` and the flag wins over it.

use crate::common::run_to_exit;
use crate::hardening::{accepted, justnow, refused};
use crate::harness::{Server, STOA};
use std::process::Command;

matrix!(
    a_used_address_is_refused_unless_reuse_port,
    a_mount_for_a_missing_app_is_refused_with_a_suggestion,
    strict_plugins_exits_on_a_refused_file,
    sizes_and_durations_take_units,
    flags_read_the_environment_and_the_flag_wins,
    bind_takes_a_host_name,
);

fn a_used_address_is_refused_unless_reuse_port(poller: &str) {
    let first = Server::start(poller, &["article"], &[]);
    let (_, log) = Server::launch(poller)
        .port(first.port)
        .apps(&["article"])
        .refused();
    assert!(
        log.contains(&format!(
            "cannot bind 127.0.0.1:{}: address already in use",
            first.port
        )) && log.contains("--reuse-port"),
        "{log}"
    );
    // On purpose, with the flag, it shares the port; the first serves on.
    let second = Server::launch(poller)
        .port(first.port)
        .apps(&["article"])
        .args(&["--reuse-port"])
        .start();
    assert_eq!(second.port, first.port);
    assert_eq!(first.get("/article").status, 200);
}

fn a_mount_for_a_missing_app_is_refused_with_a_suggestion(poller: &str) {
    let typo = Server::launch(poller)
        .apps(&["article", "demo"])
        .args(&["--mount", "artcle=/a"])
        .refused()
        .1;
    assert!(
        typo.contains(r#"--mount artcle=/a: no app named "artcle" (did you mean "article"?); loaded: article, demo"#),
        "{typo}"
    );
    let missing = Server::launch(poller)
        .apps(&["article"])
        .args(&["--mount", "nosuch=/x"])
        .refused()
        .1;
    assert!(
        missing.contains(r#"--mount nosuch=/x: no app named "nosuch"; loaded: article"#),
        "{missing}"
    );
}

fn strict_plugins_exits_on_a_refused_file(poller: &str) {
    let launch = || {
        Server::launch(poller)
            .apps(&["article"])
            .file("broken.so", b"not a library")
    };
    let (_, log) = launch().args(&["--strict-plugins"]).refused();
    assert!(
        log.contains("--strict-plugins: 1 plugin file(s) refused at start-up")
            && log.contains("broken.so: not a loadable shared library"),
        "{log}"
    );
    // Without the flag the refusal is logged and the rest serves.
    let server = launch().start();
    assert_eq!(server.get("/article").status, 200);
}

fn sizes_and_durations_take_units(poller: &str) {
    let server = Server::launch(poller)
        .apps(&["demo"])
        .args(&[
            "--max-body",
            "1K",
            "--max-head",
            "16KiB",
            "--head-timeout",
            "2s",
            "--graceful-timeout",
            "10s",
            "--loop-block-warn",
            "250ms",
        ])
        .start();
    let body = vec![b'b'; 1024];
    accepted(
        &server,
        "a 1 KiB body",
        &justnow("POST", &["Content-Length: 1024"], &body),
    );
    let over = justnow("POST", &["Content-Length: 1025"], b"");
    refused(&server, "1025 bytes", &over, 413, "max_body");
}

fn flags_read_the_environment_and_the_flag_wins(poller: &str) {
    let body = vec![b'b'; 2000];
    let post = justnow("POST", &["Content-Length: 2000"], &body);
    let from_env = Server::launch(poller)
        .apps(&["demo"])
        .env("STOA_MAX_BODY", "1K")
        .start();
    refused(
        &from_env,
        "2000 bytes over STOA_MAX_BODY=1K",
        &post,
        413,
        "max_body",
    );
    let flag_wins = Server::launch(poller)
        .apps(&["demo"])
        .env("STOA_MAX_BODY", "1K")
        .args(&["--max-body", "4K"])
        .start();
    accepted(&flag_wins, "2000 bytes under --max-body 4K", &post);
}

fn bind_takes_a_host_name(poller: &str) {
    let server = Server::launch(poller)
        .apps(&["article"])
        .bind("localhost:0")
        .start();
    both_loopbacks_answer(&server);
}

/// Process mode: the supervisor binds both and its workers serve them.
#[test]
fn bind_localhost_serves_both_loopbacks_in_process_mode() {
    let server = Server::launch("epoll")
        .apps(&["article"])
        .bind("localhost:0")
        .args(&["--worker-mode", "process", "--workers", "2"])
        .start();
    both_loopbacks_answer(&server);
}

/// `--bind localhost:0` listens on 127.0.0.1 and ::1 on one port, a line
/// each, and a client on either gets answers; on a machine without an
/// IPv6 loopback, ::1 is skipped with a log line.
fn both_loopbacks_answer(server: &Server) {
    use crate::client::{get, Client};
    let port = server.port;
    assert_eq!(server.get("/article").status, 200);
    if std::net::TcpListener::bind("[::1]:0").is_err() {
        assert!(
            server.wait_log(&[
                "--bind localhost:0: [::1]:",
                "is not available on this machine"
            ]),
            "{}",
            server.log()
        );
        return;
    }
    let line = format!("listening on http://[::1]:{port}\n");
    assert!(
        server
            .stdout
            .wait(std::time::Duration::from_secs(10), |t| t.contains(&line)),
        "{:?}",
        server.stdout.text()
    );
    for _ in 0..2 {
        let v6 = std::net::TcpStream::connect(("::1", port)).expect("connect to [::1]");
        let answer = Client::from_stream(v6).request(&get("/article"));
        assert_eq!(answer.status, 200, "{}", server.log());
    }
}

/// Runs `stoa ARGS` with no apps, expecting a refusal before it serves;
/// returns its stderr.
fn refused_flags(args: &[&str]) -> String {
    let dir = crate::harness::TempDir::new("flags");
    let bind: &[&str] = if args.contains(&"--bind") {
        &[]
    } else {
        &["--bind", "127.0.0.1:0"]
    };
    let out = run_to_exit(
        Command::new(STOA)
            .args(bind)
            .arg("--apps")
            .arg(dir.path())
            .args(args)
            .env_remove("STOA_POLLER"),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{args:?} accepted: {stdout}");
    assert!(!stdout.contains("listening on"), "{args:?} started");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn zero_and_oversized_values_are_refused_naming_the_flag() {
    let cases: [(&[&str], &[&str]); 9] = [
        (&["--workers", "0"], &["--workers", "1..=1024"]),
        (
            &["--poller", "select", "--max-connections", "1000000000"],
            &[
                "--max-connections 1000000000",
                "RLIMIT_NOFILE",
                "at most",
                "use --max-connections",
            ],
        ),
        (&["--max-body", "1Q"], &["--max-body", "\"1Q\"", "KiB"]),
        (
            &["--graceful-timeout", "ten"],
            &["--graceful-timeout", "\"ten\"", "30s"],
        ),
        (
            &["--log-level", "loud"],
            &["\"loud\"", "error, warn, info, debug or trace"],
        ),
        (&["--bind", "unix:"], &["--bind", "give the socket's path"]),
        (&["--max-headers", "0"], &["--max-headers"]),
        (&["--ws-max-message", "0"], &["--ws-max-message", "zero"]),
        (
            &["--ws-ping-interval", "0s"],
            &["--ws-ping-interval", "zero"],
        ),
    ];
    for (args, needles) in cases {
        let stderr = refused_flags(args);
        for needle in needles {
            assert!(
                stderr.contains(needle),
                "{args:?}: {needle:?} not in {stderr}"
            );
        }
    }
}

/// A duration too short to be kept (deadlines are checked every 10 ms at
/// most) is refused naming its flag and the smallest value, from the
/// command line or the environment, instead of turning every client away.
#[test]
fn too_short_durations_are_refused_naming_the_smallest_value() {
    for (flag, value, smallest) in [
        ("--head-timeout", "1ns", "100ms"),
        ("--keep-alive-timeout", "0.001", "100ms"),
        ("--ws-ping-interval", "1ns", "100ms"),
        ("--stuck-after", "5ms", "100ms"),
        ("--loop-block-warn", "1us", "1ms"),
    ] {
        let stderr = refused_flags(&[flag, value]);
        for needle in [flag, value, "smallest allowed", smallest] {
            assert!(
                stderr.contains(needle),
                "{flag} {value}: {needle:?} not in {stderr}"
            );
        }
    }
    let dir = crate::harness::TempDir::new("flags");
    let out = run_to_exit(
        Command::new(STOA)
            .args(["--bind", "127.0.0.1:0", "--apps"])
            .arg(dir.path())
            .env("STOA_WS_PING_INTERVAL", "1ns")
            .env_remove("STOA_POLLER"),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "accepted: {stderr}");
    assert!(
        stderr.contains("--ws-ping-interval") && stderr.contains("at least 100ms"),
        "{stderr}"
    );
}

#[test]
fn version_names_the_app_abi_and_help_has_headings() {
    let run = |arg: &str| {
        let out = Command::new(STOA).arg(arg).output().expect("run stoa");
        assert!(out.status.success(), "{arg}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let version = run("--version");
    assert!(
        version.starts_with("stoa 0.") && version.contains("stoa-app-api 0."),
        "{version}"
    );
    let help = run("--help");
    for heading in [
        "Serving:",
        "Apps:",
        "Limits",
        "Timeouts",
        "Operations:",
        "Logging:",
    ] {
        assert!(help.contains(heading), "{heading} not in {help}");
    }
    assert!(help.contains("STOA_<FLAG>"), "{help}");
}

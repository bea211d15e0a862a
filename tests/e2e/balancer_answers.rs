//! An error answer from one instance behind a balancer stays one answer:
//! POSTs with bodies over `--max-body` or `--max-stream-body` (and under
//! the balancer's own body limit) get their 413 through a real nginx running `deploy/nginx.conf`
//! and a real HAProxy running `deploy/haproxy.cfg`, and the site still
//! serves right after (no instance marked down, no reset turned into a
//! 502). A missing tool fails the test, naming it.

use crate::balancers::{deploy, start_nginx, tool};
use crate::common::try_get;
use crate::harness::{wait_until, Group, Server, TempDir};
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::Duration;

/// Bodies over the instances' `--max-body 64K` (and `--max-stream-body
/// 64K`, `/demo/upload`'s), under nginx's default
/// `client_max_body_size` (1M) and HAProxy's lack of one.
const BODY: usize = 200 * 1024;

/// Two instances serving `/article` (a whole body) and `/demo/upload` (a
/// streamed one) with `--max-body 64K` and `--max-stream-body 64K`.
fn instances() -> [Server; 2] {
    let args = [
        "--max-body",
        "64K",
        "--max-stream-body",
        "64K",
        "--workers",
        "1",
        "--no-watch",
    ];
    [0, 1].map(|_| {
        Server::launch("epoll")
            .apps(&["article", "demo"])
            .args(&args)
            .start()
    })
}

/// One `POST` of `len` bytes with `Connection: close`, the body written
/// by a thread while the answer is read (as a proxy does): the status
/// code, or what went wrong.
fn try_post(port: u16, path: &str, len: usize) -> Result<u16, String> {
    let s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| format!("connect: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| e.to_string())?;
    let mut w = s.try_clone().map_err(|e| e.to_string())?;
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Length: {len}\r\n\
         Connection: close\r\n\r\n"
    );
    let writer = std::thread::spawn(move || {
        let _ = w.write_all(head.as_bytes());
        let _ = w.write_all(&vec![b'x'; len]);
    });
    let mut answer = Vec::new();
    let read = (&s).read_to_end(&mut answer);
    // A writer still blocked (the peer stopped reading) is released.
    let _ = s.shutdown(Shutdown::Both);
    let _ = writer.join();
    let text = String::from_utf8_lossy(&answer);
    let code = text.split(' ').nth(1).and_then(|c| c.parse().ok());
    code.ok_or_else(|| format!("{read:?}, answer {text:?}"))
}

/// 20 oversized POSTs to `path` through `port` get 20 answers of 413,
/// and a GET right after gets 200; `log` is the balancer's log for
/// failures.
fn twenty_413s_then_200((port, path): (u16, &str), log: &dyn Fn() -> String, stoa: &[Server; 2]) {
    let stoa_log = || format!("{}\n{}", stoa[0].log(), stoa[1].log());
    for i in 0..20 {
        assert_eq!(
            try_post(port, path, BODY),
            Ok(413),
            "POST {i} to {path}\nbalancer:\n{}\nstoa:\n{}",
            log(),
            stoa_log()
        );
    }
    assert_eq!(
        try_get(port, "/article"),
        Ok(200),
        "GET after the POSTs\nbalancer:\n{}\nstoa:\n{}",
        log(),
        stoa_log()
    );
}

#[test]
fn nginx_passes_413s_on_and_marks_no_instance_down() {
    let stoa = instances();
    let ports = stoa.each_ref().map(|s| s.port);
    let (_nginx, dir, listen) = start_nginx(&ports);
    let log = || std::fs::read_to_string(dir.path().join("logs/error.log")).unwrap_or_default();
    twenty_413s_then_200((listen, "/article"), &log, &stoa);
    // The streamed location: nginx sends the body on as it comes
    // (proxy_request_buffering off), so the 413 comes while it sends.
    twenty_413s_then_200((listen, "/demo/upload"), &log, &stoa);
}

#[test]
fn haproxy_passes_413s_on_and_still_serves() {
    let stoa = instances();
    let ports = stoa.each_ref().map(|s| s.port);
    let (_haproxy, dir, listen) = start_haproxy(&ports);
    let log = || std::fs::read_to_string(dir.path().join("haproxy.log")).unwrap_or_default();
    // Its health checks mark the instances up first.
    let up = wait_until(Duration::from_secs(10), || {
        try_get(listen, "/article") == Ok(200)
    });
    assert!(up, "HAProxy serves no GET\n{}", log());
    twenty_413s_then_200((listen, "/article"), &log, &stoa);
}

/// Starts `deploy/haproxy.cfg` itself, in the foreground, with `ports` for
/// its four instances and a free port for 8080; waits until it listens.
/// Returns it (killed on drop), its directory (with `haproxy.log`) and its
/// port.
fn start_haproxy(ports: &[u16]) -> (Group, TempDir, u16) {
    let haproxy = tool("haproxy");
    let listen = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a port")
        .port();
    let mut conf = String::new();
    for line in std::fs::read_to_string(deploy("haproxy.cfg"))
        .expect("haproxy.cfg")
        .lines()
    {
        let trimmed = line.trim_start();
        if trimmed.starts_with("server stoa1 ") {
            for (i, port) in ports.iter().enumerate() {
                conf += &format!("    server stoa{} 127.0.0.1:{port}\n", i + 1);
            }
        } else if trimmed.starts_with("server stoa") {
            continue;
        } else {
            conf += &line.replace("bind :8080", &format!("bind 127.0.0.1:{listen}"));
            conf.push('\n');
        }
    }
    assert!(conf.contains(&format!("bind 127.0.0.1:{listen}")), "{conf}");
    let dir = TempDir::new("haproxy");
    let cfg = dir.path().join("haproxy.cfg");
    std::fs::write(&cfg, &conf).expect("write haproxy.cfg");
    let out = std::fs::File::create(dir.path().join("haproxy.log")).expect("haproxy.log");
    let err = out.try_clone().expect("haproxy.log");
    let haproxy = Group::spawn(
        Command::new(haproxy)
            .arg("-db")
            .arg("-f")
            .arg(&cfg)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err),
    )
    .expect("start haproxy");
    let up = wait_until(Duration::from_secs(10), || {
        TcpStream::connect(("127.0.0.1", listen)).is_ok()
    });
    let log = std::fs::read_to_string(dir.path().join("haproxy.log")).unwrap_or_default();
    assert!(up, "haproxy did not listen on {listen}:\n{log}\n{conf}");
    (haproxy, dir, listen)
}

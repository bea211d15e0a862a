//! Balancers in front of Stoa: a real nginx running `deploy/nginx.conf` in
//! front of two instances spreads load and loses no request through a
//! rolling restart (each instance stopped with SIGTERM and started again on
//! its port), a WebSocket to `/demo/ws` goes through it, and the `deploy/`
//! configs pass `nginx -t` and `haproxy -c`.
//! A test whose tool is not installed fails, naming the tool and how to
//! install it (`.ci/run` installs both). Every load
//! loop is bounded in requests and time; only 127.0.0.1 is used.

use crate::common::{status, try_get};
use crate::harness::{wait_until, Group, Server, TempDir};
use rustix::process::Signal;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// An installed tool (`nginx`, `haproxy`): /usr/sbin first, then `PATH`.
/// A missing tool fails the test: these tests must not pass unrun.
pub(crate) fn tool(name: &str) -> PathBuf {
    let sbin = Path::new("/usr/sbin").join(name);
    if sbin.exists() {
        return sbin;
    }
    let found = Command::new(name).arg("-v").output().is_ok();
    assert!(
        found,
        "{name} is not installed: `apt-get install -y {name}` (.ci/run installs it)"
    );
    PathBuf::from(name)
}

/// The workspace's `deploy/` directory.
pub fn deploy(file: &str) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root");
    root.join("deploy").join(file)
}

/// A prefix directory for nginx with the `logs/` and `temp/` the deploy config uses.
fn nginx_prefix(what: &str) -> (TempDir, String) {
    let dir = TempDir::new(what);
    for sub in ["logs", "temp"] {
        std::fs::create_dir(dir.path().join(sub)).expect("a prefix dir");
    }
    let prefix = format!("{}/", dir.path().display());
    (dir, prefix)
}

fn article_2xx(port: u16) -> u64 {
    status(port)["requests"]["article"]["2xx"]
        .as_u64()
        .expect("a count")
}

#[test]
fn nginx_in_front_of_two_instances_loses_nothing_in_a_rolling_restart() {
    let args = ["--workers", "2", "--graceful-timeout", "10", "--no-watch"];
    let instance = |port| {
        let launch = Server::launch("epoll").port(port).apps(&["article"]);
        launch.args(&args).start()
    };
    let mut instances = [0, 0].map(instance);
    let ports = instances.each_ref().map(|s| s.port);
    let (_nginx, dir, listen) = start_nginx(&ports);
    let log = || std::fs::read_to_string(dir.path().join("logs/error.log")).unwrap_or_default();

    // Spread: round robin over both instances.
    for i in 0..20 {
        assert_eq!(
            try_get(listen, "/article"),
            Ok(200),
            "request {i}\n{}",
            log()
        );
    }
    let counts = instances.each_ref().map(|s| article_2xx(s.port));
    assert!(
        counts.iter().all(|&n| n > 0) && counts.iter().sum::<u64>() == 20,
        "{counts:?}"
    );

    // Rolling restart under load: 4 threads, at most 2000 requests and 20 s.
    const MOST: usize = 2000;
    let (sent, ok) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let stop = Arc::new(AtomicBool::new(false));
    let failures = Arc::new(Mutex::new(Vec::<String>::new()));
    let t0 = Instant::now();
    let load: Vec<_> = (0..4)
        .map(|_| {
            let (sent, ok, stop, failures) =
                (sent.clone(), ok.clone(), stop.clone(), failures.clone());
            std::thread::spawn(move || {
                while !stop.load(SeqCst) && t0.elapsed() < Duration::from_secs(20) {
                    let n = sent.fetch_add(1, SeqCst);
                    if n >= MOST {
                        sent.fetch_sub(1, SeqCst);
                        return;
                    }
                    match try_get(listen, "/article") {
                        Ok(200) => {
                            ok.fetch_add(1, SeqCst);
                        }
                        other => failures.lock().unwrap().push(format!("#{n}: {other:?}")),
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            })
        })
        .collect();
    let more = |n: usize| {
        let target = (sent.load(SeqCst) + n).min(MOST);
        assert!(wait_until(Duration::from_secs(10), || sent.load(SeqCst) >= target));
    };
    more(50);
    for (i, inst) in instances.iter_mut().enumerate() {
        // SIGTERM, wait for exit 0, start again on the same port, and wait
        // until nginx sends it requests again (after fail_timeout) before
        // the next: with both marked failed, nginx has no live upstream.
        let port = inst.port;
        inst.signal(Signal::TERM);
        let exit = inst
            .wait_exit(Duration::from_secs(12))
            .and_then(|e| e.code());
        assert_eq!(exit, Some(0), "instance {i}; log:\n{}", inst.log());
        *inst = instance(port);
        let back = wait_until(Duration::from_secs(8), || article_2xx(port) > 0);
        assert!(
            back,
            "restarted instance {i} gets no requests from nginx\n{}",
            log()
        );
    }
    more(50);
    let during = sent.load(SeqCst);
    stop.store(true, SeqCst);
    load.into_iter()
        .for_each(|t| t.join().expect("a load thread"));
    let failures = failures.lock().unwrap().clone();
    let n = sent.load(SeqCst);
    assert!(
        failures.is_empty(),
        "{} of {n} failed: {failures:#?}\nnginx:\n{}",
        failures.len(),
        log()
    );
    assert_eq!(ok.load(SeqCst), n);
    eprintln!(
        "rolling restart: {n} requests through nginx, all 200, {:?}",
        t0.elapsed()
    );
    assert!(
        during < MOST,
        "the load ended before both restarts were done"
    );
}

/// Starts `deploy/nginx.conf` itself, in the foreground, with `ports` for
/// its four instances and a free port for 8080; waits until it listens.
/// Returns it (killed on drop), its prefix directory and its port.
pub(crate) fn start_nginx(ports: &[u16]) -> (Group, TempDir, u16) {
    let nginx = tool("nginx");
    let listen = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a port");
    let listen = listen.port();
    let mut conf = String::from("daemon off;\nmaster_process off;\n");
    for line in std::fs::read_to_string(deploy("nginx.conf"))
        .expect("nginx.conf")
        .lines()
    {
        let line = line.replace("listen 8080;", &format!("listen 127.0.0.1:{listen};"));
        if line.trim_start().starts_with("server 127.0.0.1:8001") {
            for port in ports {
                conf += &line.replace(":8001", &format!(":{port}"));
                conf.push('\n');
            }
        } else if !line.trim_start().starts_with("server 127.0.0.1:800") {
            conf += &line.replace("worker_processes auto;", "worker_processes 1;");
            conf.push('\n');
        }
    }
    assert!(
        conf.contains(&format!("listen 127.0.0.1:{listen};")),
        "{conf}"
    );
    let (dir, prefix) = nginx_prefix("nginx");
    std::fs::write(dir.path().join("nginx.conf"), &conf).expect("write nginx.conf");
    let nginx = Group::spawn(
        Command::new(nginx)
            .args(["-p", &prefix, "-c", "nginx.conf", "-e", "logs/error.log"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    )
    .expect("start nginx");
    let up = wait_until(Duration::from_secs(10), || {
        TcpStream::connect(("127.0.0.1", listen)).is_ok()
    });
    let log = std::fs::read_to_string(dir.path().join("logs/error.log")).unwrap_or_default();
    assert!(up, "nginx did not listen on {listen}:\n{log}");
    (nginx, dir, listen)
}

/// `deploy/nginx.conf` passes a WebSocket through to `/demo/ws` (the
/// Upgrade and Connection headers are hop-by-hop: without its location
/// block nginx would drop them and the handshake would get 426).
#[test]
fn nginx_passes_websockets_through_to_demo_ws() {
    let instance = Server::launch("epoll").apps(&["demo"]).start();
    let (_nginx, dir, listen) = start_nginx(&[instance.port]);
    let cases = [
        "echo",
        "fragmentation",
        "ping_pong",
        "close_handshake",
        "broadcast",
    ];
    let out = crate::websocket::run_client(listen, &cases);
    for case in cases {
        assert!(
            out.lines().any(|l| l == format!("{case} ok")),
            "{case} through nginx:\n{out}\nnginx:\n{}\nstoa:\n{}",
            std::fs::read_to_string(dir.path().join("logs/error.log")).unwrap_or_default(),
            instance.log()
        );
    }
}

#[test]
fn deploy_nginx_conf_passes_nginx_t() {
    let nginx = tool("nginx");
    let (_dir, prefix) = nginx_prefix("nginx-t");
    let conf = deploy("nginx.conf")
        .canonicalize()
        .expect("deploy/nginx.conf");
    let out = Command::new(nginx)
        .args(["-t", "-p", &prefix, "-e", "logs/error.log", "-c"])
        .arg(&conf)
        .output()
        .expect("run nginx -t");
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && text.contains("test is successful"),
        "{text}"
    );
}

#[test]
fn deploy_haproxy_cfg_passes_haproxy_c() {
    let haproxy = tool("haproxy");
    let out = Command::new(haproxy)
        .arg("-c")
        .arg("-f")
        .arg(deploy("haproxy.cfg"))
        .output();
    let out = out.expect("run haproxy -c");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    let text = format!("{stdout}{stderr}");
    assert!(
        out.status.success() && text.contains("Configuration file is valid"),
        "{text}"
    );
}

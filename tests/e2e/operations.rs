//! Operations: `--workers` spreads connections, SIGTERM drains (in-flight
//! requests finish with `Connection: close`, new connects are refused, exit
//! 0), the status/metrics/health/ready endpoints count what was sent and
//! obey `--status-allow`, `--trusted-proxy` decides whether X-Forwarded-*
//! are believed, and a real nginx running `deploy/nginx.conf` in front of
//! two instances spreads load and loses no request through a rolling
//! restart. The `deploy/` configs pass `nginx -t` and `haproxy -c`. Every
//! load loop is bounded in requests and time; only 127.0.0.1 is used.

use crate::client::{get, request, Client, Response};
use crate::harness::{plugins, signal_child, wait_child, wait_until, Server, TempDir, STOA};
use rustix::process::Signal;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

matrix!(
    two_workers_both_serve,
    sigterm_drains_in_flight_requests,
    status_and_metrics_count_the_requests,
    status_allow_health_and_ready,
    trusted_proxy_decides_client_and_scheme,
);

const STATUS: &str = "/.well-known/stoa/status";

/// `GET path` on a new connection to `port`.
fn fetch(port: u16, path: &str) -> Response {
    Client::connect(port).request(&get(path))
}

pub(crate) fn status(port: u16) -> Value {
    let r = fetch(port, STATUS);
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.header("Content-Type"), Some("application/json"));
    serde_json::from_slice(&r.body).expect("status is JSON")
}

/// Prometheus text as `series -> value`, the series as written
/// (`name{label="v",..}`); comments must be `# TYPE`/`# HELP`.
pub(crate) fn metrics(port: u16) -> HashMap<String, f64> {
    let r = fetch(port, "/.well-known/stoa/metrics");
    assert_eq!(r.status, 200, "{r:?}");
    let kind = r.header("Content-Type").unwrap_or_default();
    assert!(kind.starts_with("text/plain; version=0.0.4"), "{kind}");
    let mut out = HashMap::new();
    for line in r.text().lines().filter(|l| !l.is_empty()) {
        if line.starts_with('#') {
            assert!(line.starts_with("# TYPE ") || line.starts_with("# HELP "));
            continue;
        }
        let (series, value) = line.rsplit_once(' ').expect("`series value`");
        let value = value.parse().unwrap_or_else(|_| panic!("{line:?}"));
        assert!(
            out.insert(series.to_string(), value).is_none(),
            "twice: {line}"
        );
    }
    out
}

fn two_workers_both_serve(poller: &str) {
    let server = Server::start(poller, &["article"], &["--workers", "2"]);
    let port = server.port;
    // 4 threads x 100 connections, one request each.
    let threads: Vec<_> = (0..4)
        .map(|_| {
            std::thread::spawn(move || {
                for _ in 0..100 {
                    let bytes = request("GET", "/article", &["Connection: close"]);
                    assert_eq!(Client::connect(port).request(&bytes).status, 200);
                }
            })
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().expect("load"));
    let s = status(port);
    assert_eq!((&s["workers"], &s["poller"]), (&json!(2), &json!(poller)));
    let per: Vec<u64> = (0..2)
        .map(|w| s["per_worker"][w]["requests"].as_u64().unwrap())
        .collect();
    assert!(
        per.iter().all(|&n| n > 0),
        "a worker served nothing: {per:?}"
    );
    assert_eq!(per.iter().sum::<u64>(), 400, "{s}");
    assert_eq!(s["requests"]["article"]["2xx"], 400);
    assert!(s["connections"]["accepted"].as_u64() >= Some(401), "{s}");
}

fn sigterm_drains_in_flight_requests(poller: &str) {
    let apps = apps_dir(&["article", "demo"]);
    let args = ["--workers", "2", "--graceful-timeout", "10"];
    let mut stoa = Stoa::spawn(apps.path(), 0, poller, &args);
    let port = stoa.port;
    let mut sleeper = Client::connect(port);
    sleeper.send(&get("/demo/sleep-handler/?seconds=1"));
    let sent = Instant::now();
    // An idle keep-alive connection (closed at drain start), and two with a
    // request head half sent (busy, so kept): they ask ready and status later.
    let mut idle = Client::connect(port);
    assert_eq!(idle.request(&get("/article")).status, 200);
    let half = |path: &str| {
        let mut c = Client::connect(port);
        c.send(format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n").as_bytes());
        c
    };
    let (mut ready, mut state) = (half("/.well-known/stoa/ready"), half(STATUS));
    // All four accepted (the k-th status poll is the (4+k)-th connection),
    // then time to read what they sent.
    let mut polls = 0;
    let accepted = wait_until(Duration::from_secs(5), || {
        polls += 1;
        status(port)["connections"]["accepted"].as_u64() >= Some(4 + polls)
    });
    assert!(accepted, "stoa did not accept our four connections");
    std::thread::sleep(Duration::from_millis(150));
    stoa.signal(Signal::TERM);

    let refused = wait_until(Duration::from_millis(600), || {
        matches!(TcpStream::connect(("127.0.0.1", port)),
            Err(e) if e.kind() == ErrorKind::ConnectionRefused)
    });
    assert!(refused, "new connects still accepted while draining");
    idle.assert_closed();
    ready.send(b"\r\n");
    let r = ready.read_response();
    assert_eq!((r.status, r.header("Connection")), (503, Some("close")));
    state.send(b"\r\n");
    let s: Value = serde_json::from_slice(&state.read_response().body).expect("JSON");
    assert_eq!(s["draining"], true, "{s}");

    let r = sleeper.read_response();
    assert_eq!((r.status, r.text()), (200, "when i sleep 5s"));
    assert_eq!(r.header("Connection"), Some("close"));
    assert!(sent.elapsed() >= Duration::from_millis(950), "too early");
    sleeper.assert_closed();
    let exit = stoa
        .wait_exit(Duration::from_secs(10))
        .and_then(|e| e.code());
    assert_eq!(exit, Some(0), "log:\n{}", stoa.log());
    assert!(stoa.log().contains("draining"), "{}", stoa.log());
}

fn status_and_metrics_count_the_requests(poller: &str) {
    let server = Server::start(poller, &["article"], &["--workers", "2"]);
    let mut c = server.connect();
    for _ in 0..7 {
        assert_eq!(c.request(&get("/article")).status, 200);
    }
    for path in ["/article/no-such-article", "/not-mounted", "/nothing"] {
        assert_eq!(c.request(&get(path)).status, 404, "{path}");
    }
    let s = status(server.port);
    assert_eq!(
        (&s["poller"], &s["draining"]),
        (&json!(poller), &json!(false))
    );
    let a = &s["requests"]["article"];
    assert_eq!(
        (&a["requests"], &a["2xx"], &a["4xx"], &a["5xx"]),
        (&json!(8), &json!(7), &json!(1), &json!(0))
    );
    assert!(a["mean_latency_ms"].as_f64() >= Some(0.0), "{s}");
    assert_eq!(s["requests"]["(host)"]["4xx"], 2, "{s}");
    assert!(s["connections"]["open"].as_u64() >= Some(1), "{s}");
    let app = &s["apps"][0];
    assert_eq!(
        (&app["name"], &app["mount"]),
        (&json!("article"), &json!("/article"))
    );
    assert!(
        app["file"]
            .as_str()
            .is_some_and(|f| f.ends_with("libarticle.so")),
        "{s}"
    );
    assert_eq!(
        (s["apps"].as_array().map(Vec::len), &s["refused"]),
        (Some(1), &json!([]))
    );

    let m = metrics(server.port);
    let get = |series: &str| {
        *m.get(series)
            .unwrap_or_else(|| panic!("no {series} in {m:?}"))
    };
    let requests = |app: &str, class: &str| {
        get(&format!(
            "stoa_requests_total{{app=\"{app}\",class=\"{class}\"}}"
        ))
    };
    assert_eq!(requests("article", "2xx"), 7.0);
    assert_eq!(requests("article", "4xx"), 1.0);
    assert_eq!(requests("article", "5xx"), 0.0);
    assert_eq!(requests("(host)", "4xx"), 2.0);
    assert_eq!(requests("(host)", "2xx"), 1.0, "the status request before");
    let duration = |suffix: &str| get(&format!("stoa_request_duration_seconds_{suffix}"));
    assert_eq!(duration("count{app=\"article\"}"), 8.0);
    assert_eq!(duration("bucket{app=\"article\",le=\"+Inf\"}"), 8.0);
    assert!(duration("sum{app=\"article\"}") >= 0.0);
    assert_eq!(get("stoa_apps_loaded"), 1.0);
    assert_eq!(get("stoa_plugins_refused"), 0.0);
    assert_eq!(get("stoa_blocking_queue_depth"), 0.0);
    assert_eq!(get("stoa_draining"), 0.0);
    assert_eq!(
        get(&format!("stoa_info{{poller=\"{poller}\",workers=\"2\"}}")),
        1.0
    );
    let open: f64 = (0..2)
        .map(|w| get(&format!("stoa_connections_open{{worker=\"{w}\"}}")))
        .sum();
    assert!(
        open >= 2.0,
        "our keep-alive connection and this one: {open}"
    );
}

fn status_allow_health_and_ready(poller: &str) {
    let server = Server::start(poller, &["article"], &["--status-allow", "10.0.0.0/8"]);
    for path in [STATUS, "/.well-known/stoa/metrics"] {
        assert_eq!(server.get(path).status, 403, "{path} from 127.0.0.1");
    }
    let r = server.get("/.well-known/stoa/health");
    assert_eq!((r.status, r.text()), (200, "ok\n"));
    assert_eq!(server.get("/.well-known/stoa/ready").status, 200);
    assert_eq!(server.get("/.well-known/stoa/nope").status, 404);
    let open = Server::start(poller, &["article"], &["--status-allow", "127.0.0.1/32"]);
    assert_eq!(open.get(STATUS).status, 200);

    let empty = Server::start(poller, &[], &[]);
    assert_eq!(empty.get("/.well-known/stoa/ready").status, 503);
    assert_eq!(empty.get("/.well-known/stoa/health").status, 200);
    assert_eq!(status(empty.port)["apps"], json!([]));
}

/// The environ dump of `/_environ/` with these extra headers, and our local port.
fn environ(server: &Server, headers: &[&str]) -> (Value, u16) {
    let mut c = server.connect();
    let local = c.stream().local_addr().expect("local address").port();
    let r = c.request(&request("GET", "/_environ/", headers));
    assert_eq!(r.status, 200, "{r:?}");
    (serde_json::from_slice(&r.body).expect("JSON"), local)
}

fn trusted_proxy_decides_client_and_scheme(poller: &str) {
    let forwarded = ["X-Forwarded-For: 203.0.113.9", "X-Forwarded-Proto: https"];
    let trusting = Server::start(poller, &["environ"], &["--trusted-proxy", "127.0.0.1/32"]);
    let (v, _) = environ(&trusting, &forwarded);
    let addr = v["remote_addr"].as_str().unwrap_or_default();
    assert!(addr.starts_with("203.0.113.9:"), "{v}");
    assert_eq!(v["scheme"], "https");
    // Walked right to left past trusted hops.
    let (v, _) = environ(&trusting, &["X-Forwarded-For: 198.51.100.7, 127.0.0.1"]);
    assert_eq!(
        (&v["remote_addr"], &v["scheme"]),
        (&json!("198.51.100.7:0"), &json!("http"))
    );

    let plain = Server::start(poller, &["environ"], &[]);
    let other = Server::start(poller, &["environ"], &["--trusted-proxy", "10.0.0.0/8"]);
    for server in [&plain, &other] {
        let (v, local) = environ(server, &forwarded);
        assert_eq!(v["remote_addr"], format!("127.0.0.1:{local}"), "{v}");
        assert_eq!(v["scheme"], "http");
        for h in forwarded {
            let (name, value) = h.split_once(": ").expect("a header line");
            let seen = v["headers"]
                .as_array()
                .expect("headers")
                .contains(&json!([name, value]));
            assert!(seen, "{h} not passed on: {v}");
        }
    }
}

/// A fresh apps directory with these suite plugins (for `Stoa`).
fn apps_dir(names: &[&str]) -> TempDir {
    let dir = TempDir::new("ops-apps");
    for so in names.iter().map(|n| &plugins()[n]) {
        let to = dir.path().join(so.file_name().expect("a file name"));
        if std::fs::hard_link(so, &to).is_err() {
            std::fs::copy(so, &to).expect("copy a plugin");
        }
    }
    dir
}

/// A `stoa` this module starts itself, to signal it and see its exit.
struct Stoa {
    child: Child,
    port: u16,
    log: Arc<Mutex<String>>,
}

impl Stoa {
    /// Starts on 127.0.0.1:`port` (0: any) and waits for its port line.
    fn spawn(apps: &Path, port: u16, poller: &str, args: &[&str]) -> Stoa {
        let mut child = Command::new(STOA)
            .args([
                "--bind",
                &format!("127.0.0.1:{port}"),
                "--poller",
                poller,
                "--no-watch",
            ])
            .arg("--apps")
            .arg(apps)
            .args(args)
            .env_remove("STOA_POLLER")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn stoa");
        let log = Arc::new(Mutex::new(String::new()));
        let (sink, stderr) = (log.clone(), child.stderr.take().expect("stderr"));
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let mut log = sink.lock().unwrap_or_else(|p| p.into_inner());
                log.push_str(&line);
                log.push('\n');
            }
        });
        let (tx, rx) = std::sync::mpsc::channel();
        let stdout = child.stdout.take().expect("stdout");
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines().map_while(Result::ok);
            let _ = tx.send(lines.next());
            lines.for_each(drop);
        });
        let first = rx.recv_timeout(Duration::from_secs(20)).ok().flatten();
        let first = first.unwrap_or_default();
        let mut stoa = Stoa {
            child,
            port: 0,
            log,
        };
        let printed = first.strip_prefix("listening on http://127.0.0.1:");
        match printed.and_then(|p| p.parse().ok()) {
            Some(p) if port == 0 || p == port => stoa.port = p,
            _ => panic!("stoa printed {first:?}; log:\n{}", stoa.log()),
        }
        stoa
    }

    fn log(&self) -> String {
        self.log.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Sends `signal` to this child's pid only.
    fn signal(&self, signal: Signal) {
        signal_child(&self.child, signal);
    }

    fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        wait_child(&mut self.child, timeout)
    }
}

impl Drop for Stoa {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("--- stoa (port {}) log ---\n{}", self.port, self.log());
        }
    }
}

/// An installed tool (`nginx`, `haproxy`): /usr/sbin first, then `PATH`.
fn tool(name: &str) -> Option<PathBuf> {
    let sbin = Path::new("/usr/sbin").join(name);
    if sbin.exists() {
        return Some(sbin);
    }
    let found = Command::new(name).arg("-v").output().is_ok();
    found.then(|| PathBuf::from(name))
}

/// The workspace's `deploy/` directory.
fn deploy(file: &str) -> PathBuf {
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

/// One `GET` with `Connection: close`: the status code, or what went wrong.
pub(crate) fn try_get(port: u16, path: &str) -> Result<u16, String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| format!("connect: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| e.to_string())?;
    let bytes = request("GET", path, &["Connection: close"]);
    s.write_all(&bytes).map_err(|e| format!("send: {e}"))?;
    let mut answer = Vec::new();
    s.read_to_end(&mut answer)
        .map_err(|e| format!("read: {e}"))?;
    let text = String::from_utf8_lossy(&answer);
    let code = text.split(' ').nth(1).and_then(|c| c.parse().ok());
    code.ok_or_else(|| format!("answer {text:?}"))
}

fn article_2xx(port: u16) -> u64 {
    status(port)["requests"]["article"]["2xx"]
        .as_u64()
        .expect("a count")
}

/// Kills the nginx this test started (by its pid) when dropped.
struct Nginx(Child);

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn nginx_in_front_of_two_instances_loses_nothing_in_a_rolling_restart() {
    let Some(nginx) = tool("nginx") else {
        eprintln!("SKIPPED: nginx is not installed (.ci/run installs it with apt-get)");
        return;
    };
    let apps = apps_dir(&["article"]);
    let args = ["--workers", "2", "--graceful-timeout", "10"];
    let mut instances = [0, 0].map(|_| Stoa::spawn(apps.path(), 0, "epoll", &args));
    // deploy/nginx.conf itself, in the foreground, with our two instances
    // for its four and a free port for 8080.
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
            for s in &instances {
                conf += &line.replace(":8001", &format!(":{}", s.port));
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
    let started = Command::new(nginx)
        .args(["-p", &prefix, "-c", "nginx.conf", "-e", "logs/error.log"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    let _nginx = Nginx(started.expect("start nginx"));
    let log = || std::fs::read_to_string(dir.path().join("logs/error.log")).unwrap_or_default();
    let up = wait_until(Duration::from_secs(10), || {
        TcpStream::connect(("127.0.0.1", listen)).is_ok()
    });
    assert!(up, "nginx did not listen on {listen}:\n{}", log());

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
        *inst = Stoa::spawn(apps.path(), port, "epoll", &args);
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

#[test]
fn deploy_nginx_conf_passes_nginx_t() {
    let Some(nginx) = tool("nginx") else {
        eprintln!("SKIPPED: nginx is not installed (.ci/run installs it with apt-get)");
        return;
    };
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
    let Some(haproxy) = tool("haproxy") else {
        eprintln!("SKIPPED: haproxy is not installed (.ci/run installs it with apt-get)");
        return;
    };
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

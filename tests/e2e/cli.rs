//! The command line: `--poller` (and `STOA_POLLER`), the start-up output,
//! the access log (`--access-log FILE|-`) and `--max-connections`.

use crate::client::{get, request, Client};
use crate::common::run_to_exit;
use crate::harness::{Server, SAMPLE_APPS, STOA};
use std::process::Command;

matrix!(
    startup_prints_one_line_and_logs_the_backend,
    poller_from_the_environment,
    access_log_has_one_combined_line_per_request,
    access_log_to_stdout,
    max_connections_queues_extra_clients,
);

#[test]
fn bogus_poller_is_an_error_listing_the_valid_names() {
    let dir = crate::harness::TempDir::new("bogus");
    let out = run_to_exit(
        Command::new(STOA)
            .args(["--bind", "127.0.0.1:0", "--poller", "bogus", "--apps"])
            .arg(dir.path())
            .env_remove("STOA_POLLER"),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "exit status {}", out.status);
    assert!(stderr.contains("bogus"), "{stderr}");
    for name in ["epoll", "poll", "select", "io_uring"] {
        assert!(stderr.contains(name), "{name} not listed in {stderr}");
    }
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("listening on"),
        "it must not start"
    );
}

fn startup_prints_one_line_and_logs_the_backend(poller: &str) {
    let server = Server::samples(poller);
    let r = server.get("/hello/");
    assert_eq!(r.status, 200);
    let stdout = server.stdout.text();
    assert_eq!(
        stdout,
        format!("listening on http://127.0.0.1:{}\n", server.port)
    );
    let lines = server.wait_lines(&[&format!("poller={poller} ")], 1);
    assert_eq!(lines.len(), 1, "{}", server.log());
    assert!(lines[0].contains("INFO"), "{}", lines[0]);
    assert!(lines[0].contains("fd_cap="), "{}", lines[0]);
    assert!(lines[0].contains("RLIMIT_NOFILE="), "{}", lines[0]);
    assert!(lines[0].contains("--overload shed"), "{}", lines[0]);
}

fn poller_from_the_environment(poller: &str) {
    let server = Server::launch(poller)
        .apps(SAMPLE_APPS)
        .poller_via_env()
        .start();
    assert!(
        server.wait_log(&[&format!("poller={poller} ")]),
        "{}",
        server.log()
    );
    assert_eq!(server.get("/hello/").text(), "Hello World!");
    // The flag wins over the environment.
    let flag = Server::launch(poller)
        .apps(SAMPLE_APPS)
        .env("STOA_POLLER", "bogus")
        .start();
    assert!(
        flag.wait_log(&[&format!("poller={poller} ")]),
        "{}",
        flag.log()
    );
}

/// The combined-format fields of an access line, then its
/// `app=NAME gen=N us=D` suffix.
struct Fields {
    host: String,
    time: String,
    request: String,
    status: u16,
    size: usize,
    referer: String,
    agent: String,
    app: String,
    generation: String,
    micros: u64,
}

fn fields(line: &str) -> Fields {
    let (host, rest) = line.split_once(" - - [").expect("host - - [");
    let (time, rest) = rest.split_once("] \"").expect("time] \"");
    let (req, rest) = rest.split_once("\" ").expect("request\" ");
    let mut parts = rest.splitn(3, ' ');
    let status = parts.next().and_then(|s| s.parse().ok()).expect("status");
    let size = parts.next().and_then(|s| s.parse().ok()).expect("size");
    let quoted: Vec<&str> = parts.next().unwrap_or_default().split('"').collect();
    assert_eq!(quoted.len(), 5, "{line}");
    let suffix: Vec<&str> = quoted[4].split_whitespace().collect();
    let word = |i: usize, key: &str| {
        suffix
            .get(i)
            .and_then(|w| w.strip_prefix(key))
            .unwrap_or_else(|| panic!("no {key} in {line}"))
            .to_string()
    };
    assert_eq!(suffix.len(), 3, "{line}");
    Fields {
        host: host.into(),
        time: time.into(),
        request: req.into(),
        status,
        size,
        referer: quoted[1].into(),
        agent: quoted[3].into(),
        app: word(0, "app="),
        generation: word(1, "gen="),
        micros: word(2, "us=").parse().expect("us= a number"),
    }
}

/// `10/Oct/2000:13:55:36 +0000`.
fn is_clf_time(t: &str) -> bool {
    let b = t.as_bytes();
    b.len() == 26
        && b[2] == b'/'
        && b[6] == b'/'
        && b[11] == b':'
        && t.ends_with(" +0000")
        && [0, 1, 7, 8, 9, 10, 12, 13, 15, 16, 18, 19]
            .iter()
            .all(|&i| b[i].is_ascii_digit())
}

fn access_log_has_one_combined_line_per_request(poller: &str) {
    let mut apps = SAMPLE_APPS.to_vec();
    apps.push("misbehave");
    let server = Server::launch(poller).apps(&apps).access_log().start();
    let mut c = server.connect();
    let ua = "User-Agent: e2e/1.0 (test)";
    c.request(&request(
        "GET",
        "/hello/",
        &[ua, "Referer: http://localhost/"],
    ));
    let not_found = c.request(&get("/no/such/")).body.len();
    c.request(&request("POST", "/article?x=1", &["Content-Length: 0"]));
    c.send(&request("HEAD", "/hello/", &[]));
    c.read_head_response();
    c.request(&get("/_test/later"));
    c.request(&get("/.well-known/stoa/health"));
    let lines = server.access_lines(6);
    assert_eq!(lines.len(), 6, "{lines:#?}");
    let expect = [
        (
            "GET /hello/ HTTP/1.1",
            200,
            12,
            "http://localhost/",
            "e2e/1.0 (test)",
            "hello-project",
        ),
        // hello-project, mounted at the root, answers its own 404.
        (
            "GET /no/such/ HTTP/1.1",
            404,
            not_found,
            "-",
            "-",
            "hello-project",
        ),
        ("POST /article?x=1 HTTP/1.1", 405, 18, "-", "-", "article"),
        ("HEAD /hello/ HTTP/1.1", 200, 0, "-", "-", "hello-project"),
        ("GET /_test/later HTTP/1.1", 200, 18, "-", "-", "misbehave"),
        // The host's own answer: no app.
        (
            "GET /.well-known/stoa/health HTTP/1.1",
            200,
            3,
            "-",
            "-",
            "-",
        ),
    ];
    for (line, (req, status, size, referer, agent, app)) in lines.iter().zip(expect) {
        let f = fields(line);
        assert_eq!(f.host, "127.0.0.1", "{line}");
        assert!(is_clf_time(&f.time), "{line}");
        assert_eq!(
            (f.request.as_str(), f.status, f.size),
            (req, status, size),
            "{line}"
        );
        assert_eq!(
            (f.referer.as_str(), f.agent.as_str(), f.app.as_str()),
            (referer, agent, app),
            "{line}"
        );
        // Each app is in its first library generation; no app, no generation.
        let generation = if app == "-" { "-" } else { "1" };
        assert_eq!(f.generation, generation, "{line}");
    }
    // `/_test/later` answers from a thread 50 ms after the request.
    let later = fields(&lines[4]).micros;
    assert!((50_000..5_000_000).contains(&later), "us={later}");
}

fn access_log_to_stdout(poller: &str) {
    let server = Server::start(poller, SAMPLE_APPS, &["--access-log", "-"]);
    let r = server.get("/article");
    assert_eq!(r.status, 200, "{r:?}\n{}", server.log());
    assert!(server
        .stdout
        .wait(crate::harness::WAIT, |t| t.lines().count() >= 2));
    let out = server.stdout.text();
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[0].starts_with("listening on http://127.0.0.1:"),
        "{out}"
    );
    assert!(
        lines[1].contains("\"GET /article HTTP/1.1\" 200 49 "),
        "{out}"
    );
    let f = fields(lines[1]);
    assert_eq!(
        (f.app.as_str(), f.generation.as_str()),
        ("article", "1"),
        "{out}"
    );
}

fn max_connections_queues_extra_clients(poller: &str) {
    let server = Server::start(
        poller,
        SAMPLE_APPS,
        &["--max-connections", "2", "--overload", "queue"],
    );
    let mut clients: Vec<Client> = (0..5).map(|_| server.connect()).collect();
    for c in clients.iter_mut() {
        c.send(&get("/hello/"));
    }
    // Clients past the cap wait in the backlog; each one that leaves lets
    // another in. Nobody is refused. (Each worker has a backlog of its own,
    // and the cap is the host's: a client waiting on one worker can be
    // overtaken by a later one on another, so every client is read at
    // once, each on a thread of its own.)
    std::thread::scope(|s| {
        for (i, mut c) in clients.into_iter().enumerate() {
            s.spawn(move || {
                let r = c.read_response();
                assert_eq!((r.status, r.text()), (200, "Hello World!"), "client {i}");
            });
        }
    });
}

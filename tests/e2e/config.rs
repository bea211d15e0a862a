//! The configuration file: values honoured with the precedence flags >
//! environment > file > defaults; `[apps.NAME]` tables (mount, optional);
//! unknown keys and typo'd app names refused with the nearest valid one;
//! `--print-config` round-trips; `stoa check` loads the real plugins and
//! exits 0 or 1 with one line per problem; the committed example loads,
//! and `docs/operating.md` shows it as it is.

use crate::common::{run_to_exit, status};
use crate::hardening::{accepted, justnow, refused};
use crate::harness::{wait_until, Server, TempDir, STOA};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

matrix!(
    file_values_are_honoured_and_flags_and_environment_win,
    app_tables_mount_apps_and_optional_ones_may_be_absent,
    app_tables_give_an_app_its_own_limits,
);

/// A temp dir holding `stoa.toml` with `text` and an `apps/` directory
/// with these plugins.
struct Setup {
    dir: TempDir,
}

impl Setup {
    fn new(text: &str, apps: &[&str]) -> Self {
        let dir = TempDir::new("config");
        std::fs::write(dir.path().join("stoa.toml"), text).expect("write stoa.toml");
        crate::common::apps_dir_with(dir.path(), apps);
        Setup { dir }
    }

    fn config(&self) -> PathBuf {
        self.dir.path().join("stoa.toml")
    }

    fn apps(&self) -> PathBuf {
        self.dir.path().join("apps")
    }

    /// Runs `stoa ARGS --config stoa.toml --apps apps/` to its end.
    fn run(&self, args: &[&str]) -> Output {
        run(&self.config(), &self.apps(), args)
    }
}

fn run(config: &Path, apps: &Path, args: &[&str]) -> Output {
    run_with_env(config, apps, args, &[])
}

/// `run`, with these `STOA_*` variables set.
fn run_with_env(config: &Path, apps: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    run_to_exit(
        Command::new(STOA)
            .args(args)
            .arg("--config")
            .arg(config)
            .arg("--apps")
            .arg(apps)
            .args(["--bind", "127.0.0.1:0", "--log-level", "warn"])
            .env_remove("STOA_POLLER")
            .envs(env.iter().copied()),
    )
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn file_values_are_honoured_and_flags_and_environment_win(poller: &str) {
    let setup = Setup::new("max_body = \"1K\"\nhead_timeout = \"5s\"\n", &[]);
    let config = setup.config();
    let config = config.to_str().expect("utf-8 path");
    let launch = || {
        Server::launch(poller)
            .apps(&["demo"])
            .args(&["--config", config])
    };
    let body = vec![b'b'; 2000];
    let post = justnow("POST", &["Content-Length: 2000"], &body);
    let from_file = launch().start();
    refused(&from_file, "over max_body = 1K", &post, 413, "max_body");
    let env_wins = launch().env("STOA_MAX_BODY", "4K").start();
    accepted(&env_wins, "STOA_MAX_BODY=4K over the file", &post);
    let flag_wins = launch()
        .env("STOA_MAX_BODY", "1K")
        .args(&["--max-body", "4K"])
        .start();
    accepted(&flag_wins, "--max-body 4K over both", &post);
}

fn app_tables_mount_apps_and_optional_ones_may_be_absent(poller: &str) {
    let setup = Setup::new(
        "[apps.article]\nmount = \"/news\"\n\n[apps.hello-project]\noptional = true\n",
        &[],
    );
    let config = setup.config();
    let server = Server::launch(poller)
        .apps(&["article"])
        .args(&["--config", config.to_str().expect("utf-8 path")])
        .start();
    assert_eq!(server.get("/news").status, 200);
    assert_eq!(server.get("/article").status, 404);
}

fn app_tables_give_an_app_its_own_limits(poller: &str) {
    let setup = Setup::new(
        "max_body = \"1K\"\n\
         [apps.demo]\nmax_body = \"4K\"\napp_timeout = \"300ms\"\nblocking_share = 25\n",
        &[],
    );
    let config = setup.config();
    let server = Server::launch(poller)
        .apps(&["demo", "misbehave"])
        .args(&["--config", config.to_str().expect("utf-8 path")])
        .start();
    let body = vec![b'b'; 2000];
    // demo takes up to its own 4 KiB; misbehave keeps the server-wide 1 KiB.
    let to_demo = justnow("POST", &["Content-Length: 2000"], &body);
    accepted(&server, "2000 bytes to demo (max_body 4K)", &to_demo);
    let over = justnow("POST", &["Content-Length: 5000"], b"");
    refused(&server, "5000 bytes to demo", &over, 413, "max_body");
    let to_misbehave =
        crate::client::with_body("POST", "/_test/ok", &["Content-Length: 2000"], &body);
    refused(
        &server,
        "2000 bytes to misbehave (1K)",
        &to_misbehave,
        413,
        "max_body",
    );
    // demo's timer route answers in 1 s: past demo's own app_timeout.
    let r = server.get("/demo/sleep-handler/");
    assert_eq!(r.status, 504, "{r:?}");
    assert!(
        server.wait_log(&["within app_timeout (300ms)"]),
        "{}",
        server.log()
    );
    // misbehave keeps the server-wide app_timeout.
    assert_eq!(server.get("/_test/later").status, 200);
}

/// An app's own `blocking_share` is its guarantee (backend-free: one
/// backend). stuck (25% of 4 threads: one) hangs all four kept threads,
/// three of them borrowed; demo (75%: three) still runs three at once, on
/// temporary threads. With either app's share ignored (the pool's 50%),
/// demo would run two.
#[test]
fn an_apps_own_blocking_share_is_its_guarantee() {
    let setup = Setup::new(
        "[apps.stuck]\nblocking_share = 25\n[apps.demo]\nblocking_share = 75\n",
        &[],
    );
    let config = setup.config();
    let server = Server::launch("epoll")
        .apps(&["stuck", "demo"])
        .args(&["--config", config.to_str().expect("utf-8 path")])
        .args(&["--blocking-threads", "4"])
        .start();
    let send = |path: &str| {
        let mut c = server.connect();
        c.send(&crate::client::get(path));
        c
    };
    let pool = || status(server.port)["blocking_pool"].clone();
    let _blocked: Vec<_> = (0..4).map(|_| send("/_stuck/block")).collect();
    let settled = wait_until(Duration::from_secs(5), || {
        let p = &pool()["apps"]["stuck"];
        p["busy"] == 4 && p["queued"] == 0
    });
    assert!(settled, "{}", pool());
    let _sleeping: Vec<_> = (0..3)
        .map(|_| send("/demo/syncsleep-handler/?seconds=10"))
        .collect();
    let served = wait_until(Duration::from_secs(5), || {
        let p = pool();
        p["apps"]["demo"]["busy"] == 3 && p["temporary_threads"] == 3
    });
    assert!(served, "{}", pool());
}

#[test]
fn unknown_keys_and_bad_values_are_refused_naming_the_key() {
    for (toml, needles) in [
        (
            "max_bdy = \"1M\"\n",
            &["unknown key `max_bdy` (did you mean `max_body`?)"][..],
        ),
        ("max_body = \"1Q\"\n", &["`max_body`", "\"1Q\""][..]),
        (
            "no_watch = \"yes\"\n",
            &["`no_watch`: expected true or false"][..],
        ),
        (
            "[apps.article]\nmout = \"/a\"\n",
            &["`apps.article.mout` (did you mean `mount`?)"][..],
        ),
        (
            "apps = \"/srv/apps\"\n",
            &["the apps directory is `apps_dir`"][..],
        ),
        ("max_body = \n", &["stoa.toml"][..]),
    ] {
        let setup = Setup::new(toml, &[]);
        let out = setup.run(&[]);
        let stderr = text(&out.stderr);
        assert!(!out.status.success(), "{toml:?} accepted");
        for needle in needles {
            assert!(
                stderr.contains(needle),
                "{toml:?}: {needle:?} not in {stderr}"
            );
        }
    }
}

/// A file with several mistakes, and a bad flag: every one is reported in
/// one run, each at the file's line and column, naming the key (not the
/// flag), with the nearest valid key or value; nothing starts.
#[test]
fn every_mistake_is_reported_at_once_at_its_line_and_column() {
    let setup = Setup::new(
        "poller = \"kqueue\"\n\
         max_bdy = \"1M\"\n\
         worker_mode = \"proces\"\n\
         no_watch = \"yes\"\n\
         max_body = \"1Q\"\n\
         bind = [\"127.0.0.1:0\", \"unix:\"]\n\
         \n\
         [apps.article]\n\
         mout = \"/a\"\n",
        &[],
    );
    let out = setup.run(&["--workers", "0", "--print-config"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
    let file = setup.config().display().to_string();
    let at = |place: &str, rest: &str| format!("{file}:{place}: {rest}");
    let lines = [
        at(
            "1:10",
            "`poller`: unknown poller \"kqueue\" (kqueue is not a Linux backend: \
             did you mean \"epoll\"?); valid: auto, epoll, poll, select, io_uring, io_uring-completion",
        ),
        at("2:1", "unknown key `max_bdy` (did you mean `max_body`?)"),
        at(
            "3:15",
            "`worker_mode`: unknown value \"proces\" (did you mean \"process\"?); \
             valid: process, thread",
        ),
        at("4:12", "`no_watch`: expected true or false, got \"yes\""),
        at("5:12", "`max_body`: unknown size unit \"Q\" in \"1Q\""),
        at("6:24", "`bind`: \"unix:\": give the socket's path"),
        at(
            "9:1",
            "unknown key `apps.article.mout` (did you mean `mount`?)",
        ),
        "command line or environment: invalid value '0' for '--workers <N>'".to_string(),
    ];
    for line in &lines {
        assert!(
            stderr.lines().any(|l| l.starts_with(line.as_str())),
            "{line:?} not in {stderr}"
        );
    }
    assert!(
        stderr.contains(&format!("--config {file}: 8 problems:")),
        "{stderr}"
    );
}

/// `--print-config` refuses what `stoa check` refuses of the values, and
/// prints nothing then (a file it writes is one that checks).
#[test]
fn print_config_refuses_what_check_refuses() {
    for (toml, needle) in [
        ("poller = \"kqueue\"\n", "did you mean \"epoll\"?"),
        (
            "unhealthy_after = \"1s\"\n",
            "problem: --unhealthy-after (1s) must be at least --stuck-after (5s)",
        ),
        (
            "stuck_after = \"2s\"\nworker_mode = \"process\"\nworker_timeout = \"2s\"\n",
            "(stuck_after at CONFIG:1:15; worker_timeout at CONFIG:3:18)",
        ),
        (
            "worker_mode = \"thread\"\nworker_max_requests = 100\n",
            "--worker-max-requests",
        ),
    ] {
        let setup = Setup::new(toml, &[]);
        let needle = needle.replace("CONFIG", &setup.config().display().to_string());
        let printed = setup.run(&["--print-config"]);
        let stderr = text(&printed.stderr);
        assert_eq!(printed.status.code(), Some(1), "{toml:?}: {stderr}");
        assert!(
            printed.stdout.is_empty(),
            "{toml:?}: {}",
            text(&printed.stdout)
        );
        assert!(
            stderr.contains(&needle),
            "{toml:?}: {needle:?} not in {stderr}"
        );
        let checked = setup.run(&["check"]);
        assert_eq!(checked.status.code(), Some(1), "{toml:?}: check passed it");
        let said = text(&checked.stdout) + &text(&checked.stderr);
        assert!(said.contains(&needle), "check: {needle:?} not in {said}");
    }
}

/// A relative path of the file is relative to the working directory, not
/// to the file's directory, and `stoa check` says so with the path taken.
#[test]
fn check_says_what_a_relative_path_is_relative_to() {
    let setup = Setup::new("apps_dir = \"apps\"\npid_file = \"run/stoa.pid\"\n", &[]);
    let cwd = TempDir::new("config-cwd");
    std::fs::create_dir(cwd.path().join("apps")).expect("apps dir in the working directory");
    let out = run_to_exit(
        Command::new(STOA)
            .arg("check")
            .arg("--config")
            .arg(setup.config())
            .args(["--bind", "127.0.0.1:0", "--log-level", "warn"])
            .current_dir(cwd.path())
            .env_remove("STOA_POLLER")
            .env_remove("STOA_APPS")
            .env_remove("STOA_PID_FILE"),
    );
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    let cwd = cwd.path().display();
    for (key, path) in [("apps_dir", "apps"), ("pid_file", "run/stoa.pid")] {
        let line = format!(
            "# {key}: {path} (relative to the working directory {cwd}, not to the \
             configuration file's: {cwd}/{path})"
        );
        assert!(stdout.contains(&line), "{line:?} not in {stdout}");
    }
}

#[test]
fn print_config_loads_back_unchanged() {
    let setup = Setup::new(
        "max_body = \"1M\"\nworkers = 2\nstatus_allow = [\"10.0.0.0/8\"]\n\
         [apps.article]\nmount = \"/news\"\napp_timeout = \"5s\"\n",
        &[],
    );
    let first = setup.run(&["--print-config"]);
    assert!(first.status.success(), "{}", text(&first.stderr));
    let printed = text(&first.stdout);
    for line in [
        "max_body = \"1M\"",
        "workers = 2",
        "[apps.article]",
        "mount = \"/news\"",
        "app_timeout = \"5s\"",
    ] {
        assert!(printed.contains(line), "{line} not in {printed}");
    }
    let again = TempDir::new("config-again");
    let file = again.path().join("printed.toml");
    std::fs::write(&file, &printed).expect("write the printed config");
    let second = run(&file, &setup.apps(), &["--print-config"]);
    assert_eq!(text(&second.stdout), printed);
}

/// Runs `stoa ARGS --apps DIR` with no `--bind` of its own (a command-line
/// `--bind` would keep the file's from being read).
fn run_unbound(apps: &Path, args: &[&str]) -> Output {
    run_to_exit(
        Command::new(STOA)
            .args(args)
            .arg("--apps")
            .arg(apps)
            .env_remove("STOA_POLLER")
            .env_remove("STOA_BIND"),
    )
}

/// A number where an address or a mode is due is refused with the string
/// to write (`bind = [5]` is not every address's port 5).
#[test]
fn numbers_for_addresses_and_modes_are_refused_with_the_string_to_write() {
    for (toml, needles) in [
        (
            "bind = [\"127.0.0.1:0\", 5]\n",
            &["`bind`", "5 is a number", "\"127.0.0.1:5\""][..],
        ),
        ("bind = 8000\n", &["`bind`", "\"127.0.0.1:8000\""][..]),
        (
            "unix_mode = 0o660\n",
            &["`unix_mode`", "432 is a number", "\"660\""][..],
        ),
    ] {
        let setup = Setup::new(toml, &[]);
        let config = setup.config();
        let config = config.to_str().expect("a UTF-8 path");
        let out = run_unbound(&setup.apps(), &["--config", config, "--print-config"]);
        let stderr = text(&out.stderr);
        assert!(
            !out.status.success(),
            "{toml:?} accepted: {}",
            text(&out.stdout)
        );
        for needle in needles {
            assert!(
                stderr.contains(needle),
                "{toml:?}: {needle:?} not in {stderr}"
            );
        }
    }
}

/// `--print-config` writes addresses as strings, so the file it prints
/// loads back (a bare port printed as a number would now be refused).
#[test]
fn print_config_writes_addresses_as_strings_that_load_back() {
    let dir = TempDir::new("config-bind");
    let apps = dir.path().join("apps");
    std::fs::create_dir(&apps).expect("apps dir");
    let first = run_unbound(
        &apps,
        &[
            "--bind",
            "8000",
            "--bind",
            "unix:/run/x.sock",
            "--print-config",
        ],
    );
    assert!(first.status.success(), "{}", text(&first.stderr));
    let printed = text(&first.stdout);
    assert!(
        printed.contains("bind = [\"8000\", \"unix:/run/x.sock\"]"),
        "{printed}"
    );
    assert!(printed.contains("unix_mode = \"660\""), "{printed}");
    let file = dir.path().join("printed.toml");
    std::fs::write(&file, &printed).expect("write the printed config");
    let file = file.to_str().expect("a UTF-8 path");
    let second = run_unbound(&apps, &["--config", file, "--print-config"]);
    assert!(second.status.success(), "{}", text(&second.stderr));
    assert_eq!(text(&second.stdout), printed);
}

#[test]
fn check_passes_a_good_configuration_and_prints_the_mounts() {
    let setup = Setup::new("[apps.article]\nmount = \"/news\"\n", &["article", "demo"]);
    let out = setup.run(&["check"]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("/news -> article 0.1.0"), "{stdout}");
    assert!(stdout.contains("/demo -> demo 0.1.0"), "{stdout}");
    assert!(stdout.contains("max_body = \"8M\""), "{stdout}");
    // The default worker mode, said.
    assert!(
        stdout.contains("# workers\nprocess mode: a supervisor and "),
        "{stdout}"
    );
    let thread = setup.run(&["check", "--worker-mode", "thread", "--workers", "3"]);
    let said = text(&thread.stdout);
    assert!(
        said.contains("thread mode: one process, 3 event-loop thread(s); no crash containment"),
        "{said}"
    );
    assert!(
        stdout.contains("stoa check: the configuration is OK"),
        "{stdout}"
    );
}

#[test]
fn check_reports_each_problem_on_a_line_and_fails() {
    let setup = Setup::new("[apps.artcle]\nmount = \"/a\"\n", &["article"]);
    std::fs::write(setup.apps().join("broken.so"), b"not a library").expect("write");
    let out = setup.run(&["check"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    let problems: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("problem: "))
        .collect();
    assert_eq!(problems.len(), 2, "{stdout}");
    assert!(
        problems.iter().any(|p| p.contains(
            r#"[apps.artcle] mount = "/a": no app named "artcle" (did you mean "article"?)"#
        )),
        "{stdout}"
    );
    assert!(
        problems
            .iter()
            .any(|p| p.contains("broken.so: not a loadable shared library")),
        "{stdout}"
    );
}

#[test]
fn the_operating_guide_shows_the_committed_example_as_it_is() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let read = |file: &str| {
        std::fs::read_to_string(root.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"))
    };
    let example = read("deploy/stoa.toml");
    let block = format!("```toml\n{example}```\n");
    assert!(
        read("docs/operating.md").contains(&block),
        "docs/operating.md does not show deploy/stoa.toml as it is: copy the file into its toml block"
    );
}

#[test]
fn the_committed_example_checks_clean_with_the_sample_apps() {
    let example = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../deploy/stoa.toml")
        .canonicalize()
        .expect("deploy/stoa.toml");
    let setup = Setup::new("", &["hello-project", "article", "environ", "demo"]);
    let out = run(&example, &setup.apps(), &["check"]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    for mount in [
        "/ -> hello-project",
        "/article -> article",
        "/_environ -> environ",
        "/demo -> demo",
    ] {
        assert!(stdout.contains(mount), "{mount} not in {stdout}");
    }
}

/// A switch set from its `STOA_*` variable takes the spellings
/// environments use (1/0, yes/no, on/off, true/false) and refuses another
/// naming them, alone and beside a configuration file.
#[test]
fn switches_from_the_environment_take_the_usual_spellings() {
    let setup = Setup::new("no_watch = true\n", &[]);
    let with_env = |name: &str, value: &str| {
        run_with_env(
            &setup.config(),
            &setup.apps(),
            &["--print-config"],
            &[(name, value)],
        )
    };
    for (value, on) in [
        ("1", true),
        ("yes", true),
        ("ON", true),
        ("true", true),
        ("0", false),
        ("no", false),
        ("off", false),
        ("false", false),
    ] {
        let out = with_env("STOA_BLOCKING_ON_LOOP", value);
        let stdout = text(&out.stdout);
        assert!(out.status.success(), "{value:?}: {}", text(&out.stderr));
        let line = format!("blocking_on_loop = {on}");
        assert!(
            stdout.lines().any(|l| l == line),
            "STOA_BLOCKING_ON_LOOP={value}: {line:?} not in {stdout}"
        );
    }
    // The environment wins over the file's `no_watch = true`.
    let out = with_env("STOA_NO_WATCH", "0");
    assert!(
        text(&out.stdout).lines().any(|l| l == "no_watch = false"),
        "{}",
        text(&out.stdout)
    );
    // An unknown spelling, or an empty variable (a template's unset
    // `${VAR}`), is refused naming the flag, not read as false.
    for value in ["maybe", ""] {
        let out = with_env("STOA_BLOCKING_ON_LOOP", value);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{value:?}: {stderr}");
        for needle in ["--blocking-on-loop", "1/0, yes/no and on/off"] {
            assert!(
                stderr.contains(needle),
                "{value:?}: {needle:?} not in {stderr}"
            );
        }
    }
}

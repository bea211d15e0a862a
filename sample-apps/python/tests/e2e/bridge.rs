//! Starting a host that serves a WSGI application: its configuration file
//! (`[apps.python]` mount and settings), the Python a test needs, and the
//! JSON answers of the test application.

use crate::harness::{wait_until, Server, TempDir};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The test applications (`tests/python`).
pub fn test_apps() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python")
}

/// The Django hello project (`examples/djangohello`).
pub fn django_project() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/djangohello")
}

/// Fails the test, naming the missing tool, unless `python3` imports every
/// module (the interpreter the plugin embeds is the one pyo3 found as
/// `python3`).
pub fn require_python(modules: &[&str]) {
    for module in modules {
        let out = Command::new("python3")
            .args(["-c", &format!("import {module}")])
            .output();
        match out {
            Ok(o) if o.status.success() => {}
            Ok(o) => panic!(
                "this test needs the Python package `{module}` (pip install {module}; \
                 .ci/run installs it): {}",
                String::from_utf8_lossy(&o.stderr)
            ),
            Err(e) => panic!("this test needs python3 on PATH: {e}"),
        }
    }
}

/// How long a start waits for the bridge's constructor: the host's own
/// `--init-timeout` default.
const READY_WAIT: Duration = Duration::from_secs(60);

/// A host serving `module` (from `python_path`) mounted at `mount`, with
/// the `demo` app beside it and extra flags.
pub struct Bridge {
    pub server: Server,
    _config: TempDir,
}

impl Bridge {
    pub fn start(
        poller: &str,
        module: &str,
        python_path: &Path,
        mount: &str,
        args: &[&str],
    ) -> Bridge {
        Bridge::start_with(poller, config(module, python_path, mount, ""), args)
    }

    /// Starts with an `[apps.python]` table that says `optional = true`:
    /// the host serves the other apps when this one is refused.
    pub fn start_optional(poller: &str, module: &str, python_path: &Path, mount: &str) -> Bridge {
        let config = config(module, python_path, mount, "optional = true\n");
        Bridge::start_with(poller, config, &[])
    }

    pub fn start_with(poller: &str, (config, path): (TempDir, String), args: &[&str]) -> Bridge {
        let mut all = vec!["--config", path.as_str()];
        all.extend_from_slice(args);
        let server = Server::launch(poller)
            .apps(&["python", "demo"])
            .args(&all)
            .start();
        // The host serves its other apps after 5 s even while a
        // constructor runs (importing FastAPI on a loaded machine takes
        // longer): wait, as a balancer does, until /ready says every
        // constructor has returned (the app mounted, or refused).
        let ready = wait_until(READY_WAIT, || {
            !server
                .get("/.well-known/stoa/ready")
                .text()
                .contains("still runs (--init-timeout)")
        });
        assert!(
            ready,
            "the bridge's constructor did not return within {READY_WAIT:?}: {}",
            server.log()
        );
        Bridge {
            server,
            _config: config,
        }
    }
}

/// A configuration file with the `[apps.python]` table (`extra` lines in it).
pub fn config(module: &str, python_path: &Path, mount: &str, extra: &str) -> (TempDir, String) {
    let dir = TempDir::new("python-config");
    let path = dir.path().join("stoa.toml");
    let text = format!(
        "[apps.python]\nmount = {mount:?}\n{extra}\n[apps.python.settings]\nmodule = {module:?}\n\
         python_path = [{:?}]\n",
        python_path.display().to_string()
    );
    std::fs::write(&path, text).expect("write the configuration file");
    let path = path.display().to_string();
    (dir, path)
}

/// A JSON body.
pub fn json(body: &[u8]) -> Value {
    serde_json::from_slice(body)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(body)))
}

/// A file of the main suite's TLS fixtures (`tests/fixtures/tls`).
pub fn tls_fixture(name: &str) -> String {
    concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/tls/").to_string() + name
}

/// The flags of a `tls://` bind with the fixtures' certificate, and their
/// client CA with client certificates optional.
pub fn tls_args() -> Vec<String> {
    let mut args = vec!["--bind".to_string(), "tls://127.0.0.1:0".to_string()];
    for (flag, file) in [
        ("--tls-cert", "cert.pem"),
        ("--tls-key", "key.pem"),
        ("--tls-client-ca", "client-ca.pem"),
    ] {
        args.push(flag.to_string());
        args.push(tls_fixture(file));
    }
    args.extend(["--tls-client-auth".to_string(), "optional".to_string()]);
    args
}

/// The port of the host's `tls://` bind, once it listens there.
pub fn https_port(server: &Server) -> u16 {
    assert!(
        server.stdout.wait(crate::harness::START_TIMEOUT, |t| t
            .contains("listening on https://")),
        "{}",
        server.log()
    );
    let text = server.stdout.text();
    text.lines()
        .find_map(|l| l.strip_prefix("listening on https://127.0.0.1:"))
        .and_then(|p| p.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or_else(|| panic!("no https line: {text}"))
}

/// `curl` over HTTPS to `localhost:port` (trusting the fixtures' CA) with
/// `extra` arguments: the body, as JSON.
pub fn curl_json(port: u16, path: &str, extra: &[&str]) -> Value {
    let out = Command::new("curl")
        .args([
            "-sS",
            "--max-time",
            "20",
            "--cacert",
            &tls_fixture("ca.pem"),
        ])
        .args(["-H", "X-Forwarded-Proto: http"])
        .args(extra)
        .arg(format!("https://localhost:{port}{path}"))
        .output()
        .unwrap_or_else(|e| panic!("curl is needed: `apt-get install -y curl` ({e})"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    json(&out.stdout)
}

//! Starting a host whose bridge serves ASGI applications: the
//! configuration file (one application with `interface = "asgi"`, or
//! several side by side under `[[apps.python.settings.apps]]`), and what the
//! tests read back from it: the host's memory, the test applications'
//! record of what they saw, a de-chunked body.

use crate::bridge::{django_project, json, require_python, test_apps, Bridge};
use crate::harness::{wait_until, TempDir, WAIT};
use std::path::PathBuf;

/// One Python application of a `[[apps.python.settings.apps]]` list.
pub struct Entry<'a> {
    pub mount: &'a str,
    pub module: &'a str,
    pub interface: &'a str,
}

/// A TOML string.
fn quoted(s: &str) -> String {
    format!("{s:?}")
}

/// The test applications' directory and the Django project's, as a TOML
/// list for `python_path`.
fn python_path() -> String {
    let dirs: [PathBuf; 2] = [test_apps(), django_project()];
    let items: Vec<String> = dirs
        .iter()
        .map(|d| quoted(&d.display().to_string()))
        .collect();
    format!("[{}]", items.join(", "))
}

/// `[apps.python]` at `mount` (with the `host` lines in it) serving
/// `module` as an ASGI application (with the `settings` lines in its
/// settings).
pub fn one_app(mount: &str, module: &str, host: &str, settings: &str) -> String {
    format!(
        "[apps.python]\nmount = {}\n{host}\n[apps.python.settings]\nmodule = {}\n\
         interface = \"asgi\"\npython_path = {}\n{settings}\n",
        quoted(mount),
        quoted(module),
        python_path()
    )
}

/// `[apps.python]` at `mount` serving each entry at its own mount under it.
pub fn several_apps(mount: &str, entries: &[Entry]) -> String {
    let mut text = format!(
        "[apps.python]\nmount = {}\n[apps.python.settings]\npython_path = {}\n",
        quoted(mount),
        python_path()
    );
    for e in entries {
        text.push_str(&format!(
            "[[apps.python.settings.apps]]\nmount = {}\nmodule = {}\ninterface = {}\n",
            quoted(e.mount),
            quoted(e.module),
            quoted(e.interface)
        ));
    }
    text
}

/// A host (with the `demo` app beside the bridge) started with this
/// configuration file and extra flags.
pub fn start_text(poller: &str, text: &str, args: &[&str]) -> Bridge {
    let dir = TempDir::new("asgi-config");
    let path = dir.path().join("stoa.toml");
    std::fs::write(&path, text).expect("write the configuration file");
    let path = path.display().to_string();
    Bridge::start_with(poller, (dir, path), args)
}

/// The FastAPI test application (`tests/python/fastapp.py`) at `mount`.
pub fn fastapi(poller: &str, mount: &str, args: &[&str]) -> Bridge {
    fastapi_with(poller, mount, "", args)
}

/// The same, with extra lines in `[apps.python]` (`app_timeout = "1s"`).
pub fn fastapi_with(poller: &str, mount: &str, host: &str, args: &[&str]) -> Bridge {
    require_python(&["fastapi"]);
    start_text(poller, &one_app(mount, "fastapp:app", host, ""), args)
}

/// The framework-less test application (`tests/python/pureasgi.py`,
/// callable `callable`) at `mount`.
pub fn pure(poller: &str, callable: &str, mount: &str) -> Bridge {
    let module = format!("pureasgi:{callable}");
    start_text(poller, &one_app(mount, &module, "", ""), &[])
}

/// What the application behind `seen_path` has recorded (its `SEEN`).
pub fn seen(bridge: &Bridge, seen_path: &str) -> Vec<String> {
    let r = bridge.server.get(seen_path);
    assert_eq!(r.status, 200, "{r:?}");
    let list = json(&r.body);
    list.as_array()
        .unwrap_or_else(|| panic!("not a list: {list}"))
        .iter()
        .map(|v| v.as_str().unwrap_or_default().to_string())
        .collect()
}

/// Polls `seen_path` until the application has recorded `what`.
pub fn wait_seen(bridge: &Bridge, seen_path: &str, what: &str) -> bool {
    wait_until(WAIT, || seen(bridge, seen_path).iter().any(|s| s == what))
}

/// A `/proc/PID/status` figure (`VmRSS`, `VmHWM`) of the host, in KiB.
pub fn rss_kib(bridge: &Bridge, field: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{}/status", bridge.server.pid()))
        .expect("read the host's /proc status");
    text.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in {text}"))
}

/// A whole chunked body (after its head) decoded; `None` unless it ends
/// with its terminating chunk.
pub fn dechunk(mut raw: &[u8]) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let line_end = raw.windows(2).position(|w| w == b"\r\n")?;
        let line = std::str::from_utf8(&raw[..line_end]).ok()?;
        let size = usize::from_str_radix(line.trim(), 16).ok()?;
        let data = raw.get(line_end + 2..line_end + 2 + size)?;
        body.extend_from_slice(data);
        raw = raw.get(line_end + 2 + size + 2..)?;
        if size == 0 {
            return Some(body);
        }
    }
}

/// True when `python3` imports `module` (for what the host reports about
/// an optional package, such as uvloop).
pub fn python_has(module: &str) -> bool {
    std::process::Command::new("python3")
        .args(["-c", &format!("import {module}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

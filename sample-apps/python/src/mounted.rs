//! The bridge's Python applications, each at its mount under the
//! bridge's own: imported into the process's one interpreter, checked
//! against their interface, and found again for each request (longest
//! mount first, on a segment boundary).

use crate::asgi::{self, Asgi};
use crate::python::{import_app, traceback};
use crate::settings::{display_mount, AppEntry, BridgeSettings, Interface};
use crate::wsgi::Wsgi;
use pyo3::prelude::*;
use stoa_app_api::log;

/// One application and how it is served.
pub enum Served {
    Wsgi(Wsgi),
    Asgi(Asgi),
}

pub struct Mounted {
    /// Under the bridge's mount: `""` or `/segment...`.
    pub mount: String,
    pub served: Served,
}

/// Starts the interpreter (once per process) and loads every application;
/// the first error refuses the bridge (the traceback is logged here).
pub fn load(settings: &BridgeSettings) -> Result<Vec<Mounted>, String> {
    crate::python::start()?;
    let mut mounted = Vec::with_capacity(settings.apps.len());
    for entry in &settings.apps {
        let served = load_one(&settings.python_path, entry)?;
        if settings.apps.len() > 1 {
            log::info!(
                "{} application {} mounted at {}",
                interface_name(entry.interface),
                entry.target(),
                display_mount(&entry.mount)
            );
        }
        mounted.push(Mounted {
            mount: entry.mount.clone(),
            served,
        });
    }
    Ok(mounted)
}

fn interface_name(interface: Interface) -> &'static str {
    match interface {
        Interface::Wsgi => "WSGI",
        Interface::Asgi => "ASGI",
    }
}

fn load_one(shared: &[String], entry: &AppEntry) -> Result<Served, String> {
    let target = entry.target();
    let kind = interface_name(entry.interface);
    let dirs: Vec<String> = shared.iter().chain(&entry.python_path).cloned().collect();
    Python::with_gil(|py| {
        let app = import_app(py, &dirs, &entry.module, &entry.callable).map_err(|e| {
            let trace = traceback(py, &e);
            let last = trace.lines().last().unwrap_or_default().to_string();
            py.allow_threads(|| {
                log::error!("importing the {kind} application {target} raised:\n{trace}");
            });
            format!("the {kind} application {target} failed to import: {last}")
        })?;
        match entry.interface {
            Interface::Wsgi => {
                if asgi::is_coroutine_app(py, app.bind(py)).unwrap_or(false) {
                    return Err(format!(
                        "setting `interface` is \"wsgi\" but {target} is an ASGI application \
                         (an async callable): set interface = \"asgi\""
                    ));
                }
                Wsgi::new(py, app).map(Served::Wsgi)
            }
            Interface::Asgi => {
                asgi::check_interface(py, app.bind(py), &target)?;
                Asgi::load(py, app, entry).map(Served::Asgi)
            }
        }
    })
}

/// The application `path_info` (under the bridge's mount) falls to.
pub fn find<'a>(apps: &'a [Mounted], path_info: &str) -> Option<&'a Mounted> {
    apps.iter().find(|m| under(&m.mount, path_info))
}

/// `path` is at or under `mount`.
fn under(mount: &str, path: &str) -> bool {
    mount.is_empty()
        || (path.starts_with(mount)
            && matches!(path.as_bytes().get(mount.len()), None | Some(b'/')))
}

#[cfg(test)]
mod tests {
    use super::under;

    #[test]
    fn longest_mount_on_a_segment_boundary() {
        let mounts = ["/api/v2", "/api", ""];
        let find = |path: &str| mounts.iter().copied().find(|m| under(m, path));
        assert_eq!(find("/api/v2/x"), Some("/api/v2"));
        assert_eq!(find("/api"), Some("/api"));
        assert_eq!(find("/apiary"), Some(""));
        assert_eq!(find("/api/v22"), Some("/api"));
        assert_eq!(["/api"].iter().find(|m| under(m, "/other")), None);
    }
}

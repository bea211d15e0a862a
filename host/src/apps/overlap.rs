//! Mounts that take paths from another app: one nested inside another
//! app's non-root mount (`/a/b` inside `/a`), logged when it is mounted and
//! listed by `stoa check`; and, for an app mounted at `/`, the routes of it
//! a mount hides, which `stoa check` finds by asking the root app for each
//! mount's path (a GET of `PREFIX` and `PREFIX/`, answered 2xx or 3xx).

use crate::apps::loader::LoadedApp;
use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::std_types::{RSlice, RStr, RString};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;
use stoa_app_api::abi::{
    closed_stream, BodySinkBox, HeaderRef, RawResponder, RawResponder_TO, Request, Response,
    StreamBox, WsSessionBox,
};

/// How long `stoa check` waits for the root app's answer to one probe.
const PROBE_WAIT: Duration = Duration::from_millis(500);

/// `app` shown with its mount (`/` for the root one).
fn shown(app: &LoadedApp) -> String {
    let mount = if app.mount.is_empty() {
        "/"
    } else {
        &app.mount
    };
    format!("app {} at {mount}", app.name)
}

/// One line for each of `others` that `app` is nested in or that is nested
/// in `app` (root mounts aside: every mount is inside `/`).
pub fn nested<'a>(
    app: &LoadedApp,
    others: impl IntoIterator<Item = &'a Arc<LoadedApp>>,
) -> Vec<String> {
    let mut lines = Vec::new();
    for other in others {
        let (inner, outer) = if inside(&app.mount, &other.mount) {
            (app, &**other)
        } else if inside(&other.mount, &app.mount) {
            (&**other, app)
        } else {
            continue;
        };
        lines.push(format!(
            "mount {} is nested inside {}: {} no longer gets {} and the paths under it",
            shown(inner),
            shown(outer),
            outer.name,
            inner.mount
        ));
    }
    lines
}

/// Whether mount `inner` is under `outer`, a non-root mount, on a
/// path-segment boundary.
fn inside(inner: &str, outer: &str) -> bool {
    !outer.is_empty()
        && inner
            .strip_prefix(outer)
            .is_some_and(|r| r.starts_with('/'))
}

/// What `stoa check` notes under the mount table: every nested mount
/// among `apps` (each pair once), then the routes of the root app each
/// mount hides.
pub fn notes(apps: &[Arc<LoadedApp>]) -> Vec<String> {
    let mut lines = Vec::new();
    for (i, app) in apps.iter().enumerate() {
        lines.extend(nested(app, apps.iter().skip(i + 1)));
    }
    lines.extend(hidden_root_routes(apps));
    lines
}

/// For an app at `/` among `apps`: one line per mount that hides a route
/// of it (the root app answers that mount's path 2xx or 3xx).
pub fn hidden_root_routes(apps: &[Arc<LoadedApp>]) -> Vec<String> {
    let Some(root) = apps.iter().find(|a| a.mount.is_empty()) else {
        return Vec::new();
    };
    let mut lines = Vec::new();
    for app in apps.iter().filter(|a| !a.mount.is_empty()) {
        let slash = format!("{}/", app.mount);
        let answered: Vec<String> = [app.mount.as_str(), slash.as_str()]
            .into_iter()
            .filter_map(|path| {
                let status = probe(root, path)?;
                (200..400)
                    .contains(&status)
                    .then(|| format!("{path} ({status})"))
            })
            .collect();
        if !answered.is_empty() {
            lines.push(format!(
                "mount {} hides routes of {}: {}",
                shown(app),
                shown(root),
                answered.join(", ")
            ));
        }
    }
    lines
}

/// The status `app` answers a GET of `path` with, if it answers in time.
fn probe(app: &LoadedApp, path: &str) -> Option<u16> {
    let headers = [HeaderRef {
        name: RStr::from_str("Host"),
        value: RSlice::from_slice(b"localhost"),
    }];
    let request = Request {
        method: RStr::from_str("GET"),
        version_minor: 1,
        scheme: RStr::from_str("http"),
        server_name: RStr::from_str("localhost"),
        server_port: 80,
        peer: RStr::from_str("127.0.0.1:0"),
        script_name: RStr::from_str(""),
        path_info: RStr::from_str(path),
        query: RStr::from_str(""),
        headers: RSlice::from_slice(&headers),
        body: RSlice::from_slice(&[]),
    };
    let (tx, rx) = mpsc::channel();
    app.handle(&request, RawResponder_TO::from_value(Probe(tx), TD_Opaque));
    rx.recv_timeout(PROBE_WAIT).ok().flatten()
}

/// A responder that reports the status it is answered with (none for a
/// body read or a WebSocket).
struct Probe(mpsc::Sender<Option<u16>>);

impl RawResponder for Probe {
    fn respond(self, response: Response) {
        let _ = self.0.send(Some(response.status));
    }

    fn panicked(self, _message: RString) {
        let _ = self.0.send(None);
    }

    fn start_stream(
        self,
        head: Response,
        _length: abi_stable::std_types::ROption<u64>,
    ) -> StreamBox {
        let _ = self.0.send(Some(head.status));
        closed_stream()
    }

    fn read_body(self, _sink: BodySinkBox) {
        let _ = self.0.send(None);
    }

    fn accept_websocket(self, _session: WsSessionBox) {
        let _ = self.0.send(None);
    }
}

#[cfg(test)]
mod tests {
    use super::inside;

    #[test]
    fn nested_means_under_a_non_root_mount_on_a_segment_boundary() {
        assert!(inside("/a/b", "/a"));
        assert!(inside("/a/b/c", "/a"));
        assert!(!inside("/ab", "/a"));
        assert!(!inside("/a", "/a"));
        assert!(!inside("/a", "/a/b"));
        assert!(!inside("/a/b", ""));
    }
}

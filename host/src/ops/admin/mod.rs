//! The host's own endpoints under `/.well-known/stoa/`, answered before
//! any mount: health, readiness, status (JSON, `status`) and metrics
//! (Prometheus, `metrics`), both from one view of the workers (`View`).

mod metrics;
mod status;
mod view;

use metrics::metrics_text;
use status::status_json;
use view::stuck_workers;
pub use view::Sources;

use crate::http::answer::HostAnswer;
use crate::ops::netfilter::peer_ip;
use crate::ops::stuck::{not_ready, unhealthy};
use stoa_app_api::Response;

/// The prefix of the host's endpoints.
pub const PREFIX: &str = "/.well-known/stoa/";

/// Answers a host endpoint, or `None` if `path` is not one.
pub fn answer(shared: &Sources<'_>, path: &str, peer: &str) -> Option<Response> {
    let name = path.strip_prefix(PREFIX)?;
    let response = match name {
        "health" => {
            let (stuck, workers) = stuck_workers(shared);
            match unhealthy(&stuck, workers, shared.board.unhealthy_after) {
                Some(why) => HostAnswer::Stuck(why).response(),
                None => Response::text(200, "ok\n"),
            }
        }
        "ready" if shared.control.draining() => HostAnswer::Draining.response(),
        "ready" if !shared.apps.load().starting.is_empty() => {
            HostAnswer::Starting(shared.apps.load().starting.clone()).response()
        }
        "ready" if shared.apps.load().mounts.apps().is_empty() => HostAnswer::NoApps.response(),
        "ready" => {
            let (stuck, workers) = stuck_workers(shared);
            match not_ready(&stuck, workers) {
                Some(why) => HostAnswer::Stuck(why).response(),
                None => Response::text(200, "ready\n"),
            }
        }
        "status" | "metrics"
            if !peer_ip(peer).is_some_and(|ip| shared.settings.status_allow.contains(ip)) =>
        {
            HostAnswer::StatusForbidden.response()
        }
        "status" => Response::json(200, status_json(shared).as_bytes()),
        "metrics" => Response::new(200)
            .with_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            .with_body(metrics_text(shared)),
        _ => HostAnswer::NoEndpoint.response(),
    };
    Some(response)
}

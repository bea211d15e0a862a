//! Every fixed value the host runs with, derived once at start-up from
//! the command line, the environment and the config file (and from what
//! start-up measured: the worker count, the connection cap, the poller).
//! A leaf: it imports nothing from the host's other modules, so every
//! wing may read it and none of it changes while the host runs. The live
//! parts (the app table, the pool, the logs, the counters, the watchdog's
//! board, the run state) are separate handles.

mod limits;
mod net;
mod values;

pub use limits::{AppLimits, ConnParams, LingerLimits, WsParams};
pub use net::{parse_net, NetList};
pub use values::{Bind, LogFormat, OnGenerationCap, Overload, WorkerMode};

use std::time::Duration;

/// The fixed values the workers, the endpoints and the watchdog read.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Limits and timeouts of a connection; `conn.max_body` is the largest
    /// body any app may take (the flag, or an app's larger own `max_body`).
    pub conn: ConnParams,
    /// Limits and timing of open WebSockets.
    pub ws: WsParams,
    /// `--max-body`, when some app has its own `max_body`: each request's
    /// limit is then its app's, or this.
    pub app_body_limits: Option<usize>,
    /// The shortest `app_timeout` of any app (its own, or the flag's):
    /// deadlines are checked often enough for it.
    pub shortest_app_timeout: Duration,
    /// Connection cap of each worker: its share of `max_connections_total`.
    pub max_connections: usize,
    /// The process-wide cap (`--max-connections`, or the default).
    pub max_connections_total: usize,
    /// What clients past the cap get.
    pub overload: Overload,
    /// Warn when app code holds the loop longer than this.
    pub loop_block_warn: Duration,
    /// The readiness backend's name.
    pub poller: &'static str,
    /// Who may read the status endpoints.
    pub status_allow: NetList,
    /// Whose `X-Forwarded-*` headers are believed.
    pub trusted_proxies: NetList,
}

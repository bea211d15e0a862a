//! What every worker shares: the mounted apps, the settings, the run state
//! and the counters.

use crate::apps::registry::AppState;
use crate::apps::services::Pool;
use crate::http::ConnParams;
use crate::ops::access_log::AccessLog;
use crate::ops::control::Control;
use crate::ops::netfilter::NetList;
use crate::ops::stats::WorkerStats;
use crate::ops::watchdog::Board;
use arc_swap::ArcSwap;
use std::sync::Arc;
use std::time::Duration;

pub struct Shared {
    /// The mounted apps; replaced whole when plugins change.
    pub apps: ArcSwap<AppState>,
    /// Limits and timeouts; `params.max_body` is the largest body any app
    /// may take (the flag, or an app's larger own `max_body`).
    pub params: ConnParams,
    /// Limits and timing of open WebSockets.
    pub ws: crate::server::WsParams,
    /// `--max-body`, when some app has its own `max_body`: each request's
    /// limit is then its app's, or this.
    pub app_body_limits: Option<usize>,
    /// The shortest `app_timeout` of any app (its own, or the flag's):
    /// deadlines are checked often enough for it.
    pub shortest_app_timeout: std::time::Duration,
    pub access_log: Option<AccessLog>,
    /// Connection cap of each worker: its share of `max_connections_total`.
    pub max_connections: usize,
    /// The process-wide cap (`--max-connections`, or the default).
    pub max_connections_total: usize,
    /// What clients past the cap get.
    pub overload: crate::cli::Overload,
    /// Runs handlers that declare they block; `None` runs them on the loop
    /// (`--blocking-on-loop`, Tornado's behaviour).
    pub pool: Option<Arc<Pool>>,
    /// Warn when app code holds the loop longer than this.
    pub loop_block_warn: Duration,
    pub control: Control,
    /// The workers' heartbeats, read by the watchdog and the endpoints.
    pub watch: Board,
    /// One block of counters per worker, by worker index.
    pub stats: Vec<WorkerStats>,
    pub poller: &'static str,
    pub status_allow: NetList,
    pub trusted_proxies: NetList,
}

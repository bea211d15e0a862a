//! Every fixed value the host runs with, derived once at start-up from
//! the command line, the environment and the config file (and from what
//! start-up measured: the worker count, the connection cap, the poller).
//! A leaf: it imports nothing from the host's other modules, so every
//! wing may read it and none of it changes while the host runs. The live
//! parts (the app table, the pool, the logs, the counters, the watchdog's
//! board, the run state) are separate handles.

mod h2;
mod limits;
mod net;
mod tls;
mod values;

pub use h2::H2Params;
pub use limits::{AppLimits, ConnParams, LingerLimits, WsParams};
pub use net::{parse_net, NetList};
pub use tls::{CertPair, ClientAuth, MinVersion, Site, Sites};
pub use values::{Bind, LogFormat, OnGenerationCap, Overload, WorkerMode};

use std::time::Duration;

/// The fixed values the workers, the endpoints and the watchdog read.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Limits and timeouts of a connection; `conn.max_body` is the largest
    /// body any app may take whole (the flag, or an app's larger own
    /// `max_body`), `conn.max_stream_body` the largest it may read as it
    /// arrives.
    pub conn: ConnParams,
    /// Limits and timing of open WebSockets.
    pub ws: WsParams,
    /// `--max-body`, when some app has its own `max_body`: each request's
    /// limit is then its app's, or this.
    pub app_body_limits: Option<usize>,
    /// `--max-stream-body`, when some app has its own `max_stream_body`:
    /// each streamed body's limit is then its app's, or this.
    pub app_stream_limits: Option<usize>,
    /// The shortest `app_timeout` of any app (its own, or the flag's):
    /// deadlines are checked often enough for it.
    pub shortest_app_timeout: Duration,
    /// The host-wide connection cap (`--max-connections`, or the default):
    /// every worker admits against one count of open connections.
    pub max_connections: usize,
    /// What clients past the cap get.
    pub overload: Overload,
    /// Warn when app code holds the loop longer than this.
    pub loop_block_warn: Duration,
    /// The `Strict-Transport-Security` value answers on TLS binds carry
    /// (`--hsts`), if any.
    pub hsts: Option<std::sync::Arc<str>>,
    /// Plain TCP binds redirect every request to the first TLS bind
    /// (`--https-redirect`).
    pub https_redirect: bool,
    /// The readiness backend's name.
    pub poller: &'static str,
    /// Who may read the status endpoints.
    pub status_allow: NetList,
    /// Whose `X-Forwarded-*` headers are believed.
    pub trusted_proxies: NetList,
    /// HTTP/2 connections' limits (the header list's are `conn`'s).
    pub h2: H2Params,
    /// A plain connection that opens with HTTP/2's preface speaks it (h2c
    /// with prior knowledge).
    pub h2c: bool,
}

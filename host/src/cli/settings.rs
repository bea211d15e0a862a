//! The fixed settings (`crate::settings`) from the flags, the environment
//! and the config file: the one place a flag's value becomes a setting.

use super::Cli;
use crate::settings::{ConnParams, LingerLimits, NetList, Settings, WsParams};

/// What start-up measured before the settings could be made.
pub struct Measured {
    pub workers: usize,
    /// The connection cap, host-wide (`--max-connections`, or what the
    /// descriptor limit leaves room for).
    pub max_connections: usize,
    /// The readiness backend chosen.
    pub poller: &'static str,
}

impl Cli {
    /// Every fixed value the workers, the endpoints and the watchdog read.
    pub fn settings(&self, measured: Measured) -> Settings {
        let workers = measured.workers.max(1);
        let sections = || self.app_sections.values().map(|s| s.limits);
        let flags = self.conn_params();
        let conn = ConnParams {
            linger: LingerLimits {
                most: self.max_lingering.div_ceil(workers),
                ..flags.linger
            },
            max_body: sections()
                .filter_map(|l| l.max_body)
                .fold(self.max_body, usize::max),
            max_stream_body: sections()
                .filter_map(|l| l.max_stream_body)
                .fold(self.max_stream_body, usize::max),
            ..flags
        };
        let h2 = crate::settings::H2Params {
            max_concurrent_streams: self.h2_max_concurrent_streams,
            stream_window: self.h2_stream_window,
            conn_window: self.h2_conn_window,
            reset_rate: self.h2_reset_rate,
            reset_burst: self.h2_reset_rate.saturating_mul(2),
            control_rate: self.h2_control_rate,
            control_burst: self.h2_control_rate,
            // The header list's limits are HTTP/1.1's head limits.
            max_header_list: u32::try_from(conn.max_head).unwrap_or(u32::MAX),
            max_headers: conn.max_headers,
            ..crate::settings::H2Params::default()
        };
        Settings {
            conn,
            ws: self.ws_params(),
            app_body_limits: sections()
                .any(|l| l.max_body.is_some())
                .then_some(self.max_body),
            app_stream_limits: sections()
                .any(|l| l.max_stream_body.is_some())
                .then_some(self.max_stream_body),
            shortest_app_timeout: sections()
                .filter_map(|l| l.app_timeout)
                .fold(self.app_timeout, std::time::Duration::min),
            max_connections: measured.max_connections,
            overload: self.overload,
            loop_block_warn: self.loop_block_warn,
            hsts: self.hsts.filter(|d| !d.is_zero()).map(|age| {
                let sub = match self.hsts_subdomains {
                    true => "; includeSubDomains",
                    false => "",
                };
                format!("max-age={}{sub}", age.as_secs()).into()
            }),
            https_redirect: self.https_redirect,
            poller: measured.poller,
            status_allow: if self.status_allow.is_empty() {
                NetList::loopback()
            } else {
                NetList(self.status_allow.clone())
            },
            trusted_proxies: NetList(self.trusted_proxy.clone()),
            h2,
            h2c: self.h2c,
        }
    }

    /// The WebSocket limit and ping policy from the flags.
    pub fn ws_params(&self) -> WsParams {
        WsParams {
            max_message: self.ws_max_message,
            ping_interval: self.ws_ping_interval,
            min_rate: self.body_min_rate,
            rate_grace: self.body_timeout,
        }
    }

    /// The per-connection limits and timeouts from the flags.
    pub fn conn_params(&self) -> ConnParams {
        ConnParams {
            max_request_line: self.max_request_line,
            max_header_field: self.max_header_field,
            max_headers: usize::from(self.max_headers),
            max_head: self.max_head,
            max_body: self.max_body,
            max_stream_body: self.max_stream_body,
            max_requests_per_conn: self.max_requests_per_conn,
            tls_handshake_timeout: self.tls_handshake_timeout,
            head_timeout: self.head_timeout,
            body_timeout: self.body_timeout,
            send_timeout: self.send_timeout,
            keep_alive_timeout: self.keep_alive_timeout,
            app_timeout: self.app_timeout,
            stream_queue: self.stream_queue,
            stream_idle_timeout: self.stream_idle_timeout,
            body_min_rate: self.body_min_rate,
            linger: LingerLimits {
                time: self.lingering_time,
                timeout: self.lingering_timeout,
                bytes: self.lingering_bytes,
                // Host-wide here; each worker takes its share at start-up.
                most: self.max_lingering,
            },
        }
    }
}

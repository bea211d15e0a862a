//! Command-line flags (clap).

use crate::http::parse::HEADER_ARRAY;
use crate::http::ConnParams;
use clap::Parser;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Stoa: a non-blocking HTTP/1.1 gateway container for native app plugins.
#[derive(Parser, Debug, Clone)]
#[command(name = "stoa", version, about)]
pub struct Cli {
    /// Address to listen on; port 0 picks a free port.
    #[arg(long, default_value = "127.0.0.1:8000")]
    pub bind: SocketAddr,

    /// Directory of app plugins (`*.so`), loaded in name order at start-up.
    #[arg(long, default_value = "apps")]
    pub apps: PathBuf,

    /// Readiness backend: auto (epoll, then poll, then select), epoll, poll or select.
    #[arg(long, env = "STOA_POLLER", default_value = "auto")]
    pub poller: String,

    /// Mount an app at another prefix than its default: NAME=PREFIX (repeatable).
    #[arg(long = "mount", value_name = "NAME=PREFIX", value_parser = parse_mount)]
    pub mounts: Vec<(String, String)>,

    /// Listen backlog [default: the kernel's somaxconn].
    #[arg(long)]
    pub backlog: Option<i32>,

    /// Threads of the blocking pool that runs handlers declared blocking.
    #[arg(long, default_value_t = 64)]
    pub blocking_threads: usize,

    /// Requests that may wait for a blocking thread; past it they get 503.
    #[arg(long, default_value_t = 1024)]
    pub blocking_queue: usize,

    /// Percent of the blocking threads, and of its queue, one app may hold
    /// (at least one thread); its further jobs wait, or get 503 past its
    /// share of the queue.
    #[arg(long, value_name = "PERCENT", default_value_t = 50,
          value_parser = clap::value_parser!(u8).range(1..=100))]
    pub blocking_share: u8,

    /// Run handlers declared blocking on the event loop itself (Tornado's
    /// behaviour, for comparison): the loop stalls while they run.
    #[arg(long)]
    pub blocking_on_loop: bool,

    /// Warn when app code holds the event loop longer than this many ms.
    #[arg(long, default_value_t = 100)]
    pub loop_block_warn: u64,

    /// Event-loop threads, each with its own poller and SO_REUSEPORT
    /// listener [default: the number of CPUs].
    #[arg(long)]
    pub workers: Option<usize>,

    /// Seconds to let in-flight requests finish after SIGTERM/SIGINT; the
    /// process then ends even if a worker is stuck in app code.
    #[arg(long, default_value_t = 30)]
    pub graceful_timeout: u64,

    /// Seconds an event loop may go without turning (app code that does not
    /// return) before it is reported stuck: /ready answers 503 and its
    /// listener leaves the accept group.
    #[arg(long, value_name = "SECS", default_value_t = 5.0, value_parser = parse_secs)]
    pub stuck_after: f64,

    /// Seconds a worker may stay stuck before /health answers 503 (at once
    /// when every worker is stuck); at least --stuck-after.
    #[arg(long, value_name = "SECS", default_value_t = 30.0, value_parser = parse_secs)]
    pub unhealthy_after: f64,

    /// Who may read /.well-known/stoa/status and metrics (CIDR, repeatable)
    /// [default: loopback only].
    #[arg(long, value_parser = crate::ops::netfilter::parse_net)]
    pub status_allow: Vec<ipnet::IpNet>,

    /// A proxy whose X-Forwarded-For/-Proto are believed (CIDR, repeatable).
    #[arg(long, value_parser = crate::ops::netfilter::parse_net)]
    pub trusted_proxy: Vec<ipnet::IpNet>,

    /// Library generations kept per app before a replace is refused
    /// (libraries are never unloaded).
    #[arg(long, default_value_t = 16)]
    pub max_generations: u32,

    /// Largest plugin file loaded, in bytes or with a K/M/G suffix (e.g.
    /// 512M); a larger file is refused before it is copied.
    #[arg(long, default_value = "1G", value_name = "SIZE", value_parser = crate::apps::plugin_copy::parse_size)]
    pub max_plugin_size: u64,

    /// Do not watch the apps directory (SIGHUP still rescans it).
    #[arg(long)]
    pub no_watch: bool,

    /// Load plugins even from an apps directory or files that any user can
    /// write or that another user owns (a loud warning instead of a
    /// refusal; for development only).
    #[arg(long)]
    pub insecure_apps_dir: bool,

    /// Longest request-target, bytes (414 past it).
    #[arg(long, default_value_t = 8 * 1024)]
    pub max_request_line: usize,

    /// Longest single header field value, bytes (431).
    #[arg(long, default_value_t = 8 * 1024)]
    pub max_header_field: usize,

    /// Most header fields in a request (431).
    #[arg(long, default_value_t = 100)]
    pub max_headers: usize,

    /// Largest request head, bytes (431).
    #[arg(long, default_value_t = 64 * 1024)]
    pub max_head: usize,

    /// Largest request body, bytes (413).
    #[arg(long, default_value_t = 8 * 1024 * 1024)]
    pub max_body: usize,

    /// Requests on one keep-alive connection before it is closed.
    #[arg(long, default_value_t = 1000)]
    pub max_requests_per_conn: u32,

    /// Seconds to receive a whole request head (408; slowloris).
    #[arg(long, default_value_t = 30.0, value_parser = parse_secs)]
    pub head_timeout: f64,

    /// Seconds a request body may stall between reads (408).
    #[arg(long, default_value_t = 30.0, value_parser = parse_secs)]
    pub body_timeout: f64,

    /// Seconds a response may make no sending progress (then closed).
    #[arg(long, default_value_t = 30.0, value_parser = parse_secs)]
    pub send_timeout: f64,

    /// Seconds an idle keep-alive connection is kept.
    #[arg(long, default_value_t = 30.0, value_parser = parse_secs)]
    pub keep_alive_timeout: f64,

    /// Seconds an app has to answer before its client gets 504.
    #[arg(long, default_value_t = 30.0, value_parser = parse_secs)]
    pub app_timeout: f64,

    /// Log level: error, warn, info, debug or trace.
    #[arg(long, default_value = "info")]
    pub log_level: log::LevelFilter,

    /// Access log in combined format: a file path, or `-` for standard output.
    #[arg(long, value_name = "PATH|-")]
    pub access_log: Option<String>,

    /// Most connections served at once; past it, new clients wait in the
    /// backlog [default: 10000; select: FD_SETSIZE minus reserved fds].
    #[arg(long)]
    pub max_connections: Option<usize>,
}

fn parse_secs(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v <= 86_400.0 => Ok(v),
        _ => Err(format!("expected seconds between 0 and 86400, got {s:?}")),
    }
}

impl Cli {
    /// The per-connection limits and timeouts from the flags.
    pub fn conn_params(&self) -> ConnParams {
        ConnParams {
            max_request_line: self.max_request_line,
            max_header_field: self.max_header_field,
            max_headers: self.max_headers.clamp(1, HEADER_ARRAY),
            max_head: self.max_head,
            max_body: self.max_body,
            max_requests_per_conn: self.max_requests_per_conn.max(1),
            head_timeout: Duration::from_secs_f64(self.head_timeout),
            body_timeout: Duration::from_secs_f64(self.body_timeout),
            send_timeout: Duration::from_secs_f64(self.send_timeout),
            keep_alive_timeout: Duration::from_secs_f64(self.keep_alive_timeout),
            app_timeout: Duration::from_secs_f64(self.app_timeout),
        }
    }
}

fn parse_mount(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((name, prefix)) if !name.is_empty() && prefix.starts_with('/') => {
            Ok((name.to_string(), prefix.to_string()))
        }
        _ => Err(format!("expected NAME=/prefix, got {s:?}")),
    }
}

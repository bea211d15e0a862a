//! Command-line flags (clap).

use clap::Parser;
use std::net::SocketAddr;
use std::path::PathBuf;

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

    /// Run handlers declared blocking on the event loop itself (Tornado's
    /// behaviour, for comparison): the loop stalls while they run.
    #[arg(long)]
    pub blocking_on_loop: bool,

    /// Warn when app code holds the event loop longer than this many ms.
    #[arg(long, default_value_t = 100)]
    pub loop_block_warn: u64,

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

fn parse_mount(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((name, prefix)) if !name.is_empty() && prefix.starts_with('/') => {
            Ok((name.to_string(), prefix.to_string()))
        }
        _ => Err(format!("expected NAME=/prefix, got {s:?}")),
    }
}

//! Command-line flags (clap). Every flag also reads `STOA_<NAME>` from the
//! environment (a flag given on the command line wins). Values take units:
//! see `values`.

mod app_table;
mod config;
mod file_map;
pub mod new_app;
mod problem;
mod settings;
mod tls_table;
mod values;

pub use settings::Measured;

use crate::http::parse::HEADER_ARRAY;
use crate::settings::{Bind, LogFormat, OnGenerationCap, Overload, WorkerMode};
pub use app_table::AppSection;
use clap::builder::RangedU64ValueParser;
use clap::Parser;
pub use config::{load, shown_path, with_file_places, FileOrigin, LoadError};
use std::path::PathBuf;
use std::time::Duration;
pub use tls_table::TlsSection;
pub use values::{
    nearest, parse_bind, parse_client_auth, parse_hsts, parse_init_timeout, parse_millis,
    parse_min_version, parse_secs, parse_size, parse_size_usize,
};
use values::{
    parse_h2_conn_window, parse_h2_window, parse_level, parse_mode, parse_mount, parse_on_off,
    parse_poller, parse_stream_queue, parse_switch,
};

/// The app ABI this host accepts: the `stoa-app-api` version plugins are
/// checked against (any 0.1.x build loads).
pub fn abi_version() -> String {
    use abi_stable::library::RootModule;
    let v = <stoa_app_api::abi::AppModuleRef as RootModule>::VERSION_STRINGS;
    format!("stoa-app-api {}", v.version)
}

fn long_version() -> &'static str {
    let text = format!(
        "{} (accepts app plugins built against {})",
        env!("CARGO_PKG_VERSION"),
        abi_version()
    );
    Box::leak(text.into_boxed_str())
}

const CONFIGURATION: &str = "Configuration";
const SERVING: &str = "Serving";
const APPS: &str = "Apps";
const LIMITS: &str = "Limits (sizes take K, M, G: 8KiB, 1M)";
const TIMEOUTS: &str = "Timeouts (durations take ms, s, m, h: 500ms, 30s, 2m; a bare number is \
                        seconds; at least 100ms)";
const OPERATIONS: &str = "Operations";
const LOGGING: &str = "Logging";

/// Stoa: a non-blocking HTTP/1.1 gateway container for native app plugins.
#[derive(Parser, Debug, Clone)]
#[command(name = "stoa", version = long_version(), about,
          after_help = "Every flag can also be set in the environment as STOA_<FLAG> (e.g. \
                        STOA_MAX_BODY=1M) and in the --config file as a key (max_body = \"1M\"); \
                        precedence: command line > environment > file > defaults.\n\n\
                        Also: `stoa check [FLAGS]` (= --check-config) and \
                        `stoa new-app NAME [--dir DIR]` (writes a new app plugin crate).")]
pub struct Cli {
    /// A TOML configuration file: keys are the flags' names with `_`
    /// (`max_body = "1M"`, `apps_dir` for --apps) and `[apps.NAME]` tables
    /// (`mount`, `optional`); flags and STOA_* win over it. Every mistake
    /// is reported at once, at its line and column. Relative paths in it
    /// are relative to the working directory, not to the file.
    #[arg(long, env = "STOA_CONFIG", value_name = "FILE", help_heading = CONFIGURATION)]
    pub config: Option<PathBuf>,

    /// Check the configuration and exit: load every plugin through the real
    /// loader, resolve the mounts, print the effective configuration and the
    /// mount table, one line per problem; exit 0 or 1 (also `stoa check`).
    /// An address held by a live stoa (the socket among the descriptors of
    /// a process named stoa, or of the --pid-file's) is not a problem.
    #[arg(long, help_heading = CONFIGURATION)]
    pub check_config: bool,

    /// Print the effective configuration as TOML (loads back unchanged) and
    /// exit; with a value `stoa check` refuses, print nothing and exit 1.
    #[arg(long, help_heading = CONFIGURATION)]
    pub print_config: bool,

    /// The `[apps.NAME]` tables of the configuration file.
    #[arg(skip)]
    pub app_sections: std::collections::BTreeMap<String, AppSection>,

    /// The `[tls."ADDR"]` tables of the configuration file.
    #[arg(skip)]
    pub tls_sections: std::collections::BTreeMap<String, tls_table::TlsSection>,

    /// The effective configuration as TOML (for --print-config and check).
    #[arg(skip)]
    pub effective_config: String,

    /// The values the configuration file gave, with their keys and places.
    #[arg(skip)]
    pub file_origins: Vec<config::FileOrigin>,

    /// Address to listen on (repeatable: listens on all): HOST:PORT (every
    /// address the name resolves to, on one port; localhost is 127.0.0.1
    /// and ::1, and one the machine lacks is skipped with a log line),
    /// [IPv6]:PORT, :PORT or PORT (all IPv4 addresses), or unix:PATH (a
    /// Unix-domain socket), or tls://IP:PORT (HTTPS with --tls-cert and
    /// --tls-key); port 0 picks a free port. Not used when sockets are
    /// passed (socket activation: LISTEN_FDS for the pid in LISTEN_PID,
    /// names from LISTEN_FDNAMES shown on the "listening on" lines, a
    /// socket named tls or tls-... serving HTTPS; or an upgrade on
    /// SIGUSR2).
    #[arg(long, env = "STOA_BIND", value_name = "ADDR", default_value = "127.0.0.1:8000",
          value_parser = parse_bind, value_delimiter = ',', help_heading = SERVING)]
    pub bind: Vec<Bind>,

    /// The certificate chain (PEM, the server's certificate first) that
    /// every tls:// bind serves.
    #[arg(long, env = "STOA_TLS_CERT", value_name = "FILE", help_heading = SERVING)]
    pub tls_cert: Option<PathBuf>,

    /// The private key (PEM: PKCS#8, PKCS#1 or SEC1, not encrypted) of
    /// --tls-cert.
    #[arg(long, env = "STOA_TLS_KEY", value_name = "FILE", help_heading = SERVING)]
    pub tls_key: Option<PathBuf>,

    /// Mutual TLS: the CA certificates (PEM) client certificates must
    /// chain to on every tls:// bind; apps see the client's subject.
    #[arg(long, env = "STOA_TLS_CLIENT_CA", value_name = "FILE", help_heading = SERVING)]
    pub tls_client_ca: Option<PathBuf>,

    /// With --tls-client-ca: required (a client without a valid
    /// certificate fails the handshake) or optional (it may send none;
    /// one it sends must verify).
    #[arg(long, env = "STOA_TLS_CLIENT_AUTH", value_name = "MODE", default_value = "required",
          value_parser = parse_client_auth, help_heading = SERVING)]
    pub tls_client_auth: crate::settings::ClientAuth,

    /// Answers on tls:// binds carry Strict-Transport-Security with this
    /// max-age (e.g. 365d; 0 or none: no header); an app's own header
    /// wins.
    #[arg(long, env = "STOA_HSTS", value_name = "DURATION", value_parser = parse_hsts,
          help_heading = SERVING)]
    pub hsts: Option<Duration>,

    /// Answer every request on the plain TCP binds with 308 Permanent
    /// Redirect to the same host and target on the first tls:// bind's
    /// port (Unix sockets still serve).
    #[arg(long, env = "STOA_HTTPS_REDIRECT", value_parser = parse_switch, help_heading = SERVING)]
    pub https_redirect: bool,

    /// With --hsts: add includeSubDomains.
    #[arg(long, env = "STOA_HSTS_SUBDOMAINS", value_parser = parse_switch, help_heading = SERVING)]
    pub hsts_subdomains: bool,

    /// The oldest TLS version offered: 1.2 or 1.3.
    #[arg(long, env = "STOA_TLS_MIN_VERSION", value_name = "VERSION", default_value = "1.2",
          value_parser = parse_min_version, help_heading = SERVING)]
    pub tls_min_version: crate::settings::MinVersion,

    /// How often the files of the tls:// binds (chains, keys, client CAs)
    /// are read to notice a change of content (a file rewritten, renamed
    /// over, or a Kubernetes Secret's ..data symlink swapped): a change
    /// reloads them as SIGHUP does. Also when a certificate's expiry
    /// warning is due.
    #[arg(long, env = "STOA_TLS_WATCH_INTERVAL", value_name = "DURATION", default_value = "5s",
          value_parser = parse_secs, help_heading = SERVING)]
    pub tls_watch_interval: Duration,

    /// File mode of a Unix socket (octal): who may connect.
    #[arg(long, env = "STOA_UNIX_MODE", value_name = "OCTAL", default_value = "660",
          value_parser = parse_mode, help_heading = SERVING)]
    pub unix_mode: u32,

    /// Share the address with other processes that listen on it with this
    /// flag too (rolling restarts); without it, an address in use is an error.
    #[arg(long, env = "STOA_REUSE_PORT", value_parser = parse_switch, help_heading = SERVING)]
    pub reuse_port: bool,

    /// Event backend: auto (epoll, then poll, then select), epoll, poll,
    /// select, io_uring (readiness) or io_uring-completion (the ring does
    /// the connections' reads and writes; io_uring readiness on a kernel
    /// before 6.0, said in the log); the io_uring ones only by name.
    #[arg(long, env = "STOA_POLLER", default_value = "auto", value_parser = parse_poller,
          help_heading = SERVING)]
    pub poller: String,

    /// Workers: event-loop threads, each with its own poller and
    /// SO_REUSEPORT listener (thread mode), or worker processes with one
    /// loop each on shared listening sockets (process mode) [default: the
    /// number of CPUs].
    #[arg(long, env = "STOA_WORKERS", value_name = "N", help_heading = SERVING,
          value_parser = RangedU64ValueParser::<usize>::new().range(1..=1024))]
    pub workers: Option<usize>,

    /// How the workers run: process (the default: a small supervisor that
    /// never loads app code, and one worker process per worker, each with
    /// one event loop and every app, accepting on the same sockets: a
    /// worker that crashes, hangs past --worker-timeout or reaches a
    /// --worker-max-* limit is replaced, the others serve on) or thread
    /// (one process, one event-loop thread per worker: for comparison and
    /// small hosts, with no crash containment). The blocking pool
    /// (--blocking-threads, its shares) is per worker process.
    #[arg(long, env = "STOA_WORKER_MODE", value_name = "MODE", default_value = "process",
          value_enum, help_heading = SERVING)]
    pub worker_mode: WorkerMode,

    /// Process mode: a worker process whose loop has not turned for this
    /// long (app code that does not return) is killed and replaced; more
    /// than --stuck-after (when it stops getting new connections). Thread
    /// mode has no such kill: --unhealthy-after then reports it.
    #[arg(long, env = "STOA_WORKER_TIMEOUT", value_name = "DURATION", default_value = "30s",
          value_parser = parse_secs, help_heading = TIMEOUTS)]
    pub worker_timeout: Duration,

    /// Process mode: plugin bytes whose requests or constructor killed
    /// this many worker processes within --quarantine-window are
    /// quarantined: every worker refuses them (and takes them out of
    /// service: the generation before serves again, else the mount
    /// answers 503 naming the quarantine) until a file with other bytes
    /// replaces them (0: never).
    #[arg(long, env = "STOA_QUARANTINE_AFTER", value_name = "N", default_value_t = 3,
          help_heading = APPS)]
    pub quarantine_after: u32,

    /// See --quarantine-after.
    #[arg(long, env = "STOA_QUARANTINE_WINDOW", value_name = "DURATION", default_value = "60s",
          value_parser = parse_secs, help_heading = APPS)]
    pub quarantine_window: Duration,

    /// Process mode: replace a worker process once it has served this
    /// many requests (0: never), plus a random 0..=--worker-max-requests-jitter
    /// so the workers do not all restart at once. Not --max-requests-per-conn,
    /// which closes one connection.
    #[arg(long, env = "STOA_WORKER_MAX_REQUESTS", value_name = "N", default_value_t = 0,
          help_heading = LIMITS)]
    pub worker_max_requests: u64,

    /// See --worker-max-requests.
    #[arg(long, env = "STOA_WORKER_MAX_REQUESTS_JITTER", value_name = "N", default_value_t = 0,
          help_heading = LIMITS)]
    pub worker_max_requests_jitter: u64,

    /// Process mode: replace a worker process whose resident memory (RSS)
    /// passes this size, checked once a second [default: no limit].
    #[arg(long, env = "STOA_WORKER_MAX_MEMORY", value_name = "SIZE",
          value_parser = parse_size, help_heading = LIMITS)]
    pub worker_max_memory: Option<u64>,

    /// Most connections served at once, one count for the whole host
    /// (every worker thread or process); past it, --overload decides. More than
    /// the descriptor limit (RLIMIT_NOFILE) leaves room for is an error
    /// [default: 10000, or what RLIMIT_NOFILE leaves room for if less].
    #[arg(long, env = "STOA_MAX_CONNECTIONS", value_name = "N", help_heading = SERVING,
          value_parser = RangedU64ValueParser::<usize>::new().range(1..))]
    pub max_connections: Option<usize>,

    /// Clients past --max-connections (or when no descriptor is left):
    /// shed answers each at once with 503 and Retry-After: 1, then closes;
    /// queue stops accepting, so they wait in the kernel backlog until a
    /// connection closes.
    #[arg(long, env = "STOA_OVERLOAD", value_name = "POLICY", default_value = "shed",
          value_enum, help_heading = SERVING)]
    pub overload: Overload,

    /// Listen backlog [default: the kernel's somaxconn].
    #[arg(long, env = "STOA_BACKLOG", value_name = "N", help_heading = SERVING,
          value_parser = clap::value_parser!(i32).range(1..))]
    pub backlog: Option<i32>,

    /// Directory of app plugins (`*.so`), loaded in name order at start-up
    /// (a relative path is relative to the working directory).
    #[arg(long, env = "STOA_APPS", value_name = "DIR", default_value = "apps", help_heading = APPS)]
    pub apps: PathBuf,

    /// Mount an app at another prefix than its default: NAME=PREFIX
    /// (repeatable); NAME must be an app loaded at start-up.
    #[arg(long = "mount", env = "STOA_MOUNT", value_name = "NAME=PREFIX", value_parser = parse_mount,
          value_delimiter = ',', help_heading = APPS)]
    pub mounts: Vec<(String, String)>,

    /// Exit with status 1 when a plugin file is refused at start-up
    /// (for CI and deploy pipelines); without it, refusals are logged.
    #[arg(long, env = "STOA_STRICT_PLUGINS", value_parser = parse_switch, help_heading = APPS)]
    pub strict_plugins: bool,

    /// Library generations kept per app before a replace is refused
    /// (libraries are never unloaded).
    #[arg(long, env = "STOA_MAX_GENERATIONS", value_name = "N", default_value_t = 16,
          value_parser = clap::value_parser!(u32).range(1..=1024), help_heading = APPS)]
    pub max_generations: u32,

    /// Largest plugin file loaded; a larger file is refused before it is copied.
    #[arg(long, env = "STOA_MAX_PLUGIN_SIZE", default_value = "1G", value_name = "SIZE",
          value_parser = parse_size, help_heading = APPS)]
    pub max_plugin_size: u64,

    /// What a replace past --max-generations does: reexec (the host
    /// re-executes itself in place, as on SIGUSR2: same sockets, every app
    /// loaded fresh, the old process drains) or refuse (the new version is
    /// refused until a restart).
    #[arg(long, env = "STOA_ON_GENERATION_CAP", value_name = "POLICY", default_value = "reexec",
          value_enum, help_heading = APPS)]
    pub on_generation_cap: OnGenerationCap,

    /// Longest an app's constructor may run at start-up (at least 1s):
    /// READY=1 and /ready wait for every app's constructor (but those of
    /// apps whose table says `optional = true`), and one still running past
    /// this is refused (not mounted) so that the host gets ready without it.
    #[arg(long, env = "STOA_INIT_TIMEOUT", value_name = "DURATION", default_value = "60s",
          value_parser = parse_init_timeout, help_heading = APPS)]
    pub init_timeout: Duration,

    /// Do not watch the apps directory (SIGHUP still rescans it).
    #[arg(long, env = "STOA_NO_WATCH", value_parser = parse_switch, help_heading = APPS)]
    pub no_watch: bool,

    /// Load plugins even from an apps directory or files that any user can
    /// write or that another user owns (a loud warning instead of a
    /// refusal; for development only).
    #[arg(long, env = "STOA_INSECURE_APPS_DIR", value_parser = parse_switch, help_heading = APPS)]
    pub insecure_apps_dir: bool,

    /// Threads the blocking pool keeps to run handlers declared blocking
    /// (while an app runs on threads borrowed past its share, up to as many
    /// temporary ones start for the other apps' shares).
    #[arg(long, env = "STOA_BLOCKING_THREADS", value_name = "N", default_value_t = 64,
          value_parser = RangedU64ValueParser::<usize>::new().range(1..=4096), help_heading = APPS)]
    pub blocking_threads: usize,

    /// Requests that may wait for a blocking thread; past it they get 503.
    #[arg(long, env = "STOA_BLOCKING_QUEUE", value_name = "N", default_value_t = 1024,
          value_parser = RangedU64ValueParser::<usize>::new(), help_heading = APPS)]
    pub blocking_queue: usize,

    /// Percent of the blocking threads, and of its queue, one app is
    /// guaranteed while others want them (at least one thread). An app may
    /// also use idle threads and free queue room past it; a job waiting past
    /// its share gives way (503) to an app within its share.
    #[arg(long, env = "STOA_BLOCKING_SHARE", value_name = "PERCENT", default_value_t = 50,
          value_parser = clap::value_parser!(u8).range(1..=100), help_heading = APPS)]
    pub blocking_share: u8,

    /// Run handlers declared blocking on the event loop itself (Tornado's
    /// behaviour, for comparison): the loop stalls while they run.
    #[arg(long, env = "STOA_BLOCKING_ON_LOOP", value_parser = parse_switch, help_heading = APPS)]
    pub blocking_on_loop: bool,

    /// Longest request-target (414 past it).
    #[arg(long, env = "STOA_MAX_REQUEST_LINE", value_name = "SIZE", default_value = "8K",
          value_parser = parse_size_usize, help_heading = LIMITS)]
    pub max_request_line: usize,

    /// Longest single header field value (431).
    #[arg(long, env = "STOA_MAX_HEADER_FIELD", value_name = "SIZE", default_value = "8K",
          value_parser = parse_size_usize, help_heading = LIMITS)]
    pub max_header_field: usize,

    /// Most header fields in a request (431).
    #[arg(long, env = "STOA_MAX_HEADERS", value_name = "N", default_value_t = 100,
          value_parser = clap::value_parser!(u16).range(1..=HEADER_ARRAY as i64), help_heading = LIMITS)]
    pub max_headers: u16,

    /// Largest request head (431).
    #[arg(long, env = "STOA_MAX_HEAD", value_name = "SIZE", default_value = "64K",
          value_parser = parse_size_usize, help_heading = LIMITS)]
    pub max_head: usize,

    /// Largest request body an app takes whole (413); the host buffers it,
    /// so this much per connection.
    #[arg(long, env = "STOA_MAX_BODY", value_name = "SIZE", default_value = "8M",
          value_parser = parse_size_usize, help_heading = LIMITS)]
    pub max_body: usize,

    /// Largest request body an app reads as it arrives (an upload route,
    /// App::reads_body; 413 past it): the host holds only a small window of
    /// it at a time, so it costs no more memory than a small body and may be
    /// far above --max-body.
    #[arg(long, env = "STOA_MAX_STREAM_BODY", value_name = "SIZE", default_value = "4G",
          value_parser = parse_size_usize, help_heading = LIMITS)]
    pub max_stream_body: usize,

    /// Bytes of a streamed response (or of a WebSocket's messages) queued
    /// per connection (from 4K to 64M): past it the app's sends answer
    /// WouldBlock until the client reads, so a slow client costs at most
    /// this much memory (a stream's queue counts in --max-buffered too).
    #[arg(long, env = "STOA_STREAM_QUEUE", value_name = "SIZE", default_value = "256K",
          value_parser = parse_stream_queue, help_heading = LIMITS)]
    pub stream_queue: usize,

    /// Bytes the host may hold, over all clients, of request bodies it
    /// buffers (and heads past their first 16K read buffer), of their
    /// copies for blocking-pool routes, of WebSocket messages not yet
    /// whole and of streamed answers' queues: past it a new body is
    /// answered 503 with Retry-After, a message closes its WebSocket with
    /// 1013 and a stream's send waits as on a full queue. At least --max-body and
    /// --ws-max-message [default: a quarter of the memory limit the host
    /// runs under (the cgroup's, else the machine's), at least those two].
    #[arg(long, env = "STOA_MAX_BUFFERED", value_name = "SIZE",
          value_parser = parse_size_usize, help_heading = LIMITS)]
    pub max_buffered: Option<usize>,

    /// Largest WebSocket message, its fragments added up (the connection is
    /// closed with 1009 past it).
    #[arg(long, env = "STOA_WS_MAX_MESSAGE", value_name = "SIZE", default_value = "16M",
          value_parser = parse_size_usize, help_heading = LIMITS)]
    pub ws_max_message: usize,

    /// Most bytes read and dropped from one lingering connection (see
    /// --lingering-time); past it the connection is closed.
    #[arg(long, env = "STOA_LINGERING_BYTES", value_name = "SIZE", default_value = "64M",
          value_parser = parse_size, help_heading = LIMITS)]
    pub lingering_bytes: u64,

    /// Most connections lingering at once (see --lingering-time), shared by
    /// the worker threads (each takes an equal share, rounded up; in process
    /// mode each worker process has it whole); past it the one lingering
    /// longest is closed. They count toward --max-connections.
    #[arg(long, env = "STOA_MAX_LINGERING", value_name = "N", default_value_t = 1024,
          value_parser = RangedU64ValueParser::<usize>::new().range(1..), help_heading = LIMITS)]
    pub max_lingering: usize,

    /// Offer HTTP/2 on the TLS binds (ALPN `h2`, preferred to `http/1.1`
    /// when a client offers both); off: HTTP/1.1 only. A `[tls."ADDR"]`
    /// table's `http2` key sets it per bind.
    #[arg(long, env = "STOA_HTTP2", value_name = "on|off", default_value = "on",
          value_parser = parse_on_off, action = clap::ArgAction::Set, help_heading = SERVING)]
    pub http2: bool,

    /// Take HTTP/2 with prior knowledge on the plain binds (h2c): a
    /// connection that opens with HTTP/2's preface speaks it; off: the
    /// preface is answered 505 as any HTTP/2.0 request line. (The
    /// `Upgrade: h2c` of RFC 7540, which RFC 9113 deprecates, is not
    /// offered: such a request is served as HTTP/1.1.)
    #[arg(long, env = "STOA_H2C", value_name = "on|off", default_value = "on",
          value_parser = parse_on_off, action = clap::ArgAction::Set, help_heading = SERVING)]
    pub h2c: bool,

    /// Streams one HTTP/2 client may have open at once
    /// (SETTINGS_MAX_CONCURRENT_STREAMS); past it a stream is refused
    /// (REFUSED_STREAM).
    #[arg(long, env = "STOA_H2_MAX_CONCURRENT_STREAMS", value_name = "N", default_value_t = 100,
          value_parser = clap::value_parser!(u32).range(1..=10_000), help_heading = LIMITS)]
    pub h2_max_concurrent_streams: u32,

    /// What an HTTP/2 client may send on one stream before the host opens
    /// its window again (SETTINGS_INITIAL_WINDOW_SIZE): a body streamed to
    /// a slow app holds at most this much per stream.
    #[arg(long, env = "STOA_H2_STREAM_WINDOW", value_name = "SIZE", default_value = "64K",
          value_parser = parse_h2_window, help_heading = LIMITS)]
    pub h2_stream_window: u32,

    /// What an HTTP/2 client may send on one connection, all its streams
    /// together, before the host opens the window again.
    #[arg(long, env = "STOA_H2_CONN_WINDOW", value_name = "SIZE", default_value = "1M",
          value_parser = parse_h2_conn_window, help_heading = LIMITS)]
    pub h2_conn_window: u32,

    /// Resets one HTTP/2 client may cause a second (streams it resets
    /// before their answer, streams the host resets for its errors or
    /// refuses), with twice that in a burst; past it the connection gets
    /// GOAWAY ENHANCE_YOUR_CALM (Rapid Reset, CVE-2023-44487).
    #[arg(long, env = "STOA_H2_RESET_RATE", value_name = "N", default_value_t = 100,
          value_parser = clap::value_parser!(u32).range(1..), help_heading = LIMITS)]
    pub h2_reset_rate: u32,

    /// Control frames one HTTP/2 client may send a second (SETTINGS, PING,
    /// PRIORITY, RST_STREAM, empty DATA and CONTINUATION, WINDOW_UPDATEs
    /// under 1K, unknown types), as many in a burst; past it GOAWAY
    /// ENHANCE_YOUR_CALM (the floods of CVE-2019-9512, 9515, 9518).
    #[arg(long, env = "STOA_H2_CONTROL_RATE", value_name = "N", default_value_t = 1000,
          value_parser = clap::value_parser!(u32).range(1..), help_heading = LIMITS)]
    pub h2_control_rate: u32,

    /// Requests on one keep-alive connection before it is closed.
    #[arg(long, env = "STOA_MAX_REQUESTS_PER_CONN", value_name = "N", default_value_t = 1000,
          value_parser = clap::value_parser!(u32).range(1..), help_heading = LIMITS)]
    pub max_requests_per_conn: u32,

    /// Time a client on a tls:// bind has to finish its TLS handshake,
    /// from the accept; past it the connection is closed unanswered (a
    /// ClientHello sent a byte at a time is cut here). --head-timeout
    /// starts after it, with the first request byte.
    #[arg(long, env = "STOA_TLS_HANDSHAKE_TIMEOUT", value_name = "DURATION", default_value = "10s",
          value_parser = parse_secs, help_heading = TIMEOUTS)]
    pub tls_handshake_timeout: Duration,

    /// Time to receive a whole request head (408; slowloris).
    #[arg(long, env = "STOA_HEAD_TIMEOUT", value_name = "DURATION", default_value = "30s",
          value_parser = parse_secs, help_heading = TIMEOUTS)]
    pub head_timeout: Duration,

    /// Time a request body may stall between reads (408).
    #[arg(long, env = "STOA_BODY_TIMEOUT", value_name = "DURATION", default_value = "30s",
          value_parser = parse_secs, help_heading = TIMEOUTS)]
    pub body_timeout: Duration,

    /// Least average rate of a request body or a WebSocket message, in
    /// bytes a second, once --body-timeout has passed since its first byte
    /// (Apache's MinRate: each such many bytes earn it a second more);
    /// slower gets 408 (a message: close 1008). 0: none. A body streamed
    /// to its app is read at the app's pace and has only --body-timeout.
    /// The default passes any upload a working link carries (1 GiB at
    /// 500 bytes/s is 25 days) and cuts a drip of a byte every few seconds.
    #[arg(long, env = "STOA_BODY_MIN_RATE", value_name = "SIZE", default_value = "500",
          value_parser = parse_size_usize, help_heading = TIMEOUTS)]
    pub body_min_rate: usize,

    /// Time a response may make no sending progress (then closed).
    #[arg(long, env = "STOA_SEND_TIMEOUT", value_name = "DURATION", default_value = "30s",
          value_parser = parse_secs, help_heading = TIMEOUTS)]
    pub send_timeout: Duration,

    /// Time an idle keep-alive connection is kept.
    #[arg(long, env = "STOA_KEEP_ALIVE_TIMEOUT", value_name = "DURATION", default_value = "30s",
          value_parser = parse_secs, help_heading = TIMEOUTS)]
    pub keep_alive_timeout: Duration,

    /// Time an app has to answer before its client gets 504.
    #[arg(long, env = "STOA_APP_TIMEOUT", value_name = "DURATION", default_value = "30s",
          value_parser = parse_secs, help_heading = TIMEOUTS)]
    pub app_timeout: Duration,

    /// Time a streamed response may go without a chunk from its app
    /// (then ended: the connection closes).
    #[arg(long, env = "STOA_STREAM_IDLE_TIMEOUT", value_name = "DURATION", default_value = "60s",
          value_parser = parse_secs, help_heading = TIMEOUTS)]
    pub stream_idle_timeout: Duration,

    /// Longest lingering close: after an answer that leaves request bytes
    /// unread (an error such as 413 or 408 sent while the client is still
    /// sending, an answer before its body all came), the connection is
    /// half-closed and what the client still sends is read and dropped for
    /// at most this long, so the answer is not destroyed by a reset
    /// (nginx's lingering_time).
    #[arg(long, env = "STOA_LINGERING_TIME", value_name = "DURATION", default_value = "30s",
          value_parser = parse_secs, help_heading = TIMEOUTS)]
    pub lingering_time: Duration,

    /// Time a lingering connection waits for the client's next bytes
    /// before it is closed (nginx's lingering_timeout).
    #[arg(long, env = "STOA_LINGERING_TIMEOUT", value_name = "DURATION", default_value = "5s",
          value_parser = parse_secs, help_heading = TIMEOUTS)]
    pub lingering_timeout: Duration,

    /// Silence after which an open WebSocket's peer is pinged; a peer still
    /// silent after another interval is dropped.
    #[arg(long, env = "STOA_WS_PING_INTERVAL", value_name = "DURATION", default_value = "30s",
          value_parser = parse_secs, help_heading = TIMEOUTS)]
    pub ws_ping_interval: Duration,

    /// Time to let in-flight requests finish after SIGTERM/SIGINT; the
    /// process then ends even if a worker is stuck in app code.
    #[arg(long, env = "STOA_GRACEFUL_TIMEOUT", value_name = "DURATION", default_value = "30s",
          value_parser = parse_secs, help_heading = TIMEOUTS)]
    pub graceful_timeout: Duration,

    /// Time an event loop may go without turning (app code that does not
    /// return) before it is reported stuck: /ready answers 503 and its
    /// listener leaves the accept group.
    #[arg(long, env = "STOA_STUCK_AFTER", value_name = "DURATION", default_value = "5s",
          value_parser = parse_secs, help_heading = TIMEOUTS)]
    pub stuck_after: Duration,

    /// Time a worker may stay stuck before /health answers 503 (at once
    /// when every worker is stuck); at least --stuck-after.
    #[arg(long, env = "STOA_UNHEALTHY_AFTER", value_name = "DURATION", default_value = "30s",
          value_parser = parse_secs, help_heading = TIMEOUTS)]
    pub unhealthy_after: Duration,

    /// Warn when app code holds the event loop longer than this (a bare
    /// number is milliseconds; at least 1ms).
    #[arg(long, env = "STOA_LOOP_BLOCK_WARN", value_name = "DURATION", default_value = "100ms",
          value_parser = parse_millis, help_heading = TIMEOUTS)]
    pub loop_block_warn: Duration,

    /// Who may read /.well-known/stoa/status and metrics (CIDR, repeatable)
    /// [default: loopback only].
    #[arg(long, env = "STOA_STATUS_ALLOW", value_name = "CIDR", value_delimiter = ',',
          value_parser = crate::settings::parse_net, help_heading = OPERATIONS)]
    pub status_allow: Vec<ipnet::IpNet>,

    /// A proxy whose X-Forwarded-For/-Proto are believed (CIDR, repeatable):
    /// the client is the first X-Forwarded-For entry from the right that is
    /// not a trusted proxy, `unknown` if that entry is not an address.
    #[arg(long, env = "STOA_TRUSTED_PROXY", value_name = "CIDR", value_delimiter = ',',
          value_parser = crate::settings::parse_net, help_heading = OPERATIONS)]
    pub trusted_proxy: Vec<ipnet::IpNet>,

    /// Write the process id here once the listener is bound (after a
    /// thread-mode upgrade, once the new stoa serves; in process mode the
    /// supervisor's, which an upgrade keeps); removed at a clean exit. A
    /// pid file naming a live process is an error.
    #[arg(long, env = "STOA_PID_FILE", value_name = "PATH", help_heading = OPERATIONS)]
    pub pid_file: Option<PathBuf>,

    /// Log level: error, warn, info, debug or trace.
    #[arg(long, env = "STOA_LOG_LEVEL", value_name = "LEVEL", default_value = "info",
          value_parser = parse_level, help_heading = LOGGING)]
    pub log_level: log::LevelFilter,

    /// Format of the error log and the access log: text (the access log
    /// in combined format) or json (one object per line).
    #[arg(long, env = "STOA_LOG_FORMAT", value_name = "FORMAT", default_value = "text",
          value_enum, help_heading = LOGGING)]
    pub log_format: LogFormat,

    /// Access log: a regular file (SIGUSR1 reopens it), or `-` for standard
    /// output (`/dev/stderr` for standard error). One line per request,
    /// written when its answer is queued; a streamed answer's, SSE
    /// stream's or WebSocket's when it ends (the body bytes actually sent,
    /// the whole duration), even if the client or a shutdown cut it short.
    /// Written by a thread of its own; lines it cannot take are dropped
    /// and counted (status `logs`).
    #[arg(long, env = "STOA_ACCESS_LOG", value_name = "PATH|-", help_heading = LOGGING)]
    pub access_log: Option<String>,

    /// Error log: a regular file, appended to by every process of the host
    /// (SIGUSR1 reopens it), instead of standard error. Its directory must
    /// exist. On standard error under systemd (`JOURNAL_STREAM`), lines
    /// carry journald priorities (`<3>` error .. `<7>` debug) and no time.
    #[arg(long, env = "STOA_ERROR_LOG", value_name = "PATH", help_heading = LOGGING)]
    pub error_log: Option<String>,
}

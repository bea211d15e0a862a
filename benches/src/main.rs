//! The `stoa-bench` command line: `load` (one load run against a URL) and
//! `compare` (Stoa's backends and peers through the whole matrix).

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use stoa_bench::affinity::{self, parse_cpu_list};
use stoa_bench::compare::{self, Peer};
use stoa_bench::load::{
    self, Config, ErrorKind, Mode, Report, ThinkRange, TlsOptions, UsersConfig, UsersReport,
    FAILURE_NAMES, PERCENTILES, PIPELINE_DEPTH,
};
use stoa_bench::parse_duration;
use stoa_bench::target::Target;

/// Load generator and backend comparison harness for Stoa.
#[derive(Parser)]
#[command(name = "stoa-bench", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Load one URL (127.0.0.1/localhost only) and report req/s, latency and errors.
    Load(Box<LoadArgs>),
    /// Start stoa once per poller backend and sweep paths x concurrency x mode.
    Compare(Box<CompareArgs>),
}

#[derive(Args)]
struct LoadArgs {
    /// Target, e.g. http://127.0.0.1:8000/hello/ or https://localhost:8443/article
    /// (loopback only; https:// needs --ca).
    url: String,
    /// Connections at once (up to 10000 and beyond, RLIMIT_NOFILE permitting).
    #[arg(short = 'c', long, default_value_t = 10)]
    connections: usize,
    /// Requests to complete [default: 10000, or unbounded-but-capped with -d].
    #[arg(short = 'n', long)]
    requests: Option<u64>,
    /// Run for this long (e.g. 10s) instead of a request count.
    #[arg(short = 'd', long, value_parser = parse_duration)]
    duration: Option<Duration>,
    /// Event-loop threads [default: CPUs available, at most the connections].
    #[arg(short = 't', long)]
    threads: Option<usize>,
    /// Keep-alive (HTTP/1.1) instead of one connection per request (HTTP/1.0).
    #[arg(short = 'k', long)]
    keepalive: bool,
    /// Requests sent per write on each keep-alive connection (needs -k); the
    /// next batch goes once all their answers are in.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pipeline: u32,
    /// A request unanswered this long counts as a timeout.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    timeout: Duration,
    /// Time limit for a run bounded by -n.
    #[arg(long, default_value = "120s", value_parser = parse_duration)]
    max_time: Duration,
    /// Request cap for a run bounded by -d.
    #[arg(long, default_value_t = 100_000_000)]
    max_requests: u64,
    /// Pin the load threads to these CPUs (taskset syntax: 1 or 0-3,6).
    #[arg(long)]
    cpus: Option<String>,
    /// Think-time mode: this many user sessions at once, each one keep-alive
    /// connection with --session-requests requests and a --think pause
    /// between them; runs for -d (default 20s). Replaces -c, -n and -k.
    #[arg(long)]
    users: Option<usize>,
    /// Think time between a session's requests: `500ms..2s` (uniform) or `1s`.
    #[arg(long, default_value = "500ms..2s", value_parser = ThinkRange::parse)]
    think: ThinkRange,
    /// Requests per user session before it closes and the next user arrives.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    session_requests: u32,
    /// https:// targets: the PEM file of the CA certificates the server's
    /// certificate is checked against.
    #[arg(long, value_name = "FILE")]
    ca: Option<PathBuf>,
    /// https:// targets: resume TLS sessions on new connections (tickets)
    /// instead of a full handshake on each.
    #[arg(long)]
    tls_resume: bool,
    /// https:// targets: the cipher suites offered, in order (e.g.
    /// TLS13_AES_128_GCM_SHA256) [default: rustls's list].
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    tls_suite: Vec<String>,
}

#[derive(Args)]
struct CompareArgs {
    /// The stoa binary [default: `stoa` next to this executable].
    #[arg(long)]
    stoa: Option<PathBuf>,
    /// Where the sample plugins are [default: the stoa binary's directory].
    #[arg(long)]
    apps_from: Option<PathBuf>,
    /// A plugin file to serve beside the sample apps (repeatable), e.g. the
    /// Python bridge with --stoa-arg=--config=FILE for its settings.
    #[arg(long = "app")]
    extra_apps: Vec<PathBuf>,
    /// Output directory for NAME.md, NAME.csv and NAME.svg.
    #[arg(long, default_value = "bench-results")]
    out: PathBuf,
    /// Base name of the output files [default: compare, or compare-quick].
    #[arg(long)]
    name: Option<String>,
    /// Poller backends to start stoa with.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "select,poll,epoll,io_uring,io_uring-completion"
    )]
    backends: Vec<String>,
    /// How stoa runs its workers (passed as --worker-mode): thread (one
    /// process), process (a supervisor and worker processes), or both
    /// (thread,process: each backend twice). CPU time and RSS count every
    /// process of the server.
    #[arg(long, value_delimiter = ',', default_value = "thread", value_parser = parse_worker_mode)]
    worker_mode: Vec<String>,
    /// App paths to load.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "/hello/,/article,/demo/sleep-handler/"
    )]
    paths: Vec<String>,
    /// Concurrency levels.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "1,10,100,1000,5000,10000"
    )]
    concurrency: Vec<usize>,
    /// Modes: keepalive, close, pipelined (16 requests per write; skips the 1 s sleep handler).
    #[arg(long, value_delimiter = ',', default_value = "keepalive,close,pipelined", value_parser = parse_mode)]
    modes: Vec<Mode>,
    /// Requests per point (the 1 s sleep handler gets at most 5 x concurrency).
    #[arg(long, default_value_t = 10_000)]
    requests: u64,
    /// Requests per point at the highest concurrency [default: 5 x --requests].
    #[arg(long)]
    requests_at_max: Option<u64>,
    /// Runs per point; tables show the median and the best.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Idle keep-alive connections held open in the idle scenario (empty: skip it).
    #[arg(long, value_delimiter = ',', default_value = "0,1000,5000,10000")]
    idle: Vec<usize>,
    /// Skip the idle-connections scenario.
    #[arg(long, conflicts_with = "idle_only")]
    no_idle: bool,
    /// Run only the idle-connections scenario (no matrix).
    #[arg(long)]
    idle_only: bool,
    /// Active connections measuring req/s in the idle scenario.
    #[arg(long, default_value_t = 100)]
    idle_active: usize,
    /// An externally started server to add: NAME=URL, or NAME=URL@PID for its CPU and RSS.
    #[arg(long = "peer", value_parser = Peer::parse)]
    peers: Vec<Peer>,
    /// Small matrix (/hello/, c=1,50, 2000 requests, 1 run, idle 0,100); fails on any error.
    #[arg(long)]
    quick: bool,
    /// Exit non-zero if any point is incomplete or had errors (implied by --quick).
    #[arg(long)]
    strict: bool,
    /// A request unanswered this long counts as a timeout.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    timeout: Duration,
    /// Time limit of one run.
    #[arg(long, default_value = "120s", value_parser = parse_duration)]
    max_time: Duration,
    /// Do not pin the server and the load generator to different CPUs.
    #[arg(long)]
    no_pin: bool,
    /// Load-generator threads [default: the CPUs left to it].
    #[arg(long)]
    threads: Option<usize>,
    /// Pause between runs, for the server to close the last run's connections.
    #[arg(long, default_value = "200ms", value_parser = parse_duration)]
    settle: Duration,
    /// Extra argument passed to every stoa (repeatable), e.g. --stoa-arg=--max-connections=20000.
    #[arg(long = "stoa-arg", allow_hyphen_values = true)]
    stoa_args: Vec<String>,
}

fn parse_mode(s: &str) -> Result<Mode, String> {
    match s {
        "keepalive" | "keep-alive" | "k" => Ok(Mode::KeepAlive),
        "close" | "connection-per-request" => Ok(Mode::Close),
        "pipelined" | "pipeline" | "p" => Ok(Mode::Pipelined(PIPELINE_DEPTH)),
        _ => Err(format!("unknown mode {s:?} (keepalive, close, pipelined)")),
    }
}

fn parse_worker_mode(s: &str) -> Result<String, String> {
    match s {
        "thread" | "process" => Ok(s.to_string()),
        _ => Err(format!("unknown worker mode {s:?} (thread, process)")),
    }
}

/// The `--worker-mode` values to start stoa with: each as given when the
/// binary has the flag; without it (an older host, threads only) `thread`
/// runs with no flag and `process` is refused. A `--stoa-arg` setting it
/// is refused too, as the tables would not know.
fn worker_modes(
    stoa: &std::path::Path,
    modes: Vec<String>,
    stoa_args: &[String],
) -> Result<Vec<Option<String>>, String> {
    const FLAG: &str = "--worker-mode";
    if stoa_args.iter().any(|a| a.starts_with(FLAG)) {
        return Err(format!(
            "--stoa-arg={FLAG}: use stoa-bench's own {FLAG} (thread, process), which the tables report"
        ));
    }
    let mut modes = modes;
    modes.dedup();
    if stoa_bench::server::supports_flag(stoa, FLAG) {
        return Ok(modes.into_iter().map(Some).collect());
    }
    if modes.iter().any(|m| m == "process") {
        return Err(format!(
            "{} has no {FLAG} flag (a host with threads only): use --worker-mode thread",
            stoa.display()
        ));
    }
    Ok(vec![None])
}

fn main() -> ExitCode {
    let result = match Cli::parse().command {
        Command::Load(args) => run_load(*args),
        Command::Compare(args) => run_compare(*args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("stoa-bench: {e}");
            ExitCode::from(2)
        }
    }
}

fn run_load(a: LoadArgs) -> Result<ExitCode, String> {
    let target = Target::parse(&a.url)?;
    let (requests, max_time) = match (a.requests, a.duration) {
        (n, Some(d)) => (n.unwrap_or(a.max_requests), d),
        (n, None) => (n.unwrap_or(10_000), a.max_time),
    };
    let cpus = match &a.cpus {
        Some(list) => parse_cpu_list(list)?,
        None => affinity::allowed_cpus(),
    };
    affinity::pin_current(&affinity::cpu_set(&cpus)).map_err(|e| format!("pinning: {e}"))?;
    let threads = a.threads.unwrap_or(cpus.len()).max(1);
    let tls = match (a.ca, a.tls_resume || !a.tls_suite.is_empty()) {
        (Some(ca), _) => Some(TlsOptions {
            ca,
            resume: a.tls_resume,
            suites: a.tls_suite,
        }),
        (None, true) => return Err("--tls-resume and --tls-suite need --ca FILE".into()),
        (None, false) => None,
    };
    if let Some(users) = a.users {
        if a.pipeline != 1 {
            return Err("--pipeline does not apply to --users sessions".into());
        }
        if tls.is_some() {
            return Err(
                "--ca, --tls-resume and --tls-suite do not apply to --users sessions".into(),
            );
        }
        let config = UsersConfig {
            target,
            users,
            think: a.think,
            session_requests: a.session_requests,
            duration: a.duration.unwrap_or(Duration::from_secs(20)),
            threads,
            timeout: a.timeout,
        };
        let report = load::run_users(&config)?;
        print_users_report(&config, &report);
        return Ok(ExitCode::SUCCESS);
    }
    let mode = match (a.keepalive, a.pipeline) {
        (true, 1) => Mode::KeepAlive,
        (true, n) => Mode::Pipelined(n),
        (false, 1) => Mode::Close,
        (false, n) => {
            return Err(format!(
                "--pipeline {n} needs -k: without keep-alive each connection carries one request"
            ))
        }
    };
    let config = Config {
        target,
        mode,
        connections: a.connections,
        requests,
        max_time,
        threads,
        timeout: a.timeout,
        tls,
    };
    let report = load::run(&config)?;
    print_report(&config, &report, a.duration.is_some());
    Ok(ExitCode::SUCCESS)
}

fn print_report(c: &Config, r: &Report, by_duration: bool) {
    println!("target:       {}", c.target.url());
    let depth = match c.mode {
        Mode::Pipelined(n) => format!("{n} requests per write, "),
        _ => String::new(),
    };
    println!(
        "mode:         {} ({depth}{} connections, {} thread(s))",
        c.mode.name(),
        c.connections,
        c.threads.min(c.connections)
    );
    let ended = if by_duration {
        "time limit".to_string()
    } else if r.timed_out {
        format!(
            "time limit {:?} reached before the request count (incomplete)",
            c.max_time
        )
    } else {
        "request count".to_string()
    };
    println!("stopped by:   {ended}");
    println!(
        "complete:     {} requests, {} failed, in {:.3} s",
        r.completed,
        r.failed,
        r.elapsed.as_secs_f64()
    );
    println!("requests/s:   {:.1}", r.req_per_sec());
    println!(
        "transfer:     {:.2} MiB/s ({} bytes received)",
        r.bytes_per_sec() / (1024.0 * 1024.0),
        r.bytes
    );
    println!("latency (ms), share of requests answered within:");
    for p in PERCENTILES {
        println!("  {:>4}%  {:>10.3}", p, r.percentile_ms(p));
    }
    if let Some(tls) = &c.tls {
        let negotiated = r
            .negotiated
            .map_or_else(|| "no handshake".into(), |n| n.describe());
        println!("tls:          {negotiated}");
        println!(
            "handshakes:   {} full, {} resumed{}, {:.1}/s",
            r.handshakes,
            r.resumed,
            if tls.resume { "" } else { " (resumption off)" },
            r.handshakes_per_sec()
        );
    }
    let errors = ErrorKind::ALL.map(|k| (k.name(), r.errors[k as usize]));
    print_errors(&errors, r.first_other.as_deref());
}

/// The errors line, and the first "other" error's text.
fn print_errors(counts: &[(&str, u64)], first_other: Option<&str>) {
    let errors: Vec<String> = counts.iter().map(|(k, n)| format!("{k} {n}")).collect();
    println!("errors:       {}", errors.join(", "));
    if let Some(e) = first_other {
        println!("first other error: {e}");
    }
}

fn print_users_report(c: &UsersConfig, r: &UsersReport) {
    println!("target:       {}", c.target.url());
    println!(
        "mode:         users ({} at once, {} requests per session, think {:?}..{:?}, {} thread(s))",
        c.users,
        c.session_requests,
        c.think.min,
        c.think.max,
        c.threads.min(c.users)
    );
    println!(
        "ended:        {} requests ({} 2xx), {} whole sessions, in {:.3} s",
        r.requests(),
        r.ok,
        r.sessions,
        r.elapsed.as_secs_f64()
    );
    println!("2xx/s:        {:.1}", r.ok_per_sec());
    let [p50, p90, p99] = [50.0, 90.0, 99.0].map(|p| r.percentile_ms(p));
    println!("latency (ms): p50 {p50:.2}, p90 {p90:.2}, p99 {p99:.2}");
    let errors: Vec<_> = FAILURE_NAMES.into_iter().zip(r.failures).collect();
    print_errors(&errors, r.first_other.as_deref());
    let counts: Vec<String> = r.failures.iter().map(u64::to_string).collect();
    println!(
        "row: | {} | {} | {} | {:.0} | {p50:.1} | {p90:.1} | {p99:.1} | {} |",
        c.users,
        r.requests(),
        r.ok,
        r.ok_per_sec(),
        counts.join(" | ")
    );
}

/// Idle connections must outlive the idle scenario's runs: a host with a
/// keep-alive timeout gets a long one unless the user chose one.
fn with_idle_keep_alive(stoa: &std::path::Path, mut args: Vec<String>) -> Vec<String> {
    const FLAG: &str = "--keep-alive-timeout";
    if !args.iter().any(|a| a.starts_with(FLAG)) && stoa_bench::server::supports_flag(stoa, FLAG) {
        args.push(format!("{FLAG}=600"));
    }
    args
}

/// Every backend serves every client: unless `--stoa-arg` sets one,
/// stoa gets a `--max-connections` above the most clients a point opens
/// (the sweep's highest concurrency, or the idle scenario's idle plus
/// active ones), so no cap and no overload policy is in the way. Returns
/// that number of clients.
fn room_for_every_client(opts: &mut compare::Options) -> usize {
    const FLAG: &str = "--max-connections";
    let sweep = opts.concurrency.iter().copied().max().unwrap_or(0);
    let idle = opts
        .idle
        .iter()
        .copied()
        .max()
        .map_or(0, |i| i + opts.idle_active);
    let clients = sweep.max(idle);
    if !opts.stoa_args.iter().any(|a| a.starts_with(FLAG)) {
        opts.stoa_args.push(format!("{FLAG}={}", clients + 64));
    }
    clients
}

fn run_compare(a: CompareArgs) -> Result<ExitCode, String> {
    let exe_dir = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("."));
    let stoa = a.stoa.unwrap_or_else(|| exe_dir.join("stoa"));
    let apps_from = a
        .apps_from
        .or_else(|| stoa.parent().map(PathBuf::from))
        .unwrap_or(exe_dir);
    let stoa_for_args = stoa.clone();
    let worker_modes = worker_modes(&stoa, a.worker_mode, &a.stoa_args)?;
    let pin = if a.no_pin {
        None
    } else {
        affinity::split_for_benchmark()
    };
    let load_cpus = pin
        .as_ref()
        .map_or_else(affinity::allowed_cpus, |(_, l)| l.clone());
    let work_dir = std::env::temp_dir().join(format!("stoa-bench-{}", std::process::id()));
    let mut opts = compare::Options {
        stoa,
        apps_from,
        extra_apps: a.extra_apps,
        backends: a.backends,
        worker_modes,
        paths: a.paths,
        concurrency: a.concurrency,
        modes: a.modes,
        requests: a.requests,
        requests_at_max: a.requests_at_max.unwrap_or(a.requests * 5),
        runs: a.runs.max(1),
        idle: if a.no_idle { Vec::new() } else { a.idle },
        sweep: !a.idle_only,
        idle_active: a.idle_active,
        peers: a.peers,
        timeout: a.timeout,
        max_time: a.max_time,
        pin,
        threads: a.threads.unwrap_or(load_cpus.len()).max(1),
        stoa_args: with_idle_keep_alive(&stoa_for_args, a.stoa_args),
        settle: a.settle,
        work_dir: work_dir.clone(),
    };
    if a.quick {
        opts.paths = vec!["/hello/".into()];
        opts.concurrency = vec![1, 50];
        opts.requests = if a.requests == 10_000 {
            2_000
        } else {
            a.requests
        };
        opts.requests_at_max = opts.requests;
        opts.runs = 1;
        opts.idle = vec![0, 100];
        opts.settle = opts.settle.min(Duration::from_millis(50));
    }
    let clients = room_for_every_client(&mut opts);
    load::raise_nofile(clients as u64 + 256)?;
    let name = a
        .name
        .unwrap_or_else(|| if a.quick { "compare-quick" } else { "compare" }.into());
    eprintln!(
        "stoa-bench compare: {} ({}) with apps from {}; {}",
        opts.stoa.display(),
        opts.worker_modes
            .iter()
            .map(|m| m
                .as_deref()
                .map_or("no --worker-mode flag: threads".into(), |m| format!(
                    "{m} mode"
                )))
            .collect::<Vec<String>>()
            .join(", "),
        opts.apps_from.display(),
        match &opts.pin {
            Some((s, l)) => format!("server on CPU {s:?}, load on CPU {l:?}"),
            None => "not pinned (one CPU, or --no-pin)".into(),
        }
    );
    let outcome = compare::run(&opts);
    let _ = std::fs::remove_dir_all(&work_dir);
    let outcome = outcome?;
    let md = compare::write_outputs(&outcome, &a.out, &name)?;
    print!("{md}");
    eprintln!("wrote {}/{name}.{{md,csv,svg}}", a.out.display());
    if (a.quick || a.strict) && !outcome.all_ok() {
        eprintln!("stoa-bench: some points are incomplete or had errors");
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

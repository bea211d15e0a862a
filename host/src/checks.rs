//! Start-up checks that turn a value the host cannot honour into an error
//! naming it, instead of a silent change: the connection cap a backend can
//! hold, an address another process listens on, a mount for an app that is
//! not there, a refused plugin under `--strict-plugins`. `holders` tells,
//! for `stoa check`, whether an address in use is held by a live stoa;
//! `tls` what it says of each TLS certificate (expiry, chain, key mode);
//! `command` is `stoa check` and `--print-config` themselves.

pub mod command;
mod holders;
mod tls;

use crate::apps::registry::AppState;
use crate::cli::Cli;
use crate::error::{BootError, UnixRefusal};
use crate::settings::Bind;
use socket2::{Domain, Protocol, Socket, Type};
use std::io;

/// File descriptors the host keeps for itself whatever the workers: stdio,
/// log files, the apps directory's watch and scans, a plugin being copied
/// and probed, and the blocking pool's work.
pub const RESERVED_FDS: usize = 32;

/// File descriptors each worker keeps besides its connections and
/// listeners: its poller and waker (3), the spare descriptor of
/// `--overload shed`, and the shed connections it lets linger
/// (`server::MAX_LINGERING`).
pub const PER_WORKER_FDS: usize = 4 + crate::server::MAX_LINGERING;

/// The connection cap when none is given and descriptors allow it.
pub const DEFAULT_CAP: usize = 10_000;

/// What the process can hold and why, for the cap and its error message.
pub struct FdBudget {
    /// The backend's descriptor limit (FD_SETSIZE for select where the
    /// system's select(2) needs it), if any.
    pub fd_limit: Option<usize>,
    /// The process's descriptor limit (RLIMIT_NOFILE's soft value, once
    /// raised to the hard one), if it could be read.
    pub nofile: Option<u64>,
    pub workers: usize,
    /// Listeners of each worker (one per `--bind`).
    pub listeners: usize,
    /// Descriptors plugin generations keep open: one memfd each, counted
    /// for two generations of every plugin file at start-up (the one
    /// served and one being replaced). Later generations come out of the
    /// connections' room; an EMFILE that follows is met by `--overload`.
    pub plugin_fds: usize,
}

impl FdBudget {
    /// Descriptors the host needs besides its connections.
    pub fn reserved(&self) -> usize {
        RESERVED_FDS + self.workers * (PER_WORKER_FDS + self.listeners) + self.plugin_fds
    }

    /// The tightest descriptor limit and its name.
    fn limit(&self) -> Option<(usize, &'static str)> {
        let nofile = self
            .nofile
            .map(|n| (usize::try_from(n).unwrap_or(usize::MAX), "RLIMIT_NOFILE"));
        let backend = self.fd_limit.map(|n| (n, "FD_SETSIZE"));
        match (nofile, backend) {
            (Some(a), Some(b)) => Some(if b.0 < a.0 { b } else { a }),
            (a, b) => a.or(b),
        }
    }
}

/// The process-wide connection cap: the operator's, or `DEFAULT_CAP` when
/// none is given, never more than the descriptor limit leaves room for
/// after the host's own (`FdBudget::reserved`). Asking for more than that
/// is an error naming both numbers and the largest valid value.
pub fn connection_cap(
    requested: Option<usize>,
    budget: &FdBudget,
    poller: &str,
) -> Result<usize, BootError> {
    let reserved = budget.reserved();
    let room = budget
        .limit()
        .map(|(limit, name)| (limit, name, limit.saturating_sub(reserved).max(1)));
    match (requested, room) {
        (Some(n), Some((limit, name, cap))) if n > cap => Err(BootError::TooManyConnections {
            given: n,
            cap,
            limit_name: name,
            limit,
            reserved,
            workers: budget.workers,
            poller: poller.to_string(),
        }),
        (Some(n), _) => Ok(n),
        (None, Some((_, _, cap))) => Ok(cap.min(DEFAULT_CAP)),
        (None, None) => Ok(DEFAULT_CAP),
    }
}

/// The descriptor budget of a run with these flags, `workers` workers and
/// a backend limited to `fd_limit`.
pub fn fd_budget(cli: &Cli, fd_limit: Option<usize>, workers: usize) -> FdBudget {
    FdBudget {
        fd_limit,
        nofile: rlimit::getrlimit(rlimit::Resource::NOFILE)
            .ok()
            .map(|(soft, _)| soft),
        workers,
        listeners: cli.bind.iter().map(Bind::listeners).sum(),
        plugin_fds: 2.min(cli.max_generations as usize)
            * crate::apps::plugin_copy::plugin_files(&cli.apps),
    }
}

/// Fails when another process listens on `bind`: for TCP, a plain bind
/// (without `SO_REUSEPORT`) is refused then, while the workers' own
/// listeners, which all set `SO_REUSEPORT`, would silently share the
/// port; for a Unix socket, a server answers a connect. Port 0 has
/// nothing to check.
pub fn address_is_free(bind: &Bind) -> Result<(), BootError> {
    let addrs = match bind {
        Bind::Unix(path) => {
            return match std::os::unix::net::UnixStream::connect(path) {
                Ok(_) => Err(BootError::UnixBind {
                    addr: bind.to_string(),
                    why: UnixRefusal::InUse,
                }),
                Err(_) => Ok(()),
            }
        }
        Bind::Tcp(addr) | Bind::Tls(addr) => std::slice::from_ref(addr),
        // An address the machine lacks is skipped when binding.
        Bind::Name { addrs, .. } => addrs,
    };
    for &addr in addrs.iter().filter(|a| a.port() != 0) {
        let probe = || -> io::Result<()> {
            let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
            socket.set_reuse_address(true)?;
            socket.bind(&addr.into())
        };
        match probe() {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AddrInUse => {
                return Err(BootError::AddressInUse { addr })
            }
            Err(e) if matches!(bind, Bind::Name { .. }) && crate::listen::unavailable(&e) => {}
            Err(e) => return Err(BootError::socket("bind", addr, e)),
        }
    }
    Ok(())
}

/// Every `--mount NAME=PREFIX` and `[apps.NAME]` table must name an app
/// loaded (or still being constructed) at start-up, unless the table says
/// `optional = true`; a typo gets the nearest name.
pub fn mounts_name_loaded_apps(cli: &Cli, state: &AppState) -> Result<(), BootError> {
    // Each app's name and its former names.
    let apps = state.mounts.apps();
    let named: Vec<(&str, &[String])> = (apps.iter())
        .map(|a| (a.name.as_str(), a.formerly.as_slice()))
        .chain((state.constructing.iter()).map(|c| (c.app.as_str(), c.formerly.as_slice())))
        .collect();
    let mut known: Vec<&str> = (named.iter())
        .flat_map(|(name, formerly)| {
            std::iter::once(*name).chain(formerly.iter().map(String::as_str))
        })
        .collect();
    // A quarantined app (process mode) is known: it killed workers, and
    // the host serves the others rather than refusing to start.
    known.extend(state.refused.iter().filter_map(|r| match &*r.reason {
        crate::apps::error::LoadError::Quarantined { app, .. } => Some(app.as_str()),
        _ => None,
    }));
    known.sort_unstable();
    known.dedup();
    // What the refusal lists: the apps by their names.
    let formerly: Vec<&str> = (named.iter())
        .flat_map(|(_, formerly)| formerly.iter().map(String::as_str))
        .collect();
    let loaded: Vec<&str> = (known.iter().copied())
        .filter(|n| !formerly.contains(n))
        .collect();
    let optional = |name: &str| cli.app_sections.get(name).is_some_and(|s| s.optional);
    let named_in_config = cli
        .mounts
        .iter()
        .map(|(name, prefix)| (name.as_str(), format!("--mount {name}={prefix}")))
        .chain(
            cli.app_sections
                .keys()
                .filter(|name| !cli.mounts.iter().any(|(n, _)| n == *name))
                .map(|name| (name.as_str(), format!("[apps.{name}]"))),
        );
    let mut lines = configured_twice(cli, &named);
    lines.extend(
        named_in_config
            .filter(|(name, _)| !known.contains(name) && !optional(name))
            .map(|(name, what)| {
                let hint = crate::cli::nearest(name, &known)
                    .map(|n| format!(" (did you mean {n:?}?)"))
                    .unwrap_or_default();
                let loaded = if known.is_empty() {
                    "no app is loaded".to_string()
                } else {
                    format!("loaded: {}", loaded.join(", "))
                };
                let what = match cli.app_sections.get(name).and_then(|s| s.mount.as_deref()) {
                    Some(prefix) => format!("[apps.{name}] mount = {prefix:?}"),
                    None => what,
                };
                format!("{what}: no app named {name:?}{hint}; {loaded}")
            }),
    );
    if lines.is_empty() {
        Ok(())
    } else {
        Err(BootError::UnknownApps { lines })
    }
}

/// An app the configuration names both by its name and by a former one
/// (`[apps.python]` beside `[apps.wsgi]`): which table counts is not
/// guessed; one line each.
fn configured_twice(cli: &Cli, apps: &[(&str, &[String])]) -> Vec<String> {
    let says = |name: &str| {
        cli.app_sections.contains_key(name) || cli.mounts.iter().any(|(n, _)| n == name)
    };
    (apps.iter())
        .filter(|(name, _)| says(name))
        .flat_map(|(name, formerly)| {
            (formerly.iter()).filter(|old| says(old)).map(move |old| {
                format!(
                    "[apps.{old}] / --mount {old}=: {old:?} is the former name of app {name:?}, \
                     which the configuration also names {name:?}; keep only [apps.{name}]"
                )
            })
        })
        .collect()
}

/// `--unhealthy-after` must be at least `--stuck-after` (a worker is
/// unhealthy only after it is stuck).
pub fn watchdog_bounds(cli: &Cli) -> Result<(), BootError> {
    if cli.unhealthy_after < cli.stuck_after {
        return placed(
            cli,
            BootError::WatchdogBounds {
                unhealthy_after: cli.unhealthy_after,
                stuck_after: cli.stuck_after,
            },
        );
    }
    Ok(())
}

/// `e`, a check of values against each other, with the key and place of
/// each of its values that the configuration file gave.
fn placed(cli: &Cli, e: BootError) -> Result<(), BootError> {
    let text = e.to_string();
    let shown = crate::cli::with_file_places(text.clone(), &cli.file_origins);
    Err(match shown == text {
        true => e,
        false => BootError::Placed(shown),
    })
}

/// Thread mode: the flags only worker processes have are refused when
/// given, naming `--worker-mode process`.
pub fn process_mode_only(cli: &Cli) -> Result<(), BootError> {
    let given: Vec<&str> = [
        ("--worker-max-requests", cli.worker_max_requests > 0),
        (
            "--worker-max-requests-jitter",
            cli.worker_max_requests_jitter > 0,
        ),
        ("--worker-max-memory", cli.worker_max_memory.is_some()),
    ]
    .into_iter()
    .filter_map(|(flag, set)| set.then_some(flag))
    .collect();
    if given.is_empty() {
        return Ok(());
    }
    placed(
        cli,
        BootError::ProcessModeOnly {
            flags: given.join(", "),
        },
    )
}

/// Process mode: `--worker-timeout` must exceed `--stuck-after` (a stuck
/// worker first stops getting connections, then is killed).
pub fn worker_timeout(cli: &Cli) -> Result<(), BootError> {
    if cli.worker_timeout <= cli.stuck_after {
        return placed(
            cli,
            BootError::WorkerTimeout {
                worker_timeout: cli.worker_timeout,
                stuck_after: cli.stuck_after,
            },
        );
    }
    Ok(())
}

/// One line per plugin file refused: the file and the reason.
fn refusal_lines(state: &AppState) -> Vec<String> {
    state
        .refused
        .iter()
        .map(|r| format!("refused plugin {}: {}", r.file.display(), r.reason))
        .collect()
}

/// Under `--strict-plugins`, any plugin file refused at start-up is an
/// error listing each file and its reason.
pub fn no_refused_plugins(state: &AppState) -> Result<(), BootError> {
    let refused = refusal_lines(state);
    if refused.is_empty() {
        return Ok(());
    }
    Err(BootError::StrictPlugins { refused })
}

/// The TLS sites the TLS listeners (on `tls_addrs`) serve, resuming
/// sessions with tickets sealed by `ticket_keys` (a worker process's
/// shared keys) or keys of this process's own: each
/// `[tls."ADDR"]` table's, and the flags' (`--tls-cert`, `--tls-key`,
/// `--tls-client-ca`, ...) for one without a table; `None` without TLS
/// listeners. A TLS listener with no certificate, or TLS values without
/// a TLS bind, are refused naming the flags and tables; a file that does
/// not load names itself.
pub fn tls_config(
    cli: &Cli,
    tls_addrs: &[Option<std::net::SocketAddr>],
    ticket_keys: Option<&'static [std::sync::atomic::AtomicU64]>,
) -> Result<Option<std::sync::Arc<crate::listen::tls::TlsSites>>, BootError> {
    use crate::listen::tls::{tickets, Resumption, TlsSites};
    tls_binds_apart(&cli.bind)?;
    if cli.tls_cert.is_some() != cli.tls_key.is_some() {
        return Err(BootError::tls(
            "--tls-cert and --tls-key go together (tls_cert and tls_key in the configuration \
             file): give both",
        ));
    }
    if cli.hsts_subdomains && cli.hsts.is_none_or(|d| d.is_zero()) {
        return Err(BootError::tls(
            "--hsts-subdomains adds to --hsts, which is not given: add --hsts 365d (or leave \
             --hsts-subdomains out)",
        ));
    }
    let sites = cli.tls_sites().map_err(BootError::tls)?;
    if tls_addrs.is_empty() {
        let given = [
            (cli.tls_cert.is_some(), "--tls-cert and --tls-key"),
            (cli.tls_client_ca.is_some(), "--tls-client-ca"),
            (!cli.tls_sections.is_empty(), "[tls.\"ADDR\"] tables"),
            (cli.https_redirect, "--https-redirect"),
            (cli.hsts.is_some(), "--hsts"),
        ];
        return match given.iter().find(|(yes, _)| *yes) {
            Some((_, what)) => Err(BootError::tls(format!(
                "{what} serve tls:// binds, and no --bind is one (nor a passed socket named \
                 tls): add --bind tls://IP:PORT (under socket activation, name the socket tls: \
                 FileDescriptorName=tls), or leave them out"
            ))),
            None => Ok(None),
        };
    }
    let default_used = tls_addrs.iter().any(|a| sites.table_of(*a).is_none());
    if default_used && sites.default.certs.is_empty() {
        return Err(BootError::tls(
            "a tls:// bind (or a passed socket named tls) needs --tls-cert FILE and --tls-key \
             FILE (tls_cert and tls_key in the configuration file), or a [tls.\"ADDR\"] table \
             with its certificates",
        ));
    }
    let resumption = Resumption::new(tickets(ticket_keys));
    TlsSites::load(&sites, default_used, resumption)
        .map(|s| Some(std::sync::Arc::new(s)))
        .map_err(BootError::Tls)
}

/// A `tls://` bind on an address a plain bind also has is refused: both
/// would listen (each worker's socket shares its port), and clients would
/// get TLS or plain HTTP by chance.
fn tls_binds_apart(binds: &[Bind]) -> Result<(), BootError> {
    let overlap = |a: &std::net::SocketAddr, b: &std::net::SocketAddr| {
        a.port() == b.port()
            && a.port() != 0
            && (a.ip() == b.ip() || a.ip().is_unspecified() || b.ip().is_unspecified())
    };
    for tls in binds.iter().filter_map(|b| match b {
        Bind::Tls(a) => Some(a),
        _ => None,
    }) {
        let plain = binds.iter().find(|b| match b {
            Bind::Tcp(a) => overlap(tls, a),
            Bind::Name { addrs, .. } => addrs.iter().any(|a| overlap(tls, a)),
            _ => false,
        });
        if let Some(plain) = plain {
            return Err(BootError::tls(format!(
                "--bind tls://{tls} and --bind {plain} take the same port: a client would get \
                 TLS or plain HTTP by chance; give the TLS bind a port of its own"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(fd_limit: Option<usize>, nofile: Option<u64>) -> FdBudget {
        FdBudget {
            fd_limit,
            nofile,
            workers: 2,
            listeners: 1,
            plugin_fds: 64,
        }
    }

    #[test]
    fn the_cap_follows_the_descriptor_limit() {
        let reserved = RESERVED_FDS + 2 * (PER_WORKER_FDS + 1) + 64;
        assert_eq!(budget(None, None).reserved(), reserved);
        let plenty = budget(None, Some(1 << 20));
        assert_eq!(
            connection_cap(None, &plenty, "epoll").ok(),
            Some(DEFAULT_CAP)
        );
        assert_eq!(
            connection_cap(Some(50_000), &plenty, "epoll").ok(),
            Some(50_000)
        );
        let low = budget(None, Some(1000));
        assert_eq!(
            connection_cap(None, &low, "poll").ok(),
            Some(1000 - reserved)
        );
        let e = connection_cap(Some(5000), &low, "poll")
            .expect_err("over the limit")
            .to_string();
        assert!(
            e.contains("--max-connections 5000")
                && e.contains("RLIMIT_NOFILE 1000")
                && e.contains(&format!("--max-connections {}", 1000 - reserved)),
            "{e}"
        );
        assert_eq!(connection_cap(Some(500), &low, "poll").ok(), Some(500));
        // A backend limit below RLIMIT_NOFILE is the one that counts.
        let capped = budget(Some(1024), Some(20_000));
        let e = connection_cap(Some(5000), &capped, "select")
            .expect_err("over")
            .to_string();
        assert!(e.contains("FD_SETSIZE 1024"), "{e}");
        // Too few descriptors for anything still leaves one connection.
        assert_eq!(
            connection_cap(None, &budget(None, Some(10)), "epoll").ok(),
            Some(1)
        );
        assert_eq!(
            connection_cap(None, &budget(None, None), "epoll").ok(),
            Some(DEFAULT_CAP)
        );
    }

    #[test]
    fn typos_find_the_nearest_name() {
        let known = ["article", "demo", "environ", "hello_project"];
        assert_eq!(crate::cli::nearest("artcle", &known), Some("article"));
        assert_eq!(
            crate::cli::nearest("hello-project", &known),
            Some("hello_project")
        );
        assert_eq!(crate::cli::nearest("nosuch", &known), None);
    }

    #[test]
    fn a_used_address_is_refused_by_name() {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = taken.local_addr().expect("addr");
        let e = address_is_free(&Bind::Tcp(addr)).expect_err("in use");
        assert!(matches!(e, BootError::AddressInUse { .. }), "{e}");
        let e = e.to_string();
        assert!(
            e.contains(&addr.to_string()) && e.contains("--reuse-port"),
            "{e}"
        );
        drop(taken);
        assert!(address_is_free(&Bind::Tcp(addr)).is_ok());
    }
}

//! Start-up checks that turn a value the host cannot honour into an error
//! naming it, instead of a silent change: the connection cap a backend can
//! hold, an address another process listens on, a mount for an app that is
//! not there, a refused plugin under `--strict-plugins`.

use crate::apps::registry::AppState;
use crate::cli::{Bind, Cli};
use socket2::{Domain, Protocol, Socket, Type};
use std::io;

/// File descriptors kept free under FD_SETSIZE for stdio, the pollers'
/// wakers, the listeners, log files and a plugin being copied and probed.
pub const RESERVED_FDS: usize = 24;

/// What a backend can hold and why, for the cap and its error message.
pub struct FdBudget {
    /// The backend's descriptor limit (select's FD_SETSIZE), if any.
    pub fd_limit: Option<usize>,
    pub workers: usize,
    /// Descriptors plugin generations keep open (one memfd each:
    /// `--max-generations` x the plugin files at start-up).
    pub plugin_fds: usize,
}

/// The process-wide connection cap: the operator's, or the backend's when
/// none is given. Asking for more than the backend can hold is an error
/// that names its limit and the largest valid value.
pub fn connection_cap(
    requested: Option<usize>,
    budget: &FdBudget,
    poller: &str,
) -> Result<usize, String> {
    let reserved = RESERVED_FDS + 3 * budget.workers + budget.plugin_fds;
    let backend_cap = budget
        .fd_limit
        .map(|limit| (limit, limit.saturating_sub(reserved).max(1)));
    match (requested, backend_cap) {
        (Some(n), Some((limit, cap))) if n > cap => Err(format!(
            "--max-connections {n} is more than the {poller} backend can hold: at most {cap} \
             (FD_SETSIZE {limit} minus {reserved} descriptors reserved for {} worker(s), \
             listeners, logs and plugin generations); use --max-connections {cap}, or \
             --poller poll or epoll",
            budget.workers
        )),
        (Some(n), _) => Ok(n),
        (None, Some((_, cap))) => Ok(cap),
        (None, None) => Ok(10_000),
    }
}

/// Fails when another process listens on `bind`: for TCP, a plain bind
/// (without `SO_REUSEPORT`) is refused then, while the workers' own
/// listeners, which all set `SO_REUSEPORT`, would silently share the
/// port; for a Unix socket, a server answers a connect. Port 0 has
/// nothing to check.
pub fn address_is_free(bind: &Bind) -> Result<(), String> {
    let addr = match bind {
        Bind::Unix(path) => {
            return match std::os::unix::net::UnixStream::connect(path) {
                Ok(_) => Err(format!(
                    "cannot bind {bind}: address already in use (another server listens there)"
                )),
                Err(_) => Ok(()),
            }
        }
        Bind::Tcp(addr) if addr.port() == 0 => return Ok(()),
        Bind::Tcp(addr) => *addr,
    };
    let probe = || -> io::Result<()> {
        let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
        socket.set_reuse_address(true)?;
        socket.bind(&addr.into())
    };
    match probe() {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AddrInUse => Err(format!(
            "cannot bind {addr}: address already in use (another server listens there); \
             stop it, choose another --bind, or give --reuse-port to both to share it on purpose"
        )),
        Err(e) => Err(format!("cannot bind {addr}: {e}")),
    }
}

/// Every `--mount NAME=PREFIX` and `[apps.NAME]` table must name an app
/// loaded (or still being constructed) at start-up, unless the table says
/// `optional = true`; a typo gets the nearest name.
pub fn mounts_name_loaded_apps(cli: &Cli, state: &AppState) -> Result<(), String> {
    let mut known: Vec<&str> = state
        .mounts
        .apps()
        .iter()
        .map(|a| a.name.as_str())
        .collect();
    known.extend(state.constructing.iter().map(|c| c.app.as_str()));
    known.sort_unstable();
    let optional = |name: &str| cli.app_sections.get(name).is_some_and(|s| s.optional);
    let named = cli
        .mounts
        .iter()
        .map(|(name, prefix)| (name.as_str(), format!("--mount {name}={prefix}")))
        .chain(
            cli.app_sections
                .keys()
                .filter(|name| !cli.mounts.iter().any(|(n, _)| n == *name))
                .map(|name| (name.as_str(), format!("[apps.{name}]"))),
        );
    let problems: Vec<String> = named
        .filter(|(name, _)| !known.contains(name) && !optional(name))
        .map(|(name, what)| {
            let hint = nearest(name, &known)
                .map(|n| format!(" (did you mean {n:?}?)"))
                .unwrap_or_default();
            let loaded = if known.is_empty() {
                "no app is loaded".to_string()
            } else {
                format!("loaded: {}", known.join(", "))
            };
            let what = match cli.app_sections.get(name).and_then(|s| s.mount.as_deref()) {
                Some(prefix) => format!("[apps.{name}] mount = {prefix:?}"),
                None => what,
            };
            format!("{what}: no app named {name:?}{hint}; {loaded}")
        })
        .collect();
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("\n"))
    }
}

/// The known name closest to `name`, if it is close enough to be a typo.
pub(crate) fn nearest<'a>(name: &str, known: &[&'a str]) -> Option<&'a str> {
    known
        .iter()
        .map(|k| (strsim::damerau_levenshtein(name, k), *k))
        .filter(|(d, k)| *d <= 2.max(k.len() / 3))
        .min()
        .map(|(_, k)| k)
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
pub fn no_refused_plugins(state: &AppState) -> Result<(), String> {
    let lines = refusal_lines(state);
    if lines.is_empty() {
        return Ok(());
    }
    Err(format!(
        "--strict-plugins: {} plugin file(s) refused at start-up:\n{}",
        lines.len(),
        lines.join("\n")
    ))
}

/// `stoa check`: the configuration as the server would take it, every
/// plugin loaded through the real loader (constructors run, nothing is
/// served), the mounts resolved; prints the effective configuration, the
/// mount table and one line per problem. Err when there is any problem.
pub fn check(cli: &Cli) -> Result<(), String> {
    let mut problems = Vec::new();
    let mut note = |r: Result<(), String>| {
        if let Err(e) = r {
            problems.extend(e.lines().map(str::to_string));
        }
    };
    let config = cli
        .config
        .as_ref()
        .map_or_else(|| "none".to_string(), |p| p.display().to_string());
    println!("# configuration file: {config}");
    println!("{}", cli.effective_config);
    match crate::poller::create_by_flag(&cli.poller) {
        Ok(poller) => {
            let budget = FdBudget {
                fd_limit: poller.features().fd_limit,
                workers: cli.workers.unwrap_or(1),
                plugin_fds: cli.max_generations as usize
                    * crate::apps::plugin_copy::plugin_files(&cli.apps),
            };
            note(connection_cap(cli.max_connections, &budget, poller.name()).map(|_| ()));
        }
        Err(e) => note(Err(e)),
    }
    for bind in &cli.bind {
        if !cli.reuse_port || matches!(bind, Bind::Unix(_)) {
            note(address_is_free(bind));
        }
    }
    if cli.unhealthy_after < cli.stuck_after {
        note(Err(format!(
            "--unhealthy-after ({:?}) must be at least --stuck-after ({:?})",
            cli.unhealthy_after, cli.stuck_after
        )));
    }
    match crate::boot::load_apps(cli) {
        Ok(registry) => {
            let state = registry.state();
            println!("# mounts");
            for app in state.mounts.apps() {
                let mount = if app.mount.is_empty() {
                    "/"
                } else {
                    &app.mount
                };
                println!(
                    "{mount} -> {} {} ({})",
                    app.name,
                    app.version,
                    app.file.display()
                );
            }
            for line in refusal_lines(&state) {
                note(Err(line));
            }
            note(mounts_name_loaded_apps(cli, &state));
            // The apps were constructed: retire them before exiting.
            drop((state, registry));
            crate::apps::retire::wait_all(crate::apps::retire::RETIRE_BOUND);
        }
        Err(e) => note(Err(e)),
    }
    for p in &problems {
        println!("problem: {p}");
    }
    if problems.is_empty() {
        println!("stoa check: the configuration is OK");
        Ok(())
    } else {
        Err(format!("stoa check: {} problem(s)", problems.len()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(fd_limit: Option<usize>) -> FdBudget {
        FdBudget {
            fd_limit,
            workers: 2,
            plugin_fds: 64,
        }
    }

    #[test]
    fn the_cap_is_the_backends_unless_asked_and_more_is_refused() {
        let select = budget(Some(1024));
        assert_eq!(
            connection_cap(None, &select, "select"),
            Ok(1024 - 24 - 6 - 64)
        );
        assert_eq!(connection_cap(Some(500), &select, "select"), Ok(500));
        let e = connection_cap(Some(5000), &select, "select").expect_err("over the cap");
        assert!(
            e.contains("--max-connections 5000") && e.contains("--max-connections 930"),
            "{e}"
        );
        assert_eq!(connection_cap(None, &budget(None), "epoll"), Ok(10_000));
        assert_eq!(
            connection_cap(Some(50_000), &budget(None), "epoll"),
            Ok(50_000)
        );
    }

    #[test]
    fn typos_find_the_nearest_name() {
        let known = ["article", "demo", "environ", "hello_project"];
        assert_eq!(nearest("artcle", &known), Some("article"));
        assert_eq!(nearest("hello-project", &known), Some("hello_project"));
        assert_eq!(nearest("nosuch", &known), None);
    }

    #[test]
    fn a_used_address_is_refused_by_name() {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = taken.local_addr().expect("addr");
        let e = address_is_free(&Bind::Tcp(addr)).expect_err("in use");
        assert!(
            e.contains(&addr.to_string()) && e.contains("--reuse-port"),
            "{e}"
        );
        drop(taken);
        assert_eq!(address_is_free(&Bind::Tcp(addr)), Ok(()));
    }
}

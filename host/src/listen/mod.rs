//! Start-up plumbing for the socket side: the listeners (TCP with address
//! reuse, Unix-domain in `unix.rs`) and the process's file-descriptor
//! limit.

use crate::error::BootError;
use crate::settings::Bind;
use socket2::{Domain, Protocol, Socket, Type};
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

mod socket;
mod unix;

/// Most distinct `--bind` values. A loop itself takes any number of
/// listeners (an upgrade passes every worker's socket per address).
pub const MAX_LISTENERS: usize = 64;
pub use socket::{Listener, Stream, UNIX_PEER};
pub use unix::{bind_unix, keep_unix_sockets, remove_unix_sockets, watch_unix_sockets};

/// The kernel's cap on listen backlogs; the default `--backlog`.
pub fn somaxconn() -> i32 {
    std::fs::read_to_string("/proc/sys/net/core/somaxconn")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(4096)
}

/// Binds a non-blocking listener with `SO_REUSEADDR` and `SO_REUSEPORT`
/// (so each worker can have its own listener on the address).
pub fn bind(addr: SocketAddr, backlog: i32) -> io::Result<mio::net::TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(backlog)?;
    Ok(mio::net::TcpListener::from_std(socket.into()))
}

/// Raises the soft RLIMIT_NOFILE to the hard limit so thousands of
/// connections fit; returns the new soft limit.
pub fn raise_fd_limit() -> io::Result<u64> {
    rlimit::increase_nofile_limit(u64::MAX)
}

/// Every worker's listeners, and what the rest of the host needs to know
/// of them (in `--bind` order).
pub struct Bound {
    /// Worker `w`'s listeners: its own `SO_REUSEPORT` socket per TCP
    /// address, and a duplicate of each shared Unix socket.
    pub per_worker: Vec<Vec<Listener>>,
    /// The server name and port apps see on each listener.
    pub locals: Vec<(Arc<str>, u16)>,
    /// Each listener's TCP address (`None` for a Unix socket).
    pub tcp_addrs: Vec<Option<SocketAddr>>,
    /// Each listener as the start-up line shows it.
    pub shown: Vec<String>,
    /// The sockets an upgrade hands over, each once: where it is
    /// (worker, listener index) and its name, as socket activation gave it
    /// (`LISTEN_FDNAMES`). No extra descriptor is kept: a draining process
    /// must not hold its sockets open.
    handed: Vec<Handed>,
}

/// A socket to hand over: `per_worker[worker][index]`, its name, and
/// whether a stoa bound it (`own`; not a service manager's).
struct Handed {
    worker: usize,
    index: usize,
    name: Option<Arc<str>>,
    own: bool,
}

/// A listening socket handed to an upgrade's new process, its name, and
/// whether a stoa bound it (`own`: one worker's `SO_REUSEPORT` socket,
/// which the new process's watchdog may shut down and bind anew).
pub struct HandOver {
    pub fd: std::os::fd::OwnedFd,
    pub name: Option<Arc<str>>,
    pub own: bool,
}

impl Bound {
    /// No listener yet, for `workers` workers.
    fn new(workers: usize) -> Self {
        Bound {
            per_worker: (0..workers).map(|_| Vec::new()).collect(),
            locals: Vec::new(),
            tcp_addrs: Vec::new(),
            shown: Vec::new(),
            handed: Vec::new(),
        }
    }

    /// A duplicate of every listening socket (every worker's), for an
    /// upgrade to hand over, with its name.
    pub fn duplicates(&self) -> Result<Vec<HandOver>, BootError> {
        use std::os::fd::AsFd;
        self.handed
            .iter()
            .map(|h| {
                let fd = self.per_worker[h.worker][h.index]
                    .as_fd()
                    .try_clone_to_owned()
                    .map_err(|e| BootError::system("duplicate a listening socket", e))?;
                Ok(HandOver {
                    fd,
                    name: h.name.clone(),
                    own: h.own,
                })
            })
            .collect()
    }

    /// Records `per_worker[worker]`'s newest listener as one to hand over.
    fn hand(&mut self, worker: usize, own: bool) {
        let index = self.per_worker[worker].len() - 1;
        self.handed.push(Handed {
            worker,
            index,
            name: None,
            own,
        });
    }
}

/// Binds every `--bind` address for `workers` workers.
pub fn bind_all(
    binds: &[Bind],
    workers: usize,
    backlog: i32,
    unix_mode: u32,
) -> Result<Bound, BootError> {
    if binds.len() > MAX_LISTENERS {
        return Err(BootError::TooManyBinds {
            given: binds.len(),
            most: MAX_LISTENERS,
        });
    }
    let mut bound = Bound::new(workers);
    for b in binds {
        match b {
            Bind::Tcp(addr) => {
                let first = bind(*addr, backlog).map_err(|e| BootError::socket("bind", addr, e))?;
                let local = first
                    .local_addr()
                    .map_err(|e| BootError::socket("read the bound address of", addr, e))?;
                // Each worker's own SO_REUSEPORT socket is a socket of its
                // own: every one is handed over.
                bound.per_worker[0].push(Listener::Tcp(first));
                bound.hand(0, true);
                for w in 1..workers {
                    let l =
                        bind(local, backlog).map_err(|e| BootError::socket("bind", local, e))?;
                    bound.per_worker[w].push(Listener::Tcp(l));
                    bound.hand(w, true);
                }
                bound
                    .locals
                    .push((local.ip().to_string().into(), local.port()));
                bound.tcp_addrs.push(Some(local));
                bound.shown.push(format!("http://{local}"));
            }
            Bind::Unix(path) => {
                let l = bind_unix(path, backlog, unix_mode)?;
                for listeners in &mut bound.per_worker {
                    let dup = l.try_clone().map_err(|e| {
                        BootError::socket("share", format!("unix:{}", path.display()), e)
                    })?;
                    listeners.push(Listener::Unix(mio::net::UnixListener::from_std(dup)));
                }
                // One socket shared by the workers: handed over once.
                bound.hand(0, false);
                bound.locals.push(("localhost".into(), 0));
                bound.tcp_addrs.push(None);
                bound.shown.push(format!("unix:{}", path.display()));
            }
        }
    }
    Ok(bound)
}

/// Set by a stoa starting its successor (an upgrade, `ops::upgrade`) to its
/// own pid. It cannot know the successor's pid for `LISTEN_PID` before the
/// exec, so a process whose parent is the pid named here takes the sockets
/// passed without `LISTEN_PID`.
pub const UPGRADED_FROM_ENV: &str = "STOA_UPGRADED_FROM";

/// The socket-activation variables (sd_listen_fds(3)); every one is unset
/// once read, so apps and child processes do not see them.
const LISTEN_PID: &str = "LISTEN_PID";
const LISTEN_FDS: &str = "LISTEN_FDS";
const LISTEN_FDNAMES: &str = "LISTEN_FDNAMES";
/// Set by a stoa starting its successor: the passed sockets it bound itself
/// (comma-separated places from 0 = fd 3; the others are a service
/// manager's), so the successor's watchdog may shut down and bind anew the
/// ones a stuck worker holds alone.
pub const OWN_SOCKETS_ENV: &str = "STOA_OWN_SOCKETS";
/// Not part of the protocol (sockets start at fd 3), but read by the
/// `listenfd` crate: unset so it cannot move them.
const LISTEN_FDS_FIRST_FD: &str = "LISTEN_FDS_FIRST_FD";

/// One socket passed by socket activation, with its `LISTEN_FDNAMES` name
/// (`None` for systemd's "unknown", an empty name, or no names at all).
pub struct Passed {
    pub listener: Listener,
    pub name: Option<Arc<str>>,
    /// Bound by the stoa this one upgrades (`STOA_OWN_SOCKETS`).
    pub own: bool,
}

/// The activation variables as they were found (before they are unset).
#[derive(Default)]
struct ActivationEnv {
    pid: Option<String>,
    fds: Option<String>,
    names: Option<String>,
}

/// What the activation variables say, read as sd_listen_fds_with_names(3)
/// reads them.
#[derive(Debug, PartialEq)]
enum Activation {
    /// No socket is passed to this process; why, when variables were set
    /// but do not hand sockets to it.
    Nothing(Option<String>),
    /// `names.len()` sockets, at fd 3 on, with their names; `upgrade`
    /// when they come from the stoa this one upgrades.
    Sockets {
        names: Vec<Option<Arc<str>>>,
        upgrade: bool,
    },
}

/// Decides what `env` passes to process `me`, whose parent is `parent`;
/// `upgrader` is the pid in `STOA_UPGRADED_FROM`. As sd_listen_fds: no
/// `LISTEN_FDS`, no `LISTEN_PID`, or a `LISTEN_PID` naming another process
/// pass nothing (the last two with the reason, logged); a `LISTEN_FDS` that
/// is not a positive count, a `LISTEN_PID` that is not a pid, and a
/// `LISTEN_FDNAMES` whose name count differs from `LISTEN_FDS` are refused.
fn activation(
    env: &ActivationEnv,
    me: u32,
    parent: Option<u32>,
    upgrader: Option<u32>,
) -> Result<Activation, BootError> {
    let Some(fds) = &env.fds else {
        return Ok(Activation::Nothing(env.pid.as_ref().map(|p| {
            format!("LISTEN_PID={p} is set without LISTEN_FDS: no socket is passed")
        })));
    };
    let upgrade = env.pid.is_none() && upgrader.is_some() && upgrader == parent;
    match &env.pid {
        None if upgrade => {}
        None => {
            return Ok(Activation::Nothing(Some(format!(
                "LISTEN_FDS={fds} is set without LISTEN_PID, so its sockets are for no \
                 process (sd_listen_fds(3)): ignored, --bind is used"
            ))))
        }
        Some(pid) => {
            let named = pid
                .trim()
                .parse::<u32>()
                .ok()
                .filter(|&p| p > 0)
                .ok_or_else(|| BootError::Env {
                    var: LISTEN_PID,
                    given: pid.clone(),
                    expected: "the pid of the process the sockets are passed to",
                })?;
            if named != me {
                return Ok(Activation::Nothing(Some(format!(
                    "LISTEN_PID={named} names another process (this one is pid {me}): its \
                     LISTEN_FDS={fds} socket(s) are not for this one; ignored, --bind is used"
                ))));
            }
        }
    }
    let count = fds
        .trim()
        .parse::<i32>()
        .ok()
        .filter(|&n| n > 0 && n <= i32::MAX - 3)
        .ok_or_else(|| BootError::Env {
            var: LISTEN_FDS,
            given: fds.clone(),
            expected: "the count of sockets passed from fd 3 on, at least 1",
        })? as usize;
    let names = match &env.names {
        None => vec![None; count],
        Some(text) => {
            let names: Vec<Option<Arc<str>>> = text
                .split(':')
                .map(|n| (!n.is_empty() && n != "unknown").then(|| n.into()))
                .collect();
            if names.len() != count {
                return Err(BootError::FdNamesCount {
                    given: text.clone(),
                    names: names.len(),
                    fds: count,
                });
            }
            names
        }
    };
    Ok(Activation::Sockets { names, upgrade })
}

/// Reads and unsets the activation variables (as sd_listen_fds(unset=1)).
fn take_activation_env() -> ActivationEnv {
    let read = |k: &str| std::env::var_os(k).map(|v| v.to_string_lossy().into_owned());
    let env = ActivationEnv {
        pid: read(LISTEN_PID),
        fds: read(LISTEN_FDS),
        names: read(LISTEN_FDNAMES),
    };
    if let Some(first) = read(LISTEN_FDS_FIRST_FD) {
        log::warn!(
            "{LISTEN_FDS_FIRST_FD}={first} ignored: passed sockets start at fd 3 \
             (sd_listen_fds(3))"
        );
    }
    for k in [LISTEN_PID, LISTEN_FDNAMES, LISTEN_FDS_FIRST_FD] {
        std::env::remove_var(k);
    }
    env
}

/// Listening sockets passed by a service manager's socket activation
/// (`LISTEN_PID`, `LISTEN_FDS`, `LISTEN_FDNAMES`; systemd,
/// `systemd-socket-activate`) or by the stoa this one upgrades, in order
/// from fd 3, with their names; `None` when none were passed to this
/// process. The variables are unset. Each socket is a TCP or a Unix stream
/// listener; anything else is an error naming it.
pub fn inherited() -> Result<Option<Vec<Passed>>, BootError> {
    let env = take_activation_env();
    let me = std::process::id();
    let parent = rustix::process::getppid().map(|p| p.as_raw_nonzero().get() as u32);
    let upgrader = std::env::var(UPGRADED_FROM_ENV)
        .ok()
        .and_then(|p| p.parse().ok());
    let own_text = std::env::var_os(OWN_SOCKETS_ENV).map(|v| v.to_string_lossy().into_owned());
    std::env::remove_var(OWN_SOCKETS_ENV);
    let (names, own) = match activation(&env, me, parent, upgrader) {
        Ok(Activation::Sockets { names, upgrade }) => {
            let own = own_sockets(own_text.as_deref(), upgrade, names.len());
            (names, own)
        }
        Ok(Activation::Nothing(why)) => {
            std::env::remove_var(LISTEN_FDS);
            if let Some(why) = why {
                log::warn!("{why}");
            }
            return Ok(None);
        }
        Err(e) => {
            std::env::remove_var(LISTEN_FDS);
            return Err(e);
        }
    };
    // LISTEN_FDS was checked above; listenfd takes the descriptors (and
    // unsets it).
    let mut fds = listenfd::ListenFd::from_env();
    std::env::remove_var(LISTEN_FDS);
    let mut passed = Vec::with_capacity(names.len());
    for (i, name) in names.into_iter().enumerate() {
        let fd = i + 3;
        let listener = match fds.take_tcp_listener(i) {
            Ok(Some(l)) => l
                .set_nonblocking(true)
                .map(|()| Listener::Tcp(mio::net::TcpListener::from_std(l))),
            _ => match fds.take_unix_listener(i) {
                Ok(Some(l)) => l
                    .set_nonblocking(true)
                    .map(|()| Listener::Unix(mio::net::UnixListener::from_std(l))),
                Ok(None) => {
                    let source = io::Error::other("not among the passed descriptors");
                    return Err(BootError::NotAListener { fd, source });
                }
                Err(source) => return Err(BootError::NotAListener { fd, source }),
            },
        };
        let listener = listener
            .map_err(|e| BootError::system(format!("make passed socket {fd} non-blocking"), e))?;
        if !socket2::SockRef::from(&listener)
            .is_listener()
            .unwrap_or(true)
        {
            let source = io::Error::other("it does not listen");
            return Err(BootError::NotAListener { fd, source });
        }
        let own = own.contains(&i) && matches!(listener, Listener::Tcp(_));
        passed.push(Passed {
            listener,
            name,
            own,
        });
    }
    Ok(Some(passed))
}

/// The places `STOA_OWN_SOCKETS` lists, for `count` sockets from the stoa
/// this one upgrades (`upgrade`); anything else in it is ignored, and said.
fn own_sockets(text: Option<&str>, upgrade: bool, count: usize) -> Vec<usize> {
    let Some(text) = text.filter(|t| !t.is_empty()) else {
        return Vec::new();
    };
    if !upgrade {
        log::warn!(
            "{OWN_SOCKETS_ENV}={text} ignored: only the stoa this one upgrades sets it; the \
             passed sockets are served as a service manager's"
        );
        return Vec::new();
    }
    let mut own = Vec::new();
    for part in text.split(',') {
        match part.trim().parse::<usize>() {
            Ok(i) if i < count => own.push(i),
            _ => log::warn!(
                "{OWN_SOCKETS_ENV}: {part:?} ignored: not a place among the {count} passed \
                 socket(s) (0 to {})",
                count.saturating_sub(1)
            ),
        }
    }
    own
}

/// Serves the sockets a service manager (or the stoa this one upgrades)
/// passed. A service manager's are never shut down by the watchdog nor
/// re-created; the ones the upgraded stoa bound itself (`own`) are, when
/// each worker holds its own alone (as many sockets on the address as
/// workers, or a multiple). Sockets on one
/// address (an upgrade passes each old worker's `SO_REUSEPORT` socket) form
/// a group, shown once (a named one, `LISTEN_FDNAMES`, with its name after
/// the address). Of a group of `g` sockets each of the `workers` workers
/// takes `ceil(g / workers)` in turn, so every socket is served by at least
/// one worker whatever the two counts (fewer sockets than workers: they
/// are shared, a duplicate each), and every worker has the same listener
/// layout (apps see one server name and port per listener index).
pub fn adopt_all(sockets: Vec<Passed>, workers: usize) -> Result<Bound, BootError> {
    let mut groups: Vec<PassedGroup> = Vec::new();
    for (order, passed) in sockets.into_iter().enumerate() {
        let (local, shown) = describe(&passed.listener)?;
        let unnamed_unix = shown == UNNAMED_UNIX;
        match groups
            .iter_mut()
            .find(|g| g.shown == shown && !unnamed_unix)
        {
            Some(group) => {
                group.name = group.name.take().or(passed.name.clone());
                group.sockets.push((order, passed));
            }
            None => groups.push(PassedGroup {
                local,
                shown,
                addr: match &passed.listener {
                    Listener::Tcp(l) => l.local_addr().ok(),
                    Listener::Unix(_) => None,
                },
                name: passed.name.clone(),
                sockets: vec![(order, passed)],
            }),
        }
    }
    let mut bound = Bound::new(workers);
    let mut handed = Vec::new();
    let mut all_orders = Vec::new();
    for group in groups {
        let shown = match &group.name {
            Some(name) => format!("{} (socket {name})", group.shown),
            None => group.shown.clone(),
        };
        let g = group.sockets.len();
        let per_worker = g.div_ceil(workers).max(1);
        // Each worker's alone (no duplicate) and every one a stoa's: the
        // watchdog may treat them as the worker's own.
        let own_addr = group
            .addr
            .filter(|_| g % workers == 0 && group.sockets.iter().all(|(_, p)| p.own));
        // Slot `s` (worker `s / per_worker`) takes socket `s % g`: the
        // first `g` slots the passed sockets themselves, the rest a
        // duplicate of the one in `places`.
        let mut originals = group.sockets.into_iter();
        let mut orders = Vec::with_capacity(g);
        let mut places: Vec<(usize, usize)> = Vec::with_capacity(g);
        for slot in 0..workers * per_worker {
            let w = slot / per_worker;
            let index = bound.per_worker[w].len();
            let listener = match originals.next() {
                Some((order, passed)) => {
                    handed.push(Handed {
                        worker: w,
                        index,
                        name: passed.name,
                        own: passed.own,
                    });
                    orders.push(order);
                    places.push((w, index));
                    passed.listener
                }
                None => {
                    let (pw, pi) = places[slot % g];
                    bound.per_worker[pw][pi]
                        .try_clone()
                        .map_err(|e| BootError::socket("share", &shown, e))?
                }
            };
            bound.per_worker[w].push(listener);
        }
        for _ in 0..per_worker {
            bound.locals.push(group.local.clone());
            bound.tcp_addrs.push(own_addr);
        }
        bound.shown.push(shown);
        all_orders.extend(orders);
    }
    // Handed on in the order they were passed (their names with them).
    let mut ordered: Vec<(usize, Handed)> = all_orders.into_iter().zip(handed).collect();
    ordered.sort_by_key(|(order, _)| *order);
    bound.handed = ordered.into_iter().map(|(_, h)| h).collect();
    Ok(bound)
}

/// Passed sockets on one address.
struct PassedGroup {
    local: (Arc<str>, u16),
    /// The address as the start-up line shows it.
    shown: String,
    /// The TCP address (`None` for a Unix socket).
    addr: Option<SocketAddr>,
    /// The first name one of them has.
    name: Option<Arc<str>>,
    /// Each with its place in the passed order.
    sockets: Vec<(usize, Passed)>,
}

/// How a Unix socket without a path shows (each is a group of its own).
const UNNAMED_UNIX: &str = "unix:(unnamed)";

/// A passed socket's server name and port (as apps see them), and its
/// address as the start-up line shows it.
fn describe(socket: &Listener) -> Result<((Arc<str>, u16), String), BootError> {
    Ok(match socket {
        Listener::Tcp(l) => {
            let a = l
                .local_addr()
                .map_err(|e| BootError::system("read a passed socket's address", e))?;
            ((a.ip().to_string().into(), a.port()), format!("http://{a}"))
        }
        Listener::Unix(l) => {
            let path = l
                .local_addr()
                .ok()
                .and_then(|a| {
                    a.as_pathname()
                        .map(|p| unix::public_path(p).display().to_string())
                })
                .unwrap_or_else(|| "(unnamed)".into());
            (("localhost".into(), 0), format!("unix:{path}"))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pid: Option<&str>, fds: Option<&str>, names: Option<&str>) -> ActivationEnv {
        ActivationEnv {
            pid: pid.map(Into::into),
            fds: fds.map(Into::into),
            names: names.map(Into::into),
        }
    }

    fn sockets(names: &[Option<&str>]) -> Activation {
        Activation::Sockets {
            names: names.iter().map(|n| n.map(Into::into)).collect(),
            upgrade: false,
        }
    }

    #[test]
    fn sockets_are_for_the_process_listen_pid_names() {
        let e = env(Some("42"), Some("2"), None);
        assert_eq!(
            activation(&e, 42, None, None).ok(),
            Some(sockets(&[None, None]))
        );
        let other = activation(&e, 7, None, None).expect("not an error");
        assert!(
            matches!(&other, Activation::Nothing(Some(why))
                if why.contains("LISTEN_PID=42") && why.contains("pid 7")),
            "{other:?}"
        );
    }

    #[test]
    fn without_listen_pid_only_an_upgrading_parent_passes_sockets() {
        let e = env(None, Some("1"), None);
        assert_eq!(
            activation(&e, 42, Some(9), Some(9)).ok(),
            Some(Activation::Sockets {
                names: vec![None],
                upgrade: true
            })
        );
        let why = activation(&e, 42, Some(9), Some(8)).expect("not an error");
        assert!(
            matches!(&why, Activation::Nothing(Some(w)) if w.contains("without LISTEN_PID")),
            "{why:?}"
        );
        let none = activation(&env(None, None, None), 42, Some(9), Some(9));
        assert_eq!(none.ok(), Some(Activation::Nothing(None)));
    }

    #[test]
    fn a_count_that_is_not_positive_or_a_pid_that_is_not_one_is_refused() {
        for bad in ["0", "-1", "two", ""] {
            let err =
                activation(&env(Some("42"), Some(bad), None), 42, None, None).expect_err("refused");
            assert!(err.to_string().starts_with("LISTEN_FDS="), "{err}");
        }
        let err =
            activation(&env(Some("me"), Some("1"), None), 42, None, None).expect_err("refused");
        assert!(err.to_string().starts_with("LISTEN_PID=\"me\""), "{err}");
    }

    #[test]
    fn names_are_read_colon_separated_and_their_count_must_match() {
        let e = env(Some("42"), Some("3"), Some("web:unknown:"));
        assert_eq!(
            activation(&e, 42, None, None).ok(),
            Some(sockets(&[Some("web"), None, None]))
        );
        let err = activation(&env(Some("42"), Some("2"), Some("a:b:c")), 42, None, None)
            .expect_err("refused");
        let text = err.to_string();
        assert!(
            text.contains("LISTEN_FDNAMES=\"a:b:c\" names 3") && text.contains("LISTEN_FDS=2"),
            "{text}"
        );
    }

    /// `n` SO_REUSEPORT sockets on one loopback address (an old stoa's `n`
    /// workers), and the address.
    fn reuseport_group(n: usize) -> (SocketAddr, Vec<Listener>) {
        let any: SocketAddr = "127.0.0.1:0".parse().expect("addr");
        let first = bind(any, 16).expect("bind");
        let addr = first.local_addr().expect("addr");
        let mut group = vec![Listener::Tcp(first)];
        for _ in 1..n {
            group.push(Listener::Tcp(bind(addr, 16).expect("bind")));
        }
        (addr, group)
    }

    /// The socket a listener is (duplicates share it).
    fn inode(l: &Listener) -> u64 {
        rustix::fs::fstat(l).expect("fstat").st_ino
    }

    #[test]
    fn every_passed_socket_is_served_whatever_the_worker_count() {
        // Five sockets on one address, then one on another.
        let (_, mut passed) = reuseport_group(5);
        passed.extend(reuseport_group(1).1);
        let inodes: Vec<u64> = passed.iter().map(inode).collect();
        for workers in [1, 2, 5, 8] {
            let sockets = passed
                .iter()
                .map(|l| Passed {
                    listener: l.try_clone().expect("dup"),
                    name: None,
                    own: false,
                })
                .collect();
            let bound = adopt_all(sockets, workers).expect("adopted");
            assert_eq!(bound.shown.len(), 2, "one line per address");
            let served: std::collections::HashSet<u64> =
                bound.per_worker.iter().flatten().map(inode).collect();
            assert_eq!(served.len(), 6, "{workers} worker(s) serve every socket");
            for listeners in &bound.per_worker {
                assert_eq!(listeners.len(), bound.locals.len(), "one layout");
                assert_eq!(listeners.len(), 5usize.div_ceil(workers) + 1);
            }
            let handed: Vec<u64> = bound
                .handed
                .iter()
                .map(|h| inode(&bound.per_worker[h.worker][h.index]))
                .collect();
            assert_eq!(handed, inodes, "each handed over once, in order");
        }
    }

    #[test]
    fn a_stoas_own_sockets_held_one_per_worker_stay_the_workers_own() {
        let (addr, four) = reuseport_group(4);
        let passed = |own: [bool; 4]| {
            four.iter()
                .zip(own)
                .map(|(l, own)| Passed {
                    listener: l.try_clone().expect("dup"),
                    name: None,
                    own,
                })
                .collect()
        };
        // Four of a stoa's sockets, two workers: each holds two alone.
        let bound = adopt_all(passed([true; 4]), 2).expect("adopted");
        assert_eq!(bound.tcp_addrs, vec![Some(addr); 2]);
        let handed = bound.duplicates().expect("dups");
        assert!(handed.iter().all(|h| h.own));
        // Three workers share them; one a service manager's: never shut down.
        let shared = adopt_all(passed([true; 4]), 3).expect("adopted");
        assert!(shared.tcp_addrs.iter().all(Option::is_none));
        let managers = adopt_all(passed([true, true, false, true]), 2).expect("adopted");
        assert!(managers.tcp_addrs.iter().all(Option::is_none));
    }

    #[test]
    fn own_sockets_are_taken_from_an_upgrading_parent_only() {
        assert_eq!(own_sockets(Some("0,2"), true, 3), vec![0, 2]);
        assert_eq!(own_sockets(Some("0,7,x"), true, 3), vec![0]);
        assert!(own_sockets(Some("0"), false, 3).is_empty());
        assert!(own_sockets(Some(""), true, 3).is_empty());
    }

    #[test]
    fn reading_unsets_the_activation_variables() {
        // Sockets for another process: nothing is taken, and no variable
        // is left for apps or children to see.
        std::env::set_var(LISTEN_PID, "1");
        std::env::set_var(LISTEN_FDS, "2");
        std::env::set_var(LISTEN_FDNAMES, "a:b");
        assert!(inherited().expect("not an error").is_none());
        for k in [LISTEN_PID, LISTEN_FDS, LISTEN_FDNAMES] {
            assert!(std::env::var_os(k).is_none(), "{k} is still set");
        }
    }
}

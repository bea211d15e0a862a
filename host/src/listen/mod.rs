//! Start-up plumbing for the socket side: the listeners (TCP with address
//! reuse, Unix-domain in `unix.rs`, passed ones read in `activation.rs` and
//! shared out here) and the process's file-descriptor limit.

use crate::error::BootError;
use crate::settings::Bind;
use socket2::{Domain, Protocol, Socket, Type};
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

mod activation;
mod handshake;
mod ring;
mod socket;
pub mod tls;
mod unix;

/// Most distinct `--bind` values. A loop itself takes any number of
/// listeners (an upgrade passes every worker's socket per address).
pub const MAX_LISTENERS: usize = 64;
pub use activation::{inherited, Passed, OWN_SOCKETS_ENV, UPGRADED_FROM_ENV};
pub use ring::Ringed;
pub use socket::{Accepted, Listener, UNIX_PEER};
pub use unix::{
    adopt_created, bind_unix, created_files, keep_unix_sockets, remove_unix_sockets,
    watch_unix_sockets, PRIVATE_PREFIX,
};

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
    /// Each listener serves TLS (a `tls://` bind, or a passed socket named
    /// `tls`).
    pub tls: Vec<bool>,
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
            tls: Vec::new(),
            handed: Vec::new(),
        }
    }

    /// The address of each TLS listener (`None` where it cannot be read).
    pub fn tls_addrs(&self) -> Vec<Option<SocketAddr>> {
        self.local_addrs()
            .into_iter()
            .zip(&self.tls)
            .filter(|(_, tls)| **tls)
            .map(|(a, _)| a)
            .collect()
    }

    /// The local address of each listener, as the socket says (passed ones
    /// included; `None` for a Unix socket or where it cannot be read).
    pub fn local_addrs(&self) -> Vec<Option<SocketAddr>> {
        let first = self.per_worker.first().map(Vec::as_slice).unwrap_or(&[]);
        first
            .iter()
            .map(|l| match l {
                Listener::Tcp(l) => l.local_addr().ok(),
                Listener::Unix(_) => None,
            })
            .collect()
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

    /// A TCP listener for each worker on `first`'s address (`first` is
    /// worker 0's); the address bound.
    fn add_tcp(
        &mut self,
        first: mio::net::TcpListener,
        workers: usize,
        backlog: i32,
        tls: bool,
    ) -> Result<SocketAddr, BootError> {
        let local = first
            .local_addr()
            .map_err(|e| BootError::system("read a bound socket's address", e))?;
        // Each worker's own SO_REUSEPORT socket is a socket of its own:
        // every one is handed over.
        self.per_worker[0].push(Listener::Tcp(first));
        self.hand(0, true, tls);
        for w in 1..workers {
            let l = bind(local, backlog).map_err(|e| BootError::socket("bind", local, e))?;
            self.per_worker[w].push(Listener::Tcp(l));
            self.hand(w, true, tls);
        }
        self.locals
            .push((local.ip().to_string().into(), local.port()));
        self.tcp_addrs.push(Some(local));
        self.shown.push(format!("{}://{local}", scheme(tls)));
        self.tls.push(tls);
        Ok(local)
    }

    /// Records `per_worker[worker]`'s newest listener as one to hand over
    /// (a TLS one named `tls`, so that the process it goes to serves TLS
    /// on it).
    fn hand(&mut self, worker: usize, own: bool, tls: bool) {
        let index = self.per_worker[worker].len() - 1;
        self.handed.push(Handed {
            worker,
            index,
            name: tls.then(|| Arc::from(TLS_NAME)),
            own,
        });
    }
}

/// Whether a bind failed because the machine lacks the address (no IPv6
/// loopback, IPv6 turned off), not because of anything the user can fix.
pub fn unavailable(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::AddrNotAvailable
        || e.raw_os_error() == Some(rustix::io::Errno::AFNOSUPPORT.raw_os_error())
}

/// Binds each of a host name's addresses on one port (the first bound's,
/// for port 0), a listener each; one the machine lacks is skipped with a
/// log line, and the name fails only when it has none.
fn bind_name(
    bound: &mut Bound,
    given: &Bind,
    addrs: &[SocketAddr],
    workers: usize,
    backlog: i32,
) -> Result<(), BootError> {
    let mut port = None;
    let mut lacking = None;
    for &addr in addrs {
        let addr = SocketAddr::new(addr.ip(), port.unwrap_or(addr.port()));
        match bind(addr, backlog) {
            Ok(first) => {
                let local = bound.add_tcp(first, workers, backlog, false)?;
                port.get_or_insert(local.port());
            }
            Err(e) if unavailable(&e) => {
                log::info!(
                    "--bind {given}: {addr} is not available on this machine ({e}); \
                     listening on its other addresses"
                );
                lacking.get_or_insert(BootError::socket("bind", addr, e));
            }
            Err(e) => return Err(BootError::socket("bind", addr, e)),
        }
    }
    match (port, lacking) {
        (None, Some(e)) => Err(e),
        _ => Ok(()),
    }
}

/// The name a TLS listener is handed over with (`LISTEN_FDNAMES`); a
/// service manager's socket named `tls` or `tls-...` serves TLS too.
pub const TLS_NAME: &str = "tls";

/// True for a passed socket's name that asks for TLS.
pub fn is_tls_name(name: &str) -> bool {
    name == TLS_NAME || name.starts_with("tls-")
}

/// `LISTEN_FDNAMES` for sockets with these names: empty when none has
/// one, else each name (`unknown` for one without, as systemd says it)
/// joined by `:`.
pub fn fd_names<'a>(names: impl Iterator<Item = Option<&'a str>> + Clone) -> String {
    if !names.clone().any(|n| n.is_some()) {
        return String::new();
    }
    names
        .map(|n| n.unwrap_or("unknown"))
        .collect::<Vec<_>>()
        .join(":")
}

fn scheme(tls: bool) -> &'static str {
    match tls {
        true => "https",
        false => "http",
    }
}

/// Binds every `--bind` address for `workers` workers.
pub fn bind_all(
    binds: &[Bind],
    workers: usize,
    backlog: i32,
    unix_mode: u32,
) -> Result<Bound, BootError> {
    let given: usize = binds.iter().map(Bind::listeners).sum();
    if given > MAX_LISTENERS {
        return Err(BootError::TooManyBinds {
            given,
            most: MAX_LISTENERS,
        });
    }
    let mut bound = Bound::new(workers);
    for b in binds {
        match b {
            Bind::Tcp(addr) | Bind::Tls(addr) => {
                let first = bind(*addr, backlog).map_err(|e| BootError::socket("bind", addr, e))?;
                bound.add_tcp(first, workers, backlog, matches!(b, Bind::Tls(_)))?;
            }
            Bind::Name { addrs, .. } => bind_name(&mut bound, b, addrs, workers, backlog)?,
            Bind::Unix(path) => {
                let l = bind_unix(path, backlog, unix_mode)?;
                for listeners in &mut bound.per_worker {
                    let dup = l.try_clone().map_err(|e| {
                        BootError::socket("share", format!("unix:{}", path.display()), e)
                    })?;
                    listeners.push(Listener::Unix(mio::net::UnixListener::from_std(dup)));
                }
                // One socket shared by the workers: handed over once.
                bound.hand(0, false, false);
                bound.locals.push(("localhost".into(), 0));
                bound.tcp_addrs.push(None);
                bound.shown.push(format!("unix:{}", path.display()));
                bound.tls.push(false);
            }
        }
    }
    Ok(bound)
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
    let groups = group_passed(sockets)?;
    let mut bound = Bound::new(workers);
    let mut handed = Vec::new();
    let mut all_orders = Vec::new();
    for group in groups {
        let tls = group.name.as_deref().is_some_and(is_tls_name) && group.addr.is_some();
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
            bound.tls.push(tls);
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

/// The passed sockets by address, in the order each address first came
/// (a TLS socket never joins a plain one on the same address: their shown
/// schemes differ; each Unix socket without a path is a group of its own).
fn group_passed(sockets: Vec<Passed>) -> Result<Vec<PassedGroup>, BootError> {
    let mut groups: Vec<PassedGroup> = Vec::new();
    for (order, passed) in sockets.into_iter().enumerate() {
        // A TLS socket never joins a plain one on the same address: their
        // shown schemes differ.
        let tls = passed.name.as_deref().is_some_and(is_tls_name);
        let (local, shown) = describe(&passed.listener, tls)?;
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
    Ok(groups)
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
/// address as the start-up line shows it (`https://` for a TLS one).
fn describe(socket: &Listener, tls: bool) -> Result<((Arc<str>, u16), String), BootError> {
    Ok(match socket {
        Listener::Tcp(l) => {
            let a = l
                .local_addr()
                .map_err(|e| BootError::system("read a passed socket's address", e))?;
            (
                (a.ip().to_string().into(), a.port()),
                format!("{}://{a}", scheme(tls)),
            )
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

    fn name(addrs: &[&str]) -> Bind {
        Bind::Name {
            name: "test".into(),
            addrs: addrs.iter().map(|a| a.parse().expect("addr")).collect(),
        }
    }

    #[test]
    fn a_names_addresses_share_the_first_ones_port() {
        // 192.0.2.1 (TEST-NET-1) is on no interface: skipped, not an error.
        let bound = bind_all(&[name(&["127.0.0.1:0", "192.0.2.1:0"])], 2, 16, 0o660)
            .expect("bound on the address the machine has");
        assert_eq!(bound.shown.len(), 1, "{:?}", bound.shown);
        let port = bound.locals[0].1;
        assert!(port != 0);
        assert!(bound.per_worker.iter().all(|l| l.len() == 1));
        if std::net::TcpListener::bind("[::1]:0").is_ok() {
            let both = bind_all(&[name(&["127.0.0.1:0", "[::1]:0"])], 2, 16, 0o660).expect("bound");
            let ports: Vec<u16> = both.locals.iter().map(|l| l.1).collect();
            assert_eq!(ports.len(), 2);
            assert_eq!(ports[0], ports[1], "one port for both: {:?}", both.shown);
            assert_eq!(both.shown[1], format!("http://[::1]:{}", ports[0]));
        }
        let none = bind_all(&[name(&["192.0.2.1:0"])], 1, 16, 0o660);
        assert!(none.is_err(), "a name with no address here is an error");
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
}

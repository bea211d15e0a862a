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

/// Most listeners a loop has (distinct `--bind` values).
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
}

impl Bound {
    /// No listener yet, for `workers` workers.
    fn new(workers: usize) -> Self {
        Bound {
            per_worker: (0..workers).map(|_| Vec::new()).collect(),
            locals: Vec::new(),
            tcp_addrs: Vec::new(),
            shown: Vec::new(),
        }
    }

    /// A duplicate of every listening socket (every worker's), for an
    /// upgrade to hand over.
    pub fn duplicates(&self) -> Result<Vec<std::os::fd::OwnedFd>, BootError> {
        use std::os::fd::AsFd;
        // Each worker's own SO_REUSEPORT socket is a socket of its own;
        // a shared one (Unix, or passed to us) is handed over once.
        self.per_worker
            .iter()
            .enumerate()
            .flat_map(|(w, listeners)| {
                listeners
                    .iter()
                    .zip(&self.tcp_addrs)
                    .filter(move |(_, own)| w == 0 || own.is_some())
                    .map(|(l, _)| l)
            })
            .map(|l| l.as_fd().try_clone_to_owned())
            .collect::<std::io::Result<_>>()
            .map_err(|e| BootError::system("duplicate a listening socket", e))
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
                bound.per_worker[0].push(Listener::Tcp(first));
                for w in 1..workers {
                    let l =
                        bind(local, backlog).map_err(|e| BootError::socket("bind", local, e))?;
                    bound.per_worker[w].push(Listener::Tcp(l));
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
                bound.locals.push(("localhost".into(), 0));
                bound.tcp_addrs.push(None);
                bound.shown.push(format!("unix:{}", path.display()));
            }
        }
    }
    Ok(bound)
}

/// Listening sockets passed by a service manager's socket activation
/// (`LISTEN_FDS`, `LISTEN_PID`; systemd, `systemd-socket-activate`), in
/// order; `None` when none were passed. Each is a TCP or a Unix stream
/// listener; anything else is an error naming it.
pub fn inherited() -> Result<Option<Vec<Listener>>, BootError> {
    let mut fds = listenfd::ListenFd::from_env();
    if fds.len() == 0 {
        return Ok(None);
    }
    let mut listeners = Vec::with_capacity(fds.len());
    for i in 0..fds.len() {
        let tcp = fds.take_tcp_listener(i);
        let listener = match tcp {
            Ok(Some(l)) => l
                .set_nonblocking(true)
                .map(|()| Listener::Tcp(mio::net::TcpListener::from_std(l))),
            _ => match fds.take_unix_listener(i) {
                Ok(Some(l)) => l
                    .set_nonblocking(true)
                    .map(|()| Listener::Unix(mio::net::UnixListener::from_std(l))),
                Ok(None) => continue,
                Err(source) => return Err(BootError::NotAListener { fd: i + 3, source }),
            },
        };
        let fd = i + 3;
        let listener = listener
            .map_err(|e| BootError::system(format!("make passed socket {fd} non-blocking"), e))?;
        listeners.push(listener);
    }
    Ok(Some(listeners))
}

/// Serves the sockets a service manager passed: shared by every worker
/// (a duplicate each), never shut down by the watchdog nor re-created.
pub fn adopt_all(sockets: Vec<Listener>, workers: usize) -> Result<Bound, BootError> {
    let mut bound = Bound::new(workers);
    for socket in sockets {
        let (local, shown) = match &socket {
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
        };
        for listeners in bound.per_worker.iter_mut().skip(1) {
            listeners.push(
                socket
                    .try_clone()
                    .map_err(|e| BootError::socket("share", &shown, e))?,
            );
        }
        bound.per_worker[0].push(socket);
        bound.locals.push(local);
        bound.tcp_addrs.push(None);
        bound.shown.push(shown);
    }
    Ok(bound)
}

//! Start-up plumbing for the socket side: the listener (backlog, address
//! reuse) and the process's file-descriptor limit.

use socket2::{Domain, Protocol, Socket, Type};
use std::io;
use std::net::SocketAddr;

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

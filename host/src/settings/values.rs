//! The value types of flags and config keys that more than one wing reads.

use std::net::SocketAddr;
use std::path::PathBuf;

/// What a replace past `--max-generations` does.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnGenerationCap {
    /// Re-execute the host in place (same sockets, apps loaded fresh).
    Reexec,
    /// Refuse the new version until a restart.
    Refuse,
}

/// How the workers run (`--worker-mode`).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkerMode {
    /// A supervisor and one worker process per worker (the default).
    Process,
    /// One process, one event-loop thread per worker.
    Thread,
}

/// How log lines are written.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable lines; the access log in combined format.
    Text,
    /// One JSON object per line.
    Json,
}

/// What happens to clients past the connection cap.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Overload {
    /// Answer each at once with 503 and Retry-After: 1, then close.
    Shed,
    /// Stop accepting: they wait in the kernel backlog.
    Queue,
}

impl Overload {
    pub fn name(self) -> &'static str {
        match self {
            Overload::Shed => "shed",
            Overload::Queue => "queue",
        }
    }
}

/// Where to listen: a TCP address, a host name and every address it
/// stands for, or a Unix-domain socket's path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bind {
    Tcp(SocketAddr),
    /// `name:port` and its addresses, IPv4 first (`localhost`: 127.0.0.1
    /// and ::1), all on one port: each is bound, as nginx does, and one
    /// the machine lacks (no IPv6 loopback) is skipped with a log line.
    Name {
        name: String,
        addrs: Vec<SocketAddr>,
    },
    Unix(PathBuf),
    /// `tls://IP:PORT`: HTTPS on a TCP address (`--tls-cert`, `--tls-key`).
    Tls(SocketAddr),
}

impl Bind {
    /// How many listening sockets it may take: a host name one per address.
    pub fn listeners(&self) -> usize {
        match self {
            Bind::Name { addrs, .. } => addrs.len(),
            _ => 1,
        }
    }
}

impl std::fmt::Display for Bind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Bind::Tcp(a) => write!(f, "{a}"),
            Bind::Name { name, addrs } => {
                write!(f, "{name}:{}", addrs.first().map_or(0, |a| a.port()))
            }
            Bind::Unix(p) => write!(f, "unix:{}", p.display()),
            Bind::Tls(a) => write!(f, "tls://{a}"),
        }
    }
}

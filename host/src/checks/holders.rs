//! Who holds an address `stoa check` finds in use: the sockets listening
//! there (`/proc/net/tcp`, `tcp6`, `unix`: their inodes), and the
//! processes with one of those inodes among their descriptors
//! (`/proc/PID/fd/N` -> `socket:[INODE]`). A process is a live stoa when it
//! is named `stoa` (`/proc/PID/comm`) or its pid is the one `--pid-file`
//! names. Under socket activation the service manager holds the socket
//! too, and the stoa it passed it to has the same inode: the rule is the
//! same. In process mode the supervisor and its workers hold it; the
//! supervisor is the one reported.

use crate::settings::Bind;
use std::collections::{BTreeSet, HashMap};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;

/// Who holds an address in use.
#[derive(Debug, PartialEq)]
pub enum Held {
    /// Every socket listening there is held by a live stoa: these pids
    /// (the top of each process tree: a supervisor, not its workers).
    Stoa(Vec<u32>),
    /// A socket listening there is held by no stoa: its holders, as
    /// `NAME pid N`.
    Other(Vec<String>),
    /// Who holds it cannot be told: why.
    Unseen(String),
}

/// A process holding a socket.
struct Holder {
    pid: u32,
    name: String,
}

/// Who holds the sockets listening at `bind`; `pid_file` is the
/// configuration's `--pid-file`, whose pid counts as a stoa.
pub fn who_holds(bind: &Bind, pid_file: Option<&Path>) -> Held {
    let inodes = match bind {
        Bind::Tcp(addr) | Bind::Tls(addr) => tcp_listeners(*addr),
        Bind::Name { addrs, .. } => addrs.iter().flat_map(|a| tcp_listeners(*a)).collect(),
        Bind::Unix(path) => unix_listeners(path),
    };
    if inodes.is_empty() {
        return Held::Unseen(
            "no socket listening there is listed in /proc/net (another network namespace?)"
                .to_string(),
        );
    }
    let (holders, unreadable) = socket_holders(&inodes);
    let from_file = pid_file.and_then(pid_in_file);
    let is_stoa = |h: &Holder| h.name == "stoa" || Some(h.pid) == from_file;
    let mut stoas = BTreeSet::new();
    let mut others = BTreeSet::new();
    let mut unseen = false;
    for inode in &inodes {
        let held = holders.get(inode).map(Vec::as_slice).unwrap_or_default();
        if held.is_empty() {
            unseen = true;
        } else if held.iter().any(is_stoa) {
            stoas.extend(held.iter().filter(|h| is_stoa(h)).map(|h| h.pid));
        } else {
            others.extend(held.iter().map(|h| format!("{} pid {}", h.name, h.pid)));
        }
    }
    if !others.is_empty() {
        return Held::Other(others.into_iter().collect());
    }
    if unseen {
        return Held::Unseen(format!(
            "the process holding it is not visible to this user ({unreadable} process(es) \
             whose /proc/PID/fd cannot be read): run stoa check as the server's user or root \
             to tell a live stoa from another server"
        ));
    }
    let tops = stoas
        .iter()
        .copied()
        .filter(|pid| !parent(*pid).is_some_and(|p| stoas.contains(&p)))
        .collect();
    Held::Stoa(tops)
}

/// The inodes of the TCP sockets listening where `addr` would (the same
/// port, and the same address or either one the unspecified address).
fn tcp_listeners(addr: SocketAddr) -> Vec<u64> {
    const LISTEN: &str = "0A";
    let mut inodes = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            let (Some(local), Some(state), Some(inode)) = (f.get(1), f.get(3), f.get(9)) else {
                continue;
            };
            let Some(listener) = hex_addr(local) else {
                continue;
            };
            let same_ip = listener.ip() == addr.ip()
                || listener.ip().is_unspecified()
                || addr.ip().is_unspecified();
            if *state == LISTEN && listener.port() == addr.port() && same_ip {
                inodes.extend(inode.parse::<u64>().ok().filter(|i| *i != 0));
            }
        }
    }
    inodes
}

/// `0100007F:1F40` (IPv4) or 32 hex digits and a port (IPv6), each 32-bit
/// word in the machine's byte order, as /proc/net/tcp writes them.
fn hex_addr(field: &str) -> Option<SocketAddr> {
    let (ip, port) = field.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let word = |i: usize| -> Option<[u8; 4]> {
        let digits = ip.get(i * 8..i * 8 + 8)?;
        Some(u32::from_str_radix(digits, 16).ok()?.to_ne_bytes())
    };
    let ip = match ip.len() {
        8 => IpAddr::V4(Ipv4Addr::from(word(0)?)),
        32 => {
            let mut bytes = [0u8; 16];
            for i in 0..4 {
                bytes[i * 4..i * 4 + 4].copy_from_slice(&word(i)?);
            }
            IpAddr::V6(Ipv6Addr::from(bytes))
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

/// The inodes of the Unix sockets listening at `path`.
fn unix_listeners(path: &Path) -> Vec<u64> {
    const ACCEPTING: u32 = 0x0001_0000;
    let Ok(text) = std::fs::read_to_string("/proc/net/unix") else {
        return Vec::new();
    };
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let flags = u32::from_str_radix(f.get(3)?, 16).ok()?;
            let here = same_socket_path(path, Path::new(f.get(7)?));
            (flags & ACCEPTING != 0 && here)
                .then(|| f.get(6)?.parse().ok())
                .flatten()
        })
        .collect()
}

/// True if a socket /proc/net/unix shows bound at `shown` is the one at
/// `wanted`: the same path, or (a stoa's) bound in a private directory
/// beside it and renamed into place (`DIR/.stoa-bind-PID-N/NAME` for
/// `DIR/NAME`). A relative path is taken from this process's directory.
fn same_socket_path(wanted: &Path, shown: &Path) -> bool {
    let plain = |p: &Path| -> Option<std::path::PathBuf> {
        let p = std::path::absolute(p).ok()?;
        Some(
            p.components()
                .filter(|c| *c != std::path::Component::CurDir)
                .collect(),
        )
    };
    let (Some(wanted), Some(shown)) = (plain(wanted), plain(shown)) else {
        return false;
    };
    if wanted == shown {
        return true;
    }
    let private = shown.parent().filter(|d| {
        d.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with(crate::listen::PRIVATE_PREFIX))
    });
    private
        .is_some_and(|d| d.parent() == wanted.parent() && shown.file_name() == wanted.file_name())
}

/// For each inode, the processes with it among their descriptors; and how
/// many processes' descriptors could not be read.
fn socket_holders(inodes: &[u64]) -> (HashMap<u64, Vec<Holder>>, usize) {
    let mut holders: HashMap<u64, Vec<Holder>> = HashMap::new();
    let mut unreadable = 0;
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return (holders, unreadable);
    };
    for entry in procs.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(entry.path().join("fd")) else {
            unreadable += 1;
            continue;
        };
        let mut held: BTreeSet<u64> = BTreeSet::new();
        for fd in fds.flatten() {
            let Ok(target) = std::fs::read_link(fd.path()) else {
                continue;
            };
            let inode = target
                .to_str()
                .and_then(|t| t.strip_prefix("socket:["))
                .and_then(|t| t.strip_suffix(']'))
                .and_then(|t| t.parse::<u64>().ok());
            held.extend(inode.filter(|i| inodes.contains(i)));
        }
        for inode in held {
            let name = std::fs::read_to_string(entry.path().join("comm"))
                .map(|n| n.trim_end().to_string())
                .unwrap_or_else(|_| "?".to_string());
            holders.entry(inode).or_default().push(Holder { pid, name });
        }
    }
    (holders, unreadable)
}

/// The pid a pid file names, if it names a live process.
fn pid_in_file(path: &Path) -> Option<u32> {
    let pid: u32 = std::fs::read_to_string(path).ok()?.trim().parse().ok()?;
    Path::new(&format!("/proc/{pid}")).exists().then_some(pid)
}

/// A process's parent (`/proc/PID/stat`, the field after the state).
fn parent(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = stat.get(stat.rfind(')')? + 1..)?;
    after_name.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_net_addresses_are_read_in_the_machines_byte_order() {
        let v4 = u32::from_ne_bytes([127, 0, 0, 1]);
        let field = format!("{v4:08X}:1F40");
        assert_eq!(
            hex_addr(&field),
            Some("127.0.0.1:8000".parse().expect("v4"))
        );
        let one = u32::from_ne_bytes([0, 0, 0, 1]);
        let field = format!("{:08X}{:08X}{:08X}{one:08X}:0050", 0, 0, 0);
        assert_eq!(hex_addr(&field), Some("[::1]:80".parse().expect("v6")));
        assert_eq!(hex_addr("zz:1"), None);
    }

    #[test]
    fn a_unix_socket_bound_beside_its_path_is_the_one_at_it() {
        let at = |w: &str, s: &str| same_socket_path(Path::new(w), Path::new(s));
        assert!(at("/run/stoa.sock", "/run/stoa.sock"));
        assert!(at("/run/stoa.sock", "/run/.stoa-bind-12-0/stoa.sock"));
        assert!(at("s.sock", "./.stoa-bind-12-0/s.sock"));
        assert!(!at("/run/stoa.sock", "/run/other/stoa.sock"));
        assert!(!at("/run/stoa.sock", "/tmp/.stoa-bind-12-0/stoa.sock"));
        assert!(!at("/run/stoa.sock", "/run/.stoa-bind-12-0/other.sock"));
    }

    #[test]
    fn this_process_is_found_holding_its_listener_and_is_no_stoa() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        match who_holds(&Bind::Tcp(addr), None) {
            Held::Other(holders) => {
                let me = format!("pid {}", std::process::id());
                assert!(holders.iter().any(|h| h.ends_with(&me)), "{holders:?}");
            }
            other => panic!("{other:?}"),
        }
        // Its pid in the pid file makes it the stoa of this configuration.
        let dir = tempfile::tempdir().expect("tempdir");
        let pid_file = dir.path().join("stoa.pid");
        std::fs::write(&pid_file, std::process::id().to_string()).expect("write");
        let held = who_holds(&Bind::Tcp(addr), Some(&pid_file));
        assert_eq!(held, Held::Stoa(vec![std::process::id()]));
    }
}

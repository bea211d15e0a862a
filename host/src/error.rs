//! Why the host cannot start, or an operation of its edges failed:
//! `BootError`, one variant per kind of failure, each saying what was being
//! done and to what (the path, the address, the flag). Its `Display` is the
//! line the host logs (`stoa: ...` on standard error, the error log, `stoa
//! check`'s problems), so the texts are kept as operators and tests read
//! them.
//!
//! This module uses nothing of the host's others, so every wing may return
//! it: the listeners (`listen/`), the logs, the pid file, the upgrade, the
//! budget's checks.

use std::io;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::time::Duration;

/// Why start-up, or an operation of the host's edges, failed.
#[derive(Debug, thiserror::Error)]
pub enum BootError {
    /// A file operation failed: `doing` says which ("open", "write the pid
    /// file", "start"), on `path`.
    #[error("cannot {doing} {}: {source}", path.display())]
    File {
        doing: &'static str,
        path: PathBuf,
        source: io::Error,
    },
    /// A socket operation failed: `doing` says which ("bind", "listen on",
    /// "share"), on `addr` as the start-up line shows it (`127.0.0.1:8080`,
    /// `unix:/run/stoa.sock`, `http://[::1]:80`).
    #[error("cannot {doing} {addr}: {source}")]
    Socket {
        doing: &'static str,
        addr: String,
        source: io::Error,
    },
    /// An operation on no file nor address failed (duplicating descriptors,
    /// catching a signal): `doing` says which.
    #[error("cannot {doing}: {source}")]
    System { doing: String, source: io::Error },
    /// A thread could not be started; `thread` names it ("the access log
    /// writer thread", "the watchdog").
    #[error("cannot start {thread}: {source}")]
    Thread { thread: String, source: io::Error },

    /// A Unix-domain socket could not be bound at its path (`unix:PATH`),
    /// for a reason of its own (the io failures are `Socket`).
    #[error("cannot bind {addr}: {why}")]
    UnixBind { addr: String, why: UnixRefusal },
    /// More `--bind` addresses than the host serves.
    #[error("--bind given {given} times: at most {most} addresses")]
    TooManyBinds { given: usize, most: usize },
    /// A socket passed by a service manager (`LISTEN_FDS`) that is not a
    /// listener the host can serve; `fd` is its descriptor number.
    #[error(
        "socket {fd} passed by the service manager (LISTEN_FDS) is neither a TCP nor a Unix \
         stream listener: {source}"
    )]
    NotAListener { fd: usize, source: io::Error },
    /// `LISTEN_FDNAMES` (colon-separated) names a different count of
    /// sockets than `LISTEN_FDS` passes.
    #[error(
        "LISTEN_FDNAMES={given:?} names {names} socket(s) but LISTEN_FDS={fds}: give one name \
         per passed socket, {fds} colon-separated (sd_listen_fds_with_names(3))"
    )]
    FdNamesCount {
        given: String,
        names: usize,
        fds: usize,
    },

    /// A budget below what one body or message takes: `setting` was given
    /// `given`, less than `floor`'s `least`, which is the nearest value the
    /// host can run with.
    #[error(
        "{setting} {given} is below {floor} {least}: such a body or message could never be \
         held; give {setting} {least} (or lower {floor})"
    )]
    BelowFloor {
        setting: &'static str,
        given: String,
        floor: &'static str,
        least: String,
    },
    /// An environment variable holds a value the host does not take.
    #[error("{var}={given:?}: expected {expected}")]
    Env {
        var: &'static str,
        given: String,
        expected: &'static str,
    },
    /// A check of values against each other that the configuration file
    /// gave some of: its words with each such value's key and place.
    #[error("{0}")]
    Placed(String),
    /// TLS settings that cannot serve: a missing or unreadable file, a key
    /// that is not the certificate's, a TLS bind without them.
    #[error("{0}")]
    Tls(#[from] TlsError),
    /// A failure that belongs to one flag's value (`--access-log PATH:
    /// ...`).
    #[error("{setting} {value}: {source}")]
    In {
        setting: &'static str,
        value: String,
        source: Box<BootError>,
    },

    /// `--pid-file` names a live process.
    #[error(
        "another stoa (pid {pid}) uses {}; stop it, or remove the file if that process is \
         not a stoa",
        path.display()
    )]
    PidFileInUse { pid: u32, path: PathBuf },
    /// A log's path is there and is not a regular file; `kind` says what it
    /// is ("a FIFO", "a directory").
    #[error(
        "{} is {kind}, not a regular file (a log there could stall the host); give a regular \
         file, or - for standard output",
        path.display()
    )]
    NotRegular { path: PathBuf, kind: &'static str },
    /// A log's file cannot be created: its directory is not one.
    #[error("cannot create {}: {} is not a directory", path.display(), dir.display())]
    NoDirectory { path: PathBuf, dir: PathBuf },
    /// The error log was set up already (the process installs one logger).
    #[error("the error log is already set up")]
    LogSetUp,
    /// The logger could not be installed.
    #[error(transparent)]
    Logger(#[from] log::SetLoggerError),

    /// An upgrade asked of a process that drains already.
    #[error("already draining")]
    Draining,
    /// The upgrade's sockets could not be mapped to the new process's
    /// descriptors.
    #[error("cannot hand the sockets over: {0}")]
    HandOver(#[from] command_fds::FdMappingCollision),
    /// The upgraded process exited before it reported ready.
    #[error("the new process exited ({status}) before it was ready")]
    ExitedBeforeReady { status: ExitStatus },
    /// The upgraded process did not report ready in time.
    #[error("the new process did not report ready within {secs} s")]
    NotReady { secs: u64 },

    /// The backend `--poller` names cannot start.
    #[error("cannot start the {name} poller: {source}")]
    Poller { name: String, source: io::Error },
    /// `--poller auto` found no backend that starts: each one tried, with
    /// its error.
    #[error("no poller backend could start ({})", tried.join("; "))]
    NoPoller { tried: Vec<String> },
    /// `--max-connections` above what the descriptor limit leaves room
    /// for; `cap` is the most it can be.
    #[error(
        "--max-connections {given} is more than the descriptor limit leaves room for: at most \
         {cap} ({limit_name} {limit} minus {reserved} descriptors the host keeps for {workers} \
         {poller} worker(s), listeners, logs and plugin generations); use --max-connections \
         {cap}, or raise the limit (ulimit -n)"
    )]
    TooManyConnections {
        given: usize,
        cap: usize,
        limit_name: &'static str,
        limit: usize,
        reserved: usize,
        workers: usize,
        poller: String,
    },
    /// Another process listens on a TCP `--bind` address.
    #[error(
        "cannot bind {addr}: address already in use (another server listens there); stop it, \
         choose another --bind, or give --reuse-port to both to share it on purpose"
    )]
    AddressInUse { addr: std::net::SocketAddr },
    /// `--unhealthy-after` below `--stuck-after`.
    #[error(
        "--unhealthy-after ({unhealthy_after:?}) must be at least --stuck-after ({stuck_after:?}): \
         use --unhealthy-after {}",
        humantime::format_duration(*stuck_after)
    )]
    WatchdogBounds {
        unhealthy_after: Duration,
        stuck_after: Duration,
    },
    /// A worker-process flag given in thread mode.
    #[error("{flags} replace(s) worker processes: drop --worker-mode thread, or give --worker-mode process (the default; thread mode has one process)")]
    ProcessModeOnly { flags: String },
    /// `--worker-timeout` at or under `--stuck-after`.
    #[error(
        "--worker-timeout {} must be more than --stuck-after {} (a stuck worker first stops \
         getting connections, then is killed); try --worker-timeout {}",
        humantime::format_duration(*worker_timeout),
        humantime::format_duration(*stuck_after),
        humantime::format_duration(*stuck_after + Duration::from_secs(1))
    )]
    WorkerTimeout {
        worker_timeout: Duration,
        stuck_after: Duration,
    },
    /// `--mount` or `[apps.NAME]` name apps that did not load: one line
    /// each.
    #[error("{}", lines.join("\n"))]
    UnknownApps { lines: Vec<String> },
    /// `--strict-plugins`, and plugin files were refused: one line each.
    #[error(
        "--strict-plugins: {} plugin file(s) refused at start-up:\n{}",
        refused.len(),
        refused.join("\n")
    )]
    StrictPlugins { refused: Vec<String> },
    /// A worker's loop ended in an error.
    #[error("worker {worker} failed: {source}")]
    Worker { worker: usize, source: io::Error },
    /// A worker's loop panicked.
    #[error("worker {worker} panicked")]
    WorkerPanicked { worker: usize },
    /// `stoa check` found problems (each printed on its own line).
    #[error("stoa check: {problems} problem(s)")]
    CheckFailed { problems: usize },
}

/// Why a Unix-domain socket could not be bound at its path (the part after
/// `cannot bind unix:PATH: `).
#[derive(Debug, thiserror::Error)]
pub enum UnixRefusal {
    /// The path names no file (it ends in `/` or `..`).
    #[error("give the socket file's path, not a directory")]
    NoFileName,
    /// The socket's directory cannot be opened.
    #[error("cannot open its directory {}: {source}", dir.display())]
    OpenDir { dir: PathBuf, source: io::Error },
    /// The private directory the socket is first bound in cannot be made.
    #[error("cannot make a private directory in {}: {source}", dir.display())]
    MakePrivate { dir: PathBuf, source: io::Error },
    /// Every private directory name the host tries (`STEM-0` to `STEM-99`)
    /// exists.
    #[error("cannot make a private directory in {}: {stem}-0..99 all exist", dir.display())]
    PrivateNamesTaken { dir: PathBuf, stem: String },
    /// The private directory just made is not ours and 0700.
    #[error(
        "the private directory {} was swapped as it was made (can others write in {}?)",
        private.display(),
        dir.display()
    )]
    PrivateSwapped { private: PathBuf, dir: PathBuf },
    /// The path, bound first inside the private directory, is longer than
    /// a socket address takes; `most` is the longest path that fits there.
    #[error(
        "the path is too long: at most {most} bytes here (a socket path takes {max}, and it is \
         first bound in {} beside it)",
        private.display()
    )]
    TooLong {
        most: usize,
        max: usize,
        private: PathBuf,
    },
    /// The private directory was moved away while the socket was bound.
    #[error(
        "the private directory {} was moved while binding (can others write beside it?); a \
         socket file may be left where it was moved to",
        private.display()
    )]
    PrivateMoved { private: PathBuf },
    /// A file appeared at the path while the socket was bound.
    #[error("a file appeared there while binding")]
    Appeared,
    /// The socket could not be renamed into place.
    #[error("cannot move the socket into place: {source}")]
    Move { source: io::Error },
    /// The socket moved into place was replaced at once.
    #[error("it was replaced right after it was bound (can others write in its directory?)")]
    Replaced,
    /// The path holds something that is not a socket.
    #[error("it exists and is not a socket")]
    NotASocket,
    /// A live server listens on the path.
    #[error("address already in use (another server listens there)")]
    InUse,
}

impl BootError {
    /// TLS flags that do not go together, or a TLS bind without them.
    pub fn tls(why: impl Into<String>) -> Self {
        BootError::Tls(TlsError::Settings(why.into()))
    }

    /// `doing` on the file at `path` failed.
    pub fn file(doing: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        BootError::File {
            doing,
            path: path.into(),
            source,
        }
    }

    /// `doing` on the socket shown as `addr` failed.
    pub fn socket(doing: &'static str, addr: impl ToString, source: io::Error) -> Self {
        BootError::Socket {
            doing,
            addr: addr.to_string(),
            source,
        }
    }

    /// `doing` (on no file nor address) failed.
    pub fn system(doing: impl Into<String>, source: io::Error) -> Self {
        BootError::System {
            doing: doing.into(),
            source,
        }
    }

    /// `thread` could not be started.
    pub fn thread(thread: impl Into<String>, source: io::Error) -> Self {
        BootError::Thread {
            thread: thread.into(),
            source,
        }
    }

    /// This failure, as one of `setting`'s value `value`.
    pub fn within(self, setting: &'static str, value: impl ToString) -> Self {
        BootError::In {
            setting,
            value: value.to_string(),
            source: Box::new(self),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lines_name_what_was_done_and_to_what() {
        let denied = || io::Error::from(io::ErrorKind::PermissionDenied);
        let e = BootError::file("write the pid file", "/run/stoa.pid", denied());
        assert_eq!(
            e.to_string(),
            format!("cannot write the pid file /run/stoa.pid: {}", denied())
        );
        let e = BootError::UnixBind {
            addr: "unix:/run/s.sock".into(),
            why: UnixRefusal::InUse,
        };
        assert_eq!(
            e.to_string(),
            "cannot bind unix:/run/s.sock: address already in use (another server listens there)"
        );
        let e = BootError::NotRegular {
            path: "/tmp/fifo".into(),
            kind: "a FIFO",
        }
        .within("--access-log", "/tmp/fifo");
        assert!(
            e.to_string()
                .starts_with("--access-log /tmp/fifo: /tmp/fifo is a FIFO, not a regular file"),
            "{e}"
        );
    }
}

// What goes wrong when the TLS settings are turned into a serving
// configuration (`listen::tls`): each case names the file (or the site,
// the flags) and the reason, as an operator reads it in the log or from
// `stoa check`.
/// A TLS setting that cannot serve.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A site with no certificate at all.
    #[error("no certificate to serve")]
    NoCertificate,
    /// A PEM file that cannot be read or parsed.
    #[error("{}: {reason}", path.display())]
    Read { path: PathBuf, reason: String },
    /// A PEM file with no certificate in it (a chain, or client CAs).
    #[error("{}: no PEM certificate in it", path.display())]
    NoPem { path: PathBuf },
    /// A certificate that does not parse as X.509.
    #[error("{}: the certificate does not parse: {reason}", path.display())]
    Certificate { path: PathBuf, reason: String },
    /// A private key that cannot be read.
    #[error(
        "{}: {reason} (a PEM private key, PKCS#8, PKCS#1 or SEC1, unencrypted)",
        path.display()
    )]
    Key { path: PathBuf, reason: String },
    /// A key that is not the certificate's (or a chain rustls refuses).
    #[error(
        "{} and {}: {reason} (is the key the certificate's?)",
        cert.display(),
        key.display()
    )]
    KeyMismatch {
        cert: PathBuf,
        key: PathBuf,
        reason: String,
    },
    /// A client CA that cannot be used to verify client certificates.
    #[error("{}: a CA that cannot be used: {reason}", path.display())]
    ClientCa { path: PathBuf, reason: String },
    /// The protocol versions asked for cannot be offered.
    #[error("{0}")]
    Versions(String),
    /// One site's failure, named by its table or the flags.
    #[error("{site}: {source}")]
    Site {
        site: String,
        #[source]
        source: Box<TlsError>,
    },
    /// TLS flags that do not go together, or a TLS bind without them.
    #[error("{0}")]
    Settings(String),
}

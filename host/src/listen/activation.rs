//! Sockets passed to this process: socket activation by a service manager
//! (`LISTEN_PID`, `LISTEN_FDS`, `LISTEN_FDNAMES`, read as
//! sd_listen_fds_with_names(3) reads them, and unset), or the hand-over of
//! the stoa this one upgrades (which also names the sockets it bound
//! itself).

use super::socket::Listener;
use crate::error::BootError;
use std::io;
use std::sync::Arc;

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

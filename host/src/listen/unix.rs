//! A Unix-domain listener's socket file, set up without a path race: the
//! socket is bound in a fresh private directory beside its path (0700 and
//! ours, so no one can swap what is in it), given its mode there, renamed
//! into place, and checked to be the same inode afterwards. While serving,
//! the watchdog's tick notices the file unlinked or replaced (logged
//! once); at exit it is removed only while it is still ours.

use crate::error::{BootError, UnixRefusal};
use rustix::fs::{AtFlags, FileType, Mode, OFlags, RenameFlags, Stat};
use socket2::{Domain, Socket, Type};
use std::ffi::OsStr;
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

/// The private directory a socket is first bound in is named so, then the
/// process id and a counter.
pub const PRIVATE_PREFIX: &str = ".stoa-bind-";

/// The longest socket path the kernel takes (`sun_path` less its NUL).
const SUN_PATH_MAX: usize = 107;

/// A socket file this process created: its path and `(device, inode)`.
struct Created {
    path: PathBuf,
    id: (u64, u64),
    /// Its loss was logged.
    said: bool,
}

/// The Unix socket files this process created, removed at exit.
static CREATED: Mutex<Vec<Created>> = Mutex::new(Vec::new());

fn created() -> MutexGuard<'static, Vec<Created>> {
    CREATED.lock().unwrap_or_else(|p| p.into_inner())
}

fn id_of(st: &Stat) -> (u64, u64) {
    (st.st_dev, st.st_ino)
}

fn is_socket(st: &Stat) -> bool {
    FileType::from_raw_mode(st.st_mode) == FileType::Socket
}

/// Binds a non-blocking Unix-domain listener at `path` with file mode
/// `mode`. A socket file left by a server that is gone (connecting to it
/// is refused) is removed first, as gunicorn does; one a live server
/// listens on, or a path that is not a socket, is an error.
pub fn bind_unix(path: &Path, backlog: i32, mode: u32) -> Result<UnixListener, BootError> {
    let addr = format!("unix:{}", path.display());
    let fail = |why| BootError::UnixBind {
        addr: addr.clone(),
        why,
    };
    remove_stale(path, &addr)?;
    let name = path
        .file_name()
        .ok_or_else(|| fail(UnixRefusal::NoFileName))?;
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let dir = rustix::fs::open(
        parent,
        OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| {
        fail(UnixRefusal::OpenDir {
            dir: parent.to_path_buf(),
            source: e.into(),
        })
    })?;
    let private = Private::create(&dir, parent, name).map_err(fail)?;
    let inner = private.path.join(name);
    let len = inner.as_os_str().len();
    if len > SUN_PATH_MAX {
        return Err(fail(UnixRefusal::TooLong {
            most: SUN_PATH_MAX - (len - path.as_os_str().len()),
            max: SUN_PATH_MAX,
            private: private.path.clone(),
        }));
    }
    let socket = Socket::new(Domain::UNIX, Type::STREAM, None)
        .and_then(|s| {
            s.bind(&socket2::SockAddr::unix(&inner)?)?;
            Ok(s)
        })
        .map_err(|e| BootError::socket("bind", &addr, e))?;
    let id = private.socket_id().map_err(fail)?;
    rustix::fs::chmodat(
        &private.fd,
        name,
        Mode::from_raw_mode(mode),
        AtFlags::empty(),
    )
    .map_err(|e| BootError::system(format!("set mode {mode:o} on {addr}"), e.into()))?;
    move_into_place(&private.fd, &dir, name).map_err(fail)?;
    let there = rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW);
    if !there.is_ok_and(|st| is_socket(&st) && id_of(&st) == id) {
        return Err(fail(UnixRefusal::Replaced));
    }
    created().push(Created {
        path: path.to_path_buf(),
        id,
        said: false,
    });
    socket
        .listen(backlog)
        .and_then(|()| socket.set_nonblocking(true))
        .map_err(|e| BootError::socket("listen on", &addr, e))?;
    Ok(socket.into())
}

/// Removes a socket file no server listens on any more; refuses a live
/// one and a path that is not a socket (`addr` is the path as shown).
fn remove_stale(path: &Path, addr: &str) -> Result<(), BootError> {
    use std::os::unix::fs::FileTypeExt;
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return Ok(());
    };
    let refuse = |why| BootError::UnixBind {
        addr: addr.to_string(),
        why,
    };
    if !meta.file_type().is_socket() {
        return Err(refuse(UnixRefusal::NotASocket));
    }
    if std::os::unix::net::UnixStream::connect(path).is_ok() {
        return Err(refuse(UnixRefusal::InUse));
    }
    log::info!("removing the stale socket {addr}");
    std::fs::remove_file(path).map_err(|e| BootError::socket("remove the stale socket", addr, e))
}

/// Renames `name` from the private directory to the socket's own,
/// refusing to replace a file that appeared there meanwhile (where the
/// file system cannot refuse, a plain rename, which never follows a
/// symbolic link).
fn move_into_place(private: &OwnedFd, dir: &OwnedFd, name: &OsStr) -> Result<(), UnixRefusal> {
    let moved = match rustix::fs::renameat_with(private, name, dir, name, RenameFlags::NOREPLACE) {
        Err(rustix::io::Errno::EXIST) => return Err(UnixRefusal::Appeared),
        Err(rustix::io::Errno::INVAL | rustix::io::Errno::NOSYS) => {
            rustix::fs::renameat(private, name, dir, name)
        }
        other => other,
    };
    moved.map_err(|e| UnixRefusal::Move { source: e.into() })
}

/// A fresh directory of our own beside the socket's path, removed (with
/// whatever socket is left in it) when dropped.
struct Private<'a> {
    parent: &'a OwnedFd,
    name: String,
    socket: &'a OsStr,
    fd: OwnedFd,
    path: PathBuf,
}

impl<'a> Private<'a> {
    fn create(parent: &'a OwnedFd, shown: &Path, socket: &'a OsStr) -> Result<Self, UnixRefusal> {
        let stem = format!("{PRIVATE_PREFIX}{}", std::process::id());
        for n in 0..100 {
            let name = format!("{stem}-{n}");
            match rustix::fs::mkdirat(parent, name.as_str(), Mode::RWXU) {
                Ok(()) => {}
                Err(rustix::io::Errno::EXIST) => continue,
                Err(e) => {
                    return Err(UnixRefusal::MakePrivate {
                        dir: shown.to_path_buf(),
                        source: e.into(),
                    })
                }
            }
            let opened = rustix::fs::openat(
                parent,
                name.as_str(),
                OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::RDONLY | OFlags::CLOEXEC,
                Mode::empty(),
            );
            let path = shown.join(&name);
            let swapped = UnixRefusal::PrivateSwapped {
                private: path.clone(),
                dir: shown.to_path_buf(),
            };
            let private = |fd| Private {
                parent,
                name,
                socket,
                fd,
                path,
            };
            let ours = opened.map(private).and_then(|p| {
                let st = rustix::fs::fstat(&p.fd)?;
                let mine = st.st_uid == rustix::process::geteuid().as_raw();
                Ok((p, mine && st.st_mode & 0o077 == 0))
            });
            return match ours {
                Ok((p, true)) => Ok(p),
                _ => Err(swapped),
            };
        }
        Err(UnixRefusal::PrivateNamesTaken {
            dir: shown.to_path_buf(),
            stem,
        })
    }

    /// The socket just bound in the directory, which only we can write in.
    fn socket_id(&self) -> Result<(u64, u64), UnixRefusal> {
        match rustix::fs::statat(&self.fd, self.socket, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) if is_socket(&st) => Ok(id_of(&st)),
            _ => Err(UnixRefusal::PrivateMoved {
                private: self.path.clone(),
            }),
        }
    }
}

impl Drop for Private<'_> {
    fn drop(&mut self) {
        // Gone once moved into place; left after a failure.
        let _ = rustix::fs::unlinkat(&self.fd, self.socket, AtFlags::empty());
        if let Err(e) = rustix::fs::unlinkat(self.parent, self.name.as_str(), AtFlags::REMOVEDIR) {
            log::warn!("cannot remove {}: {e}", self.path.display());
        }
    }
}

/// The path a socket was meant for, from the one it was bound at (an
/// inherited socket's address names its private directory).
pub fn public_path(bound: &Path) -> PathBuf {
    let private = bound
        .parent()
        .and_then(Path::file_name)
        .and_then(OsStr::to_str)
        .is_some_and(|d| d.starts_with(PRIVATE_PREFIX));
    match (
        private,
        bound.parent().and_then(Path::parent),
        bound.file_name(),
    ) {
        (true, Some(dir), Some(name)) => dir.join(name),
        _ => bound.to_path_buf(),
    }
}

/// Logs, once each, a socket file of ours that was unlinked or replaced
/// while serving: new clients cannot reach this server there any more.
/// The watchdog calls it on its tick.
pub fn watch_unix_sockets() {
    for c in created().iter_mut().filter(|c| !c.said) {
        let shown = c.path.display();
        match rustix::fs::statat(rustix::fs::CWD, &c.path, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) if id_of(&st) == c.id => continue,
            Ok(_) => log::error!(
                "unix:{shown} was replaced by another file while serving: new clients \
                 there no longer reach this server (restart it to bind the path again)"
            ),
            Err(rustix::io::Errno::NOENT) => log::error!(
                "unix:{shown} was removed while serving: new clients cannot connect \
                 there (restart the server to bind it again)"
            ),
            Err(e) => log::warn!("cannot check unix:{shown}: {e}"),
        }
        c.said = true;
    }
}

/// The socket files this process created, `(path, device, inode)`, for
/// an image that takes them over (the supervisor re-executed in place).
pub fn created_files() -> Vec<(PathBuf, u64, u64)> {
    created()
        .iter()
        .map(|c| (c.path.clone(), c.id.0, c.id.1))
        .collect()
}

/// Takes over socket files a previous image of this process created: they
/// are watched while serving and removed at exit as if bound here.
pub fn adopt_created(files: Vec<(PathBuf, u64, u64)>) {
    created().extend(files.into_iter().map(|(path, dev, ino)| Created {
        path,
        id: (dev, ino),
        said: false,
    }));
}

/// Leaves the Unix socket files in place at exit: an upgraded process
/// serves them now.
pub fn keep_unix_sockets() {
    created().clear();
}

/// Removes the Unix socket files this process created (at exit, after a
/// failed start too), each only while it is still ours.
pub fn remove_unix_sockets() {
    let files = std::mem::take(&mut *created());
    for c in files {
        let shown = c.path.display();
        match rustix::fs::statat(rustix::fs::CWD, &c.path, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) if id_of(&st) == c.id => {
                if let Err(e) = std::fs::remove_file(&c.path) {
                    log::debug!("cannot remove unix:{shown}: {e}");
                }
            }
            Ok(_) => log::info!("unix:{shown} is another file now: left in place"),
            Err(e) => log::debug!("unix:{shown} is gone: {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn temp_dir(what: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("stoa-unix-{what}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).expect("a temp dir");
        dir
    }

    #[test]
    fn created_files_survive_a_hand_over() {
        let dir = temp_dir("handover");
        let sock = dir.join("h.sock");
        let listener = bind_unix(&sock, 16, 0o600).expect("bound");
        let files = created_files();
        let ours: Vec<_> = files.iter().filter(|f| f.0 == sock).cloned().collect();
        assert_eq!(ours.len(), 1, "{files:?}");
        // A new image starts with an empty list and takes the old one's.
        created().retain(|c| c.path != sock);
        adopt_created(ours);
        drop(listener);
        remove_unix_sockets();
        assert!(
            !sock.exists(),
            "removed at exit by the image that took it over"
        );
        std::fs::remove_dir_all(&dir).expect("clean up");
    }

    #[test]
    fn binds_with_the_mode_and_leaves_no_private_directory() {
        let dir = temp_dir("mode");
        let sock = dir.join("s.sock");
        let listener = bind_unix(&sock, 16, 0o640).expect("bound");
        let meta = std::fs::symlink_metadata(&sock).expect("the socket file");
        assert_eq!(meta.permissions().mode() & 0o777, 0o640);
        let names: Vec<_> = std::fs::read_dir(&dir)
            .expect("read the dir")
            .map(|e| e.expect("an entry").file_name())
            .collect();
        assert_eq!(names, ["s.sock"]);
        // Its address names the private directory; shown as the path.
        let addr = listener.local_addr().expect("an address");
        let bound = addr.as_pathname().expect("a path");
        assert_eq!(public_path(bound), sock);
        drop(listener);
        std::fs::remove_dir_all(&dir).expect("clean up");
    }

    #[test]
    fn a_path_too_long_with_the_private_directory_names_its_limit() {
        let dir = temp_dir("long");
        let name = "x".repeat(SUN_PATH_MAX - dir.as_os_str().len() - 1);
        let sock = dir.join(name);
        assert_eq!(sock.as_os_str().len(), SUN_PATH_MAX);
        let e = bind_unix(&sock, 16, 0o660).expect_err("too long");
        assert!(
            matches!(
                &e,
                BootError::UnixBind {
                    why: UnixRefusal::TooLong { .. },
                    ..
                }
            ),
            "{e}"
        );
        assert!(
            e.to_string().contains("the path is too long: at most "),
            "{e}"
        );
        assert!(
            std::fs::read_dir(&dir).expect("read").next().is_none(),
            "left files"
        );
        std::fs::remove_dir_all(&dir).expect("clean up");
    }

    #[test]
    fn public_path_strips_only_a_private_directory() {
        let p = |s: &str| public_path(Path::new(s));
        assert_eq!(
            p("/run/.stoa-bind-12-0/stoa.sock"),
            Path::new("/run/stoa.sock")
        );
        assert_eq!(p("/run/stoa/stoa.sock"), Path::new("/run/stoa/stoa.sock"));
        assert_eq!(p("stoa.sock"), Path::new("stoa.sock"));
    }
}

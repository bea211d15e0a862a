//! Reloads the TLS sites when one of their files changes, without a
//! signal. Every `--tls-watch-interval` each file (chains, keys, client
//! CAs) is read through its symlinks and hashed, so that all the ways a
//! certificate is renewed show as a change of content: a file rewritten
//! in place (cert-manager, an ACME client), another renamed over it, and
//! a Kubernetes Secret volume's swap of its `..data` symlink (the path
//! `dir/tls.crt` -> `..data/tls.crt` -> `..2026_12_02.../tls.crt` keeps
//! its name; only what it leads to changes). A change reloads every site
//! (`TlsSites::reload`): new handshakes use the new certificate, open
//! connections keep their sessions.
//!
//! A change that does not load is often a renewal half-written (the
//! certificate is there, its key not yet): it is tried again as soon as
//! the files change again, and if they stay so for a whole interval the
//! error is logged once, naming the file, while the certificate loaded
//! before keeps serving. Each tick also says which served certificates
//! near their end (`expiry::Warnings`), where this process is the one to
//! say it.

use super::expiry::{unix_now, Warnings};
use super::sites::{log_outcome, TlsSites};
use crate::error::BootError;
use sha2::{Digest, Sha256};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The part a process plays: what it does with what it notices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// Serves the sites: logs each reload and the expiry warnings (thread
    /// mode).
    Serves,
    /// A worker process: logs each reload; the supervisor says the expiry
    /// warnings, once for the host (and not again each time a worker is
    /// replaced).
    Worker,
    /// The supervisor: reloads its copy of the sites (so its warnings
    /// follow a renewal) without a word of it (each worker logs its own),
    /// and says the expiry warnings.
    Supervisor,
}

/// A change that did not load.
struct Failed {
    why: String,
    errors: Vec<String>,
    logged: bool,
}

/// The watch over one process's sites.
pub struct Watch {
    sites: Arc<TlsSites>,
    part: Part,
    files: Vec<PathBuf>,
    /// Each file's digest when last looked at (`None`: it could not be
    /// read then).
    seen: Vec<Option<[u8; 32]>>,
    failed: Option<Failed>,
    warnings: Warnings,
}

impl Watch {
    /// A watch over `sites`, whose files are taken as they are now.
    pub fn new(sites: Arc<TlsSites>, part: Part) -> Self {
        let mut files = sites.files();
        files.sort();
        files.dedup();
        let seen = files.iter().map(digest).collect();
        Watch {
            sites,
            part,
            files,
            seen,
            failed: None,
            warnings: Warnings::default(),
        }
    }

    /// Looks at the files once: reloads on a change, logs a change that
    /// stayed unloadable for a whole tick, and says the expiry warnings
    /// due at `now` (seconds since the Unix epoch).
    pub fn tick(&mut self, now: i64) {
        let digests: Vec<Option<[u8; 32]>> = self.files.iter().map(digest).collect();
        if digests != self.seen {
            let changed: Vec<String> = self
                .files
                .iter()
                .zip(digests.iter().zip(&self.seen))
                .filter(|(_, (now, before))| now != before)
                .map(|(file, _)| file.display().to_string())
                .collect();
            self.seen = digests;
            self.reload(format!("{} changed", changed.join(", ")));
        } else if let Some(failed) = self.failed.as_mut().filter(|f| !f.logged) {
            failed.logged = true;
            if self.part != Part::Supervisor {
                log_outcome(&failed.why, &failed.errors, &self.sites);
            }
        }
        if self.part != Part::Worker {
            self.warnings.tick(&self.sites.certificates(), now);
        }
    }

    fn reload(&mut self, why: String) {
        let errors = self.sites.reload();
        if errors.is_empty() {
            self.failed = None;
            match self.part {
                Part::Supervisor => log::debug!("{why}: read the TLS files again"),
                Part::Serves | Part::Worker => log_outcome(&why, &errors, &self.sites),
            }
            return;
        }
        log::debug!(
            "{why}: not loaded yet ({}); tried again when the files change, logged if they \
             stay so",
            errors.join("; ")
        );
        self.failed = Some(Failed {
            why,
            errors,
            logged: false,
        });
    }
}

/// The SHA-256 of the bytes `file` leads to (through its symlinks), or
/// `None` if it cannot be read now.
fn digest(file: &PathBuf) -> Option<[u8; 32]> {
    std::fs::read(file).ok().map(|b| Sha256::digest(&b).into())
}

/// Starts the thread that watches `sites` every `every`, its first look
/// at once (the expiry warnings at start).
pub fn spawn(sites: Arc<TlsSites>, part: Part, every: Duration) -> Result<(), BootError> {
    let mut watch = Watch::new(sites, part);
    std::thread::Builder::new()
        .name("stoa-tls-watch".into())
        .spawn(move || loop {
            watch.tick(unix_now());
            std::thread::sleep(every);
        })
        .map(|_| ())
        .map_err(|e| BootError::thread("the TLS files' watch", e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::listen::tls::{fixture, tickets, Resumption};
    use crate::settings::{CertPair, Site, Sites};
    use std::path::Path;

    /// Sites serving `cert` and `key` (with the flags' site).
    fn sites_of(cert: PathBuf, key: PathBuf) -> Arc<TlsSites> {
        let sites = Sites {
            default: Site {
                certs: vec![CertPair { cert, key }],
                ..Default::default()
            },
            by_addr: Vec::new(),
        };
        let resumption = Resumption::new(tickets(None));
        Arc::new(TlsSites::load(&sites, true, resumption).expect("loads"))
    }

    /// Sites serving copies of the first test certificate in `dir`.
    fn sites_in(dir: &Path) -> Arc<TlsSites> {
        std::fs::copy(fixture("cert.pem"), dir.join("cert.pem")).expect("copy");
        std::fs::copy(fixture("key.pem"), dir.join("key.pem")).expect("copy");
        sites_of(dir.join("cert.pem"), dir.join("key.pem"))
    }

    fn served(sites: &TlsSites) -> i64 {
        sites.certificates()[0].1.not_after
    }

    #[test]
    fn a_half_written_pair_waits_and_a_whole_one_loads() {
        let dir = tempfile::tempdir().expect("a directory");
        let sites = sites_in(dir.path());
        let first = served(&sites);
        let mut watch = Watch::new(sites.clone(), Part::Serves);
        watch.tick(0);
        assert!(watch.failed.is_none());
        // The new certificate without its key: not loaded, not yet logged.
        std::fs::copy(fixture("cert2.pem"), dir.path().join("cert.pem")).expect("cert2");
        watch.tick(0);
        let failed = watch.failed.as_ref().expect("a failed change");
        assert!(!failed.logged && failed.why.ends_with("cert.pem changed"));
        assert!(failed.errors[0].contains("cert.pem"), "{:?}", failed.errors);
        assert_eq!(served(&sites), first);
        // The same files a tick later: logged, once.
        watch.tick(0);
        assert!(watch.failed.as_ref().is_some_and(|f| f.logged));
        // The key comes: loaded.
        std::fs::copy(fixture("key2.pem"), dir.path().join("key.pem")).expect("key2");
        watch.tick(0);
        assert!(watch.failed.is_none());
        assert_ne!(served(&sites), first);
    }

    #[test]
    fn a_swapped_symlink_is_a_change() {
        let dir = tempfile::tempdir().expect("a directory");
        let d = dir.path();
        for (name, cert, key) in [
            ("..v1", "cert.pem", "key.pem"),
            ("..v2", "cert2.pem", "key2.pem"),
        ] {
            std::fs::create_dir(d.join(name)).expect("a version");
            std::fs::copy(fixture(cert), d.join(name).join("tls.crt")).expect("cert");
            std::fs::copy(fixture(key), d.join(name).join("tls.key")).expect("key");
        }
        std::os::unix::fs::symlink("..v1", d.join("..data")).expect("..data");
        for f in ["tls.crt", "tls.key"] {
            std::os::unix::fs::symlink(format!("..data/{f}"), d.join(f)).expect("link");
        }
        let sites = sites_of(d.join("tls.crt"), d.join("tls.key"));
        let first = served(&sites);
        let mut watch = Watch::new(sites.clone(), Part::Worker);
        // As the kubelet does: a new link, renamed over `..data`.
        std::os::unix::fs::symlink("..v2", d.join("..data_tmp")).expect("new link");
        std::fs::rename(d.join("..data_tmp"), d.join("..data")).expect("swap");
        watch.tick(0);
        assert!(watch.failed.is_none());
        assert_ne!(served(&sites), first);
    }
}

//! The TLS sites a process serves, loaded from their files, which
//! `reload` reads again (SIGHUP, a changed file): new handshakes use the
//! new configuration, sessions already made keep theirs, and a site whose
//! files do not load keeps serving what it had.

use super::config::{self, CertFacts, Resumption};
use crate::error::TlsError;
use crate::settings::{Site, Sites};
use arc_swap::ArcSwap;
use rustls::ServerConfig;
use std::net::SocketAddr;
use std::sync::Arc;

/// One site and what it serves now.
struct Live {
    /// `tls://ADDR`'s table, or the flags' (`None`).
    addr: Option<SocketAddr>,
    site: Site,
    config: ArcSwap<ServerConfig>,
    certs: ArcSwap<Vec<CertFacts>>,
}

impl Live {
    fn load(
        addr: Option<SocketAddr>,
        site: &Site,
        resumption: &Resumption,
    ) -> Result<Self, TlsError> {
        let loaded = config::load(site, resumption).map_err(|e| TlsError::Site {
            site: site_name(addr),
            source: Box::new(e),
        })?;
        Ok(Live {
            addr,
            site: site.clone(),
            config: ArcSwap::new(loaded.config),
            certs: ArcSwap::from_pointee(loaded.certs),
        })
    }
}

/// How a site is named in messages.
pub fn site_name(addr: Option<SocketAddr>) -> String {
    match addr {
        Some(a) => format!("[tls.\"{a}\"]"),
        None => "--tls-cert/--tls-key".into(),
    }
}

/// Every site of the process.
pub struct TlsSites {
    /// Each table's site, in order, then the flags' (when a TLS listener
    /// has no table).
    sites: Vec<Live>,
    spec: Sites,
    resumption: Resumption,
}

impl TlsSites {
    /// Loads the sites of `sites` that serve: the tables', and the
    /// default one if `default_used` (a TLS listener has no table). The
    /// error names the table or the flags, the file and the reason.
    pub fn load(
        sites: &Sites,
        default_used: bool,
        resumption: Resumption,
    ) -> Result<Self, TlsError> {
        let mut live = Vec::with_capacity(sites.by_addr.len() + 1);
        for (addr, site) in &sites.by_addr {
            live.push(Live::load(Some(*addr), site, &resumption)?);
        }
        if default_used {
            live.push(Live::load(None, &sites.default, &resumption)?);
        }
        Ok(TlsSites {
            sites: live,
            spec: sites.clone(),
            resumption,
        })
    }

    /// The site a TLS listener on `local` serves (an index for `config`):
    /// its table's, else the flags'; `None` when that is not loaded.
    pub fn site_of(&self, local: Option<SocketAddr>) -> Option<usize> {
        match self.spec.table_of(local) {
            Some(i) => Some(i),
            None => (self.sites.len() > self.spec.by_addr.len()).then_some(self.spec.by_addr.len()),
        }
    }

    /// The configuration new sessions of site `index` start with.
    pub fn config(&self, index: usize) -> Option<Arc<ServerConfig>> {
        self.sites.get(index).map(|l| l.config.load_full())
    }

    /// Reads every site's files again. Each site that loads serves its new
    /// configuration; each that does not keeps its old one, and its error
    /// (naming the site, the file and the reason) is returned.
    pub fn reload(&self) -> Vec<String> {
        let mut errors = Vec::new();
        for live in &self.sites {
            match config::load(&live.site, &self.resumption) {
                Ok(loaded) => {
                    live.config.store(loaded.config);
                    live.certs.store(Arc::new(loaded.certs));
                }
                Err(e) => errors.push(format!("{}: {e}", site_name(live.addr))),
            }
        }
        errors
    }

    /// Every certificate served now, with the site it belongs to.
    pub fn certificates(&self) -> Vec<(String, CertFacts)> {
        self.sites
            .iter()
            .flat_map(|l| {
                let site = site_name(l.addr);
                l.certs
                    .load()
                    .iter()
                    .map(|c| (site.clone(), c.clone()))
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// Every file the sites read (chains, keys, client CAs).
    pub fn files(&self) -> Vec<std::path::PathBuf> {
        let mut files = Vec::new();
        for l in &self.sites {
            for pair in &l.site.certs {
                files.push(pair.cert.clone());
                files.push(pair.key.clone());
            }
            files.extend(l.site.client_ca.clone());
        }
        files
    }
}

/// Reloads `sites` (`why`: `SIGHUP`, or the file that changed) and logs
/// the outcome: the certificates now served, or each site that keeps its
/// old ones, with the file and the reason.
pub fn log_reload(why: &str, sites: &TlsSites) {
    log_outcome(why, &sites.reload(), sites);
}

/// Logs a reload's outcome: `errors` (each site that keeps its old
/// certificates, with the file and the reason), or, with none, the
/// certificates now served.
pub fn log_outcome(why: &str, errors: &[String], sites: &TlsSites) {
    for e in errors {
        log::error!(
            "{why}: cannot reload the TLS certificate: {e}; the certificate loaded before \
             keeps serving"
        );
    }
    if errors.is_empty() {
        let files: Vec<String> = sites
            .certificates()
            .iter()
            .map(|(_, c)| c.path.display().to_string())
            .collect();
        log::info!(
            "{why}: reloaded the TLS certificate {} and its key: new handshakes use them",
            files.join(", ")
        );
    }
}

//! What a loop knows of each listener, by its index (a connection's `via`):
//! the server name and port apps see, the TLS site it serves, and whether
//! its requests are redirected to HTTPS. One table, built once at boot from
//! the bound sockets and shared by every loop.

use crate::listen::tls::TlsSites;
use crate::listen::Bound;
use std::net::SocketAddr;
use std::sync::Arc;

/// One listener's facts.
struct Facts {
    /// The server name and port apps see (`SERVER_NAME`, `SERVER_PORT`).
    local: (Arc<str>, u16),
    /// The TLS site it serves (its index in `TlsSites`); `None` on a plain
    /// listener.
    tls_site: Option<usize>,
    /// True on a TLS listener (even one whose site could not be told).
    tls: bool,
    /// The port its requests are redirected to (`--https-redirect`, on a
    /// plain TCP listener).
    redirect_to: Option<u16>,
}

/// Every listener's facts, by index, and the TLS sites they serve.
#[derive(Default)]
pub struct Listeners {
    facts: Vec<Facts>,
    sites: Option<Arc<TlsSites>>,
}

/// What `Listeners::new` is built from, listener by listener.
pub struct ListenerList<'a> {
    /// The server name and port apps see on each.
    pub locals: &'a [(Arc<str>, u16)],
    /// Each one's TCP address (`None` for a Unix socket).
    pub addrs: &'a [Option<SocketAddr>],
    /// Each one serves TLS.
    pub tls: &'a [bool],
}

impl Listeners {
    /// The table of `list`, each TLS listener its site by its address;
    /// with `https_redirect`, every plain TCP listener redirects to the
    /// first TLS one's port (443 if none has one).
    pub fn new(
        list: ListenerList<'_>,
        sites: Option<&Arc<TlsSites>>,
        https_redirect: bool,
    ) -> Self {
        let https_port = list
            .addrs
            .iter()
            .zip(list.tls)
            .find(|(_, tls)| **tls)
            .and_then(|(a, _)| a.map(|a| a.port()))
            .unwrap_or(443);
        let facts = list
            .locals
            .iter()
            .enumerate()
            .map(|(i, local)| {
                let addr = list.addrs.get(i).copied().flatten();
                let tls = list.tls.get(i) == Some(&true);
                let plain_tcp = addr.is_some() && !tls;
                Facts {
                    local: local.clone(),
                    tls_site: sites.filter(|_| tls).and_then(|s| s.site_of(addr)),
                    tls,
                    redirect_to: (https_redirect && plain_tcp).then_some(https_port),
                }
            })
            .collect();
        Listeners {
            facts,
            sites: sites.cloned(),
        }
    }

    /// The table of the sockets `bound` holds.
    pub fn of_bound(bound: &Bound, sites: Option<&Arc<TlsSites>>, https_redirect: bool) -> Self {
        let addrs = bound.local_addrs();
        let list = ListenerList {
            locals: &bound.locals,
            addrs: &addrs,
            tls: &bound.tls,
        };
        Listeners::new(list, sites, https_redirect)
    }

    /// A table of plain listeners with these names and ports (tests).
    #[cfg(test)]
    pub fn plain(locals: Vec<(Arc<str>, u16)>) -> Self {
        let addrs = vec![None; locals.len()];
        let tls = vec![false; locals.len()];
        let list = ListenerList {
            locals: &locals,
            addrs: &addrs,
            tls: &tls,
        };
        Listeners::new(list, None, false)
    }

    /// The server name and port apps see on listener `via`.
    pub fn local(&self, via: usize) -> (Arc<str>, u16) {
        self.facts
            .get(via)
            .map_or_else(|| ("localhost".into(), 0), |f| f.local.clone())
    }

    /// True if listener `via` serves TLS.
    pub fn serves_tls(&self, via: usize) -> bool {
        self.facts.get(via).is_some_and(|f| f.tls)
    }

    /// The port listener `via`'s requests are redirected to, if they are.
    pub fn redirect_to(&self, via: usize) -> Option<u16> {
        self.facts.get(via).and_then(|f| f.redirect_to)
    }

    /// The configuration a new TLS session on listener `via` starts with
    /// (its site's latest load); `None` on a plain listener.
    pub fn tls_config(&self, via: usize) -> Option<Arc<rustls::ServerConfig>> {
        let site = self.facts.get(via)?.tls_site?;
        self.sites.as_ref()?.config(site)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_tcp_listener_redirects_to_the_first_tls_port_only_when_asked() {
        let locals: Vec<(Arc<str>, u16)> =
            vec![("a".into(), 80), ("a".into(), 8443), ("u".into(), 0)];
        let addrs = [
            Some("127.0.0.1:80".parse().expect("addr")),
            Some("127.0.0.1:8443".parse().expect("addr")),
            None,
        ];
        let tls = [false, true, false];
        let list = || ListenerList {
            locals: &locals,
            addrs: &addrs,
            tls: &tls,
        };
        let table = Listeners::new(list(), None, true);
        assert_eq!(table.redirect_to(0), Some(8443));
        assert_eq!(
            table.redirect_to(1),
            None,
            "a TLS listener is not redirected"
        );
        assert_eq!(
            table.redirect_to(2),
            None,
            "a Unix socket is not redirected"
        );
        assert!(table.serves_tls(1) && !table.serves_tls(0));
        assert_eq!(table.local(1), ("a".into(), 8443));
        assert_eq!(table.local(9), ("localhost".into(), 0));
        let table = Listeners::new(list(), None, false);
        assert_eq!(table.redirect_to(0), None);
    }
}

//! A TLS site's rustls configuration, built from its files: each
//! certificate chain with its key (checked to be the certificate's), the
//! choice among them by the name the client asks for (SNI; the first is
//! the default), the client CAs of mutual TLS, the oldest version
//! offered, ALPN `http/1.1` alone, no 0-RTT. What the host shows of the
//! certificates (names, expiry) is read here too.

use crate::error::TlsError;
use crate::settings::{CertPair, ClientAuth, MinVersion, Site};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert, StoresServerSessions, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::{ServerConfig, SupportedProtocolVersion};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What the host knows of one served certificate.
#[derive(Clone, Debug)]
pub struct CertFacts {
    /// Its chain file.
    pub path: PathBuf,
    /// The host names it is for (its DNS subject alternative names).
    pub names: Vec<String>,
    /// Its end of validity, in seconds since the Unix epoch.
    pub not_after: i64,
}

/// A site's configuration and the facts of its certificates.
pub struct Loaded {
    pub config: Arc<ServerConfig>,
    pub certs: Vec<CertFacts>,
}

/// What resumption keeps across reloads of a process's sites: the ticket
/// keys (TLS 1.3 tickets and TLS 1.2's) and the session cache, so a
/// client resumes after a certificate rotation too.
pub struct Resumption {
    pub tickets: Arc<dyn rustls::server::ProducesTickets>,
    pub sessions: Arc<dyn StoresServerSessions>,
}

impl Resumption {
    /// Tickets sealed with `tickets`, and a session cache of this size.
    pub fn new(tickets: Arc<dyn rustls::server::ProducesTickets>) -> Self {
        Resumption {
            tickets,
            sessions: rustls::server::ServerSessionMemoryCache::new(4096),
        }
    }
}

/// The crypto provider every site uses: ring.
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Builds `site`'s configuration; the error names the file and the reason.
pub fn load(site: &Site, resumption: &Resumption) -> Result<Loaded, TlsError> {
    let provider = provider();
    if site.certs.is_empty() {
        return Err(TlsError::NoCertificate);
    }
    let mut keys = Vec::with_capacity(site.certs.len());
    let mut certs = Vec::with_capacity(site.certs.len());
    for pair in &site.certs {
        let (key, facts) = certified(pair, &provider)?;
        keys.push((facts.names.clone(), Arc::new(key)));
        certs.push(facts);
    }
    let versions: &[&SupportedProtocolVersion] = match site.min_version {
        MinVersion::Tls12 => &[&rustls::version::TLS13, &rustls::version::TLS12],
        MinVersion::Tls13 => &[&rustls::version::TLS13],
    };
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(versions)
        .map_err(|e| TlsError::Versions(e.to_string()))?;
    let builder = match &site.client_ca {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let roots = client_roots(ca)?;
            let verifier = WebPkiClientVerifier::builder_with_provider(roots, provider);
            let verifier = match site.client_auth {
                ClientAuth::Required => verifier,
                ClientAuth::Optional => verifier.allow_unauthenticated(),
            };
            let verifier = verifier.build().map_err(|e| TlsError::ClientCa {
                path: ca.clone(),
                reason: e.to_string(),
            })?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder.with_cert_resolver(Arc::new(BySni { keys }));
    config.alpn_protocols = match site.http1_only {
        true => vec![b"http/1.1".to_vec()],
        // The host's preference wins in rustls: h2 whenever offered.
        false => vec![b"h2".to_vec(), b"http/1.1".to_vec()],
    };
    config.ticketer = resumption.tickets.clone();
    config.session_storage = resumption.sessions.clone();
    config.max_early_data_size = 0;
    Ok(Loaded {
        config: Arc::new(config),
        certs,
    })
}

/// One chain and its key, checked to match, and the chain's facts.
fn certified(
    pair: &CertPair,
    provider: &CryptoProvider,
) -> Result<(CertifiedKey, CertFacts), TlsError> {
    let (cert, key) = (&pair.cert, &pair.key);
    let chain = pem_certificates(cert)?;
    let Some(leaf) = chain.first() else {
        return Err(TlsError::NoPem { path: cert.clone() });
    };
    let facts = facts(cert, leaf)?;
    let private = PrivateKeyDer::from_pem_file(key).map_err(|e| TlsError::Key {
        path: key.clone(),
        reason: e.to_string(),
    })?;
    let certified =
        CertifiedKey::from_der(chain, private, provider).map_err(|e| TlsError::KeyMismatch {
            cert: cert.clone(),
            key: key.clone(),
            reason: e.to_string(),
        })?;
    Ok((certified, facts))
}

/// The names and expiry of the certificate `leaf` of file `path`.
pub fn facts(path: &Path, leaf: &CertificateDer<'_>) -> Result<CertFacts, TlsError> {
    use x509_parser::prelude::{FromDer, GeneralName, X509Certificate};
    let (_, parsed) =
        X509Certificate::from_der(leaf.as_ref()).map_err(|e| TlsError::Certificate {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
    let names = match parsed.subject_alternative_name() {
        Ok(Some(san)) => san
            .value
            .general_names
            .iter()
            .filter_map(|n| match n {
                GeneralName::DNSName(d) => Some(d.to_ascii_lowercase()),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    Ok(CertFacts {
        path: path.to_path_buf(),
        names,
        not_after: parsed.validity().not_after.timestamp(),
    })
}

/// The CAs of `file`, for verifying client certificates.
fn client_roots(file: &Path) -> Result<Arc<rustls::RootCertStore>, TlsError> {
    let mut roots = rustls::RootCertStore::empty();
    let cas = pem_certificates(file)?;
    if cas.is_empty() {
        return Err(TlsError::NoPem {
            path: file.to_path_buf(),
        });
    }
    for ca in cas {
        roots.add(ca).map_err(|e| TlsError::ClientCa {
            path: file.to_path_buf(),
            reason: e.to_string(),
        })?;
    }
    Ok(Arc::new(roots))
}

/// The PEM certificates of `file`, in order.
fn pem_certificates(file: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    CertificateDer::pem_file_iter(file)
        .and_then(|certs| certs.collect())
        .map_err(|e| TlsError::Read {
            path: file.to_path_buf(),
            reason: e.to_string(),
        })
}

/// Chooses a site's certificate by the name the client asks for: the
/// first whose names cover it (`*.example.com` covers one label), else the
/// first.
#[derive(Debug)]
struct BySni {
    keys: Vec<(Vec<String>, Arc<CertifiedKey>)>,
}

impl ResolvesServerCert for BySni {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let chosen = hello.server_name().and_then(|asked| {
            self.keys
                .iter()
                .find(|(names, _)| names.iter().any(|n| covers(n, asked)))
        });
        chosen.or(self.keys.first()).map(|(_, key)| key.clone())
    }
}

/// True if certificate name `name` (lower case) covers host `asked`.
fn covers(name: &str, asked: &str) -> bool {
    let asked = asked.trim_end_matches('.');
    if name.eq_ignore_ascii_case(asked) {
        return true;
    }
    match (name.strip_prefix("*."), asked.split_once('.')) {
        (Some(parent), Some((label, rest))) => {
            !label.is_empty() && parent.eq_ignore_ascii_case(rest)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::covers;

    #[test]
    fn a_wildcard_covers_one_label() {
        assert!(covers("example.com", "EXAMPLE.com"));
        assert!(covers("*.example.com", "api.example.com"));
        assert!(!covers("*.example.com", "a.b.example.com"));
        assert!(!covers("*.example.com", "example.com"));
        assert!(!covers("api.example.com", "www.example.com"));
    }
}

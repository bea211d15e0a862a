//! What `stoa check` says of each TLS certificate beyond whether it loads
//! (a file that does not, or a key that is not its certificate's, is a
//! problem of `tls_config`): its names and notAfter; an expired
//! certificate in the chain file is a problem; one within
//! `WARN_WITHIN` of its end, a chain whose certificates are not each
//! signed by the next (out of order, or an intermediate missing), and a
//! key file its group or others may open are warnings, which do not fail
//! the check.

use crate::listen::tls::expiry::{rfc3339, span, Standing};
use crate::listen::tls::{facts, site_name};
use crate::settings::{CertPair, Sites};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use std::os::unix::fs::PermissionsExt;
use x509_parser::prelude::{FromDer, X509Certificate};

/// What the check says of the certificates.
#[derive(Default, Debug)]
pub struct Review {
    /// Fail the check.
    pub problems: Vec<String>,
    /// Said, and the check passes.
    pub warnings: Vec<String>,
    /// One line per certificate: site, file, names, notAfter.
    pub notes: Vec<String>,
}

/// Reviews every certificate of `sites` at `now` (seconds since the Unix
/// epoch). A file that cannot be read or parsed is left to the load's
/// problem.
pub fn review(sites: &Sites, now: i64) -> Review {
    let mut review = Review::default();
    let named = sites
        .by_addr
        .iter()
        .map(|(addr, site)| (site_name(Some(*addr)), site))
        .chain(std::iter::once((site_name(None), &sites.default)));
    for (name, site) in named {
        for pair in &site.certs {
            review.pair(&name, pair, now);
        }
    }
    review
}

impl Review {
    fn pair(&mut self, site: &str, pair: &CertPair, now: i64) {
        self.key_mode(site, pair);
        let file = pair.cert.display();
        let Ok(ders) = CertificateDer::pem_file_iter(&pair.cert)
            .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        else {
            return;
        };
        let parsed: Vec<X509Certificate<'_>> = ders
            .iter()
            .map_while(|d| X509Certificate::from_der(d.as_ref()).ok().map(|(_, c)| c))
            .collect();
        for (i, cert) in parsed.iter().enumerate() {
            let which = match i {
                0 => format!("{site}: {file}"),
                _ => format!("{site}: {file}, certificate {} ({})", i + 1, cert.subject()),
            };
            if let Some(leaf) = ders.first().filter(|_| i == 0) {
                let names = facts(&pair.cert, leaf).map(|f| f.names).unwrap_or_default();
                let names = match names.is_empty() {
                    true => "no DNS name".to_string(),
                    false => names.join(", "),
                };
                let at = rfc3339(cert.validity().not_after.timestamp());
                self.notes.push(format!("{which}: {names}; notAfter {at}"));
            }
            self.expiry(&which, cert.validity().not_after.timestamp(), now);
        }
        for (i, pair) in parsed.windows(2).enumerate() {
            self.link(site, &file.to_string(), i, &pair[0], &pair[1]);
        }
    }

    /// The key file: only its owner may open it.
    fn key_mode(&mut self, site: &str, pair: &CertPair) {
        let Ok(meta) = std::fs::metadata(&pair.key) else {
            return;
        };
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            let key = pair.key.display();
            self.warnings.push(format!(
                "{site}: the key file {key} may be opened by its group or others (mode \
                 {mode:04o}): run `chmod 600 {key}` (a Kubernetes Secret volume: \
                 defaultMode: 0400)"
            ));
        }
    }

    fn expiry(&mut self, which: &str, not_after: i64, now: i64) {
        let at = rfc3339(not_after);
        match Standing::of(not_after, now) {
            Standing::Fresh => {}
            Standing::Expiring(left) => self.warnings.push(format!(
                "{which}: expires in {}, at {at}: renew it",
                span(left)
            )),
            Standing::Expired(ago) => self.problems.push(format!(
                "{which}: expired {} ago, at {at}: clients refuse it; renew it",
                span(ago)
            )),
        }
    }

    /// Certificate `i` (from 0) of the chain file `file` must be issued,
    /// and signed, by the next one.
    fn link(
        &mut self,
        site: &str,
        file: &str,
        i: usize,
        cert: &X509Certificate<'_>,
        next: &X509Certificate<'_>,
    ) {
        let (n, m) = (i + 1, i + 2);
        if cert.issuer().as_raw() != next.subject().as_raw() {
            self.warnings.push(format!(
                "{site}: {file}: certificate {n} ({}) is issued by {}, but certificate {m} is \
                 {}: the chain is out of order or misses an intermediate (the server's \
                 certificate first, then each certificate's issuer)",
                cert.subject(),
                cert.issuer(),
                next.subject()
            ));
            return;
        }
        if let Err(e) = cert.verify_signature(Some(next.public_key())) {
            self.warnings.push(format!(
                "{site}: {file}: certificate {n} ({}) names certificate {m} as its issuer but \
                 is not signed by its key ({e})",
                cert.subject()
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::listen::tls::fixture;
    use crate::settings::Site;

    fn sites(cert: std::path::PathBuf, key: std::path::PathBuf) -> Sites {
        Sites {
            default: Site {
                certs: vec![CertPair { cert, key }],
                ..Default::default()
            },
            by_addr: Vec::new(),
        }
    }

    fn chain(dir: &std::path::Path, files: &[&str]) -> std::path::PathBuf {
        let text: String = files
            .iter()
            .map(|f| std::fs::read_to_string(fixture(f)).expect("a fixture"))
            .collect();
        let path = dir.join(files.join("+"));
        std::fs::write(&path, text).expect("the chain");
        path
    }

    #[test]
    fn chains_in_order_pass_and_others_are_warnings() {
        let dir = tempfile::tempdir().expect("a directory");
        let key = dir.path().join("key.pem");
        std::fs::copy(fixture("key.pem"), &key).expect("the key");
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        let now = crate::listen::tls::expiry::unix_now();
        let good = review(
            &sites(chain(dir.path(), &["cert.pem", "ca.pem"]), key.clone()),
            now,
        );
        assert!(
            good.warnings.is_empty() && good.problems.is_empty(),
            "{good:?}"
        );
        assert!(
            good.notes[0].contains("localhost; notAfter 2126-"),
            "{good:?}"
        );
        let reversed = review(
            &sites(chain(dir.path(), &["ca.pem", "cert.pem"]), key.clone()),
            now,
        );
        assert_eq!(reversed.warnings.len(), 1, "{reversed:?}");
        assert!(
            reversed.warnings[0].contains("out of order"),
            "{reversed:?}"
        );
        let other = review(
            &sites(
                chain(dir.path(), &["cert.pem", "ca-other.pem"]),
                key.clone(),
            ),
            now,
        );
        assert!(
            other.warnings[0].contains("misses an intermediate"),
            "{other:?}"
        );
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o640)).expect("chmod");
        let open = review(&sites(fixture("cert.pem"), key.clone()), now);
        assert!(
            open.warnings[0].contains("mode 0640") && open.warnings[0].contains("chmod 600"),
            "{open:?}"
        );
        assert!(open.problems.is_empty());
    }
}

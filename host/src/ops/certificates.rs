//! What status and metrics show of the TLS certificates this process
//! serves: for each, its site, file, names and notAfter, and the seconds
//! left until then (negative once expired). In process mode the worker
//! that answers shows its own sites, which every worker loads from the
//! same files and reloads on the same changes.

use crate::listen::tls::expiry::rfc3339;
use crate::listen::tls::TlsSites;
use crate::ops::prometheus::label;
use serde_json::{json, Value};
use std::fmt::Write;

/// Status's `tls_certificates`: one object per served certificate.
pub fn status_json(sites: Option<&TlsSites>, now: i64) -> Vec<Value> {
    let Some(sites) = sites else {
        return Vec::new();
    };
    sites
        .certificates()
        .iter()
        .map(|(site, cert)| {
            json!({
                "site": site,
                "file": cert.path.display().to_string(),
                "names": cert.names,
                "not_after": rfc3339(cert.not_after),
                "seconds_left": cert.not_after.saturating_sub(now),
            })
        })
        .collect()
}

/// `stoa_tls_certificate_expiry_seconds` (seconds until notAfter) and
/// `stoa_tls_certificate_not_after_timestamp_seconds` (notAfter as a
/// Unix time), by site and file; no series without TLS.
pub fn metrics(sites: Option<&TlsSites>, now: i64, out: &mut String) {
    let Some(sites) = sites else {
        return;
    };
    let certs = sites.certificates();
    let series = |c: &crate::listen::tls::CertFacts, site: &str| {
        format!(
            "{{site=\"{}\",file=\"{}\"}}",
            label(site),
            label(&c.path.display().to_string())
        )
    };
    let _ = writeln!(out, "# TYPE stoa_tls_certificate_expiry_seconds gauge");
    for (site, cert) in &certs {
        let left = cert.not_after.saturating_sub(now);
        let _ = writeln!(
            out,
            "stoa_tls_certificate_expiry_seconds{} {left}",
            series(cert, site)
        );
    }
    let _ = writeln!(
        out,
        "# TYPE stoa_tls_certificate_not_after_timestamp_seconds gauge"
    );
    for (site, cert) in &certs {
        let _ = writeln!(
            out,
            "stoa_tls_certificate_not_after_timestamp_seconds{} {}",
            series(cert, site),
            cert.not_after
        );
    }
}

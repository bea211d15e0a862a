//! What goes wrong when the TLS settings are turned into a serving
//! configuration: each case names the file (or the site, the flags) and
//! the reason, as an operator reads it in the log or from `stoa check`.

use std::path::PathBuf;

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

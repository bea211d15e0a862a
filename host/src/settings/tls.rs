//! What a TLS bind serves: its certificates (several, chosen by the name
//! the client asks for), whether it asks clients for certificates of
//! their own, and the oldest protocol version it speaks. The flags give
//! every `tls://` bind one such site; a `[tls."ADDR"]` table of the
//! configuration file gives the bind on ADDR its own.

use std::path::PathBuf;

/// A certificate chain and its private key (PEM files).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertPair {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// Whether a site with a client CA requires a client certificate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ClientAuth {
    /// A client without a verified certificate is refused in the handshake.
    #[default]
    Required,
    /// A client may send none; one it sends must verify. Apps see which.
    Optional,
}

impl ClientAuth {
    pub const NAMES: [&'static str; 2] = ["required", "optional"];

    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "required" => Ok(ClientAuth::Required),
            "optional" => Ok(ClientAuth::Optional),
            other => Err(format!("expected required or optional, got {other:?}")),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            ClientAuth::Required => "required",
            ClientAuth::Optional => "optional",
        }
    }
}

/// The oldest TLS version a site speaks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MinVersion {
    #[default]
    Tls12,
    Tls13,
}

impl MinVersion {
    pub const NAMES: [&'static str; 2] = ["1.2", "1.3"];

    pub fn parse(s: &str) -> Result<Self, String> {
        match s.trim_start_matches("TLSv").trim_start_matches("tls") {
            "1.2" => Ok(MinVersion::Tls12),
            "1.3" => Ok(MinVersion::Tls13),
            _ => Err(format!(
                "expected 1.2 or 1.3, got {s:?} (older versions are not offered)"
            )),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            MinVersion::Tls12 => "1.2",
            MinVersion::Tls13 => "1.3",
        }
    }
}

/// Everything one TLS bind serves.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Site {
    /// The certificates, the first the default: served to a client that
    /// names no host, or one no certificate is for.
    pub certs: Vec<CertPair>,
    /// The CAs client certificates are verified against (mutual TLS);
    /// `None`: clients are not asked for one.
    pub client_ca: Option<PathBuf>,
    pub client_auth: ClientAuth,
    pub min_version: MinVersion,
    /// ALPN offers `http/1.1` alone (`--http2 off`, or the table's
    /// `http2 = false`); else `h2` first, then `http/1.1`.
    pub http1_only: bool,
}

/// The sites of a host's TLS binds: the flags' one, for every `tls://`
/// bind without a table, and each table's, by the address it names.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sites {
    pub default: Site,
    pub by_addr: Vec<(std::net::SocketAddr, Site)>,
}

impl Sites {
    /// The table a TLS listener on `local` serves (its index in
    /// `by_addr`): the one for its address, else one for `0.0.0.0:P` or
    /// `[::]:P` of its port and family; `None`: the default site.
    pub fn table_of(&self, local: Option<std::net::SocketAddr>) -> Option<usize> {
        let local = local?;
        let find = |want: &dyn Fn(std::net::SocketAddr) -> bool| {
            self.by_addr.iter().position(|(a, _)| want(*a))
        };
        find(&|a| a == local).or_else(|| {
            find(&|a| {
                a.port() == local.port()
                    && a.ip().is_unspecified()
                    && a.is_ipv4() == local.is_ipv4()
            })
        })
    }
}

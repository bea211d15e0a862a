//! What apps see of a TLS session (app-api's `TlsSession`), read once per
//! connection after its handshake: the version, the cipher suite's IANA
//! name, the host name the client asked for and, under mutual TLS, the
//! client certificate's subject.

use abi_stable::std_types::{ROption, RString};
use rustls::ServerConnection;
use stoa_app_api::abi::TlsSession;

/// The session of `tls`, once its handshake is done.
pub fn of(tls: &ServerConnection) -> Option<TlsSession> {
    if tls.is_handshaking() {
        return None;
    }
    let version = match tls.protocol_version() {
        Some(rustls::ProtocolVersion::TLSv1_3) => "TLSv1.3",
        Some(rustls::ProtocolVersion::TLSv1_2) => "TLSv1.2",
        _ => "unknown",
    };
    let cipher = tls
        .negotiated_cipher_suite()
        .and_then(|s| s.suite().as_str())
        .map(iana_name)
        .unwrap_or_default();
    let subject = tls
        .peer_certificates()
        .and_then(|chain| chain.first())
        .map(|leaf| subject(leaf.as_ref()));
    Some(TlsSession {
        version: version.into(),
        cipher: cipher.into(),
        server_name: tls.server_name().map(RString::from).into(),
        client_verified: subject.is_some(),
        client_subject: subject
            .map(RString::from)
            .map_or(ROption::RNone, ROption::RSome),
    })
}

/// rustls names TLS 1.3 suites `TLS13_...`; IANA (and OpenSSL, so nginx)
/// `TLS_...`.
fn iana_name(name: &str) -> String {
    match name.strip_prefix("TLS13_") {
        Some(rest) => format!("TLS_{rest}"),
        None => name.to_string(),
    }
}

/// A certificate's subject as an RFC 4514 distinguished name: the
/// relative names last to first, joined by `,` (`CN=client,O=Example`),
/// with `,+"\<>;=` escaped in values.
pub fn subject(der: &[u8]) -> String {
    use x509_parser::objects::{oid2abbrev, oid_registry};
    use x509_parser::prelude::{FromDer, X509Certificate};
    let Ok((_, cert)) = X509Certificate::from_der(der) else {
        return String::new();
    };
    let rdns: Vec<String> = cert
        .subject()
        .iter_rdn()
        .map(|rdn| {
            rdn.iter()
                .map(|attr| {
                    let oid = attr.attr_type();
                    let name = oid2abbrev(oid, oid_registry())
                        .map(str::to_string)
                        .unwrap_or_else(|_| oid.to_id_string());
                    let value = attr.as_str().map(escape).unwrap_or_else(|_| "#".into());
                    format!("{name}={value}")
                })
                .collect::<Vec<_>>()
                .join("+")
        })
        .collect();
    rdns.into_iter().rev().collect::<Vec<_>>().join(",")
}

fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for (i, c) in value.chars().enumerate() {
        let edge = (i == 0 && (c == ' ' || c == '#')) || (i + 1 == value.len() && c == ' ');
        if edge || matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';' | '=') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{escape, iana_name};

    #[test]
    fn names_and_escapes() {
        assert_eq!(
            iana_name("TLS13_AES_128_GCM_SHA256"),
            "TLS_AES_128_GCM_SHA256"
        );
        assert_eq!(
            iana_name("TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"),
            "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"
        );
        assert_eq!(escape("a,b=c"), "a\\,b\\=c");
        assert_eq!(escape(" x "), "\\ x\\ ");
    }
}

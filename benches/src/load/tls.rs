//! The TLS client of `https://` targets: rustls with its ring provider
//! (the host's stack, so both ends run the same code), trusting the CA
//! certificates of a PEM file, offering ALPN `http/1.1`. Every connection
//! makes a full handshake unless resumption is asked for; then the
//! sessions the server gave (tickets or ids) are kept for the next
//! connections of the run.
//!
//! The server's chain is checked against the CA once per run: the same
//! certificate bytes for the same name again are taken as checked (as a
//! browser's verification cache does), while the handshake's signature,
//! the proof that the server holds the key, is checked on every
//! handshake. The client, on one CPU, does more public-key work per
//! handshake than the server; a second ECDSA verification per handshake
//! would only make it the limit sooner.

use super::link::{Link, Negotiated};
use mio::net::TcpStream;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{Resumption, WebPkiServerVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    ClientConfig, ClientConnection, DigitallySignedStruct, HandshakeKind, RootCertStore,
    SignatureScheme,
};
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// How `https://` targets are spoken to.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsOptions {
    /// PEM file of the CA certificates the server's chain must lead to.
    pub ca: PathBuf,
    /// Resume sessions (tickets) on new connections instead of a full
    /// handshake every time.
    pub resume: bool,
    /// Cipher suites offered, by their names (`TLS13_AES_128_GCM_SHA256`),
    /// in order of preference; empty: the provider's default list.
    pub suites: Vec<String>,
}

/// The client configuration and the server's name, made once per run.
#[derive(Debug)]
pub struct TlsClient {
    config: Arc<ClientConfig>,
    name: ServerName<'static>,
}

impl TlsClient {
    /// A client for the server named `server_name` (a DNS name or an IP
    /// address, checked against its certificate); the error names the
    /// file or the value at fault.
    pub fn new(options: &TlsOptions, server_name: &str) -> Result<TlsClient, String> {
        let ca = options.ca.display();
        let mut roots = RootCertStore::empty();
        for cert in CertificateDer::pem_file_iter(&options.ca).map_err(|e| format!("{ca}: {e}"))? {
            let cert = cert.map_err(|e| format!("{ca}: {e}"))?;
            roots.add(cert).map_err(|e| format!("{ca}: {e}"))?;
        }
        if roots.is_empty() {
            return Err(format!("{ca}: no PEM certificate in it"));
        }
        let mut provider = rustls::crypto::ring::default_provider();
        if !options.suites.is_empty() {
            provider.cipher_suites = suites(&provider.cipher_suites, &options.suites)?;
        }
        let provider = Arc::new(provider);
        let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
            .build()
            .map_err(|e| format!("{ca}: {e}"))?;
        let verifier = Arc::new(CheckedOnce {
            webpki,
            checked: Mutex::new(None),
        });
        let mut config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("--tls-suite: {e}"))?
            .dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        config.resumption = if options.resume {
            Resumption::default()
        } else {
            Resumption::disabled()
        };
        let name = ServerName::try_from(server_name.to_string())
            .map_err(|e| format!("{server_name}: not a server name for TLS: {e}"))?;
        Ok(TlsClient {
            config: Arc::new(config),
            name,
        })
    }
}

/// The CA's check of the server's chain (webpki), made again only when
/// the chain or the name differs from the last one that passed; the
/// handshake signature is checked every time.
#[derive(Debug)]
struct CheckedOnce {
    webpki: Arc<WebPkiServerVerifier>,
    /// The name and the chain's certificates (DER) that passed last.
    checked: Mutex<Option<Vec<Vec<u8>>>>,
}

impl CheckedOnce {
    fn key(
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        name: &ServerName<'_>,
    ) -> Vec<Vec<u8>> {
        let mut key = vec![name.to_str().as_bytes().to_vec(), end_entity.to_vec()];
        key.extend(intermediates.iter().map(|c| c.to_vec()));
        key
    }
}

impl ServerCertVerifier for CheckedOnce {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let key = Self::key(end_entity, intermediates, server_name);
        // A poisoned lock only loses the memo: the check is made again.
        if let Ok(checked) = self.checked.lock() {
            if checked.as_ref() == Some(&key) {
                return Ok(ServerCertVerified::assertion());
            }
        }
        let verified =
            self.webpki
                .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)?;
        if let Ok(mut checked) = self.checked.lock() {
            *checked = Some(key);
        }
        Ok(verified)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }
}

/// The suites of `offered` named in `names`, in the order of `names`.
fn suites(
    offered: &[rustls::SupportedCipherSuite],
    names: &[String],
) -> Result<Vec<rustls::SupportedCipherSuite>, String> {
    let name_of = |s: &rustls::SupportedCipherSuite| s.suite().as_str().unwrap_or("?");
    names
        .iter()
        .map(|name| {
            offered
                .iter()
                .find(|s| name_of(s).eq_ignore_ascii_case(name))
                .copied()
                .ok_or_else(|| {
                    let known: Vec<&str> = offered.iter().map(name_of).collect();
                    format!("--tls-suite {name}: not one of {}", known.join(", "))
                })
        })
        .collect()
}

/// A client session over a non-blocking socket, read and written as the
/// socket is: plaintext in, plaintext out, `WouldBlock` when the socket
/// can go no further now. What the session holds for the socket (its
/// handshake, a request written during it) goes out at every read and
/// write, so a writable edge reaching the connection in any phase sends it.
pub(crate) struct TlsLink {
    sock: TcpStream,
    tls: ClientConnection,
    reported: bool,
}

impl TlsLink {
    /// Sends what the session holds until the socket would block.
    fn send(&mut self) -> io::Result<()> {
        while self.tls.wants_write() {
            match self.tls.write_tls(&mut self.sock) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Decrypts what was read; a TLS error sends the session's alert and
    /// is an `InvalidData` error.
    fn process(&mut self) -> io::Result<()> {
        if let Err(e) = self.tls.process_new_packets() {
            let _ = self.send();
            return Err(io::Error::new(io::ErrorKind::InvalidData, e));
        }
        Ok(())
    }
}

impl Link for TlsLink {
    type Opener = TlsClient;

    fn open(addr: SocketAddr, client: &TlsClient) -> io::Result<Self> {
        let tls = ClientConnection::new(client.config.clone(), client.name.clone())
            .map_err(io::Error::other)?;
        Ok(TlsLink {
            sock: TcpStream::connect(addr)?,
            tls,
            reported: false,
        })
    }

    fn socket(&self) -> &TcpStream {
        &self.sock
    }

    fn socket_mut(&mut self) -> &mut TcpStream {
        &mut self.sock
    }

    fn take_handshake(&mut self) -> Option<Negotiated> {
        if self.reported || self.tls.is_handshaking() {
            return None;
        }
        self.reported = true;
        Some(Negotiated {
            resumed: self.tls.handshake_kind() == Some(HandshakeKind::Resumed),
            version: self.tls.protocol_version(),
            suite: self.tls.negotiated_cipher_suite().map(|s| s.suite()),
            group: self.tls.negotiated_key_exchange_group().map(|g| g.name()),
        })
    }
}

impl Read for TlsLink {
    /// Plaintext already decrypted, else records from the socket until
    /// some plaintext comes or the socket would block. At the socket's
    /// end: Ok(0) after the server's `close_notify`, `UnexpectedEof`
    /// without it.
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            self.send()?;
            match self.tls.reader().read(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                other => return other,
            }
            let eof = self.tls.read_tls(&mut self.sock)? == 0;
            self.process()?;
            if eof {
                return self.tls.reader().read(buf);
            }
        }
    }
}

impl Write for TlsLink {
    /// Takes plaintext into the session (held until the handshake is done)
    /// and sends what the socket takes now; the rest goes at the next read
    /// or write.
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.tls.writer().write(buf)?;
        self.send()?;
        if n == 0 && !buf.is_empty() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.send()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suites_are_chosen_by_name_in_the_order_given() {
        let offered = rustls::crypto::ring::default_provider().cipher_suites;
        let names = ["tls13_chacha20_poly1305_sha256", "TLS13_AES_128_GCM_SHA256"];
        let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        let got = suites(&offered, &names).unwrap();
        let got: Vec<_> = got.iter().map(|s| s.suite()).collect();
        assert_eq!(
            got,
            [
                rustls::CipherSuite::TLS13_CHACHA20_POLY1305_SHA256,
                rustls::CipherSuite::TLS13_AES_128_GCM_SHA256
            ]
        );
        let e = suites(&offered, &["RC4".to_string()]).unwrap_err();
        assert!(
            e.contains("RC4") && e.contains("TLS13_AES_256_GCM_SHA384"),
            "{e}"
        );
    }

    fn fixture(name: &str) -> CertificateDer<'static> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures/tls")
            .join(name);
        CertificateDer::from_pem_file(path).unwrap()
    }

    /// A chain that passed is not checked again, but another chain, or
    /// the same one for another name, is.
    #[test]
    fn only_the_chain_that_passed_is_taken_as_checked() {
        let mut roots = RootCertStore::empty();
        roots.add(fixture("ca.pem")).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()
            .unwrap();
        let v = CheckedOnce {
            webpki,
            checked: Mutex::new(None),
        };
        let check = |cert: &str, name: &str| {
            let name = ServerName::try_from(name.to_string()).unwrap();
            v.verify_server_cert(&fixture(cert), &[], &name, &[], UnixTime::now())
                .is_ok()
        };
        assert!(check("cert.pem", "localhost"));
        assert!(check("cert.pem", "localhost"));
        assert!(
            !check("cert2.pem", "localhost"),
            "self-signed, not the CA's"
        );
        assert!(!check("cert.pem", "example.com"), "not its name");
        assert!(check("cert.pem", "127.0.0.1"));
    }

    #[test]
    fn a_ca_file_without_certificates_is_refused_by_name() {
        let file = std::env::temp_dir().join(format!("stoa-bench-ca-{}.pem", std::process::id()));
        std::fs::write(&file, "nothing here").unwrap();
        let options = TlsOptions {
            ca: file.clone(),
            ..TlsOptions::default()
        };
        let e = TlsClient::new(&options, "localhost").unwrap_err();
        let _ = std::fs::remove_file(&file);
        assert!(e.contains(&file.display().to_string()), "{e}");
    }
}

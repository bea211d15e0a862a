//! The TLS client of `https://` targets: rustls with its ring provider
//! (the host's stack, so both ends run the same code), trusting the CA
//! certificates of a PEM file, offering ALPN `http/1.1`. Every connection
//! makes a full handshake unless resumption is asked for; then the
//! sessions the server gave (tickets or ids) are kept for the next
//! connections of the run.

use super::link::{Link, Negotiated};
use mio::net::TcpStream;
use rustls::client::Resumption;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, HandshakeKind, RootCertStore};
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

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
        let mut config = ClientConfig::builder_with_provider(Arc::new(provider))
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("--tls-suite: {e}"))?
            .with_root_certificates(roots)
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

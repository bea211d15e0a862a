//! What a load run aims at: an `http://` or `https://` URL on this
//! machine's loopback, and the request bytes sent to it, serialised once
//! before the run.
//!
//! Only loopback targets are accepted: a benchmark here must never send
//! traffic anywhere but to servers on this machine.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// A parsed, loopback-only target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// Where to connect.
    pub addr: SocketAddr,
    /// The `Host` header value (`host:port` as written in the URL).
    pub host: String,
    /// Path and query, starting with `/`.
    pub path: String,
    /// `https://`: the requests go over TLS (`load::tls`).
    pub tls: bool,
}

impl Target {
    /// Parses `http://HOST[:PORT][/PATH]` or `https://...`; HOST must be
    /// `localhost`, an address in 127.0.0.0/8 or `[::1]`.
    pub fn parse(url: &str) -> Result<Target, String> {
        let (rest, tls) = match (url.strip_prefix("http://"), url.strip_prefix("https://")) {
            (Some(rest), _) => (rest, false),
            (None, Some(rest)) => (rest, true),
            (None, None) => {
                return Err(format!(
                    "{url}: only http:// and https:// URLs are supported"
                ))
            }
        };
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let (host, port) = split_port(authority, if tls { 443 } else { 80 })?;
        let ip: IpAddr = if host.eq_ignore_ascii_case("localhost") {
            IpAddr::V4(Ipv4Addr::LOCALHOST)
        } else {
            host.trim_start_matches('[')
                .trim_end_matches(']')
                .parse()
                .map_err(|_| format!("{url}: host must be localhost or a loopback address"))?
        };
        if !ip.is_loopback() {
            return Err(format!(
                "{url}: refusing a non-loopback target; stoa-bench only loads servers on 127.0.0.1/localhost"
            ));
        }
        Ok(Target {
            addr: SocketAddr::new(ip, port),
            host: authority.to_string(),
            path: path.to_string(),
            tls,
        })
    }

    /// The host name without its port or brackets: what a TLS client
    /// names the server by (SNI and the certificate's check).
    pub fn server_name(&self) -> &str {
        match self.host.strip_prefix('[') {
            Some(rest) => rest.split(']').next().unwrap_or(rest),
            None => self.host.rsplit_once(':').map_or(&*self.host, |(h, _)| h),
        }
    }

    /// Refuses an `https://` target where only plain HTTP is spoken
    /// (`what` names the feature, for the message).
    pub fn plain_only(&self, what: &str) -> Result<(), String> {
        if self.tls {
            return Err(format!("{}: {what} speaks plain HTTP only", self.url()));
        }
        Ok(())
    }

    /// The same server with another path.
    pub fn with_path(&self, path: &str) -> Target {
        Target {
            path: path.to_string(),
            ..self.clone()
        }
    }

    /// The URL again, for reports.
    pub fn url(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}{}", self.host, self.path)
    }

    /// The request sent on every connection. Keep-alive mode speaks
    /// HTTP/1.1 (persistent by default, RFC 9112 section 9.3); the
    /// connection-per-request mode speaks HTTP/1.0 without keep-alive, as
    /// plain `ab` does, so the server closes after each answer.
    pub fn request_bytes(&self, keep_alive: bool) -> Vec<u8> {
        let version = if keep_alive { "1.1" } else { "1.0" };
        format!(
            "GET {} HTTP/{version}\r\nHost: {}\r\nUser-Agent: stoa-bench\r\nAccept: */*\r\n\r\n",
            self.path, self.host
        )
        .into_bytes()
    }
}

fn split_port(authority: &str, default: u16) -> Result<(&str, u16), String> {
    let (host, port) = if let Some(end) = authority.strip_prefix('[').and_then(|a| a.find(']')) {
        // `[::1]:8080`: the bracket closes at `end + 1`.
        let host = &authority[..end + 2];
        (host, authority[end + 2..].strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    let port = match port {
        Some(p) => p
            .parse()
            .map_err(|_| format!("bad port in {authority:?}"))?,
        None => default,
    };
    if host.is_empty() {
        return Err(format!("no host in {authority:?}"));
    }
    Ok((host, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_urls_parse() {
        let t = Target::parse("http://127.0.0.1:8000/hello/").unwrap();
        assert_eq!(t.addr, "127.0.0.1:8000".parse().unwrap());
        assert_eq!(t.host, "127.0.0.1:8000");
        assert_eq!(t.path, "/hello/");
        let t = Target::parse("http://localhost").unwrap();
        assert_eq!(t.addr.port(), 80);
        assert_eq!(t.path, "/");
        let t = Target::parse("http://[::1]:9/x?a=1").unwrap();
        assert_eq!(t.addr, "[::1]:9".parse().unwrap());
        assert_eq!(t.path, "/x?a=1");
        assert!(!t.tls);
    }

    #[test]
    fn https_urls_parse_with_their_server_name() {
        let t = Target::parse("https://localhost/a").unwrap();
        assert!(t.tls);
        assert_eq!(t.addr.port(), 443);
        assert_eq!(t.server_name(), "localhost");
        assert_eq!(t.url(), "https://localhost/a");
        let t = Target::parse("https://127.0.0.1:8443/").unwrap();
        assert_eq!(t.server_name(), "127.0.0.1");
        assert!(t.plain_only("the idle scenario").is_err());
        let t = Target::parse("https://[::1]:9/").unwrap();
        assert_eq!(t.server_name(), "::1");
        assert!(Target::parse("https://example.com/").is_err());
    }

    #[test]
    fn other_hosts_are_refused() {
        for url in [
            "http://10.0.0.1/",
            "http://example.com/",
            "http://192.168.1.2:80/",
            "ftp://127.0.0.1/",
            "http://0.0.0.0:80/",
        ] {
            assert!(Target::parse(url).is_err(), "{url}");
        }
    }

    #[test]
    fn requests_differ_by_mode() {
        let t = Target::parse("http://127.0.0.1:1/a").unwrap();
        let ka = String::from_utf8(t.request_bytes(true)).unwrap();
        let close = String::from_utf8(t.request_bytes(false)).unwrap();
        assert!(ka.starts_with("GET /a HTTP/1.1\r\nHost: 127.0.0.1:1\r\n"));
        assert!(close.starts_with("GET /a HTTP/1.0\r\n"));
        assert!(ka.ends_with("\r\n\r\n"));
    }
}

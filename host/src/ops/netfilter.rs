//! Address rules: who may read the status endpoints (`--status-allow`) and
//! whose `X-Forwarded-*` headers are believed (`--trusted-proxy`).

use ipnet::IpNet;
use std::net::IpAddr;

/// A list of networks.
#[derive(Clone, Debug, Default)]
pub struct NetList(pub Vec<IpNet>);

impl NetList {
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        self.0.iter().any(|n| n.contains(&ip))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// An IPv4-mapped IPv6 address is treated as the IPv4 address.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// `10.0.0.0/8` or a bare address (a /32 or /128).
pub fn parse_net(s: &str) -> Result<IpNet, String> {
    s.parse::<IpNet>()
        .or_else(|_| s.parse::<IpAddr>().map(IpNet::from))
        .map_err(|_| format!("expected an address or CIDR like 10.0.0.0/8, got {s:?}"))
}

/// The IP of `ip:port` (or `[v6]:port`); a Unix-socket peer counts as
/// loopback (it is on this machine).
pub fn peer_ip(peer: &str) -> Option<IpAddr> {
    if peer == crate::server::UNIX_PEER {
        return Some(IpAddr::V4(std::net::Ipv4Addr::LOCALHOST));
    }
    peer.parse::<std::net::SocketAddr>().ok().map(|a| a.ip())
}

/// The client address from an `X-Forwarded-For` chain received from a
/// trusted peer: walk right to left past trusted hops; the first untrusted
/// hop is the client. If every hop is trusted, the leftmost is.
pub fn forwarded_client(xff: &str, trusted: &NetList) -> Option<IpAddr> {
    let hops: Vec<IpAddr> = xff
        .split(',')
        .map(|h| h.trim().parse::<IpAddr>().ok())
        .collect::<Option<Vec<_>>>()?;
    hops.iter()
        .rev()
        .find(|ip| !trusted.contains(**ip))
        .or_else(|| hops.first())
        .copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(nets: &[&str]) -> NetList {
        NetList(nets.iter().map(|n| parse_net(n).unwrap()).collect())
    }

    #[test]
    fn contains_and_mapped() {
        let l = list(&["127.0.0.0/8", "::1"]);
        assert!(l.contains("127.0.0.1".parse().unwrap()));
        assert!(l.contains("::ffff:127.0.0.1".parse().unwrap()));
        assert!(l.contains("::1".parse().unwrap()));
        assert!(!l.contains("10.0.0.1".parse().unwrap()));
        assert!(parse_net("nonsense").is_err());
    }

    #[test]
    fn walks_xff_right_to_left() {
        let trusted = list(&["10.0.0.0/8"]);
        let c = forwarded_client("203.0.113.7, 198.51.100.1, 10.0.0.2", &trusted);
        assert_eq!(c, Some("198.51.100.1".parse().unwrap()));
        assert_eq!(
            forwarded_client("10.0.0.5, 10.0.0.2", &trusted),
            Some("10.0.0.5".parse().unwrap())
        );
        assert_eq!(forwarded_client("garbage", &trusted), None);
    }
}

//! Address lists: who may read the status endpoints (`--status-allow`)
//! and whose `X-Forwarded-*` headers are believed (`--trusted-proxy`).

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

    /// 127.0.0.0/8 and ::1: this machine.
    pub fn loopback() -> Self {
        let v4 = ipnet::Ipv4Net::new(std::net::Ipv4Addr::new(127, 0, 0, 0), 8).map(IpNet::V4);
        let v6 = IpNet::from(IpAddr::V6(std::net::Ipv6Addr::LOCALHOST));
        NetList(v4.into_iter().chain([v6]).collect())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contains_and_mapped() {
        let l = NetList(vec![
            parse_net("127.0.0.0/8").unwrap(),
            parse_net("::1").unwrap(),
        ]);
        assert!(l.contains("127.0.0.1".parse().unwrap()));
        assert!(l.contains("::ffff:127.0.0.1".parse().unwrap()));
        assert!(l.contains("::1".parse().unwrap()));
        assert!(!l.contains("10.0.0.1".parse().unwrap()));
        assert!(parse_net("nonsense").is_err());
    }

    #[test]
    fn loopback_is_this_machine_only() {
        let l = NetList::loopback();
        assert!(l.contains("127.0.0.53".parse().unwrap()));
        assert!(l.contains("::1".parse().unwrap()));
        assert!(!l.contains("10.0.0.1".parse().unwrap()));
        assert!(!l.contains("::2".parse().unwrap()));
    }
}

//! Address rules: who may read the status endpoints (`--status-allow`) and
//! whose `X-Forwarded-*` headers are believed (`--trusted-proxy`).

use crate::settings::NetList;
use std::net::{IpAddr, SocketAddr};

/// The IP of `ip:port` (or `[v6]:port`); a Unix-socket peer counts as
/// loopback (it is on this machine).
pub fn peer_ip(peer: &str) -> Option<IpAddr> {
    if peer == crate::listen::UNIX_PEER {
        return Some(IpAddr::V4(std::net::Ipv4Addr::LOCALHOST));
    }
    peer.parse::<std::net::SocketAddr>().ok().map(|a| a.ip())
}

/// What the `X-Forwarded-For` lines of a request from a trusted proxy say
/// of its client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Forwarded {
    /// This address (port 0 where the entry gave none).
    Client(SocketAddr),
    /// An entry that is not an address ended the walk: the client is
    /// unknown (and untrusted), never the proxy nor a trusted hop.
    Unknown,
}

/// What apps (`remote_addr`), the access log and the status allow-list
/// see for a [`Forwarded::Unknown`] client (the word RFC 7239 uses for
/// it): no address, so no allow-list admits it.
pub const UNKNOWN_CLIENT: &str = "unknown";

/// The client of a request a trusted proxy forwarded, from its
/// `X-Forwarded-For` lines in order (several lines are one list, as RFC
/// 9110 joins them). As nginx's realip module with `real_ip_recursive on`:
/// walk the entries right to left past trusted hops; the first untrusted
/// address is the client, and if every hop is trusted, the leftmost is.
/// Unlike nginx, an entry that cannot be read as an address ends the walk
/// as [`Forwarded::Unknown`]. `None` when the lines hold no entry at all.
pub fn forwarded_client<'a>(
    lines: impl DoubleEndedIterator<Item = &'a [u8]>,
    trusted: &NetList,
) -> Option<Forwarded> {
    let mut leftmost = None;
    let entries = lines
        .rev()
        .flat_map(|line| line.rsplit(|&b| b == b','))
        .map(|entry| entry.trim_ascii())
        .filter(|entry| !entry.is_empty());
    for entry in entries {
        let Some(addr) = hop_addr(entry) else {
            return Some(Forwarded::Unknown);
        };
        if !trusted.contains(addr.ip()) {
            return Some(Forwarded::Client(addr));
        }
        leftmost = Some(addr);
    }
    leftmost.map(Forwarded::Client)
}

/// One `X-Forwarded-For` entry as an address: `192.0.2.1`, `2001:db8::1`,
/// `192.0.2.1:4711`, `[2001:db8::1]:4711` or `[2001:db8::1]`.
fn hop_addr(entry: &[u8]) -> Option<SocketAddr> {
    let text = std::str::from_utf8(entry).ok()?;
    if let Ok(ip) = text.parse::<IpAddr>() {
        return Some(SocketAddr::new(ip, 0));
    }
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return Some(addr);
    }
    let v6 = text.strip_prefix('[')?.strip_suffix(']')?;
    v6.parse::<std::net::Ipv6Addr>()
        .ok()
        .map(|ip| SocketAddr::new(IpAddr::V6(ip), 0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::parse_net;

    fn list(nets: &[&str]) -> NetList {
        NetList(nets.iter().map(|n| parse_net(n).unwrap()).collect())
    }

    /// The client of these `X-Forwarded-For` lines behind a proxy on
    /// 10.0.0.0/8: its address as text, "unknown", or "-" for none.
    fn client(lines: &[&str]) -> String {
        let trusted = list(&["10.0.0.0/8"]);
        match forwarded_client(lines.iter().map(|l| l.as_bytes()), &trusted) {
            Some(Forwarded::Client(a)) => a.to_string(),
            Some(Forwarded::Unknown) => UNKNOWN_CLIENT.to_string(),
            None => "-".to_string(),
        }
    }

    #[test]
    fn walks_xff_right_to_left_past_trusted_hops() {
        assert_eq!(
            client(&["203.0.113.7, 198.51.100.1, 10.0.0.2"]),
            "198.51.100.1:0"
        );
        // Every hop trusted: the leftmost, as nginx.
        assert_eq!(client(&["10.0.0.5, 10.0.0.2"]), "10.0.0.5:0");
        // An IPv4-mapped hop is the IPv4 address, trusted or not.
        assert_eq!(client(&["198.51.100.1, ::ffff:10.0.0.9"]), "198.51.100.1:0");
        assert_eq!(client(&["2001:db8::1"]), "[2001:db8::1]:0");
    }

    #[test]
    fn several_lines_are_one_list() {
        // The last line is the nearest proxy's; an earlier one is further out.
        assert_eq!(client(&["203.0.113.5", "10.0.0.1"]), "203.0.113.5:0");
        assert_eq!(
            client(&["198.51.100.1", "203.0.113.5, 10.0.0.1"]),
            "203.0.113.5:0"
        );
        assert_eq!(client(&["10.0.0.3", "10.0.0.1"]), "10.0.0.3:0");
    }

    #[test]
    fn entries_with_ports_are_addresses() {
        assert_eq!(client(&["203.0.113.5:4711, 10.0.0.1"]), "203.0.113.5:4711");
        assert_eq!(client(&["[2001:db8::1]:443"]), "[2001:db8::1]:443");
        assert_eq!(client(&["[2001:db8::1]"]), "[2001:db8::1]:0");
        // A trusted hop with a port is still trusted.
        assert_eq!(client(&["203.0.113.5, 10.0.0.1:80"]), "203.0.113.5:0");
    }

    #[test]
    fn an_unreadable_entry_is_an_unknown_client_never_the_proxy() {
        // Left of the client: not reached, the client stands.
        assert_eq!(client(&["x, 203.0.113.5"]), "203.0.113.5:0");
        // Reached: unknown, not a trusted hop nor the proxy.
        for lines in [
            &["garbage"][..],
            &["203.0.113.5, x, 10.0.0.2"],
            &["unknown, 10.0.0.2"],
            &["10.0.0.2:99999"],
            &["fe80::1%eth0"],
            &["[10.0.0.2]"],
            &["10.0.0.0/8"],
            &["203.0.113.5", "bogus", "10.0.0.1"],
        ] {
            assert_eq!(client(lines), UNKNOWN_CLIENT, "{lines:?}");
        }
        // Bytes that are not UTF-8: unreadable where reached, and only there.
        let trusted = list(&["10.0.0.0/8"]);
        let walk = |line: &'static [u8]| forwarded_client([line].into_iter(), &trusted);
        assert_eq!(
            walk(b"203.0.113.5, \xff, 10.0.0.2"),
            Some(Forwarded::Unknown)
        );
        let client = "203.0.113.5:0".parse().ok().map(Forwarded::Client);
        assert_eq!(walk(b"\xff\xfe, 203.0.113.5"), client);
    }

    #[test]
    fn empty_entries_are_skipped_and_no_entry_is_no_client() {
        assert_eq!(client(&["203.0.113.5, , 10.0.0.1,"]), "203.0.113.5:0");
        assert_eq!(client(&[" ", ""]), "-");
        assert_eq!(client(&[]), "-");
    }
}

//! An app's own headers on the `101` that accepts a WebSocket
//! (`RawResponder::accept_websocket_with`): checked before they are
//! written, each refusal logged once with the app's name.

use crate::http::parse::Head;
use crate::http::response::{bad_name, bad_value, host_owned};
use stoa_app_api::Header;

/// Headers of the handshake the host writes itself; an app's are dropped.
const HANDSHAKE_OWNED: [&str; 2] = ["upgrade", "sec-websocket-accept"];

/// What accepting a valid handshake needs: the `Sec-WebSocket-Accept`
/// value and the subprotocols the client offered (its
/// `Sec-WebSocket-Protocol` values, joined with commas).
pub struct Accepting {
    pub accept: Box<str>,
    pub offered: Box<str>,
}

impl Accepting {
    /// The handshake of a request whose ask is valid (`accept` from
    /// `handshake::check`).
    pub fn new(accept: String, head: &Head, buf: &[u8]) -> Self {
        let offered: Vec<String> = head
            .values(buf, "sec-websocket-protocol")
            .map(|v| String::from_utf8_lossy(v).into_owned())
            .collect();
        Accepting {
            accept: accept.into(),
            offered: offered.join(",").into(),
        }
    }

    /// `headers` without those the `101` must not carry: an invalid name
    /// or value, one the host writes itself, a second subprotocol, or one
    /// the client did not offer (RFC 6455 4.1: its client would fail the
    /// connection). Each dropped header is logged, naming `app`.
    pub fn checked(&self, app: &str, headers: Vec<Header>) -> Vec<Header> {
        let mut protocol = false;
        headers
            .into_iter()
            .filter(|h| match self.refusal(h, protocol) {
                Some(why) => {
                    log::warn!(
                        "app {app}: dropping header {:?} from its WebSocket 101: {why}",
                        h.name.as_str()
                    );
                    false
                }
                None => {
                    protocol |= is_protocol(h);
                    true
                }
            })
            .collect()
    }

    /// Why `h` may not go on the `101` (`protocol`: a subprotocol is
    /// kept already), if it may not.
    fn refusal(&self, h: &Header, protocol: bool) -> Option<String> {
        let name = h.name.as_str();
        if name.is_empty() || bad_name(name.as_bytes()) {
            return Some("not a valid header name".into());
        }
        if bad_value(&h.value) {
            return Some("its value holds CR, LF or NUL".into());
        }
        let owned =
            host_owned(name) || HANDSHAKE_OWNED.iter().any(|o| name.eq_ignore_ascii_case(o));
        if owned {
            return Some("the host writes it".into());
        }
        if !is_protocol(h) {
            return None;
        }
        if protocol {
            return Some("a subprotocol is picked already".into());
        }
        let picked = String::from_utf8_lossy(&h.value);
        let picked = picked.trim();
        let offered = self.offered.split(',').map(str::trim);
        match offered.clone().any(|o| !o.is_empty() && o == picked) {
            true => None,
            false => Some(format!(
                "the client did not offer subprotocol {picked:?} (it offered {:?})",
                offered.filter(|o| !o.is_empty()).collect::<Vec<_>>()
            )),
        }
    }
}

fn is_protocol(h: &Header) -> bool {
    h.name.eq_ignore_ascii_case("sec-websocket-protocol")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accepting(offered: &str) -> Accepting {
        Accepting {
            accept: "abc=".into(),
            offered: offered.into(),
        }
    }

    fn header(name: &str, value: &[u8]) -> Header {
        Header {
            name: name.into(),
            value: value.into(),
        }
    }

    fn names(headers: &[Header]) -> Vec<(&str, &[u8])> {
        headers
            .iter()
            .map(|h| (h.name.as_str(), h.value.as_slice()))
            .collect()
    }

    #[test]
    fn an_offered_subprotocol_and_plain_headers_are_kept() {
        let kept = accepting("chat, superchat").checked(
            "app",
            vec![
                header("Sec-WebSocket-Protocol", b"superchat"),
                header("Set-Cookie", b"a=1"),
            ],
        );
        assert_eq!(
            names(&kept),
            [
                ("Sec-WebSocket-Protocol", &b"superchat"[..]),
                ("Set-Cookie", b"a=1")
            ]
        );
    }

    #[test]
    fn what_the_101_must_not_carry_is_dropped() {
        let kept = accepting("chat").checked(
            "app",
            vec![
                header("Sec-WebSocket-Protocol", b"other"),
                header("Sec-WebSocket-Protocol", b"Chat"),
                header("Upgrade", b"h2c"),
                header("connection", b"close"),
                header("Sec-WebSocket-Accept", b"forged"),
                header("Content-Length", b"3"),
                header("Transfer-Encoding", b"chunked"),
                header("X-Split", b"a\r\nInjected: yes"),
                header("Bad Name", b"v"),
                header("", b"v"),
                header("Sec-WebSocket-Protocol", b"chat"),
                header("sec-websocket-protocol", b"chat"),
            ],
        );
        // The case of a subprotocol matters; one is picked at most.
        assert_eq!(names(&kept), [("Sec-WebSocket-Protocol", &b"chat"[..])]);
    }

    #[test]
    fn with_nothing_offered_no_subprotocol_is_kept() {
        let kept = accepting("").checked("app", vec![header("Sec-WebSocket-Protocol", b"")]);
        assert!(kept.is_empty());
    }
}

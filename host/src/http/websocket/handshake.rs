//! The opening handshake of RFC 6455 §4.2: which requests ask for a
//! WebSocket, whether the ask is well formed, and the `101` that accepts it.
//! Socket-free: it looks at a parsed head and writes bytes.

use crate::http::parse::{has_token, Head};
use crate::http::response::write_header;
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use sha1::{Digest, Sha1};
use stoa_app_api::Header;

/// The GUID every accept value is hashed with (RFC 6455 §1.3).
const GUID: &[u8] = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// The only protocol version there is (RFC 6455 §4.4).
pub const VERSION: &str = "13";

/// Why a request that asks for a WebSocket is refused; each names the
/// part of the handshake at fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("a WebSocket handshake must be a GET")]
    Method,
    #[error("a WebSocket handshake needs HTTP/1.1")]
    Http10,
    #[error("a WebSocket handshake needs `Connection: Upgrade`")]
    Connection,
    #[error("a WebSocket handshake needs `Sec-WebSocket-Version: 13`")]
    Version,
    #[error("a WebSocket handshake needs one `Sec-WebSocket-Key` of 16 bytes in base64")]
    Key,
    #[error("this resource is served over WebSocket only: ask with `Upgrade: websocket`")]
    NotAsked,
}

impl Refusal {
    /// 426 (with `Sec-WebSocket-Version: 13`) for a version the host does
    /// not speak and for a plain request to a WebSocket-only resource; 400
    /// for a malformed ask.
    pub fn status(&self) -> u16 {
        match self {
            Refusal::Version | Refusal::NotAsked => 426,
            _ => 400,
        }
    }
}

/// True if the request asks for a WebSocket (`Upgrade` lists `websocket`):
/// then the host checks the rest of the handshake before any app sees it.
pub fn asks_for_websocket(head: &Head) -> bool {
    head.asks_websocket
}

/// Checks a request that asks for a WebSocket; the `Sec-WebSocket-Accept`
/// value that answers it, or why it is refused.
pub fn check(head: &Head, buf: &[u8]) -> Result<String, Refusal> {
    if &buf[head.method.clone()] != b"GET" {
        return Err(Refusal::Method);
    }
    if head.version_minor == 0 {
        return Err(Refusal::Http10);
    }
    if !head
        .values(buf, "connection")
        .any(|v| has_token(v, "upgrade"))
    {
        return Err(Refusal::Connection);
    }
    let mut versions = head.values(buf, "sec-websocket-version");
    match (versions.next(), versions.next()) {
        (Some(v), None) if v.trim_ascii() == VERSION.as_bytes() => {}
        _ => return Err(Refusal::Version),
    }
    let mut keys = head.values(buf, "sec-websocket-key");
    let key = match (keys.next(), keys.next()) {
        (Some(k), None) => k.trim_ascii(),
        _ => return Err(Refusal::Key),
    };
    match BASE64.decode(key) {
        Ok(raw) if raw.len() == 16 => Ok(accept_value(key)),
        _ => Err(Refusal::Key),
    }
}

/// `Sec-WebSocket-Accept` for a key: base64(SHA-1(key + GUID)).
pub fn accept_value(key: &[u8]) -> String {
    let mut sha = Sha1::new();
    sha.update(key);
    sha.update(GUID);
    BASE64.encode(sha.finalize())
}

/// Appends the `101 Switching Protocols` that accepts a handshake, with
/// the app's own `headers` (checked by `switch::Accepting::checked`).
pub fn write_switch(out: &mut Vec<u8>, accept: &str, date: &str, headers: &[Header]) {
    out.extend_from_slice(
        concat!(
            "HTTP/1.1 101 Switching Protocols\r\nServer: stoa/",
            env!("CARGO_PKG_VERSION"),
            "\r\nDate: "
        )
        .as_bytes(),
    );
    out.extend_from_slice(date.as_bytes());
    out.extend_from_slice(
        b"\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ",
    );
    out.extend_from_slice(accept.as_bytes());
    out.extend_from_slice(b"\r\n");
    for h in headers {
        write_header(out, h.name.as_str(), &h.value);
    }
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::parse::parse_head;
    use crate::settings::ConnParams;

    fn head(text: &str) -> (Head, Vec<u8>) {
        let buf = text.replace('\n', "\r\n").into_bytes();
        let head = parse_head(&buf, &ConnParams::default())
            .expect("parses")
            .expect("complete");
        (head, buf)
    }

    const KEY: &str = "dGhlIHNhbXBsZSBub25jZQ==";
    const GOOD: &str = "GET /chat HTTP/1.1\nHost: x\nUpgrade: websocket\nConnection: keep-alive, Upgrade\nSec-WebSocket-Version: 13\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\n\n";

    #[test]
    fn rfc_sample_key_gets_the_rfc_accept_value() {
        // RFC 6455 §1.3's worked example.
        let (h, buf) = head(GOOD);
        assert!(asks_for_websocket(&h));
        assert_eq!(
            check(&h, &buf).as_deref(),
            Ok("s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
        );
    }

    #[test]
    fn each_fault_is_named() {
        // (what is replaced, by what, the refusal, its status)
        let cases = [
            ("GET", "POST", Refusal::Method, 400),
            ("HTTP/1.1", "HTTP/1.0", Refusal::Http10, 400),
            (
                "keep-alive, Upgrade",
                "keep-alive",
                Refusal::Connection,
                400,
            ),
            ("Version: 13", "Version: 8", Refusal::Version, 426),
            ("Sec-WebSocket-Version: 13\n", "", Refusal::Version, 426),
            (KEY, "c2hvcnQ=", Refusal::Key, 400),
            (KEY, "not base64!", Refusal::Key, 400),
            (
                "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\n",
                "",
                Refusal::Key,
                400,
            ),
            (
                "\n\n",
                "\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\n\n",
                Refusal::Key,
                400,
            ),
        ];
        for (from, to, refusal, status) in cases {
            let text = GOOD.replace(from, to);
            let (h, buf) = head(&text);
            assert_eq!(check(&h, &buf), Err(refusal), "{text}");
            assert_eq!(refusal.status(), status);
        }
    }

    #[test]
    fn only_an_upgrade_to_websocket_asks() {
        let (h, _) = head("GET / HTTP/1.1\nHost: x\nUpgrade: h2c\nConnection: Upgrade\n\n");
        assert!(!asks_for_websocket(&h));
        let (h, _) = head("GET / HTTP/1.1\nHost: x\nUpgrade: foo, WebSocket\n\n");
        assert!(asks_for_websocket(&h));
    }

    #[test]
    fn switch_head_carries_the_accept_value() {
        let mut out = Vec::new();
        write_switch(&mut out, "abc=", "Mon, 30 Nov 2026 06:00:00 GMT", &[]);
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("HTTP/1.1 101 Switching Protocols\r\n"));
        assert!(text.contains("\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"));
        assert!(text.ends_with("Sec-WebSocket-Accept: abc=\r\n\r\n"));
    }

    #[test]
    fn switch_head_carries_the_apps_headers_after_its_own() {
        let mut out = Vec::new();
        let protocol = Header {
            name: "Sec-WebSocket-Protocol".into(),
            value: b"chat".as_slice().into(),
        };
        write_switch(
            &mut out,
            "abc=",
            "Mon, 30 Nov 2026 06:00:00 GMT",
            &[protocol],
        );
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.ends_with("Sec-WebSocket-Accept: abc=\r\nSec-WebSocket-Protocol: chat\r\n\r\n")
        );
    }
}

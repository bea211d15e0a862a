//! An answer's head as HTTP/2 fields: the host's `server`, `date` and
//! `content-length`, then the app's headers and constant headers under the
//! rules of HTTP/1.1's heads (`http::response`: the host's own headers and
//! malformed ones dropped), names lowercased, and the fields HTTP/2 has no
//! place for (RFC 9113 §8.2.2: `connection`, `keep-alive`,
//! `proxy-connection`, `transfer-encoding`, `upgrade`) left out.

use crate::http::response::{bad_name, bad_value, host_owned, never_has_body, Fixed, SERVER};
use stoa_app_api::Response;

/// The fields of one answer head, their bytes in one buffer.
#[derive(Default)]
pub struct Fields {
    bytes: Vec<u8>,
    spans: Vec<(usize, usize, usize)>,
}

impl Fields {
    fn push(&mut self, name: &str, value: &[u8]) {
        let start = self.bytes.len();
        self.bytes
            .extend(name.bytes().map(|b| b.to_ascii_lowercase()));
        let mid = self.bytes.len();
        self.bytes.extend_from_slice(value);
        self.spans.push((start, mid, self.bytes.len()));
    }

    fn push_app(&mut self, name: &str, value: &[u8]) {
        let dropped = host_owned(name)
            || name.is_empty()
            || bad_name(name.as_bytes())
            || bad_value(value)
            || ["upgrade", "proxy-connection"]
                .iter()
                .any(|h| name.eq_ignore_ascii_case(h));
        if !dropped {
            self.push(name, value);
        }
    }

    /// The fields, as name and value.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.spans
            .iter()
            .map(|&(a, b, c)| (&self.bytes[a..b], &self.bytes[b..c]))
    }
}

/// The head of `resp` (with `fixed`), its body `length` declared when
/// known (a streamed answer's may not be).
pub fn fields(resp: &Response, fixed: Fixed, length: Option<u64>, date: &str) -> Fields {
    let mut f = Fields::default();
    f.push("server", SERVER.as_bytes());
    f.push("date", date.as_bytes());
    if let Some(n) = length.filter(|_| !never_has_body(resp.status)) {
        f.push("content-length", itoa::Buffer::new().format(n).as_bytes());
    }
    for h in resp.headers.iter() {
        f.push_app(h.name.as_str(), &h.value);
    }
    for h in fixed {
        f.push_app(h.name.as_str(), h.value.as_str().as_bytes());
    }
    f
}

#[cfg(test)]
mod tests {
    use super::fields;
    use stoa_app_api::Response;

    #[test]
    fn names_are_lowercased_and_connection_fields_dropped() {
        let r = Response::text(200, "hi")
            .with_header("X-Thing", "1")
            .with_header("Connection", "close")
            .with_header("Transfer-Encoding", "chunked")
            .with_header("Upgrade", "websocket")
            .with_header("Bad\r\nName", "x");
        let f = fields(&r, &[], Some(2), "today");
        let got: Vec<(String, String)> = f
            .iter()
            .map(|(n, v)| {
                (
                    String::from_utf8_lossy(n).into(),
                    String::from_utf8_lossy(v).into(),
                )
            })
            .collect();
        let names: Vec<&str> = got.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "server",
                "date",
                "content-length",
                "content-type",
                "x-thing"
            ]
        );
        assert_eq!(got[2].1, "2");
    }

    #[test]
    fn a_bodiless_status_declares_no_length() {
        let f = fields(&Response::text(204, ""), &[], Some(0), "today");
        assert!(f.iter().all(|(n, _)| n != b"content-length"));
    }
}

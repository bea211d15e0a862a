//! Plain-Rust conveniences over the frozen FFI structs: the body as text
//! (or JSON with the `serde` feature), every value of a repeated header,
//! the query string as decoded pairs, and response builders. None of them
//! copies what it does not have to: the views borrow the host's buffers.

use crate::abi::{HeaderRef, Request, Response};
use abi_stable::std_types::{RSlice, RStr};
use std::borrow::Cow;

/// Whether `a` and `b` hold the same bytes, as `a == b` says, compared a
/// word at a time in line. `==` on byte slices calls libc's `memcmp`,
/// whose set-up costs more than the comparison itself for the few bytes of
/// a header name, a `Host` value or a route (measured: about 1% of a hello
/// request's server CPU for three such calls).
#[inline]
pub fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    // Whole words, the last one overlapping the one before: no loop over
    // single bytes, no call.
    fn word<const W: usize>(s: &[u8], at: usize) -> Option<[u8; W]> {
        s.get(at..at + W).and_then(|w| w.try_into().ok())
    }
    if n >= 8 {
        (0..n / 8).all(|i| word::<8>(a, i * 8) == word::<8>(b, i * 8))
            && word::<8>(a, n - 8) == word::<8>(b, n - 8)
    } else if n >= 4 {
        word::<4>(a, 0) == word::<4>(b, 0) && word::<4>(a, n - 4) == word::<4>(b, n - 4)
    } else {
        a.iter().zip(b).all(|(p, q)| p == q)
    }
}

impl<'a> HeaderRef<'a> {
    /// A header view (for tests: `Request { headers, ..Request::sample(..) }`).
    pub fn new(name: &'a str, value: &'a [u8]) -> Self {
        HeaderRef {
            name: RStr::from(name),
            value: RSlice::from_slice(value),
        }
    }
}

impl<'a> Request<'a> {
    /// The body as bytes (the same view as `request.body.as_slice()`).
    pub fn body_bytes(&self) -> &'a [u8] {
        self.body.as_slice()
    }

    /// The body as text, or the UTF-8 error if it is not text.
    pub fn body_str(&self) -> Result<&'a str, std::str::Utf8Error> {
        std::str::from_utf8(self.body.as_slice())
    }

    /// Every value of the header `name` (ASCII case-insensitive), in the
    /// order received: a header sent twice yields two values. Values are
    /// as sent (a comma-separated list stays one value).
    pub fn header_values<'n>(&self, name: &'n str) -> impl Iterator<Item = &'a [u8]> + 'n
    where
        'a: 'n,
    {
        self.headers
            .as_slice()
            .iter()
            .filter(move |h| h.name.as_str().eq_ignore_ascii_case(name))
            .map(|h| h.value.as_slice())
    }

    /// The query string's `key=value` pairs, percent-decoded (`+` is a
    /// space, as HTML forms send it; a key without `=` has an empty value;
    /// bytes that do not decode to UTF-8 become U+FFFD). Borrowed when
    /// nothing needed decoding. `query_param` gives one raw value instead.
    pub fn query_pairs(&self) -> QueryPairs<'a> {
        QueryPairs {
            rest: self.query.as_str(),
        }
    }

    /// The body parsed as JSON into `T` (which may borrow from the body).
    #[cfg(feature = "serde")]
    pub fn json<T: serde::Deserialize<'a>>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_slice(self.body.as_slice())
    }
}

/// The decoded `(key, value)` pairs of a query string (`Request::query_pairs`).
#[derive(Debug, Clone)]
pub struct QueryPairs<'a> {
    rest: &'a str,
}

impl<'a> Iterator for QueryPairs<'a> {
    type Item = (Cow<'a, str>, Cow<'a, str>);

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.rest.is_empty() {
                return None;
            }
            let (pair, rest) = self.rest.split_once('&').unwrap_or((self.rest, ""));
            self.rest = rest;
            if pair.is_empty() {
                continue;
            }
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            return Some((form_decode(key), form_decode(value)));
        }
    }
}

/// Decodes one `application/x-www-form-urlencoded` component: `+` is a
/// space, `%XX` a byte; a `%` not followed by two hex digits stays as is.
pub fn form_decode(text: &str) -> Cow<'_, str> {
    if !text.contains(['%', '+']) {
        return Cow::Borrowed(text);
    }
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => match (bytes.get(i + 1), bytes.get(i + 2)) {
                (Some(&hi), Some(&lo)) if hi.is_ascii_hexdigit() && lo.is_ascii_hexdigit() => {
                    out.push(hex(hi) << 4 | hex(lo));
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    match String::from_utf8(out) {
        Ok(s) => Cow::Owned(s),
        Err(e) => Cow::Owned(String::from_utf8_lossy(e.as_bytes()).into_owned()),
    }
}

fn hex(digit: u8) -> u8 {
    match digit {
        b'0'..=b'9' => digit - b'0',
        b'a'..=b'f' => digit - b'a' + 10,
        _ => digit - b'A' + 10,
    }
}

impl Response {
    /// The same response with another status.
    pub fn with_status(mut self, status: u16) -> Self {
        self.status = status;
        self
    }

    /// The body as text (for tests and logs), or the UTF-8 error.
    pub fn body_str(&self) -> Result<&str, std::str::Utf8Error> {
        std::str::from_utf8(self.body.as_slice())
    }

    /// Every value of the header `name` (ASCII case-insensitive).
    pub fn header_values<'s>(&'s self, name: &'s str) -> impl Iterator<Item = &'s [u8]> + 's {
        self.headers
            .iter()
            .filter(move |h| h.name.as_str().eq_ignore_ascii_case(name))
            .map(|h| h.value.as_slice())
    }

    /// A 200 `application/json` response with `value` serialised. A value
    /// that cannot be serialised (a map with non-string keys, say) gives a
    /// 500 and an error log line instead. `.with_status(201)` for another
    /// status.
    #[cfg(feature = "serde")]
    pub fn json_of<T: serde::Serialize + ?Sized>(value: &T) -> Self {
        match serde_json::to_vec(value) {
            Ok(body) => Response::json(200, &body),
            Err(e) => {
                log::error!("cannot serialise the JSON response: {e}");
                Response::text(
                    500,
                    "Internal Server Error: cannot serialise the response\n",
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_bytes_says_what_eq_says() {
        let samples: [&[u8]; 9] = [
            b"",
            b"a",
            b"Host",
            b"host",
            b"hello/",
            b"127.0.0.1:8000",
            b"127.0.0.1:8001",
            b"a-rather-longer-value-of-23",
            b"a-rather-longer-value-of-24",
        ];
        for a in samples {
            for b in samples {
                assert_eq!(same_bytes(a, b), a == b, "{a:?} {b:?}");
            }
        }
        // Leading zero bytes are not lost in the word of a remainder.
        assert!(!same_bytes(b"\0a", b"a\0"));
        assert!(!same_bytes(b"\0\0\0\0\0\0\0\0x", b"\0\0\0\0\0\0\0\0y"));
    }

    #[test]
    fn body_as_text_or_not() {
        let r = Request {
            body: RSlice::from_slice("héllo".as_bytes()),
            ..Request::sample("POST", "", "/", "")
        };
        assert_eq!(r.body_str(), Ok("héllo"));
        assert_eq!(r.body_bytes(), "héllo".as_bytes());
        let r = Request {
            body: RSlice::from_slice(b"\xff\xfe"),
            ..r
        };
        assert!(r.body_str().is_err());
    }

    #[test]
    fn header_values_yields_every_value_in_order() {
        let accept = [b"text/html" as &[u8], b"application/json, */*"];
        let h = [
            HeaderRef::new("Accept", accept[0]),
            HeaderRef::new("X-Other", b"x"),
            HeaderRef::new("accept", accept[1]),
        ];
        let r = Request {
            headers: RSlice::from_slice(&h),
            ..Request::sample("GET", "", "/", "")
        };
        let all: Vec<&[u8]> = r.header_values("ACCEPT").collect();
        assert_eq!(all, accept);
        assert_eq!(r.header_values("missing").count(), 0);
    }

    #[test]
    fn query_pairs_are_decoded() {
        let r = Request::sample(
            "GET",
            "",
            "/",
            "a=1&name=J%C3%A9r%C3%B4me+D&flag&&x=%zz%4&e=",
        );
        let pairs: Vec<(String, String)> = r
            .query_pairs()
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        let want = [
            ("a", "1"),
            ("name", "Jérôme D"),
            ("flag", ""),
            ("x", "%zz%4"),
            ("e", ""),
        ];
        let want: Vec<(String, String)> = want
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(pairs, want);
        assert!(matches!(
            r.query_pairs().next(),
            Some((Cow::Borrowed("a"), _))
        ));
        assert_eq!(Request::sample("GET", "", "/", "").query_pairs().count(), 0);
        assert_eq!(form_decode("%ff%41"), "\u{fffd}A");
        assert_eq!(form_decode("caf%C3%a9"), "café");
    }

    #[test]
    fn response_status_and_header_values() {
        let r = Response::text(200, "x")
            .with_header("Set-Cookie", "a=1")
            .with_header("set-cookie", "b=2")
            .with_status(201);
        assert_eq!(r.status, 201);
        let cookies: Vec<&[u8]> = r.header_values("SET-COOKIE").collect();
        assert_eq!(cookies, [&b"a=1"[..], &b"b=2"[..]]);
    }

    #[cfg(feature = "serde")]
    #[test]
    fn json_in_and_out() {
        #[derive(serde::Deserialize, serde::Serialize, Debug, PartialEq)]
        struct Item<'a> {
            name: &'a str,
            n: u32,
        }
        let r = Request {
            body: RSlice::from_slice(br#"{"name":"pen","n":3}"#),
            ..Request::sample("POST", "", "/", "")
        };
        let item: Item = r.json().expect("valid JSON");
        assert_eq!(item, Item { name: "pen", n: 3 });
        let bad = Request {
            body: RSlice::from_slice(b"{"),
            ..r
        };
        assert!(bad.json::<Item>().is_err());
        let answer = Response::json_of(&item).with_status(201);
        assert_eq!(answer.status, 201);
        assert_eq!(
            answer.header("content-type"),
            Some(&b"application/json"[..])
        );
        assert_eq!(answer.body.as_slice(), br#"{"name":"pen","n":3}"#);
        let mut keyed = std::collections::HashMap::new();
        keyed.insert(vec![1u8], 1);
        assert_eq!(Response::json_of(&keyed).status, 500);
    }
}

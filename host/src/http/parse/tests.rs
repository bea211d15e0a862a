use super::fields::{HOST_BYTES, NOT_HOST};
use super::*;

fn parse(s: &str) -> Result<Option<Head>, HttpError> {
    parse_head(s.as_bytes(), &ConnParams::default())
}

#[test]
fn parses_a_get_with_offsets() {
    let raw = "GET /a?b=1 HTTP/1.1\r\nHost: x\r\nX-Y: z\r\n\r\nrest";
    let head = parse(raw).unwrap().unwrap();
    assert_eq!(&raw[head.method.clone()], "GET");
    assert_eq!(&raw[head.target.clone()], "/a?b=1");
    assert_eq!(head.len, raw.len() - 4);
    assert_eq!(head.headers.len(), 2);
    assert_eq!(&raw[head.headers[1].1.clone()], "z");
    assert_eq!(
        head.values(raw.as_bytes(), "x-y").collect::<Vec<_>>(),
        [b"z"]
    );
    assert_eq!(head.values(raw.as_bytes(), "nope").next(), None);
    assert!(head.keep_alive);
    assert_eq!(head.body, BodyKind::None);
}

#[test]
fn partial_head_needs_more() {
    assert!(parse("GET / HTTP/1.1\r\nHost: x\r\n").unwrap().is_none());
}

#[test]
fn keep_alive_rules() {
    let h10 = parse("GET / HTTP/1.0\r\n\r\n").unwrap().unwrap();
    assert!(!h10.keep_alive);
    let h10ka = parse("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n")
        .unwrap()
        .unwrap();
    assert!(h10ka.keep_alive);
    let h11c = parse("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap()
        .unwrap();
    assert!(!h11c.keep_alive);
}

#[test]
fn framing_rules() {
    let cl = parse("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n")
        .unwrap()
        .unwrap();
    assert_eq!(cl.body, BodyKind::Length(5));
    let ch = parse("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
        .unwrap()
        .unwrap();
    assert_eq!(ch.body, BodyKind::Chunked);
    for bad in [
        "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: +5\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
    ] {
        assert!(matches!(parse(bad), Err(HttpError::Framing(_))), "{bad}");
    }
    assert!(matches!(
        parse("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"),
        Err(HttpError::UnsupportedCoding)
    ));
}

#[test]
fn host_rules() {
    assert!(matches!(
        parse("GET / HTTP/1.1\r\n\r\n"),
        Err(HttpError::Malformed(_))
    ));
    assert!(matches!(
        parse("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"),
        Err(HttpError::Malformed(_))
    ));
}

#[test]
fn host_byte_table_matches_the_rfc_3986_characters() {
    for b in 0..=255u8 {
        let rule = b.is_ascii_alphanumeric() || b"-._~%!$&'()*+,;=:[]".contains(&b);
        assert_eq!(HOST_BYTES[usize::from(b)] != NOT_HOST, rule, "byte {b}");
    }
    for (value, ok) in [
        (&b"[::1]:80"[..], true),
        (b"[::1", false),
        (b"[[::1]]", false),
        (b" a.b ", true),
        (b"a]", true),
        (b"", true),
    ] {
        assert_eq!(valid_host(value), ok, "{value:?}");
    }
}

#[test]
fn host_values_and_http_1_0_rules() {
    assert!(parse("GET / HTTP/1.1\r\nHost: [::1]:8000\r\n\r\n")
        .unwrap()
        .is_some());
    assert!(parse("GET / HTTP/1.1\r\nHost: \r\n\r\n").unwrap().is_some());
    assert!(parse("GET / HTTP/1.1\r\nHost: a b\r\n\r\n").is_err());
    assert!(parse("GET / HTTP/1.1\r\nHost: evil/x\r\n\r\n").is_err());
    assert!(parse("GET / HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n").is_err());
    assert!(matches!(
        parse("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"),
        Err(HttpError::Framing(_))
    ));
}

#[test]
fn transfer_encoding_is_one_list_across_lines() {
    let te = |lines: &str| parse(&format!("POST / HTTP/1.1\r\nHost: x\r\n{lines}\r\n"));
    assert!(matches!(
        te("Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n"),
        Err(HttpError::UnsupportedCoding)
    ));
    assert_eq!(
        te("Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n").err(),
        Some(HttpError::Framing("chunked applied more than once"))
    );
    assert_eq!(
        te("Transfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n").err(),
        Some(HttpError::Framing(
            "Transfer-Encoding does not end in chunked"
        ))
    );
    assert_eq!(
        te("Transfer-Encoding: chunked\r\n").unwrap().unwrap().body,
        BodyKind::Chunked
    );
}

#[test]
fn repeated_content_length_is_400_even_when_equal() {
    for cl in [
        "Content-Length: 5\r\nContent-Length: 5",
        "Content-Length: 5, 5",
    ] {
        let r = parse(&format!("POST / HTTP/1.1\r\nHost: x\r\n{cl}\r\n\r\n"));
        assert!(matches!(r, Err(HttpError::Framing(_))), "{cl}: {r:?}");
    }
}

#[test]
fn later_http_1_minors_are_served_as_1_1() {
    let raw = "GET /a HTTP/1.2\r\nHost: x\r\nX: y\r\n\r\n";
    let head = parse(raw).unwrap().unwrap();
    assert_eq!(head.version_minor, 1);
    assert!(head.keep_alive);
    assert_eq!(&raw[head.target.clone()], "/a");
    assert_eq!(head.values(raw.as_bytes(), "x").next(), Some(&b"y"[..]));
    assert_eq!(
        parse("GET / HTTP/2.0\r\n\r\n").err(),
        Some(HttpError::VersionNotSupported)
    );
    assert!(matches!(
        parse("GET / HTTP/1.x\r\n\r\n"),
        Err(HttpError::Malformed(_))
    ));
}

#[test]
fn absolute_form_authority_is_the_host() {
    let raw = "GET http://a.example:81/x?q HTTP/1.1\r\nHost: b\r\n\r\n";
    let head = parse(raw).unwrap().unwrap();
    let hosts: Vec<_> = head.values(raw.as_bytes(), "host").collect();
    assert_eq!(hosts, [b"a.example:81"]);
    assert!(parse("GET http:///x HTTP/1.1\r\nHost: b\r\n\r\n").is_err());
    assert!(parse("GET http://u@h/x HTTP/1.1\r\nHost: b\r\n\r\n").is_err());
}

#[test]
fn a_long_target_is_414_even_past_the_head_limit() {
    let p = ConnParams {
        max_head: 16 * 1024,
        ..ConnParams::default()
    };
    let long = format!(
        "GET /{} HTTP/1.1\r\nHost: x\r\n\r\n",
        "a".repeat(100 * 1024)
    );
    assert_eq!(
        parse_head(long.as_bytes(), &p).err(),
        Some(HttpError::UriTooLong)
    );
    let cut = &long.as_bytes()[..long.len() - 2];
    assert_eq!(parse_head(cut, &p).err(), Some(HttpError::UriTooLong));
}

#[test]
fn garbage_is_malformed() {
    assert!(parse("\x01\x02 nonsense\r\n\r\n").is_err());
    assert!(parse("GET nothing HTTP/1.1\r\nHost: x\r\n\r\n").is_err());
}

#[test]
fn limits() {
    let long = format!("GET /{} HTTP/1.1\r\n", "a".repeat(9000));
    assert!(matches!(parse(&long[..8500]), Err(HttpError::UriTooLong)));
    // A body's length is not refused here: its limit depends on its route
    // (whole or streamed), which the reader knows.
    let r = parse_head(
        b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\n",
        &ConnParams::default(),
    );
    assert!(matches!(r, Ok(Some(h)) if h.body == BodyKind::Length(11)));
}

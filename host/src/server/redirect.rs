//! `--https-redirect`: every request on a plain TCP bind is answered
//! `308 Permanent Redirect` to the same host and target over HTTPS, on
//! the first TLS bind's port (left out when it is 443), as nginx's
//! `return 308 https://$host$request_uri` does. 308 keeps the method and
//! the body, so a POST is redirected as a POST.

use crate::server::request::HeadText;
use stoa_app_api::Response;

/// The redirect for the request in `parts`; `fallback` names the host
/// when the request has no usable `Host` (HTTP/1.0): the listener's
/// address.
pub fn answer(parts: &HeadText<'_>, https_port: u16, fallback: &str) -> Response {
    let host = parts
        .head
        .values(parts.buf, "host")
        .next()
        .and_then(|v| std::str::from_utf8(v).ok())
        .and_then(host_part)
        .unwrap_or(fallback);
    let host = match host.contains(':') && !host.starts_with('[') {
        true => format!("[{host}]"),
        false => host.to_string(),
    };
    let port = match https_port {
        443 => String::new(),
        p => format!(":{p}"),
    };
    let target = match parts.query.is_empty() {
        true => parts.path.to_string(),
        false => format!("{}?{}", parts.path, parts.query),
    };
    let location = format!("https://{host}{port}{target}");
    Response::text(308, &format!("Redirecting to {location}\n")).with_header("Location", location)
}

/// The host of a `Host` value without its port, if it is a name or an
/// address (letters, digits, `-`, `.`, `:` in brackets): anything else is
/// not echoed into a `Location`.
fn host_part(value: &str) -> Option<&str> {
    let value = value.trim();
    let host = match value.strip_prefix('[') {
        Some(rest) => {
            return rest.split_once(']').map(|(v6, _)| v6).filter(|v6| {
                !v6.is_empty()
                    && v6
                        .chars()
                        .all(|c| c.is_ascii_hexdigit() || c == ':' || c == '.')
            })
        }
        None => value.split(':').next().unwrap_or(""),
    };
    let fine = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '.';
    (!host.is_empty() && host.chars().all(fine)).then_some(host)
}

#[cfg(test)]
mod tests {
    use super::host_part;

    #[test]
    fn only_names_and_addresses_are_echoed() {
        assert_eq!(host_part("example.com:8080"), Some("example.com"));
        assert_eq!(host_part("[::1]:80"), Some("::1"));
        assert_eq!(host_part("evil.com/x"), None);
        assert_eq!(host_part("a b"), None);
        assert_eq!(host_part(""), None);
    }
}

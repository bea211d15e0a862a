//! The middleware chain: host validation against `ALLOWED_HOSTS`, the
//! security headers on every response, and `APPEND_SLASH` redirects. Each
//! middleware gets the request and a `next` that runs the rest of the chain
//! and the view; settings::MIDDLEWARE names them, outermost first.

use crate::{settings, views, Site};
use stoa_app_api::log::warn;
use stoa_app_api::{Request, Response};

/// Runs the rest of the chain (and finally the view).
pub type Next<'n> = &'n dyn Fn() -> Response;

/// One middleware: may answer by itself or call `next` and amend its answer.
pub type Middleware = fn(&Site, &Request<'_>, Next<'_>) -> Response;

/// The middleware a settings name refers to.
pub fn by_name(name: &str) -> Option<Middleware> {
    match name {
        "hello_project.middleware.SecurityMiddleware" => Some(security),
        "hello_project.middleware.AllowedHostsMiddleware" => Some(allowed_hosts),
        "hello_project.middleware.CommonMiddleware" => Some(common),
        _ => None,
    }
}

/// Resolves the configured names; an unknown one is a configuration error.
pub fn load(names: &[&str]) -> Result<Vec<Middleware>, String> {
    names
        .iter()
        .map(|name| by_name(name).ok_or_else(|| format!("unknown middleware {name:?}")))
        .collect()
}

/// Runs `chain` around `view`, the first middleware outermost.
pub fn run(chain: &[Middleware], site: &Site, request: &Request<'_>, view: Next<'_>) -> Response {
    match chain.split_first() {
        Some((first, rest)) => first(site, request, &|| run(rest, site, request, view)),
        None => view(),
    }
}

/// The headers `security` adds, in order, each with whether it is on.
const SECURITY_HEADERS: [(&str, &str, bool); 3] = [
    (
        "X-Content-Type-Options",
        "nosniff",
        settings::SECURE_CONTENT_TYPE_NOSNIFF,
    ),
    ("X-Frame-Options", settings::X_FRAME_OPTIONS, true),
    ("Referrer-Policy", settings::SECURE_REFERRER_POLICY, true),
];

/// Adds the security headers to whatever the inner layers answered,
/// leaving any the view already set.
pub fn security(_site: &Site, _request: &Request<'_>, next: Next<'_>) -> Response {
    let mut response = next();
    // One pass over the view's headers marks those it set itself.
    let mut wanted = SECURITY_HEADERS.map(|(_, _, on)| on);
    for header in response.headers.iter() {
        let name = header.name.as_str();
        for (want, (security, _, _)) in wanted.iter_mut().zip(SECURITY_HEADERS) {
            *want &= !name.eq_ignore_ascii_case(security);
        }
    }
    response.headers.reserve(SECURITY_HEADERS.len());
    for (want, (name, value, _)) in wanted.into_iter().zip(SECURITY_HEADERS) {
        if want {
            response = response.with_header(name, value);
        }
    }
    response
}

/// Answers 400 unless the `Host` header names one of the site's allowed
/// hosts (`ALLOWED_HOSTS` or the `allowed_hosts` setting). A missing or
/// malformed `Host` is rejected too.
pub fn allowed_hosts(site: &Site, request: &Request<'_>, next: Next<'_>) -> Response {
    let host = request.header("Host");
    let domain = host
        .and_then(|h| std::str::from_utf8(h).ok())
        .and_then(domain_of);
    match domain {
        Some(domain) if is_allowed(domain, &site.allowed_hosts) => next(),
        _ => {
            let shown = host.map(String::from_utf8_lossy);
            warn!("Invalid Host header: {shown:?}; it may need adding to ALLOWED_HOSTS");
            views::bad_request()
        }
    }
}

/// Redirects (301) a path that matches no route to the same path with a
/// slash appended, when that one matches, keeping the query string.
pub fn common(site: &Site, request: &Request<'_>, next: Next<'_>) -> Response {
    if settings::APPEND_SLASH && should_redirect_with_slash(site, request) {
        let mut location =
            escape_leading_slashes(format!("{}{}/", request.script_name, request.path_info));
        if !request.query.is_empty() {
            location.push('?');
            location.push_str(&request.query);
        }
        return Response::new(301)
            .with_header("Content-Type", "text/html; charset=utf-8")
            .with_header("Location", location);
    }
    next()
}

fn should_redirect_with_slash(site: &Site, request: &Request<'_>) -> bool {
    let path = request.path_info.as_str();
    !path.ends_with('/')
        && site.urls.resolve(path).is_none()
        && site.urls.resolve(&format!("{path}/")).is_some()
}

/// A path starting with `//` would read as a scheme-relative URL (another
/// host) in `Location`; the second slash is percent-encoded.
fn escape_leading_slashes(path: String) -> String {
    match path.strip_prefix("//") {
        Some(rest) => format!("/%2F{rest}"),
        None => path,
    }
}

/// The domain part of a `Host` value, lower-cased, without port or trailing
/// dot; `None` if the value is not `name[:port]` or `[ipv6][:port]`.
pub fn host_domain(host: &str) -> Option<String> {
    domain_of(host).map(str::to_ascii_lowercase)
}

/// `host_domain` as a part of `host`, in the case it was sent (nothing is
/// allocated per request; `is_allowed` ignores ASCII case).
fn domain_of(host: &str) -> Option<&str> {
    let split = if host.starts_with('[') {
        host.find(']').map(|i| i + 1)
    } else {
        host.rfind(':')
    };
    let (domain, port) = host.split_at(split.unwrap_or(host.len()));
    let port_ok = port.is_empty()
        || port
            .strip_prefix(':')
            .is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    let domain_ok = match domain.strip_prefix('[').and_then(|d| d.strip_suffix(']')) {
        Some(ip) => {
            ip.contains(':')
                && ip
                    .bytes()
                    .all(|b| b.is_ascii_hexdigit() || b == b':' || b == b'.')
        }
        None => {
            !domain.is_empty()
                && domain
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-')
        }
    };
    (port_ok && domain_ok).then(|| domain.strip_suffix('.').unwrap_or(domain))
}

/// Whether `domain` matches a pattern, ignoring ASCII case: exactly, `*`
/// for any, or `.example.com` for example.com and its subdomains.
pub fn is_allowed(domain: &str, patterns: &[impl AsRef<str>]) -> bool {
    let ends_with = |suffix: &str| {
        domain.len() >= suffix.len()
            && domain.as_bytes()[domain.len() - suffix.len()..]
                .eq_ignore_ascii_case(suffix.as_bytes())
    };
    patterns.iter().any(|pattern| {
        let pattern = pattern.as_ref();
        pattern == "*"
            || pattern.eq_ignore_ascii_case(domain)
            || (pattern.starts_with('.')
                && (ends_with(pattern) || pattern[1..].eq_ignore_ascii_case(domain)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_domain_strips_port_and_trailing_dot() {
        assert_eq!(host_domain("localhost").as_deref(), Some("localhost"));
        assert_eq!(host_domain("LocalHost:8000").as_deref(), Some("localhost"));
        assert_eq!(host_domain("127.0.0.1:80").as_deref(), Some("127.0.0.1"));
        assert_eq!(host_domain("example.com.").as_deref(), Some("example.com"));
        assert_eq!(host_domain("[::1]").as_deref(), Some("[::1]"));
        assert_eq!(host_domain("[::1]:8000").as_deref(), Some("[::1]"));
        assert_eq!(
            host_domain("[2001:DB8::1]:443").as_deref(),
            Some("[2001:db8::1]")
        );
    }

    #[test]
    fn host_domain_rejects_malformed_values() {
        for bad in [
            "",
            ":8000",
            "localhost:",
            "localhost:80x",
            "a b",
            "a:b:c",
            "[::1",
            "[::1]x",
            "[]",
            "[g::1]",
            "évil",
        ] {
            assert_eq!(host_domain(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn allowed_hosts_patterns() {
        let patterns = [".example.com", "localhost"];
        assert!(is_allowed("localhost", &patterns));
        assert!(is_allowed("example.com", &patterns));
        assert!(is_allowed("www.example.com", &patterns));
        assert!(!is_allowed("badexample.com", &patterns));
        assert!(!is_allowed("localhost.evil", &patterns));
        assert!(is_allowed("anything", &["*"]));
        // Case does not matter on either side.
        assert!(is_allowed("WWW.Example.COM", &[".EXAMPLE.com"]));
        assert!(is_allowed("LocalHost", &patterns));
        assert!(!is_allowed("BadExample.com", &patterns));
        assert!(is_allowed("[::1]", settings::ALLOWED_HOSTS));
    }

    #[test]
    fn leading_double_slash_is_escaped() {
        assert_eq!(
            escape_leading_slashes("//evil.com/".into()),
            "/%2Fevil.com/"
        );
        assert_eq!(escape_leading_slashes("/hello/".into()), "/hello/");
    }

    #[test]
    fn configured_middleware_all_load_and_unknown_names_fail() {
        assert_eq!(
            load(settings::MIDDLEWARE).map(|m| m.len()),
            Ok(settings::MIDDLEWARE.len())
        );
        assert!(load(&["no.such.Middleware"]).is_err());
    }
}

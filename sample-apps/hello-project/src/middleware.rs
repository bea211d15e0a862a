//! The middleware chain: host validation against `ALLOWED_HOSTS`, the
//! security headers on every response, and `APPEND_SLASH` redirects. Each
//! middleware gets the request and a `next` that runs the rest of the chain
//! and the view; settings::MIDDLEWARE names them, outermost first.

use crate::{settings, views, Site};
use stoa_app_api::log::warn;
use stoa_app_api::{Answer, Request, Response, StaticHeader};

/// Runs the rest of the chain (and finally the view).
pub type Next<'n> = &'n dyn Fn() -> Answer;

/// One middleware: may answer by itself or call `next` and amend its
/// answer (a response plus constant headers, see `security`).
pub type Middleware = fn(&Site, &Request<'_>, Next<'_>) -> Answer;

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
pub fn run(chain: &[Middleware], site: &Site, request: &Request<'_>, view: Next<'_>) -> Answer {
    match chain.split_first() {
        Some((first, rest)) => first(site, request, &|| run(rest, site, request, view)),
        None => view(),
    }
}

const NOSNIFF: StaticHeader = StaticHeader::new("X-Content-Type-Options", "nosniff");
const FRAME: StaticHeader = StaticHeader::new("X-Frame-Options", settings::X_FRAME_OPTIONS);
const REFERRER: StaticHeader =
    StaticHeader::new("Referrer-Policy", settings::SECURE_REFERRER_POLICY);

/// The headers `security` adds, in order: constants, so they cost no
/// allocation per response.
const SECURITY_HEADERS: &[StaticHeader] = if settings::SECURE_CONTENT_TYPE_NOSNIFF {
    &[NOSNIFF, FRAME, REFERRER]
} else {
    &[FRAME, REFERRER]
};

/// Adds the security headers to whatever the inner layers answered,
/// leaving any the view already set.
pub fn security(_site: &Site, _request: &Request<'_>, next: Next<'_>) -> Answer {
    let mut answer = next();
    let is_security = |name: &str| {
        SECURITY_HEADERS
            .iter()
            .any(|h| h.name.as_str().eq_ignore_ascii_case(name))
    };
    let view_set_one = !answer.fixed.is_empty()
        || answer
            .response
            .headers
            .iter()
            .any(|h| is_security(h.name.as_str()));
    if !view_set_one {
        // The usual case: the constant list as it is.
        return answer.with_fixed(SECURITY_HEADERS);
    }
    let set_by_view = |answer: &Answer, h: &StaticHeader| answer.header(h.name.as_str()).is_some();
    for h in SECURITY_HEADERS {
        if !set_by_view(&answer, h) {
            answer.response = answer
                .response
                .with_header(h.name.as_str(), h.value.as_str());
        }
    }
    answer
}

/// Answers 400 unless the `Host` header names one of the site's allowed
/// hosts (`ALLOWED_HOSTS` or the `allowed_hosts` setting). A missing or
/// malformed `Host` is rejected too.
pub fn allowed_hosts(site: &Site, request: &Request<'_>, next: Next<'_>) -> Answer {
    let host = request.header("Host");
    let seen = site.accepted_host.get();
    if host.is_some_and(|h| seen.is_some_and(|seen| **seen == *h)) {
        return next();
    }
    match host.and_then(domain_of) {
        Some(domain) if allowed(domain, &site.allowed_hosts) => {
            if let Some(host) = host.filter(|_| seen.is_none()) {
                let _ = site.accepted_host.set(host.into());
            }
            next()
        }
        _ => {
            let shown = host.map(String::from_utf8_lossy);
            warn!("Invalid Host header: {shown:?}; it may need adding to ALLOWED_HOSTS");
            views::bad_request().into()
        }
    }
}

/// Redirects (301) a path that matches no route to the same path with a
/// slash appended, when that one matches, keeping the query string.
pub fn common(site: &Site, request: &Request<'_>, next: Next<'_>) -> Answer {
    if settings::APPEND_SLASH && should_redirect_with_slash(site, request) {
        let mut location =
            escape_leading_slashes(format!("{}{}/", request.script_name, request.path_info));
        if !request.query.is_empty() {
            location.push('?');
            location.push_str(&request.query);
        }
        return Response::new(301)
            .with_header("Content-Type", "text/html; charset=utf-8")
            .with_header("Location", location)
            .into();
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
    domain_of(host.as_bytes())
        .and_then(|d| std::str::from_utf8(d).ok())
        .map(str::to_ascii_lowercase)
}

/// `host_domain` as a part of `host`, in the case it was sent: one pass
/// over the bytes, nothing allocated (`allowed` ignores ASCII case).
fn domain_of(host: &[u8]) -> Option<&[u8]> {
    // The port: the digits after the last byte that is not a digit, when
    // that byte is a ':'.
    let domain = match host.iter().rposition(|b| !b.is_ascii_digit()) {
        Some(colon) if host[colon] == b':' => {
            if colon + 1 == host.len() {
                return None;
            }
            &host[..colon]
        }
        _ => host,
    };
    let valid = match domain {
        [b'[', ip @ .., b']'] => {
            ip.contains(&b':')
                && ip
                    .iter()
                    .all(|&b| b.is_ascii_hexdigit() || b == b':' || b == b'.')
        }
        _ => {
            !domain.is_empty()
                && domain
                    .iter()
                    .all(|&b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-')
        }
    };
    valid.then(|| domain.strip_suffix(b".").unwrap_or(domain))
}

/// Whether `domain` matches a pattern, ignoring ASCII case: exactly, `*`
/// for any, or `.example.com` for example.com and its subdomains.
pub fn is_allowed(domain: &str, patterns: &[impl AsRef<str>]) -> bool {
    allowed(domain.as_bytes(), patterns)
}

fn allowed(domain: &[u8], patterns: &[impl AsRef<str>]) -> bool {
    patterns
        .iter()
        .any(|pattern| match pattern.as_ref().as_bytes() {
            b"*" => true,
            suffix @ [b'.', parent @ ..] => {
                domain.eq_ignore_ascii_case(parent)
                    || (domain.len() >= suffix.len()
                        && domain[domain.len() - suffix.len()..].eq_ignore_ascii_case(suffix))
            }
            exact => domain.eq_ignore_ascii_case(exact),
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

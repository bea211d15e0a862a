//! The middleware chain: host validation against `ALLOWED_HOSTS`, the
//! security headers on every response, and `APPEND_SLASH` redirects. Each
//! middleware has Django's two hooks: `process_request`, which may answer
//! by itself, and `process_response`, which amends the answer on its way
//! out. settings::MIDDLEWARE names them, outermost first.

use crate::{settings, views, Site};
use stoa_app_api::app::{APPLICATION_JSON, TEXT_HTML, TEXT_PLAIN};
use stoa_app_api::log::warn;
use stoa_app_api::{Answer, Request, Response, StaticHeader};

/// One middleware of the project's own, as settings::MIDDLEWARE names them.
/// Each has Django's hooks, either of which may do nothing: dispatched by
/// a `match`, so the chain and its hooks inline into the request's path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Middleware {
    /// `SecurityMiddleware`: the security headers, on the way out.
    Security,
    /// `AllowedHostsMiddleware`: refuses a `Host` not allowed, on the way in.
    AllowedHosts,
    /// `CommonMiddleware`: `APPEND_SLASH` redirects, on the way in.
    Common,
}

impl Middleware {
    /// Runs before the view: `Some` answers at once (the view and the
    /// inner middleware are skipped; the outer ones still see the answer).
    pub fn process_request(self, site: &Site, request: &Request<'_>) -> Option<Answer> {
        match self {
            Middleware::Security => None,
            Middleware::AllowedHosts => allowed_hosts(site, request),
            Middleware::Common => common(site, request),
        }
    }

    /// Runs after the view (or after an inner middleware answered) and
    /// may amend the answer in place.
    pub fn process_response(self, site: &Site, request: &Request<'_>, answer: &mut Answer) {
        match self {
            Middleware::Security => security(site, request, answer),
            Middleware::AllowedHosts | Middleware::Common => {}
        }
    }
}

/// The middleware a settings name refers to.
pub fn by_name(name: &str) -> Option<Middleware> {
    match name {
        "hello_project.middleware.SecurityMiddleware" => Some(Middleware::Security),
        "hello_project.middleware.AllowedHostsMiddleware" => Some(Middleware::AllowedHosts),
        "hello_project.middleware.CommonMiddleware" => Some(Middleware::Common),
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

/// Runs `chain` around `view`, the first middleware outermost: the
/// request hooks in order until one answers (else the view answers), then
/// the response hooks of the middleware reached, innermost first.
pub fn run(
    chain: &[Middleware],
    site: &Site,
    request: &Request<'_>,
    view: impl FnOnce() -> Answer,
) -> Answer {
    let mut reached = chain.len();
    let mut early = None;
    for (i, middleware) in chain.iter().enumerate() {
        if let Some(answer) = middleware.process_request(site, request) {
            early = Some(answer);
            reached = i + 1;
            break;
        }
    }
    let mut answer = early.unwrap_or_else(view);
    for middleware in chain[..reached].iter().rev() {
        middleware.process_response(site, request, &mut answer);
    }
    answer
}

const NOSNIFF: StaticHeader = StaticHeader::new("X-Content-Type-Options", "nosniff");
const FRAME: StaticHeader = StaticHeader::new("X-Frame-Options", settings::X_FRAME_OPTIONS);
const REFERRER: StaticHeader =
    StaticHeader::new("Referrer-Policy", settings::SECURE_REFERRER_POLICY);

/// A constant list: `$first` (a `Content-Type`), if any, then the headers
/// `security` adds, in order.
macro_rules! secured {
    ($($first:expr)?) => {
        if settings::SECURE_CONTENT_TYPE_NOSNIFF {
            &[$($first,)? NOSNIFF, FRAME, REFERRER]
        } else {
            &[$($first,)? FRAME, REFERRER]
        }
    };
}

/// The headers `security` adds: constants, so they cost no allocation
/// per response.
const SECURITY_HEADERS: &[StaticHeader] = secured!();
const SECURE_TEXT: &[StaticHeader] = secured!(TEXT_PLAIN[0]);
const SECURE_HTML: &[StaticHeader] = secured!(TEXT_HTML[0]);
const SECURE_JSON: &[StaticHeader] = secured!(APPLICATION_JSON[0]);

/// The list to send for an answer whose constant headers are `fixed`, when
/// the security headers can join them as one constant list: none yet, or
/// one of app-api's `Content-Type` lists.
fn secured(fixed: &[StaticHeader]) -> Option<&'static [StaticHeader]> {
    if fixed.is_empty() {
        Some(SECURITY_HEADERS)
    } else if fixed == TEXT_PLAIN {
        Some(SECURE_TEXT)
    } else if fixed == TEXT_HTML {
        Some(SECURE_HTML)
    } else if fixed == APPLICATION_JSON {
        Some(SECURE_JSON)
    } else {
        None
    }
}

/// Adds the security headers to whatever the inner layers answered,
/// leaving any the view already set.
pub fn security(_site: &Site, _request: &Request<'_>, answer: &mut Answer) {
    let is_security = |name: &str| {
        SECURITY_HEADERS
            .iter()
            .any(|h| h.name.as_str().eq_ignore_ascii_case(name))
    };
    let view_set_one = answer
        .response
        .headers
        .iter()
        .any(|h| is_security(h.name.as_str()));
    if let Some(fixed) = secured(answer.fixed).filter(|_| !view_set_one) {
        // The usual case: one constant list, nothing allocated.
        answer.fixed = fixed;
        return;
    }
    for h in SECURITY_HEADERS {
        if answer.header(h.name.as_str()).is_none() {
            let response = std::mem::replace(&mut answer.response, Response::new(0));
            answer.response = response.with_header(h.name.as_str(), h.value.as_str());
        }
    }
}

/// Answers 400 unless the `Host` header names one of the site's allowed
/// hosts (`ALLOWED_HOSTS` or the `allowed_hosts` setting). A missing or
/// malformed `Host` is rejected too.
pub fn allowed_hosts(site: &Site, request: &Request<'_>) -> Option<Answer> {
    let host = request.header("Host");
    let seen = site.accepted_host.get();
    // The remembered Host: 6% fewer instructions per /hello/ request than
    // parsing and matching it every time (benches/callgrind_ir.sh
    // target/release /hello/ 1: 6046 against 6420 Ir per request).
    if host.is_some_and(|h| seen.is_some_and(|seen| &seen[..] == h)) {
        return None;
    }
    match host.and_then(domain_of) {
        Some(domain) if allowed(domain, &site.allowed_hosts) => {
            if let Some(host) = host.filter(|_| seen.is_none()) {
                let _ = site.accepted_host.set(host.into());
            }
            None
        }
        _ => {
            let shown = host.map(String::from_utf8_lossy);
            warn!("Invalid Host header: {shown:?}; it may need adding to ALLOWED_HOSTS");
            Some(views::bad_request())
        }
    }
}

/// Redirects (301) a path that matches no route to the same path with a
/// slash appended, when that one matches, keeping the query string.
pub fn common(site: &Site, request: &Request<'_>) -> Option<Answer> {
    if !(settings::APPEND_SLASH && should_redirect_with_slash(site, request)) {
        return None;
    }
    let mut location =
        escape_leading_slashes(format!("{}{}/", request.script_name, request.path_info));
    if !request.query.is_empty() {
        location.push('?');
        location.push_str(&request.query);
    }
    let redirect = Response::new(301)
        .with_header("Content-Type", "text/html; charset=utf-8")
        .with_header("Location", location);
    Some(redirect.into())
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

    fn site() -> Site {
        Site::new().expect("the site compiles")
    }

    #[test]
    fn security_joins_a_constant_content_type_without_allocating() {
        let (site, request) = (site(), Request::sample("GET", "", "/", ""));
        for (mut answer, joined) in [
            (Answer::text(200, "t"), SECURE_TEXT),
            (Answer::html(200, "h"), SECURE_HTML),
            (Answer::json(200, b"{}"), SECURE_JSON),
            (Response::new(204).into(), SECURITY_HEADERS),
        ] {
            security(&site, &request, &mut answer);
            assert_eq!(answer.fixed, joined);
            assert!(answer.response.headers.is_empty(), "nothing copied");
        }
        assert_eq!(SECURE_TEXT[0], TEXT_PLAIN[0]);
        assert_eq!(&SECURE_TEXT[1..], SECURITY_HEADERS);
    }

    #[test]
    fn security_keeps_what_the_view_set_and_copies_the_rest() {
        const OTHER: &[StaticHeader] = &[StaticHeader::new("Cache-Control", "no-store")];
        let (site, request) = (site(), Request::sample("GET", "", "/", ""));
        // A constant list it cannot join: the security headers are copied.
        let mut answer = Answer::text(200, "t").with_fixed(OTHER);
        let mut other = Answer::from(Response::new(200)).with_fixed(OTHER);
        security(&site, &request, &mut other);
        assert_eq!(other.fixed, OTHER);
        assert_eq!(other.header("X-Frame-Options"), Some(&b"DENY"[..]));
        // A security header the view set wins over the middleware's.
        answer.response = answer.response.with_header("x-frame-options", "SAMEORIGIN");
        security(&site, &request, &mut answer);
        assert_eq!(answer.header("X-Frame-Options"), Some(&b"SAMEORIGIN"[..]));
        assert_eq!(answer.header("Referrer-Policy"), Some(&b"same-origin"[..]));
        let response = answer.into_response();
        assert_eq!(response.header_values("x-frame-options").count(), 1);
    }

    #[test]
    fn an_early_answer_skips_the_view_and_inner_hooks_but_not_outer_ones() {
        use Middleware::{AllowedHosts, Common, Security};
        let site = site();
        let headers = [stoa_app_api::HeaderRef::new("Host", b"evil.example")];
        let request = Request {
            headers: headers[..].into(),
            ..Request::sample("GET", "", "/hello", "")
        };
        // AllowedHosts refuses: Common (inner, which would redirect to
        // /hello/) and the view do not run; Security (outer) does.
        let answer = run(&[Security, AllowedHosts, Common], &site, &request, || {
            unreachable!("the view ran")
        });
        assert_eq!(answer.response.status, 400);
        assert_eq!(answer.header("X-Frame-Options"), Some(&b"DENY"[..]));
        // Security inside the refusing middleware does not run.
        let answer = run(&[AllowedHosts, Security], &site, &request, || {
            unreachable!("the view ran")
        });
        assert_eq!(answer.header("X-Frame-Options"), None);
        // Without a refusal, Common answers before the view.
        let answer = run(&[Common], &site, &request, || unreachable!("the view ran"));
        assert_eq!(answer.response.status, 301);
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

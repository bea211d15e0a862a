//! The project's settings, in the spirit of a fresh Django `settings.py`:
//! plain constants read by the middleware, the URLconf and the views.

/// Debug mode. Off: errors answer the terse production pages.
pub const DEBUG: bool = false;

/// Host names this site serves (the `Host` header without its port). A
/// leading `.` matches the domain and its subdomains; `*` matches anything.
/// The default: the host's configuration file replaces it with
/// `[apps.hello-project.settings] allowed_hosts = [...]`.
pub const ALLOWED_HOSTS: &[&str] = &["localhost", "127.0.0.1", "[::1]"];

/// The middleware, outermost first: the first one sees the request first
/// and the response last. `SecurityMiddleware` comes first so its headers
/// reach every response, including the host check's 400.
pub const MIDDLEWARE: &[&str] = &[
    "hello_project.middleware.SecurityMiddleware",
    "hello_project.middleware.AllowedHostsMiddleware",
    "hello_project.middleware.CommonMiddleware",
];

/// Redirect a path that matches no pattern to the same path with a slash
/// appended, when that one does match.
pub const APPEND_SLASH: bool = true;

/// `X-Frame-Options` value set by `SecurityMiddleware`.
pub const X_FRAME_OPTIONS: &str = "DENY";

/// `Referrer-Policy` value set by `SecurityMiddleware`.
pub const SECURE_REFERRER_POLICY: &str = "same-origin";

/// Whether `SecurityMiddleware` sets `X-Content-Type-Options: nosniff`.
pub const SECURE_CONTENT_TYPE_NOSNIFF: bool = true;

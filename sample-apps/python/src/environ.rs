//! The PEP 3333 environ of one request.

use crate::body::{streamed_length, Pipe};
use crate::io::{Errors, Input};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString, PyTuple};
use std::sync::Arc;
use stoa_app_api::abi::TlsSession;
use stoa_app_api::{Request, Responder};

/// What the host says of the connection a request came over, beyond the
/// request itself: its TLS session (none over plain HTTP) and its protocol
/// as `SERVER_PROTOCOL` names it (`HTTP/2` for a stream of an HTTP/2
/// connection).
pub struct Link {
    pub tls: Option<TlsSession>,
    pub protocol: &'static str,
}

impl Link {
    /// What `responder` says of the connection `request` came over.
    pub fn of(request: &Request<'_>, responder: &Responder) -> Link {
        Link {
            tls: responder.tls(),
            protocol: responder.protocol(request),
        }
    }
}

/// The keys every request shares, built once: a request's environ starts
/// as a copy of it.
pub fn base(py: Python<'_>) -> PyResult<Py<PyDict>> {
    let base = PyDict::new(py);
    base.set_item("wsgi.version", PyTuple::new(py, [1, 0])?)?;
    // The host calls the application from several pool threads at once;
    // in process mode (`--worker-mode process`) each worker process has
    // an interpreter of its own.
    base.set_item("wsgi.multithread", true)?;
    base.set_item(
        "wsgi.multiprocess",
        std::env::var_os("STOA_WORKER_PROCESS").is_some_and(|v| v == "1"),
    )?;
    base.set_item("wsgi.run_once", false)?;
    base.set_item(
        "SERVER_SOFTWARE",
        concat!("stoa-python/", env!("CARGO_PKG_VERSION")),
    )?;
    Ok(base.unbind())
}

/// The environ of `request`, with `errors` as `wsgi.errors`.
pub fn environ<'py>(
    py: Python<'py>,
    base: &Py<PyDict>,
    request: &Request<'_>,
    errors: Bound<'py, Errors>,
    pipe: Option<Arc<Pipe>>,
) -> PyResult<Bound<'py, PyDict>> {
    let env = base.bind(py).copy()?;
    env.set_item(intern!(py, "REQUEST_METHOD"), request.method.as_str())?;
    env.set_item(
        intern!(py, "SCRIPT_NAME"),
        path_str(request.script_name.as_str()),
    )?;
    env.set_item(
        intern!(py, "PATH_INFO"),
        path_str(request.path_info.as_str()),
    )?;
    env.set_item(intern!(py, "QUERY_STRING"), request.query.as_str())?;
    env.set_item(intern!(py, "SERVER_NAME"), request.server_name.as_str())?;
    env.set_item(intern!(py, "SERVER_PORT"), request.server_port.to_string())?;
    if let Some((addr, port)) = split_peer(request.peer.as_str()) {
        env.set_item(intern!(py, "REMOTE_ADDR"), addr)?;
        env.set_item(intern!(py, "REMOTE_PORT"), port)?;
    }
    let mut content_length = !request.body.is_empty();
    for (name, value) in headers(request) {
        match name.as_str() {
            "HTTP_CONTENT_TYPE" => env.set_item(intern!(py, "CONTENT_TYPE"), value)?,
            "HTTP_CONTENT_LENGTH" => content_length = true,
            _ => env.set_item(PyString::new(py, &name), value)?,
        }
    }
    let streamed = pipe.as_ref().and(streamed_length(request));
    if let Some(length) = streamed {
        // The declared length: what wsgi.input will give.
        env.set_item(intern!(py, "CONTENT_LENGTH"), length.to_string())?;
    } else if content_length {
        // The body as read (de-chunked): what wsgi.input holds.
        env.set_item(
            intern!(py, "CONTENT_LENGTH"),
            request.body.len().to_string(),
        )?;
    }
    // The host has read X-Forwarded-Proto if the peer is a --trusted-proxy.
    env.set_item(intern!(py, "wsgi.url_scheme"), request.scheme.as_str())?;
    env.set_item(
        intern!(py, "wsgi.input"),
        match pipe {
            Some(pipe) => Bound::new(py, Input::streamed(pipe))?,
            None => Bound::new(py, Input::new(request.body.as_slice()))?,
        },
    )?;
    env.set_item(intern!(py, "wsgi.errors"), errors)?;
    Ok(env)
}

/// The keys of the connection `link` describes: `SERVER_PROTOCOL`, and
/// over TLS the session's.
pub fn link(py: Python<'_>, env: &Bound<'_, PyDict>, link: &Link) -> PyResult<()> {
    env.set_item(intern!(py, "SERVER_PROTOCOL"), link.protocol)?;
    match &link.tls {
        Some(session) => tls(py, env, session),
        None => Ok(()),
    }
}

/// The TLS session's keys, as mod_ssl and uWSGI name them: `HTTPS` on,
/// `SSL_PROTOCOL`, `SSL_CIPHER`, `SSL_TLS_SNI`, and under mutual TLS
/// `SSL_CLIENT_S_DN` with `SSL_CLIENT_VERIFY` (`SUCCESS`, or `NONE`
/// without a client certificate).
fn tls(py: Python<'_>, env: &Bound<'_, PyDict>, tls: &TlsSession) -> PyResult<()> {
    env.set_item(intern!(py, "HTTPS"), "on")?;
    env.set_item(intern!(py, "SSL_PROTOCOL"), tls.version.as_str())?;
    env.set_item(intern!(py, "SSL_CIPHER"), tls.cipher.as_str())?;
    if let Some(name) = tls.server_name.as_ref().into_option() {
        env.set_item(intern!(py, "SSL_TLS_SNI"), name.as_str())?;
    }
    if let Some(subject) = tls.client_subject.as_ref().into_option() {
        env.set_item(intern!(py, "SSL_CLIENT_S_DN"), subject.as_str())?;
    }
    let verify = match tls.client_verified {
        true => "SUCCESS",
        false => "NONE",
    };
    env.set_item(intern!(py, "SSL_CLIENT_VERIFY"), verify)?;
    Ok(())
}

/// The request headers as CGI variables (`HTTP_ACCEPT_LANGUAGE`), repeated
/// ones joined (`, `, or `; ` for cookies), values read as latin-1. A name
/// with `_` is left out: it would be indistinguishable from one with `-`
/// (a spoofing hole, dropped the same way by other WSGI servers).
pub fn headers(request: &Request<'_>) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::with_capacity(request.headers.len());
    for h in request.headers.as_slice() {
        let name = h.name.as_str();
        if name.contains('_') {
            continue;
        }
        let key: String = "HTTP_"
            .chars()
            .chain(name.chars().map(|c| {
                if c == '-' {
                    '_'
                } else {
                    c.to_ascii_uppercase()
                }
            }))
            .collect();
        let value = latin1_str(h.value.as_slice());
        match out.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => {
                v.push_str(if key == "HTTP_COOKIE" { "; " } else { ", " });
                v.push_str(&value);
            }
            None => out.push((key, value)),
        }
    }
    out
}

/// A path as PEP 3333 wants it: percent-decoded bytes, each read as one
/// latin-1 character (a `%` not followed by two hex digits stays).
pub fn path_str(raw: &str) -> String {
    latin1_str(&percent_decode(raw.as_bytes()))
}

pub fn percent_decode(raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        let hex = |at: usize| raw.get(at).and_then(|&b| (b as char).to_digit(16));
        match (raw[i], hex(i + 1), hex(i + 2)) {
            (b'%', Some(hi), Some(lo)) => {
                out.push(u8::try_from(hi * 16 + lo).unwrap_or(b'?'));
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    out
}

/// Bytes read as latin-1: each byte the character of the same number.
pub fn latin1_str(bytes: &[u8]) -> String {
    bytes.iter().map(|&b| char::from(b)).collect()
}

/// `ip:port` (or `[ipv6]:port`) as the address and the port.
pub fn split_peer(peer: &str) -> Option<(&str, &str)> {
    let (addr, port) = peer.rsplit_once(':')?;
    Some((addr.trim_start_matches('[').trim_end_matches(']'), port))
}

#[cfg(test)]
mod tests {
    use super::*;
    use stoa_app_api::abi_stable::std_types::RSlice;
    use stoa_app_api::HeaderRef;

    #[test]
    fn paths_are_percent_decoded_then_latin1() {
        assert_eq!(path_str("/caf%C3%A9/a%20b"), "/caf\u{c3}\u{a9}/a b");
        assert_eq!(path_str("/100%/%zz/%4"), "/100%/%zz/%4");
        assert_eq!(path_str("/a%2Fb"), "/a/b");
    }

    #[test]
    fn headers_become_cgi_names_and_repeats_join() {
        let h = [
            HeaderRef::new("Accept-Language", b"fr"),
            HeaderRef::new("Cookie", b"a=1"),
            HeaderRef::new("cookie", b"b=2"),
            HeaderRef::new("X-Thing", b"1"),
            HeaderRef::new("x-thing", b"2"),
            HeaderRef::new("X_Spoof", b"no"),
            HeaderRef::new("X-Latin", b"caf\xe9"),
        ];
        let request = Request {
            headers: RSlice::from_slice(&h),
            ..Request::sample("GET", "", "/", "")
        };
        let got = headers(&request);
        let get = |k: &str| got.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("HTTP_ACCEPT_LANGUAGE"), Some("fr"));
        assert_eq!(get("HTTP_COOKIE"), Some("a=1; b=2"));
        assert_eq!(get("HTTP_X_THING"), Some("1, 2"));
        assert_eq!(get("HTTP_X_SPOOF"), None);
        assert_eq!(get("HTTP_X_LATIN"), Some("caf\u{e9}"));
    }
}

//! An ASGI scope (`http` or `websocket`): the request copied off the
//! host's buffer when it is handed to the loop, turned into the scope's
//! dict on the loop's thread.

use crate::environ::{percent_decode, split_peer, Link};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};
use stoa_app_api::abi::TlsSession;
use stoa_app_api::Request;

/// What a scope needs of one request, owned.
pub struct Head {
    pub method: String,
    pub http_version: &'static str,
    pub scheme: String,
    /// The whole path as the client sent it (root path included).
    pub raw_path: String,
    /// The host's mount and the application's under it, raw.
    pub root_path: String,
    pub query: String,
    /// Names lowercased.
    pub headers: Vec<(Vec<u8>, Vec<u8>)>,
    pub client: Option<(String, u16)>,
    pub server: (String, u16),
    pub tls: Option<TlsSession>,
}

impl Head {
    /// Copies `request` (whose application is mounted at `root_path`,
    /// raw), which came over `link`.
    pub fn of(request: &Request<'_>, root_path: String, link: Link) -> Head {
        let client = split_peer(request.peer.as_str())
            .and_then(|(addr, port)| Some((addr.to_string(), port.parse().ok()?)));
        Head {
            method: request.method.as_str().to_string(),
            http_version: link.protocol.trim_start_matches("HTTP/"),
            scheme: request.scheme.as_str().to_string(),
            raw_path: format!("{}{}", request.script_name, request.path_info),
            root_path,
            query: request.query.as_str().to_string(),
            headers: request
                .headers
                .as_slice()
                .iter()
                .map(|h| {
                    (
                        h.name.as_str().to_ascii_lowercase().into_bytes(),
                        h.value.as_slice().to_vec(),
                    )
                })
                .collect(),
            client,
            server: (
                request.server_name.as_str().to_string(),
                request.server_port,
            ),
            tls: link.tls,
        }
    }

    /// `GET /path`, for messages.
    pub fn describe(&self) -> String {
        format!("{} {}", self.method, self.raw_path)
    }

    /// The scope dict: `kind` is `http` or `websocket`; `state` the
    /// application's lifespan state, copied.
    pub fn scope<'py>(
        &self,
        py: Python<'py>,
        kind: &str,
        state: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let scope = PyDict::new(py);
        scope.set_item(intern!(py, "type"), PyString::new(py, kind))?;
        let asgi = PyDict::new(py);
        asgi.set_item(intern!(py, "version"), intern!(py, "3.0"))?;
        asgi.set_item(intern!(py, "spec_version"), intern!(py, "2.4"))?;
        scope.set_item(intern!(py, "asgi"), asgi)?;
        scope.set_item(intern!(py, "http_version"), self.http_version)?;
        let ws = kind == "websocket";
        if !ws {
            scope.set_item(intern!(py, "method"), self.method.as_str())?;
        }
        let scheme = match (ws, self.scheme.as_str()) {
            (true, "https") => "wss",
            (true, _) => "ws",
            (false, s) => s,
        };
        scope.set_item(intern!(py, "scheme"), scheme)?;
        let path = percent_decode(self.raw_path.as_bytes());
        scope.set_item(intern!(py, "path"), String::from_utf8_lossy(&path))?;
        scope.set_item(
            intern!(py, "raw_path"),
            PyBytes::new(py, self.raw_path.as_bytes()),
        )?;
        scope.set_item(
            intern!(py, "query_string"),
            PyBytes::new(py, self.query.as_bytes()),
        )?;
        let root = percent_decode(self.root_path.as_bytes());
        scope.set_item(intern!(py, "root_path"), String::from_utf8_lossy(&root))?;
        let headers = PyList::empty(py);
        for (name, value) in &self.headers {
            headers.append(PyTuple::new(
                py,
                [PyBytes::new(py, name), PyBytes::new(py, value)],
            )?)?;
        }
        scope.set_item(intern!(py, "headers"), headers)?;
        match &self.client {
            Some((addr, port)) => scope.set_item(intern!(py, "client"), (addr.as_str(), *port))?,
            None => scope.set_item(intern!(py, "client"), py.None())?,
        }
        scope.set_item(
            intern!(py, "server"),
            (self.server.0.as_str(), self.server.1),
        )?;
        if ws {
            let protocols = self.subprotocols();
            scope.set_item(intern!(py, "subprotocols"), protocols)?;
        }
        scope.set_item(
            intern!(py, "state"),
            state.call_method0(intern!(py, "copy"))?,
        )?;
        let extensions = PyDict::new(py);
        if ws {
            extensions.set_item("websocket.http.response", PyDict::new(py))?;
        } else {
            extensions.set_item("http.response.pathsend", PyDict::new(py))?;
        }
        if let Some(tls) = &self.tls {
            extensions.set_item("tls", tls_extension(py, tls)?)?;
        }
        scope.set_item(intern!(py, "extensions"), extensions)?;
        Ok(scope)
    }

    /// The subprotocols the client offered, in its order.
    pub fn subprotocols(&self) -> Vec<String> {
        self.headers
            .iter()
            .filter(|(n, _)| n == b"sec-websocket-protocol")
            .flat_map(|(_, v)| {
                String::from_utf8_lossy(v)
                    .split(',')
                    .map(|p| p.trim().to_string())
                    .filter(|p| !p.is_empty())
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// The declared length of the body, if any.
    pub fn content_length(&self) -> Option<u64> {
        self.headers
            .iter()
            .find(|(n, _)| n == b"content-length")
            .and_then(|(_, v)| std::str::from_utf8(v).ok()?.trim().parse().ok())
    }
}

/// The TLS extension (the ASGI spec's `tls` scope extension): the
/// version as its number (0x0304 for TLS 1.3), the client's subject.
fn tls_extension<'py>(py: Python<'py>, tls: &TlsSession) -> PyResult<Bound<'py, PyDict>> {
    let ext = PyDict::new(py);
    let version: Option<u16> = match tls.version.as_str() {
        "TLSv1.3" => Some(0x0304),
        "TLSv1.2" => Some(0x0303),
        _ => None,
    };
    ext.set_item("server_cert", py.None())?;
    ext.set_item("client_cert_chain", PyList::empty(py))?;
    ext.set_item(
        "client_cert_name",
        tls.client_subject
            .as_ref()
            .into_option()
            .map(|s| s.as_str()),
    )?;
    ext.set_item(
        "client_cert_error",
        match (tls.client_subject.is_some(), tls.client_verified) {
            (true, false) => Some("not verified"),
            _ => None,
        },
    )?;
    ext.set_item("tls_version", version)?;
    ext.set_item("cipher_suite", py.None())?;
    Ok(ext)
}

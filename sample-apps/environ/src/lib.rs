//! The `environ` sample app: answers any request, whatever its method or
//! path under the mount, with a JSON dump of the request exactly as the app
//! received it (the counterpart of wsgiref's demo app that prints environ).

use serde::Serialize;
use stoa_app_api::abi::TlsSession;
use stoa_app_api::log::error;
use stoa_app_api::{App, Request, Responder, Response};

/// How much of the body the dump shows; `body_length` gives the full size.
pub const BODY_PREVIEW: usize = 4096;

/// The dump, fields in the order they are written.
#[derive(Serialize)]
struct Environ<'a> {
    method: &'a str,
    /// `HTTP/1.0`, `HTTP/1.1` or `HTTP/2`.
    version: &'static str,
    scheme: &'a str,
    server_name: &'a str,
    server_port: u16,
    remote_addr: &'a str,
    script_name: &'a str,
    path_info: &'a str,
    query_string: &'a str,
    /// `[name, value]` pairs in the order received; values decoded lossily.
    headers: Vec<[String; 2]>,
    body_length: usize,
    /// The first `BODY_PREVIEW` bytes, decoded lossily.
    body: String,
    /// The TLS session (`null` over plain HTTP).
    tls: Option<Tls>,
}

/// What the dump shows of a TLS session.
#[derive(Serialize)]
struct Tls {
    version: String,
    cipher: String,
    server_name: Option<String>,
    client_subject: Option<String>,
    client_verified: bool,
}

impl From<TlsSession> for Tls {
    fn from(s: TlsSession) -> Self {
        Tls {
            version: s.version.into(),
            cipher: s.cipher.into(),
            server_name: s.server_name.into_option().map(Into::into),
            client_subject: s.client_subject.into_option().map(Into::into),
            client_verified: s.client_verified,
        }
    }
}

impl<'a> Environ<'a> {
    fn of(request: &Request<'a>) -> Self {
        let body = request.body.as_slice();
        Environ {
            method: request.method.as_str(),
            version: if request.version_minor == 0 {
                "HTTP/1.0"
            } else {
                "HTTP/1.1"
            },
            scheme: request.scheme.as_str(),
            server_name: request.server_name.as_str(),
            server_port: request.server_port,
            remote_addr: request.peer.as_str(),
            script_name: request.script_name.as_str(),
            path_info: request.path_info.as_str(),
            query_string: request.query.as_str(),
            headers: request
                .headers
                .as_slice()
                .iter()
                .map(|h| {
                    [
                        h.name.as_str().to_string(),
                        String::from_utf8_lossy(h.value.as_slice()).into_owned(),
                    ]
                })
                .collect(),
            body_length: body.len(),
            body: String::from_utf8_lossy(&body[..body.len().min(BODY_PREVIEW)]).into_owned(),
            tls: None,
        }
    }
}

/// Serves the dump.
#[derive(Default)]
pub struct EnvironApp;

impl EnvironApp {
    pub fn new() -> Self {
        EnvironApp
    }
}

impl EnvironApp {
    fn answer(environ: &Environ<'_>) -> Response {
        match serde_json::to_vec_pretty(environ) {
            Ok(json) => Response::json(200, &json),
            Err(err) => {
                error!("serialising the request dump failed: {err}");
                Response::text(500, "Internal Server Error")
            }
        }
    }
}

impl App for EnvironApp {
    fn handle(&self, request: &Request<'_>, responder: Responder) {
        let mut environ = Environ::of(request);
        environ.version = responder.protocol(request);
        environ.tls = responder.tls().map(Tls::from);
        responder.respond(Self::answer(&environ));
    }

    fn call(&self, request: &Request<'_>) -> Response {
        Self::answer(&Environ::of(request))
    }
}

stoa_app_api::export_app! {
    name: "environ",
    mount: "/_environ",
    new: |_| EnvironApp::new(),
}

#[cfg(test)]
mod tests {
    use super::*;
    use abi_stable::std_types::{RSlice, RStr};
    use serde_json::{json, Value};
    use stoa_app_api::HeaderRef;

    fn dump(
        method: &str,
        version_minor: u8,
        headers: &[HeaderRef<'_>],
        body: &[u8],
    ) -> (Response, Value) {
        let request = Request {
            version_minor,
            scheme: RStr::from("https"),
            server_name: RStr::from("0.0.0.0"),
            server_port: 8443,
            peer: RStr::from("[::1]:40000"),
            headers: RSlice::from_slice(headers),
            body: RSlice::from_slice(body),
            ..Request::sample(method, "/_environ", "/a/b%20c", "x=1&y")
        };
        let response = EnvironApp::new().call(&request);
        let value = serde_json::from_slice(&response.body).unwrap_or(Value::Null);
        (response, value)
    }

    #[test]
    fn dumps_every_field() {
        let headers = [
            HeaderRef::new("Host", b"localhost:8443"),
            HeaderRef::new("X-Raw", b"caf\xe9"),
            HeaderRef::new("host", b"again"),
        ];
        let (response, v) = dump("POST", 1, &headers, b"hello");
        assert_eq!(response.status, 200);
        assert_eq!(
            response.header("Content-Type"),
            Some(&b"application/json"[..])
        );
        let expected = json!({
            "method": "POST",
            "version": "HTTP/1.1",
            "scheme": "https",
            "server_name": "0.0.0.0",
            "server_port": 8443,
            "remote_addr": "[::1]:40000",
            "script_name": "/_environ",
            "path_info": "/a/b%20c",
            "query_string": "x=1&y",
            "headers": [["Host", "localhost:8443"], ["X-Raw", "caf\u{fffd}"], ["host", "again"]],
            "body_length": 5,
            "body": "hello",
            "tls": null,
        });
        assert_eq!(v, expected);
    }

    #[test]
    fn fields_keep_their_order() {
        let (response, _) = dump("GET", 1, &[], b"");
        let text = String::from_utf8_lossy(&response.body);
        let keys = [
            "method",
            "version",
            "scheme",
            "server_name",
            "server_port",
            "remote_addr",
            "script_name",
            "path_info",
            "query_string",
            "headers",
            "body_length",
            "body",
            "tls",
        ];
        let positions: Vec<_> = keys
            .iter()
            .map(|k| text.find(&format!("\"{k}\":")))
            .collect();
        assert!(positions.iter().all(Option::is_some), "{text}");
        assert!(positions.windows(2).all(|w| w[0] < w[1]), "{text}");
    }

    #[test]
    fn http_1_0_and_any_method() {
        for method in ["GET", "HEAD", "PUT", "DELETE", "PATCH", "OPTIONS", "BREW"] {
            let (response, v) = dump(method, 0, &[], b"");
            assert_eq!(response.status, 200);
            assert_eq!(v["method"], method);
            assert_eq!(v["version"], "HTTP/1.0");
            assert_eq!(v["headers"], json!([]));
            assert_eq!(v["body_length"], 0);
        }
    }

    #[test]
    fn long_body_is_truncated_but_counted() {
        let body = vec![b'a'; BODY_PREVIEW + 100];
        let (_, v) = dump("POST", 1, &[], &body);
        assert_eq!(v["body_length"], BODY_PREVIEW + 100);
        assert_eq!(v["body"].as_str().map(str::len), Some(BODY_PREVIEW));
    }

    #[test]
    fn binary_body_is_decoded_lossily() {
        let (_, v) = dump("POST", 1, &[], b"\xff\x00ok");
        assert_eq!(v["body"], "\u{fffd}\u{0}ok");
        assert_eq!(v["body_length"], 4);
    }
}

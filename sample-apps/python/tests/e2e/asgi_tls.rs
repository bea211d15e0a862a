//! ASGI over a `tls://` bind: the scope says `https` whatever a proxy's
//! header says, and carries the `tls` extension (the version, and under
//! mutual TLS the client certificate's subject); a WebSocket over `wss://`
//! echoes.

use crate::asgi_host::fastapi;
use crate::bridge::{curl_json, https_port, tls_args, tls_fixture};
use std::process::Command;

fn https_and_wss_reach_the_asgi_application(poller: &str) {
    let args = tls_args();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let bridge = fastapi(poller, "/api", &args);
    let port = https_port(&bridge.server);
    let scope = curl_json(port, "/api/scope", &[]);
    // curl speaks HTTP/2 over TLS (ALPN), and HTTP/1.1 when asked.
    assert_eq!(scope["http_version"], "2", "{scope}");
    let one = curl_json(port, "/api/scope", &["--http1.1"]);
    assert_eq!(one["http_version"], "1.1", "{one}");
    assert_eq!(scope["scheme"], "https", "{scope}");
    assert_eq!(scope["path"], "/api/scope", "{scope}");
    let tls = &scope["tls"];
    assert_eq!(tls["tls_version"], 0x0304, "{scope}");
    assert!(tls["client_cert_name"].is_null(), "{scope}");
    let (cert, key) = (tls_fixture("client.pem"), tls_fixture("client-key.pem"));
    let scope = curl_json(port, "/api/scope", &["--cert", &cert, "--key", &key]);
    assert_eq!(
        scope["tls"]["client_cert_name"], "CN=client one,O=Stoa tests",
        "{scope}"
    );
    // A WebSocket over wss:// (the main suite's client, trusting the CA).
    let out = Command::new("python3")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/e2e/websocket_client.py"
        ))
        .args(["--ca", &tls_fixture("ca.pem")])
        .args(["--path", "/api/ws", &port.to_string(), "echo"])
        .output()
        .expect("python3 is needed for the WebSocket test");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        text.lines().any(|l| l == "echo ok"),
        "{text}\nhost log:\n{}",
        bridge.server.log()
    );
}

matrix!(https_and_wss_reach_the_asgi_application);

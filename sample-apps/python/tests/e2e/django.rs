//! The seed's Django hello project (examples/djangohello, Django from
//! PyPI) answering through the host.

use crate::bridge::{django_project, require_python, Bridge};

fn django_hello(poller: &str) {
    require_python(&["django"]);
    let bridge = Bridge::start(
        poller,
        "djangohello.wsgi:application",
        &django_project(),
        "/",
        &[],
    );
    let mut c = bridge.server.connect();
    for _ in 0..3 {
        let r = c.request(&crate::client::get("/hello/"));
        assert_eq!((r.status, r.text()), (200, "Hello World!"), "{r:?}");
        assert_eq!(r.header("Content-Type"), Some("text/html; charset=utf-8"));
        // Django's security middleware ran.
        assert_eq!(r.header("X-Frame-Options"), Some("DENY"));
        // A small declared length: answered whole, not streamed.
        assert_eq!(r.header("Content-Length"), Some("12"));
        assert_eq!(r.header("Transfer-Encoding"), None);
    }
    let r = c.request(&crate::client::get("/nothing/"));
    assert_eq!(r.status, 404, "{r:?}");
    // The native app beside it still answers.
    let r = bridge.server.get("/demo/justnow/");
    assert_eq!(r.status, 200, "{r:?}");
}

matrix!(django_hello);

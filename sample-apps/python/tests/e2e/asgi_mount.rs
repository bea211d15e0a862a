//! Several Python applications in one bridge, each at its own mount
//! (`[[apps.python.settings.apps]]`): Django through its asgi.py, FastAPI
//! and a WSGI callable side by side with a native app; the longest mount
//! wins, "" takes what no other matches, and the bridge's own mount comes
//! first in root_path.

use crate::asgi_host::{several_apps, start_text, Entry};
use crate::bridge::{json, require_python};
use crate::client::get;

fn django_fastapi_and_wsgi_side_by_side(poller: &str) {
    require_python(&["django", "fastapi"]);
    let text = several_apps(
        "/",
        &[
            Entry {
                mount: "/django",
                module: "djangohello.asgi:application",
                interface: "asgi",
            },
            Entry {
                mount: "/api",
                module: "fastapp:app",
                interface: "asgi",
            },
            Entry {
                mount: "/wsgi",
                module: "pureasgi:wsgi_app",
                interface: "wsgi",
            },
        ],
    );
    let bridge = start_text(poller, &text, &[]);
    let server = &bridge.server;
    let mut c = server.connect();
    for _ in 0..3 {
        // Django's URLconf sees /hello/ under its root_path.
        let r = c.request(&get("/django/hello/"));
        assert_eq!((r.status, r.text()), (200, "Hello World!"), "{r:?}");
        assert_eq!(r.header("X-Frame-Options"), Some("DENY"));
        let r = c.request(&get("/api/hello"));
        assert_eq!((r.status, r.text()), (200, "Hello World!"), "{r:?}");
    }
    assert_eq!(c.request(&get("/django/nothing/")).status, 404);
    // Django's own route, not the bridge's: /hello/ is not at the top.
    assert_eq!(c.request(&get("/hello/")).status, 404);
    let s = json(&c.request(&get("/api/scope")).body);
    assert_eq!(
        (s["root_path"].as_str(), s["path"].as_str()),
        (Some("/api"), Some("/api/scope")),
        "{s}"
    );
    // FastAPI's lifespan ran (Django, without one, was served all the same).
    assert_eq!(json(&c.request(&get("/api/state")).body)["started"], "yes");
    let r = c.request(&get("/wsgi/x/y"));
    assert_eq!((r.status, r.text()), (200, "wsgi /wsgi|/x/y"), "{r:?}");
    assert_eq!(c.request(&get("/elsewhere")).status, 404);
    assert_eq!(c.request(&get("/demo/justnow/")).status, 200);
}

fn the_longest_mount_wins_under_the_bridge_mount(poller: &str) {
    require_python(&["fastapi"]);
    let text = several_apps(
        "/py",
        &[
            Entry {
                mount: "",
                module: "pureasgi:strict",
                interface: "asgi",
            },
            Entry {
                mount: "/api",
                module: "fastapp:app",
                interface: "asgi",
            },
        ],
    );
    let bridge = start_text(poller, &text, &[]);
    let server = &bridge.server;
    let r = server.get("/py/api/scope");
    assert_eq!(r.status, 200, "{r:?}");
    let s = json(&r.body);
    assert_eq!(
        (s["root_path"].as_str(), s["path"].as_str()),
        (Some("/py/api"), Some("/py/api/scope")),
        "{s}"
    );
    assert_eq!(server.get("/py/api/hello").text(), "Hello World!");
    let r = server.get("/py/hello");
    assert_eq!((r.status, r.text()), (200, "pure hello"), "{r:?}");
    // A path that only starts like a mount is not under it.
    assert_eq!(server.get("/py/apiary").text(), "not here");
    assert_eq!(server.get("/demo/justnow/").status, 200);
}

matrix!(
    django_fastapi_and_wsgi_side_by_side,
    the_longest_mount_wins_under_the_bridge_mount
);

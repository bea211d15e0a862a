//! A request's route on its own, over a mount table: the host's prefix
//! first, then the longest mount on a segment boundary, else none; and
//! the client a trusted proxy names.

use crate::apps::mounts::MountTable;
use crate::http::parse::{parse_head, Head};
use crate::server::request::HeadText;
use crate::server::route::{Route, Target};
use crate::server::testing::{app, settings};
use crate::settings::{AppLimits, ConnParams, NetList, Overload, Settings};
use std::sync::Arc;

fn head(request: &str) -> Head {
    parse_head(request.as_bytes(), &ConnParams::default())
        .expect("a valid head")
        .expect("a whole head")
}

/// Where `path` goes: the mount of its app and where the mount ends, or
/// `host` or `none`.
fn target(settings: &Settings, mounts: &MountTable, path: &str) -> String {
    let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n");
    let head = head(&request);
    let parts = HeadText::new(&head, request.as_bytes());
    let route = Route::decide(settings, mounts, &parts, &Arc::from("10.0.0.1:5"));
    match route.target {
        Target::Host => "host".into(),
        Target::NoMount => "none".into(),
        Target::Held(why) => format!("held: {why}"),
        Target::App { app, split } => format!("{}@{split}", app.mount),
    }
}

#[test]
fn the_host_s_prefix_then_the_longest_mount_then_none() {
    let s = settings(16, Overload::Queue);
    let limits = AppLimits::default;
    let both = MountTable::new(vec![app("/", limits()), app("/app", limits())]);
    assert_eq!(target(&s, &both, "/.well-known/stoa/health"), "host");
    assert_eq!(target(&s, &both, "/.well-known/stoa/nothing"), "host");
    assert_eq!(target(&s, &both, "/app"), "/app@4");
    assert_eq!(target(&s, &both, "/app/x?y=/z"), "/app@4");
    assert_eq!(target(&s, &both, "/apple"), "@0");
    assert_eq!(target(&s, &both, "/"), "@0");
    let one = MountTable::new(vec![app("/app", limits())]);
    assert_eq!(target(&s, &one, "/app/"), "/app@4");
    assert_eq!(target(&s, &one, "/apple"), "none");
    assert_eq!(target(&s, &MountTable::default(), "/app"), "none");
    assert_eq!(
        target(&s, &MountTable::default(), "/.well-known/stoa/ready"),
        "host"
    );
}

#[test]
fn a_held_mount_answers_for_its_paths_unless_an_app_has_it() {
    let s = settings(16, Overload::Queue);
    let limits = AppLimits::default;
    let why = || Arc::<str>::from("quarantined");
    let table = MountTable::with_held(
        vec![app("/", limits()), app("/app", limits())],
        vec![("/bad".into(), why()), ("/app".into(), why())],
    );
    // Its paths do not fall through to the root app.
    assert_eq!(target(&s, &table, "/bad/x"), "held: quarantined");
    assert_eq!(target(&s, &table, "/bad"), "held: quarantined");
    assert_eq!(target(&s, &table, "/badge"), "@0");
    // An app mounted there again is the mount's.
    assert_eq!(target(&s, &table, "/app/x"), "/app@4");
}

#[test]
fn a_trusted_proxy_names_the_client_and_scheme() {
    let request = "GET / HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 192.0.2.7\r\n\
                   X-Forwarded-Proto: https\r\n\r\n";
    let head = head(request);
    let parts = HeadText::new(&head, request.as_bytes());
    let mounts = MountTable::default();
    let peer: Arc<str> = Arc::from("10.0.0.1:5");
    let mut s = settings(16, Overload::Queue);
    let untrusted = Route::decide(&s, &mounts, &parts, &peer);
    assert_eq!(
        (&*untrusted.client, untrusted.scheme),
        ("10.0.0.1:5", "http")
    );
    s.trusted_proxies = NetList(vec!["10.0.0.0/8".parse().expect("a net")]);
    let trusted = Route::decide(&s, &mounts, &parts, &peer);
    assert_eq!((&*trusted.client, trusted.scheme), ("192.0.2.7:0", "https"));
}

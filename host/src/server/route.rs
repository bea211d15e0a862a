//! Where a request goes, decided once per request as soon as its head is
//! whole: the client it speaks for, and the host's own endpoints, an app
//! by its mount, or none. A request with a body is routed before its body
//! is read (the body's limit and whether it is streamed are its app's), and
//! the route is kept with it until it is dispatched; a request without one
//! is routed when it is dispatched. Either way the body plan and the
//! dispatch read the same route.

use crate::apps::loader::LoadedApp;
use crate::apps::mounts::{MountTable, Resolved};
use crate::http::parse::Head;
use crate::ops::admin;
use crate::ops::netfilter::{forwarded_client, peer_ip, Forwarded, UNKNOWN_CLIENT};
use crate::server::request::HeadText;
use crate::settings::Settings;
use std::borrow::Cow;
use std::sync::Arc;

/// One request's route (`'a`: the app table it was read from; `'static`
/// once kept past it, see `kept`).
pub struct Route<'a> {
    /// The client the request speaks for: the peer, or the one a trusted
    /// proxy names. Status rules, apps and the access log all see it.
    pub client: Arc<str>,
    /// `http`, or `https` when a trusted proxy says so.
    pub scheme: &'static str,
    pub target: Target<'a>,
}

/// Who answers a request.
pub enum Target<'a> {
    /// The host's own endpoints (under `admin::PREFIX`).
    Host,
    /// The app mounted at the path's longest matching prefix; `split` is
    /// where its mount ends in the path (SCRIPT_NAME | PATH_INFO).
    App {
        app: Cow<'a, Arc<LoadedApp>>,
        split: usize,
    },
    /// No app is mounted there (404).
    NoMount,
    /// The mount there is held out of service, and why (503).
    Held(Arc<str>),
}

impl<'a> Route<'a> {
    /// Routes the request `parts` from `peer` with the mounts in `mounts`.
    #[inline]
    pub fn decide(
        settings: &Settings,
        mounts: &'a MountTable,
        parts: &HeadText<'_>,
        peer: &Arc<str>,
    ) -> Self {
        let (client, scheme) = client_of(settings, parts.head, parts.buf, peer);
        let target = if parts.path.starts_with(admin::PREFIX) {
            Target::Host
        } else {
            match mounts.resolve(parts.path) {
                Some(Resolved::App(app, split)) => Target::App {
                    app: Cow::Borrowed(app),
                    split,
                },
                Some(Resolved::Held(why)) => Target::Held(why.clone()),
                None => Target::NoMount,
            }
        };
        Route {
            client,
            scheme,
            target,
        }
    }

    /// The app the request goes to, and where its mount ends in the path.
    pub fn app(&self) -> Option<(&Arc<LoadedApp>, usize)> {
        match &self.target {
            Target::App { app, split } => Some((app, *split)),
            Target::Host | Target::NoMount | Target::Held(_) => None,
        }
    }

    /// The request's body limit, when it is not `max_body` (or, for a body
    /// its app reads as it arrives, `max_stream_body`): its app's own (or
    /// the flag's), once some app has one.
    pub fn body_limit(&self, settings: &Settings, stream: bool) -> Option<usize> {
        let (flag, own): (_, fn(&crate::settings::AppLimits) -> Option<usize>) = if stream {
            (settings.app_stream_limits, |l| l.max_stream_body)
        } else {
            (settings.app_body_limits, |l| l.max_body)
        };
        flag.map(|default| {
            self.app()
                .and_then(|(app, _)| own(&app.limits))
                .unwrap_or(default)
        })
    }

    /// The route kept past the app table it was read from, while its
    /// request's body comes in: its app is held (as a request in flight
    /// holds it), so a replace meanwhile does not move the request.
    pub fn kept(self) -> Route<'static> {
        let target = match self.target {
            Target::Host => Target::Host,
            Target::NoMount => Target::NoMount,
            Target::Held(why) => Target::Held(why),
            Target::App { app, split } => Target::App {
                app: Cow::Owned(app.into_owned()),
                split,
            },
        };
        Route {
            client: self.client,
            scheme: self.scheme,
            target,
        }
    }
}

/// The client's address and scheme: the peer's own, or from
/// `X-Forwarded-For`/`X-Forwarded-Proto` when the peer is a trusted proxy.
fn client_of(
    settings: &Settings,
    head: &Head,
    buf: &[u8],
    peer: &Arc<str>,
) -> (Arc<str>, &'static str) {
    let trusted = &settings.trusted_proxies;
    if trusted.is_empty() || !peer_ip(peer).is_some_and(|ip| trusted.contains(ip)) {
        return (peer.clone(), "http");
    }
    let client = match forwarded_client(head.values(buf, "x-forwarded-for"), trusted) {
        None => peer.clone(),
        Some(Forwarded::Client(addr)) => addr.to_string().into(),
        Some(Forwarded::Unknown) => UNKNOWN_CLIENT.into(),
    };
    // The last line: the one the nearest proxy added.
    let proto = head.values(buf, "x-forwarded-proto").next_back();
    let scheme = match proto {
        Some(p) if p.trim_ascii().eq_ignore_ascii_case(b"https") => "https",
        _ => "http",
    };
    (client, scheme)
}

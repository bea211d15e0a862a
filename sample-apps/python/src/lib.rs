//! The Python bridge: a Stoa app that embeds CPython and serves Python
//! web applications beside native apps: WSGI (PEP 3333: Django, Flask)
//! and ASGI 3.0 (FastAPI, Starlette, Django's `asgi.py`), one or several
//! side by side in the process's one interpreter, each at its own mount.
//!
//! ```toml
//! [apps.python]
//! mount = "/"
//!
//! [apps.python.settings]
//! module = "mysite.wsgi:application"   # "package.module:callable"
//! interface = "wsgi"                   # or "asgi"
//! python_path = ["/srv/mysite"]        # put in front of sys.path
//! ```
//!
//! or several applications, `[[apps.python.settings.apps]]` tables each
//! with a `mount` under the bridge's (see `settings.rs`).
//!
//! `wsgi.url_scheme` (ASGI's `scheme`) and `REMOTE_ADDR` (`client`) follow
//! the host's `--trusted-proxy` (the host resolves `X-Forwarded-Proto`/`-For`
//! from trusted peers only).
//!
//! A WSGI request runs on the host's blocking pool (the app says it
//! blocks), holding the interpreter's lock only while in Python. A body
//! with a Content-Length is streamed into `wsgi.input` (a bounded window,
//! reads that wait on the pool thread; see `body.rs`), so an upload is not
//! held whole in memory, and its limit is the host's `max_stream_body`;
//! a chunked body is read whole, under `max_body`. Response
//! iterables are streamed chunk by chunk (`stream.rs` says when a body is
//! collected instead). An ASGI request runs on the process's asyncio loop
//! thread (`asgi/`), without a thread per request. The
//! interpreter is one per process, shared by every generation of this
//! plugin (see `python.rs`): a change to the Python code needs a re-exec
//! of the host, not a plugin replace. The app's name is `python` (formerly
//! `wsgi`, which configurations may still say).

#![deny(unsafe_code)]

mod asgi;
mod body;
mod declared;
mod environ;
mod io;
mod mounted;
mod python;
mod respond;
mod settings;
mod sink;
mod stream;
mod thread_state;
mod wsgi;

use environ::Link;
use mounted::{Mounted, Served};
pub use settings::BridgeSettings;
use stoa_app_api::{App, Context, Request, Responder, Response};

/// The app: the loaded Python applications.
pub struct PythonApp {
    apps: Vec<Mounted>,
}

impl PythonApp {
    /// Reads the settings and imports the applications (an ASGI one's
    /// lifespan startup included); an error (a bad setting, an exception
    /// at import, a failed startup) refuses the app.
    pub fn new(context: &Context) -> Result<PythonApp, String> {
        let settings = BridgeSettings::read(context.settings()).map_err(|e| e.to_string())?;
        Ok(PythonApp {
            apps: mounted::load(&settings)?,
        })
    }

    fn route(&self, request: &Request<'_>) -> Option<&Mounted> {
        mounted::find(&self.apps, request.path_info.as_str())
    }
}

impl App for PythonApp {
    /// WSGI code may block anywhere: its requests go to the pool. An ASGI
    /// request is only handed to the ASGI loop.
    fn blocks(&self, request: &Request<'_>) -> bool {
        matches!(
            self.route(request),
            Some(Mounted {
                served: Served::Wsgi(_),
                ..
            })
        )
    }

    /// A WSGI body with a Content-Length streams into `wsgi.input`; an
    /// ASGI body streams past 64 KiB or chunked.
    fn reads_body(&self, request: &Request<'_>) -> bool {
        match self.route(request).map(|m| &m.served) {
            Some(Served::Wsgi(_)) => body::streamed_length(request).is_some(),
            Some(Served::Asgi(_)) => asgi::reads_body(request),
            None => false,
        }
    }

    fn handle(&self, request: &Request<'_>, responder: Responder) {
        let Some(mounted) = self.route(request) else {
            return responder.respond(Response::text(404, "Not Found"));
        };
        let script = format!("{}{}", request.script_name, mounted.mount);
        let path_info = &request.path_info.as_str()[mounted.mount.len()..];
        match &mounted.served {
            Served::Asgi(asgi) => asgi.serve(request, responder, script),
            Served::Wsgi(wsgi) if mounted.mount.is_empty() => serve_wsgi(wsgi, request, responder),
            Served::Wsgi(wsgi) => {
                let mut under = *request;
                under.script_name = script.as_str().into();
                under.path_info = path_info.into();
                serve_wsgi(wsgi, &under, responder)
            }
        }
    }

    /// The ASGI applications' lifespan shutdown.
    fn retire(&self) {
        for mounted in &self.apps {
            if let Served::Asgi(asgi) = &mounted.served {
                asgi.retire();
            }
        }
    }
}

fn serve_wsgi(wsgi: &wsgi::Wsgi, request: &Request<'_>, responder: Responder) {
    let head_only = request.method.as_str() == "HEAD";
    let link = Link::of(request, &responder);
    if body::streamed_length(request).is_some() && request.body.is_empty() {
        let pipe = body::Pipe::new();
        responder.read_body_on_pool(body::PipeSink(pipe.clone()));
        let sink = body::AfterBody::new(pipe.clone(), head_only);
        return wsgi.serve(request, Box::new(sink), Some(pipe), &link);
    }
    wsgi.serve(
        request,
        Box::new(stream::Streaming::new(responder, head_only)),
        None,
        &link,
    );
}

// Named `wsgi` until it served ASGI too: a configuration that still says
// `[apps.wsgi]` or `--mount wsgi=` configures it. Its default mount stays
// where it was, so such a configuration serves at the same place.
stoa_app_api::export_app! {
    name: "python",
    formerly: ["wsgi"],
    mount: "/wsgi",
    try_new: PythonApp::new,
}

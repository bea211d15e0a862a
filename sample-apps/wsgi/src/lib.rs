//! The WSGI bridge: a Stoa app that embeds CPython and serves a Python
//! WSGI application (PEP 3333), a Django project say, beside native apps.
//!
//! ```toml
//! [apps.wsgi]
//! mount = "/"
//!
//! [apps.wsgi.settings]
//! module = "mysite.wsgi:application"   # "package.module:callable"
//! python_path = ["/srv/mysite"]        # put in front of sys.path
//! ```
//!
//! `wsgi.url_scheme` and `REMOTE_ADDR` follow the host's `--trusted-proxy`
//! (the host resolves `X-Forwarded-Proto`/`-For` from trusted peers only).
//!
//! Every request runs on the host's blocking pool (the app says it
//! blocks), holding the interpreter's lock only while in Python. A body
//! with a Content-Length is streamed into `wsgi.input` (a bounded window,
//! reads that wait on the pool thread; see `body.rs`), so an upload is not
//! held whole in memory, and its limit is the host's `max_stream_body`;
//! a chunked body is read whole, under `max_body`. Response
//! iterables are streamed chunk by chunk (`stream.rs` says when a body is
//! collected instead). The
//! interpreter is one per process, shared by every generation of this
//! plugin (see `python.rs`): a change to the Python code needs a re-exec
//! of the host, not a plugin replace. The app's name is `wsgi`, so one
//! host serves one WSGI application.

#![deny(unsafe_code)]

mod body;
mod declared;
mod environ;
mod io;
mod python;
mod respond;
mod settings;
mod sink;
mod stream;
mod wsgi;

pub use settings::WsgiSettings;
use stoa_app_api::{App, Context, Request, Responder};

/// The app: the loaded WSGI application.
pub struct WsgiApp {
    wsgi: wsgi::Wsgi,
}

impl WsgiApp {
    /// Reads the settings and imports the application; an error (a bad
    /// setting, an exception at import) refuses the app.
    pub fn new(context: &Context) -> Result<WsgiApp, String> {
        let settings = WsgiSettings::read(context.settings()).map_err(|e| e.to_string())?;
        Ok(WsgiApp {
            wsgi: wsgi::Wsgi::load(settings)?,
        })
    }
}

impl App for WsgiApp {
    /// Python code may block anywhere: every request goes to the pool.
    fn blocks(&self, _request: &Request<'_>) -> bool {
        true
    }

    /// A body with a Content-Length streams into `wsgi.input`.
    fn reads_body(&self, request: &Request<'_>) -> bool {
        body::streamed_length(request).is_some()
    }

    fn handle(&self, request: &Request<'_>, responder: Responder) {
        let head_only = request.method.as_str() == "HEAD";
        let tls = responder.tls();
        if body::streamed_length(request).is_some() && request.body.is_empty() {
            let pipe = body::Pipe::new();
            responder.read_body_on_pool(body::PipeSink(pipe.clone()));
            let sink = body::AfterBody::new(pipe.clone(), head_only);
            return self
                .wsgi
                .serve(request, Box::new(sink), Some(pipe), tls.as_ref());
        }
        self.wsgi.serve(
            request,
            Box::new(stream::Streaming::new(responder, head_only)),
            None,
            tls.as_ref(),
        );
    }
}

stoa_app_api::export_app! {
    name: "wsgi",
    mount: "/wsgi",
    try_new: WsgiApp::new,
}

//! The `hello-project` sample app: a fresh Django project's shape on Stoa.
//! This file wires the pieces together: it compiles the URLconf, loads the
//! templates and the middleware once, and runs each request through them.

pub mod middleware;
pub mod settings;
pub mod urls;
pub mod views;

#[cfg(test)]
mod tests;

use middleware::Middleware;
use minijinja::Environment;
use std::sync::OnceLock;
use stoa_app_api::{Answer, App, Context, Request, Responder, Response};
use urls::UrlConf;

/// The templates, embedded at build time (name, source).
const TEMPLATES: &[(&str, &str)] = &[
    ("base.html", include_str!("templates/base.html")),
    ("index.html", include_str!("templates/index.html")),
    ("404.html", include_str!("templates/404.html")),
];

/// What views and middleware share: the URLconf and the parsed templates.
pub struct Site {
    pub urls: UrlConf,
    pub templates: Environment<'static>,
    /// Host names this site serves: `settings::ALLOWED_HOSTS`, or the
    /// `allowed_hosts` setting of the host's configuration file.
    pub allowed_hosts: Vec<String>,
    /// The first `Host` value accepted, as sent: a client sends the same
    /// one on every request, and it is accepted again by comparing bytes
    /// (the verdict depends on nothing else, and `allowed_hosts` does not
    /// change once requests arrive).
    pub accepted_host: OnceLock<Box<[u8]>>,
}

impl Site {
    /// Compiles the URLconf and parses every template.
    pub fn new() -> Result<Self, String> {
        let urls = UrlConf::new(urls::URLPATTERNS)?;
        let mut templates = Environment::new();
        for (name, source) in TEMPLATES {
            templates
                .add_template(name, source)
                .map_err(|err| format!("template {name}: {err}"))?;
        }
        let allowed_hosts = settings::ALLOWED_HOSTS
            .iter()
            .map(|h| h.to_string())
            .collect();
        Ok(Site {
            urls,
            templates,
            allowed_hosts,
            accepted_host: OnceLock::new(),
        })
    }
}

/// The app: the site plus its middleware chain.
pub struct HelloProject {
    site: Site,
    middleware: Vec<Middleware>,
}

impl HelloProject {
    /// Builds the app. A broken URLconf, template or MIDDLEWARE entry is a
    /// configuration error: the constructor panics and the host refuses the
    /// plugin with the message.
    pub fn new() -> Self {
        match Self::try_new() {
            Ok(app) => app,
            Err(err) => panic!("hello-project is improperly configured: {err}"),
        }
    }

    /// Builds the app, reporting a configuration error.
    pub fn try_new() -> Result<Self, String> {
        Ok(HelloProject {
            site: Site::new()?,
            middleware: middleware::load(settings::MIDDLEWARE)?,
        })
    }

    /// Builds the app with the host's settings for it: `allowed_hosts`
    /// (a list of host patterns) replaces `settings::ALLOWED_HOSTS`. A
    /// setting of the wrong type, or an empty list (which would refuse
    /// every request), is refused: the host then does not mount the app.
    pub fn from_context(context: &Context) -> Result<Self, String> {
        let mut app = Self::try_new()?;
        let hosts = context
            .settings()
            .get_str_list("allowed_hosts")
            .map_err(|e| e.to_string())?;
        match hosts {
            Some(hosts) if hosts.is_empty() => {
                return Err(
                    "setting `allowed_hosts`: an empty list would refuse every request".into(),
                )
            }
            Some(hosts) => app.site.allowed_hosts = hosts,
            None => {}
        }
        Ok(app)
    }
}

impl Default for HelloProject {
    fn default() -> Self {
        Self::new()
    }
}

impl HelloProject {
    /// Runs a request through the middleware and its view.
    pub fn answer(&self, request: &Request<'_>) -> Answer {
        let site = &self.site;
        let view = || match site.urls.resolve(request.path_info.as_str()) {
            Some(resolved) => (resolved.view)(site, request, &resolved.params),
            None => views::page_not_found(site, request),
        };
        middleware::run(&self.middleware, site, request, view)
    }
}

impl App for HelloProject {
    /// Answers with the middleware's constant headers as they are.
    fn handle(&self, request: &Request<'_>, responder: Responder) {
        responder.answer(self.answer(request));
    }

    fn call(&self, request: &Request<'_>) -> Response {
        self.answer(request).into_response()
    }
}

stoa_app_api::export_app! {
    name: "hello-project",
    mount: "/",
    try_new: HelloProject::from_context,
}

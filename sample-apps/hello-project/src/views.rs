//! The views: the welcome page, `hello/`, the article archive and detail,
//! and the error pages (400, 404, 500), with the method check they share.

use crate::urls::Params;
use crate::{settings, Site};
use minijinja::{context, Value};
use stoa_app_api::log::error;
use stoa_app_api::{Answer, Request, Response};

/// A view: answers a request whose path resolved to it (an [`Answer`]:
/// its `Content-Type` a constant, see `Answer::text`).
pub type View = fn(&Site, &Request<'_>, &Params<'_>) -> Answer;

/// This app's version, shown on the welcome page.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The welcome page a fresh project shows.
pub fn index(site: &Site, request: &Request<'_>, _params: &Params<'_>) -> Answer {
    require_safe(request, || {
        let ctx = context! {
            script_name => request.script_name.as_str(),
            version => VERSION,
            debug => settings::DEBUG,
        };
        render(site, 200, "index.html", ctx)
    })
}

/// `hello/`: the plain-text greeting.
pub fn hello(_site: &Site, request: &Request<'_>, _params: &Params<'_>) -> Answer {
    require_safe(request, || Answer::text(200, "Hello World!"))
}

/// `articles/<int:year>/`.
pub fn year_archive(_site: &Site, request: &Request<'_>, params: &Params<'_>) -> Answer {
    require_safe(request, || match params.int("year") {
        Some(year) => Answer::text(200, &format!("Articles of {year}")),
        None => misrouted("year_archive"),
    })
}

/// `articles/<int:year>/<slug:slug>/`.
pub fn article_detail(_site: &Site, request: &Request<'_>, params: &Params<'_>) -> Answer {
    require_safe(request, || match (params.int("year"), params.str("slug")) {
        (Some(year), Some(slug)) => Answer::text(200, &format!("Article {slug} of {year}")),
        _ => misrouted("article_detail"),
    })
}

/// The 404 page, for a path that matches no route.
pub fn page_not_found(site: &Site, request: &Request<'_>) -> Answer {
    let ctx = context! {
        script_name => request.script_name.as_str(),
        version => VERSION,
        request_path => request.full_path(),
    };
    render(site, 404, "404.html", ctx)
}

/// The terse 400 page (a rejected `Host`, for one).
pub fn bad_request() -> Answer {
    Answer::html(400, "Bad Request (400)")
}

/// The terse 500 page.
pub fn server_error() -> Answer {
    Answer::html(500, "Server Error (500)")
}

/// Lets GET and HEAD through to `view`; any other method gets 405.
fn require_safe(request: &Request<'_>, view: impl FnOnce() -> Answer) -> Answer {
    match request.method.as_str() {
        "GET" | "HEAD" => view(),
        _ => Response::text(405, "Method Not Allowed")
            .with_header("Allow", "GET, HEAD")
            .into(),
    }
}

/// A view reached through a route that lacks the parameters it reads: a
/// URLconf mistake, answered 500.
fn misrouted(view: &str) -> Answer {
    error!("view {view} reached without its URL parameters; check the URLconf");
    server_error()
}

/// Renders a template as an HTML response; a render error is logged and
/// answered 500.
pub fn render(site: &Site, status: u16, template: &str, ctx: Value) -> Answer {
    let rendered = site
        .templates
        .get_template(template)
        .and_then(|t| t.render(ctx));
    match rendered {
        Ok(body) => Answer::html(status, &body),
        Err(err) => {
            error!("rendering template {template} failed: {err}");
            server_error()
        }
    }
}

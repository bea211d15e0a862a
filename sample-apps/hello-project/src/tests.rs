//! End-to-end tests of the app: requests built by hand and passed to
//! `App::call`, through the middleware, the URLconf and the views.

use super::*;
use abi_stable::std_types::{RSlice, RStr};
use stoa_app_api::HeaderRef;

/// Calls a fresh app with one request.
fn call(
    method: &str,
    script_name: &str,
    path_info: &str,
    query: &str,
    host: Option<&str>,
) -> Response {
    let app = HelloProject::new();
    call_app(&app, method, script_name, path_info, query, host)
}

fn call_app(
    app: &HelloProject,
    method: &str,
    script_name: &str,
    path_info: &str,
    query: &str,
    host: Option<&str>,
) -> Response {
    let mut headers = vec![HeaderRef {
        name: RStr::from("User-Agent"),
        value: RSlice::from_slice(b"test"),
    }];
    if let Some(host) = host {
        headers.push(HeaderRef {
            name: RStr::from("Host"),
            value: RSlice::from_slice(host.as_bytes()),
        });
    }
    let request = Request {
        headers: RSlice::from_slice(&headers),
        ..Request::sample(method, script_name, path_info, query)
    };
    app.call(&request)
}

fn get(path: &str) -> Response {
    call("GET", "", path, "", Some("localhost:8000"))
}

fn header<'r>(response: &'r Response, name: &str) -> Option<&'r str> {
    response
        .header(name)
        .and_then(|v| std::str::from_utf8(v).ok())
}

fn body(response: &Response) -> &str {
    std::str::from_utf8(&response.body).unwrap_or("<not utf-8>")
}

fn assert_security_headers(response: &Response) {
    assert_eq!(header(response, "X-Content-Type-Options"), Some("nosniff"));
    assert_eq!(header(response, "X-Frame-Options"), Some("DENY"));
    assert_eq!(header(response, "Referrer-Policy"), Some("same-origin"));
}

#[test]
fn app_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<HelloProject>();
}

#[test]
fn index_renders_the_welcome_page() {
    let r = get("/");
    assert_eq!(r.status, 200);
    assert_eq!(header(&r, "Content-Type"), Some("text/html; charset=utf-8"));
    let html = body(&r);
    assert!(html.contains("<title>The install worked successfully! Congratulations!</title>"));
    assert!(html.contains(&format!("hello-project {}", views::VERSION)));
    assert!(html.contains("href=\"/hello/\""));
    assert_security_headers(&r);
    // An empty PATH_INFO is the root too.
    assert_eq!(get("").status, 200);
}

#[test]
fn head_is_answered_like_get() {
    let r = call("HEAD", "", "/hello/", "", Some("localhost"));
    assert_eq!(r.status, 200);
    assert_eq!(
        header(&r, "Content-Type"),
        Some("text/plain; charset=utf-8")
    );
    assert_eq!(call("HEAD", "", "/", "", Some("localhost")).status, 200);
}

#[test]
fn hello_says_hello_world() {
    let r = get("/hello/");
    assert_eq!(r.status, 200);
    assert_eq!(
        header(&r, "Content-Type"),
        Some("text/plain; charset=utf-8")
    );
    assert_eq!(body(&r), "Hello World!");
    assert_security_headers(&r);
}

#[test]
fn article_routes_use_their_converters() {
    let r = get("/articles/2024/");
    assert_eq!((r.status, body(&r)), (200, "Articles of 2024"));
    let r = get("/articles/2024/hello-stoa/");
    assert_eq!((r.status, body(&r)), (200, "Article hello-stoa of 2024"));
    assert_eq!(get("/articles/twenty/").status, 404);
    assert_eq!(get("/articles/2024/not.a.slug/").status, 404);
}

#[test]
fn unknown_path_renders_the_404_template() {
    let r = get("/nope/<script>");
    assert_eq!(r.status, 404);
    assert_eq!(header(&r, "Content-Type"), Some("text/html; charset=utf-8"));
    let html = body(&r);
    assert!(html.contains("<h1>Not Found</h1>"));
    assert!(
        html.contains("nope&#x2f;&lt;script&gt;"),
        "path is escaped: {html}"
    );
    assert!(!html.contains("<script>"));
    assert_security_headers(&r);
}

#[test]
fn missing_slash_redirects_permanently() {
    let r = get("/hello");
    assert_eq!(r.status, 301);
    assert_eq!(header(&r, "Location"), Some("/hello/"));
    assert_security_headers(&r);
    let r = get("/articles/2024/hello-stoa");
    assert_eq!(
        (r.status, header(&r, "Location")),
        (301, Some("/articles/2024/hello-stoa/"))
    );
}

#[test]
fn redirect_keeps_the_query_string() {
    let r = call("GET", "", "/hello", "x=1&y=%20", Some("localhost"));
    assert_eq!(r.status, 301);
    assert_eq!(header(&r, "Location"), Some("/hello/?x=1&y=%20"));
}

#[test]
fn redirect_includes_the_mount_prefix() {
    let r = call("GET", "/site", "/hello", "", Some("localhost"));
    assert_eq!(
        (r.status, header(&r, "Location")),
        (301, Some("/site/hello/"))
    );
    let r = call("GET", "/site", "/hello/", "", Some("localhost"));
    assert_eq!(r.status, 200);
}

#[test]
fn no_redirect_when_the_slashed_path_matches_nothing() {
    assert_eq!(get("/nope").status, 404);
    assert_eq!(get("/articles/x").status, 404);
}

#[test]
fn other_methods_get_405() {
    for method in ["POST", "PUT", "DELETE", "OPTIONS"] {
        let r = call(method, "", "/hello/", "", Some("localhost"));
        assert_eq!(r.status, 405, "{method}");
        assert_eq!(header(&r, "Allow"), Some("GET, HEAD"));
        assert_security_headers(&r);
    }
    assert_eq!(call("POST", "", "/", "", Some("localhost")).status, 405);
    assert_eq!(
        call("POST", "", "/articles/1/", "", Some("localhost")).status,
        405
    );
    // An unknown path is 404 whatever the method.
    assert_eq!(
        call("POST", "", "/nope/", "", Some("localhost")).status,
        404
    );
}

#[test]
fn disallowed_host_gets_400() {
    let r = call("GET", "", "/hello/", "", Some("evil.example:8000"));
    assert_eq!(r.status, 400);
    assert_eq!(body(&r), "Bad Request (400)");
    assert_eq!(header(&r, "Content-Type"), Some("text/html; charset=utf-8"));
    assert_security_headers(&r);
    // The host check comes before the slash redirect.
    assert_eq!(
        call("GET", "", "/hello", "", Some("evil.example")).status,
        400
    );
    assert_eq!(
        call("GET", "", "/hello/", "", Some("localhost:80x")).status,
        400
    );
}

#[test]
fn missing_host_gets_400() {
    let r = call("GET", "", "/", "", None);
    assert_eq!(r.status, 400);
    assert_eq!(body(&r), "Bad Request (400)");
    assert_security_headers(&r);
}

#[test]
fn allowed_hosts_with_and_without_port() {
    for host in [
        "localhost",
        "localhost:8000",
        "LOCALHOST",
        "127.0.0.1",
        "127.0.0.1:8000",
        "[::1]",
        "[::1]:8000",
    ] {
        assert_eq!(
            call("GET", "", "/hello/", "", Some(host)).status,
            200,
            "{host}"
        );
    }
}

#[test]
fn template_errors_answer_500() {
    let mut app = HelloProject::new();
    app.site
        .templates
        .add_template("404.html", "{% include 'missing.html' %}")
        .expect("parses");
    app.site.templates.remove_template("index.html");
    let r = call_app(&app, "GET", "", "/nope/", "", Some("localhost"));
    assert_eq!((r.status, body(&r)), (500, "Server Error (500)"));
    assert_security_headers(&r);
    let r = call_app(&app, "GET", "", "/", "", Some("localhost"));
    assert_eq!(r.status, 500);
}

#[test]
fn an_accepted_host_remembered_lets_no_other_in() {
    let app = HelloProject::new();
    let status = |host| call_app(&app, "GET", "", "/hello/", "", Some(host)).status;
    assert_eq!(status("localhost:8000"), 200);
    assert_eq!(status("localhost:8000"), 200);
    for bad in ["localhost:8000x", "ocalhost:8000", "evil.example:8000"] {
        assert_eq!(status(bad), 400, "{bad}");
    }
    assert_eq!(status("LOCALHOST"), 200);
    assert_eq!(status("localhost:8000"), 200);
}

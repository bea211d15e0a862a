//! The hello-project sample app mounted at `/`, through the host: routes,
//! the index and 404 templates, and its middleware (host check, security
//! headers, APPEND_SLASH redirects, method check).

use crate::client::{get, request, Response};
use crate::harness::Server;

matrix!(
    hello_world,
    index_page,
    append_slash_redirects,
    append_slash_keeps_the_query,
    disallowed_host_is_400,
    security_headers_on_200_404_400,
    article_routes_with_converters,
    unknown_path_is_the_404_page,
    post_is_405_with_allow,
);

/// `text` as the templates escape it (minijinja's HTML escaping also
/// escapes `/`, as `&#x2f;`).
pub fn html_escaped(text: &str) -> String {
    text.replace('/', "&#x2f;")
}

/// The three headers SecurityMiddleware adds to every response.
fn assert_security_headers(r: &Response) {
    assert_eq!(r.header("X-Content-Type-Options"), Some("nosniff"), "{r:?}");
    assert_eq!(r.header("X-Frame-Options"), Some("DENY"), "{r:?}");
    assert_eq!(r.header("Referrer-Policy"), Some("same-origin"), "{r:?}");
}

fn hello_world(poller: &str) {
    let server = Server::start(poller, &["hello-project"], &[]);
    let r = server.get("/hello/");
    assert_eq!((r.version.as_str(), r.status), ("HTTP/1.1", 200));
    assert_eq!(r.reason, "OK");
    assert_eq!(r.text(), "Hello World!");
    assert_eq!(r.header("Content-Length"), Some("12"));
    assert_eq!(r.header("Content-Type"), Some("text/plain; charset=utf-8"));
    assert_security_headers(&r);
}

fn index_page(poller: &str) {
    let server = Server::start(poller, &["hello-project"], &[]);
    let r = server.get("/");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("Content-Type"), Some("text/html; charset=utf-8"));
    assert_eq!(r.header("Content-Length"), Some(&*r.body.len().to_string()));
    let html = r.text();
    assert!(html.starts_with("<!doctype html>"), "{html}");
    assert!(
        html.contains("<title>The install worked successfully! Congratulations!</title>"),
        "{html}"
    );
    assert!(
        html.contains("<h1>The install worked successfully! Congratulations!</h1>"),
        "{html}"
    );
    assert!(html.contains("hello-project 0.1.0"), "{html}");
    assert!(
        html.contains("<a href=\"/hello/\">Hello World</a>"),
        "{html}"
    );
    assert!(html.contains("href=\"/articles/2024/\""), "{html}");
    assert!(html.contains("DEBUG is off"), "{html}");
    assert!(html.trim_end().ends_with("</html>"), "{html}");
    assert_security_headers(&r);
}

fn append_slash_redirects(poller: &str) {
    let server = Server::start(poller, &["hello-project"], &[]);
    let r = server.get("/hello");
    assert_eq!((r.status, r.reason.as_str()), (301, "Moved Permanently"));
    assert_eq!(r.header("Location"), Some("/hello/"));
    assert_eq!(r.header("Content-Length"), Some("0"));
    assert!(r.body.is_empty());
    assert_security_headers(&r);
    let r = server.get("/articles/2024");
    assert_eq!(r.status, 301);
    assert_eq!(r.header("Location"), Some("/articles/2024/"));
}

fn append_slash_keeps_the_query(poller: &str) {
    let server = Server::start(poller, &["hello-project"], &[]);
    let r = server.get("/hello?x=1");
    assert_eq!(r.status, 301);
    assert_eq!(r.header("Location"), Some("/hello/?x=1"));
    let r = server.get("/hello?a=1&b=two");
    assert_eq!(r.header("Location"), Some("/hello/?a=1&b=two"));
}

fn disallowed_host_is_400(poller: &str) {
    let server = Server::start(poller, &["hello-project"], &[]);
    let mut c = server.connect();
    let bytes = b"GET /hello/ HTTP/1.1\r\nHost: evil.example\r\n\r\n";
    let r = c.request(bytes);
    assert_eq!(r.status, 400);
    assert_eq!(r.text(), "Bad Request (400)");
    assert_eq!(r.header("Content-Type"), Some("text/html; charset=utf-8"));
    assert_security_headers(&r);
    // The app's 400 is an answer, not a broken connection: it stays open.
    let r = c.request(&get("/hello/"));
    assert_eq!((r.status, r.text()), (200, "Hello World!"));
    // The host check comes before the slash redirect.
    let r = c.request(b"GET /hello HTTP/1.1\r\nHost: evil.example:8000\r\n\r\n");
    assert_eq!(r.status, 400);
    assert!(server.wait_log(&["hello-project", "Invalid Host header"]));
}

fn security_headers_on_200_404_400(poller: &str) {
    let server = Server::start(poller, &["hello-project"], &[]);
    let mut c = server.connect();
    let ok = c.request(&get("/hello/"));
    let missing = c.request(&get("/no/such/page/"));
    let bad = c.request(b"GET / HTTP/1.1\r\nHost: evil.example\r\n\r\n");
    for (r, status) in [(ok, 200), (missing, 404), (bad, 400)] {
        assert_eq!(r.status, status);
        assert_security_headers(&r);
    }
}

fn article_routes_with_converters(poller: &str) {
    let server = Server::start(poller, &["hello-project"], &[]);
    let mut c = server.connect();
    let r = c.request(&get("/articles/2024/"));
    assert_eq!((r.status, r.text()), (200, "Articles of 2024"));
    let r = c.request(&get("/articles/2024/hello-stoa/"));
    assert_eq!((r.status, r.text()), (200, "Article hello-stoa of 2024"));
    // `<int:year>` takes digits only.
    let r = c.request(&get("/articles/twenty/"));
    assert_eq!(r.status, 404);
}

fn unknown_path_is_the_404_page(poller: &str) {
    let server = Server::start(poller, &["hello-project"], &[]);
    let index = server.get("/");
    let r = server.get("/no/such/page/");
    assert_eq!((r.status, r.reason.as_str()), (404, "Not Found"));
    assert_eq!(r.header("Content-Type"), Some("text/html; charset=utf-8"));
    let html = r.text();
    assert!(html.contains("<title>Not Found</title>"), "{html}");
    assert!(html.contains("<h1>Not Found</h1>"), "{html}");
    assert!(
        html.contains(&format!(
            "The requested resource <code>{}</code> was not found",
            html_escaped("/no/such/page/")
        )),
        "{html}"
    );
    // The same style as the index page: the base template's head and footer.
    let style = |page: &str| page[page.find("<style>").expect("a style")..].to_string();
    let footer = "<footer>Served by a Stoa app plugin.</footer>";
    assert!(html.contains(footer) && index.text().contains(footer));
    assert_eq!(
        style(html).split("</style>").next(),
        style(index.text()).split("</style>").next()
    );
    assert_security_headers(&r);
}

fn post_is_405_with_allow(poller: &str) {
    let server = Server::start(poller, &["hello-project"], &[]);
    let mut c = server.connect();
    let r = c.request(&request("POST", "/hello/", &["Content-Length: 0"]));
    assert_eq!((r.status, r.reason.as_str()), (405, "Method Not Allowed"));
    assert_eq!(r.header("Allow"), Some("GET, HEAD"));
    assert_security_headers(&r);
    // A POST with a body: the body is consumed, the next request is intact.
    c.send(b"POST /hello/ HTTP/1.1\r\nHost: localhost\r\nContent-Length: 7\r\n\r\na=1&b=2");
    let r = c.read_response();
    assert_eq!(r.status, 405);
    let r = c.request(&get("/hello/"));
    assert_eq!((r.status, r.text()), (200, "Hello World!"));
}

//! The article sample app at `/article`: the seed's exact 49-byte JSON
//! body, the method check, and the mount table's segment boundaries.

use crate::client::{get, request, with_body};
use crate::harness::{Server, SAMPLE_APPS};
use crate::hello::html_escaped;

matrix!(
    get_article_is_the_49_bytes,
    head_article_has_no_body,
    post_article_is_405_with_allow,
    articles_is_not_the_article_app,
);

/// The seed Go server's body, byte for byte.
const ARTICLE: &str = r#"{"Name":"A Royal Baby","Body":"A slow news week"}"#;

fn get_article_is_the_49_bytes(poller: &str) {
    let server = Server::samples(poller);
    let mut c = server.connect();
    for path in ["/article", "/article/", "/article?format=json"] {
        let r = c.request(&get(path));
        assert_eq!(r.status, 200, "{path}");
        assert_eq!(r.header("Content-Type"), Some("application/json"), "{path}");
        assert_eq!(r.header("Content-Length"), Some("49"), "{path}");
        assert_eq!(r.body.len(), 49, "{path}");
        assert_eq!(r.text(), ARTICLE, "{path}");
    }
}

fn head_article_has_no_body(poller: &str) {
    let server = Server::samples(poller);
    let mut c = server.connect();
    c.send(&request("HEAD", "/article", &[]));
    let r = c.read_head_response();
    assert_eq!(r.status, 200);
    assert_eq!(r.header("Content-Length"), Some("49"));
    assert_eq!(r.header("Content-Type"), Some("application/json"));
    // No body followed: the next response starts right away.
    let r = c.request(&get("/article"));
    assert_eq!(r.text(), ARTICLE);
}

fn post_article_is_405_with_allow(poller: &str) {
    let server = Server::samples(poller);
    let mut c = server.connect();
    let headers = ["Content-Type: application/json", "Content-Length: 2"];
    c.send(&with_body("POST", "/article", &headers, b"{}"));
    let r = c.read_response();
    assert_eq!((r.status, r.reason.as_str()), (405, "Method Not Allowed"));
    assert_eq!(r.header("Allow"), Some("GET, HEAD"));
    for method in ["PUT", "DELETE"] {
        let r = c.request(&request(method, "/article", &["Content-Length: 0"]));
        assert_eq!(r.status, 405, "{method}");
        assert_eq!(r.header("Allow"), Some("GET, HEAD"), "{method}");
    }
    let r = c.request(&get("/article"));
    assert_eq!((r.status, r.text()), (200, ARTICLE));
}

fn articles_is_not_the_article_app(poller: &str) {
    let server = Server::start(poller, SAMPLE_APPS, &[]);
    // `/article` must not match `/articles`: it falls to hello-project at
    // `/`, whose 404 page (HTML, security headers) answers.
    let r = server.get("/articles");
    assert_eq!(r.status, 404);
    assert_eq!(r.header("Content-Type"), Some("text/html; charset=utf-8"));
    assert_eq!(r.header("X-Frame-Options"), Some("DENY"));
    let shown = format!("<code>{}</code>", html_escaped("/articles"));
    assert!(r.text().contains(&shown), "{}", r.text());
    let r = server.get("/articlex/1");
    assert_eq!(r.status, 404);
    assert!(r.text().contains("<h1>Not Found</h1>"), "{}", r.text());
    // And under the mount, the article app answers its own 404.
    let r = server.get("/article/1");
    assert_eq!((r.status, r.text()), (404, "Not Found"));
}

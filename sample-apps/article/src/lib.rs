//! The `article` sample app: `GET /article` answers the 49-byte JSON article
//! that the Go server of the seed comparison returned.

use serde::Serialize;
use stoa_app_api::{App, Request, Response};

#[derive(Serialize)]
struct Article<'a> {
    #[serde(rename = "Name")]
    name: &'a str,
    #[serde(rename = "Body")]
    body: &'a str,
}

/// Serves the article.
pub struct ArticleApp {
    article: Vec<u8>,
}

impl ArticleApp {
    pub fn new() -> Self {
        let article = Article {
            name: "A Royal Baby",
            body: "A slow news week",
        };
        ArticleApp {
            article: serde_json::to_vec(&article).unwrap_or_default(),
        }
    }
}

impl Default for ArticleApp {
    fn default() -> Self {
        Self::new()
    }
}

impl App for ArticleApp {
    fn call(&self, request: &Request<'_>) -> Response {
        match (request.method.as_str(), request.path_info.as_str()) {
            ("GET" | "HEAD", "" | "/") => Response::json(200, &self.article),
            (_, "" | "/") => {
                Response::text(405, "Method Not Allowed").with_header("Allow", "GET, HEAD")
            }
            _ => Response::text(404, "Not Found"),
        }
    }
}

stoa_app_api::export_app! {
    name: "article",
    mount: "/article",
    new: |_| ArticleApp::new(),
}

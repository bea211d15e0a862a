//! The `article` sample app: `GET /article` answers the 49-byte JSON article
//! that the Go server of the seed comparison returned, and `/article/items`
//! is a JSON REST collection kept in SQLite:
//!
//! | request | answer |
//! | --- | --- |
//! | `GET /article/items` | 200, every item (`[{"id":1,"name":"..","body":".."}]`) |
//! | `POST /article/items` `{"name":"..","body":".."}` | 201, the item, `Location` |
//! | `GET /article/items/{id}` | 200, the item; 404 if none |
//! | `PUT /article/items/{id}` `{"name":"..","body":".."}` | 200, the item; 404 if none |
//! | `DELETE /article/items/{id}` | 204; 404 if none |
//!
//! A body that is not such a JSON object is 400, one over `max_item_bytes`
//! (16 KiB unless set) 413, a name another item has 409, another method
//! 405 with `Allow`. Settings (`[apps.article.settings]`): `db`, the SQLite
//! file (created if missing; without it the items live in memory and are
//! lost on a hot replace or a restart), and `max_item_bytes`. The queries
//! run on the host's blocking pool (`App::blocks`).

mod store;

use serde::{Deserialize, Serialize};
use stoa_app_api::{Answer, App, Context, Request, Responder, Response};
use store::{Item, Store, StoreError};

/// The largest item body accepted unless `max_item_bytes` says otherwise.
const MAX_ITEM_BYTES: usize = 16 * 1024;

#[derive(Serialize)]
struct Article<'a> {
    #[serde(rename = "Name")]
    name: &'a str,
    #[serde(rename = "Body")]
    body: &'a str,
}

/// What `POST` and `PUT` take.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NewItem {
    name: String,
    body: String,
}

/// Serves the article and the collection.
pub struct ArticleApp {
    article: Vec<u8>,
    store: Store,
    max_item_bytes: usize,
}

impl ArticleApp {
    /// The app with its items in memory (for benchmarks and unit tests).
    ///
    /// # Panics
    /// If SQLite cannot open an in-memory database (out of memory).
    pub fn new() -> Self {
        let context = Context::new("article", stoa_app_api::Settings::default(), None);
        Self::from_context(&context).unwrap_or_else(|e| panic!("{e}"))
    }

    /// The app from its settings (`db`, `max_item_bytes`).
    pub fn from_context(context: &Context) -> Result<Self, String> {
        let settings = context.settings();
        let db = settings.get_str("db").map_err(|e| e.to_string())?;
        let max = settings
            .get_int("max_item_bytes")
            .map_err(|e| e.to_string())?
            .map_or(Ok(MAX_ITEM_BYTES), usize::try_from)
            .map_err(|_| "setting `max_item_bytes`: expected a positive number".to_string())?;
        let store = Store::open(db).map_err(|e| format!("database {db:?}: {e:?}"))?;
        match db {
            Some(db) => stoa_app_api::log::info!("items kept in {db}"),
            None => stoa_app_api::log::info!("items kept in memory (no `db` setting)"),
        }
        Ok(ArticleApp {
            article: article(),
            store,
            max_item_bytes: max,
        })
    }

    /// `/items` and `/items/{id}`.
    fn items(&self, request: &Request<'_>, rest: &str) -> Response {
        let method = request.method.as_str();
        if rest.is_empty() || rest == "/" {
            return match method {
                "GET" | "HEAD" => answer(self.store.list(), 200),
                "POST" => match self.item_body(request) {
                    Ok(new) => created(self.store.create(&new.name, &new.body)),
                    Err(refusal) => refusal,
                },
                _ => not_allowed("GET, HEAD, POST"),
            };
        }
        let Some(id) = rest
            .strip_prefix('/')
            .and_then(|id| id.parse::<i64>().ok())
            .filter(|id| *id > 0)
        else {
            return Response::text(404, "Not Found");
        };
        match method {
            "GET" | "HEAD" => found(self.store.get(id)),
            "PUT" => match self.item_body(request) {
                Ok(new) => found(self.store.update(id, &new.name, &new.body)),
                Err(refusal) => refusal,
            },
            "DELETE" => match self.store.delete(id) {
                Ok(true) => Response::new(204),
                Ok(false) => Response::text(404, "Not Found"),
                Err(e) => failed(e),
            },
            _ => not_allowed("GET, HEAD, PUT, DELETE"),
        }
    }

    /// The item a `POST` or `PUT` carries, or the answer refusing it.
    fn item_body(&self, request: &Request<'_>) -> Result<NewItem, Response> {
        let body = request.body.as_slice();
        if body.len() > self.max_item_bytes {
            let limit = self.max_item_bytes;
            return Err(Response::text(
                413,
                &format!("an item is at most {limit} bytes"),
            ));
        }
        serde_json::from_slice(body).map_err(|e| {
            Response::text(
                400,
                &format!("expected {{\"name\": string, \"body\": string}}: {e}"),
            )
        })
    }
}

fn article() -> Vec<u8> {
    let article = Article {
        name: "A Royal Baby",
        body: "A slow news week",
    };
    serde_json::to_vec(&article).unwrap_or_default()
}

fn not_allowed(allow: &str) -> Response {
    Response::text(405, "Method Not Allowed").with_header("Allow", allow)
}

fn failed(e: StoreError) -> Response {
    match e {
        StoreError::Conflict => Response::text(409, "another item has this name"),
        StoreError::Failed(e) => {
            stoa_app_api::log::error!("database: {e}");
            Response::text(500, "database error")
        }
    }
}

fn answer<T: Serialize>(result: Result<T, StoreError>, status: u16) -> Response {
    match result.map(|value| serde_json::to_vec(&value)) {
        Ok(Ok(json)) => Response::json(status, &json),
        Ok(Err(e)) => failed(StoreError::Failed(e.to_string())),
        Err(e) => failed(e),
    }
}

fn found(result: Result<Option<Item>, StoreError>) -> Response {
    match result {
        Ok(None) => Response::text(404, "Not Found"),
        Ok(Some(item)) => answer(Ok(item), 200),
        Err(e) => failed(e),
    }
}

fn created(result: Result<Item, StoreError>) -> Response {
    let location = match &result {
        Ok(item) => format!("/article/items/{}", item.id),
        Err(_) => String::new(),
    };
    let response = answer(result, 201);
    if response.status == 201 {
        response.with_header("Location", location)
    } else {
        response
    }
}

impl Default for ArticleApp {
    fn default() -> Self {
        Self::new()
    }
}

impl ArticleApp {
    /// Every route's answer. The article's `Content-Type` is a constant
    /// (`Answer::json`), so answering it allocates only the body's copy.
    fn answer(&self, request: &Request<'_>) -> Answer {
        let path = request.path_info.as_str();
        match (request.method.as_str(), path) {
            ("GET" | "HEAD", "" | "/") => Answer::json(200, &self.article),
            (_, "" | "/") => not_allowed("GET, HEAD").into(),
            _ => match path.strip_prefix("/items") {
                Some(rest) if rest.is_empty() || rest.starts_with('/') => {
                    self.items(request, rest).into()
                }
                _ => Response::text(404, "Not Found").into(),
            },
        }
    }
}

impl App for ArticleApp {
    fn handle(&self, request: &Request<'_>, responder: Responder) {
        responder.answer(self.answer(request));
    }

    fn call(&self, request: &Request<'_>) -> Response {
        self.answer(request).into_response()
    }

    /// The collection's routes query SQLite: on the blocking pool.
    fn blocks(&self, request: &Request<'_>) -> bool {
        request.path_info.as_str().starts_with("/items")
    }
}

stoa_app_api::export_app! {
    name: "article",
    mount: "/article",
    try_new: ArticleApp::from_context,
}

#[cfg(test)]
mod tests {
    use super::*;
    use abi_stable::std_types::RSlice;

    fn call(app: &ArticleApp, method: &str, path: &str, body: &[u8]) -> Response {
        let request = Request {
            body: RSlice::from_slice(body),
            ..Request::sample(method, "/article", path, "")
        };
        app.call(&request)
    }

    #[test]
    fn the_article_stays_49_bytes_and_items_round_trip() {
        let app = ArticleApp::new();
        assert_eq!(call(&app, "GET", "", b"").body.len(), 49);
        let r = call(&app, "POST", "/items", br#"{"name":"n","body":"b"}"#);
        assert_eq!(r.status, 201);
        assert_eq!(r.header("Location"), Some(&b"/article/items/1"[..]));
        assert_eq!(call(&app, "GET", "/items/1", b"").status, 200);
        assert_eq!(
            call(&app, "POST", "/items", br#"{"name":"n","body":"c"}"#).status,
            409
        );
        assert_eq!(call(&app, "POST", "/items", b"{nope").status, 400);
        assert_eq!(call(&app, "PATCH", "/items/1", b"").status, 405);
        assert_eq!(call(&app, "GET", "/items/x", b"").status, 404);
        assert_eq!(call(&app, "DELETE", "/items/1", b"").status, 204);
        assert_eq!(call(&app, "DELETE", "/items/1", b"").status, 404);
        let big = vec![b' '; MAX_ITEM_BYTES + 1];
        assert_eq!(call(&app, "POST", "/items", &big).status, 413);
    }
}

//! Test-only plugin built against the frozen stoa-app-api 0.2.0, mounted at
//! `/previous`:
//! - `/previous` answers "built against stoa-app-api 0.2.0, greeting G",
//!   G being its `greeting` setting (`hello` when unset);
//! - `/previous/panic` panics (the host answers 500 "app previous panicked");
//! - `/previous/drop` drops its responder (500 "the app did not answer").

use stoa_app_api::{App, Context, Request, Responder, Response};

struct Previous {
    greeting: String,
}

impl App for Previous {
    fn handle(&self, request: &Request<'_>, responder: Responder) {
        match request.path_info.as_str() {
            "/panic" => panic!("previous: asked to panic"),
            "/drop" => drop(responder),
            _ => responder.respond(Response::text(
                200,
                &format!(
                    "built against stoa-app-api {}, greeting {}",
                    stoa_app_api::VERSION,
                    self.greeting
                ),
            )),
        }
    }
}

fn new(context: &Context) -> Result<Previous, String> {
    let greeting = context
        .settings()
        .get_str("greeting")
        .map_err(|e| e.to_string())?
        .unwrap_or("hello");
    Ok(Previous {
        greeting: greeting.to_string(),
    })
}

stoa_app_api::export_app! {
    name: "previous",
    mount: "/previous",
    try_new: new,
}

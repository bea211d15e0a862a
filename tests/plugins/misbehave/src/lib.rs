//! Test-only plugin mounted at `/_test`, misbehaving on purpose:
//! `/panic` panics in the handler, `/later` answers 50 ms later from its own
//! thread, `/drop` drops its responder unanswered, `/ok` answers at once.

use std::time::Duration;
use stoa_app_api::{App, Request, Responder, Response};

struct Misbehave;

impl App for Misbehave {
    fn handle(&self, request: &Request<'_>, responder: Responder) {
        match request.path_info.as_str() {
            "/panic" => panic!("misbehave: asked to panic"),
            "/later" => {
                let path = request.full_path();
                std::thread::spawn(move || {
                    std::thread::sleep(Duration::from_millis(50));
                    responder.respond(Response::text(200, &format!("later {path}")));
                });
            }
            "/drop" => {
                log::info!("dropping a responder on purpose");
                drop(responder);
            }
            "/ok" => responder.respond(Response::text(200, "ok")),
            _ => responder.respond(Response::text(404, "Not Found")),
        }
    }
}

stoa_app_api::export_app! {
    name: "misbehave",
    mount: "/_test",
    new: || Misbehave,
}

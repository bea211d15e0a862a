//! Test-only plugin: the app `renamed`, whose former name was `old-name`,
//! at `/renamed` unless configured otherwise. It answers
//! `renamed, greeting G` with `G` its `greeting` setting (`none` if
//! unset), so a test sees which configuration table reached it.

struct Renamed {
    greeting: String,
}

impl stoa_app_api::App for Renamed {
    fn call(&self, _request: &stoa_app_api::Request<'_>) -> stoa_app_api::Response {
        let text = format!("renamed, greeting {}", self.greeting);
        stoa_app_api::Response::text(200, &text)
    }
}

fn new(context: &stoa_app_api::Context) -> Result<Renamed, String> {
    let greeting = context
        .settings()
        .get_str("greeting")
        .map_err(|e| e.to_string())?
        .unwrap_or("none")
        .to_string();
    Ok(Renamed { greeting })
}

stoa_app_api::export_app! {
    name: "renamed",
    formerly: ["old-name"],
    mount: "/renamed",
    try_new: new,
}

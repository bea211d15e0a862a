// Shared by hot-v1 and hot-v2 (through `include!`): the app `hot` answers
// 200 with the including crate's `BODY` on every path under `/hot`.

struct Hot;

impl stoa_app_api::App for Hot {
    fn call(&self, _request: &stoa_app_api::Request<'_>) -> stoa_app_api::Response {
        stoa_app_api::Response::text(200, BODY)
    }
}

stoa_app_api::export_app! {
    name: "hot",
    mount: "/hot",
    new: |_| Hot,
}

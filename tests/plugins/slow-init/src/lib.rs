//! Test-only plugin: the app `slow-init` at `/slow`, answering `constructed`,
//! whose constructor first sleeps for the milliseconds in the environment
//! variable `STOA_TEST_SLOW_INIT_MS` (forever if it is `forever`; not at all
//! if it is unset or not a number), then, when its config section names a
//! file (`[apps.slow-init.settings] wait_for = "PATH"`), waits until that
//! file exists. It logs "slow-init constructor sleeping" when it starts and
//! "slow-init constructor done" when it returns.

use std::path::Path;
use std::time::Duration;

struct Slow;

impl stoa_app_api::App for Slow {
    fn call(&self, _request: &stoa_app_api::Request<'_>) -> stoa_app_api::Response {
        stoa_app_api::Response::text(200, "constructed")
    }
}

fn new(context: &stoa_app_api::Context) -> Result<Slow, String> {
    let wanted = std::env::var("STOA_TEST_SLOW_INIT_MS").unwrap_or_default();
    log::info!("slow-init constructor sleeping ({wanted} ms)");
    if wanted == "forever" {
        loop {
            std::thread::sleep(Duration::from_secs(3600));
        }
    }
    std::thread::sleep(Duration::from_millis(wanted.parse().unwrap_or(0)));
    let wait_for = context
        .settings()
        .get_str("wait_for")
        .map_err(|e| e.to_string())?;
    if let Some(file) = wait_for {
        log::info!("slow-init constructor waiting for {file}");
        while !Path::new(file).exists() {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    log::info!("slow-init constructor done");
    Ok(Slow)
}

stoa_app_api::export_app! {
    name: "slow-init",
    mount: "/slow",
    try_new: new,
}

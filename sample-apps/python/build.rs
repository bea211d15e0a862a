//! Gives the plugin a run path to the libpython it links (a Python built
//! with `--enable-shared` outside the system directories, pyenv's say, is
//! otherwise not found when the host loads the plugin), and tells the
//! end-to-end tests where the main workspace builds the `stoa` binary.

fn main() {
    let config = pyo3_build_config::get();
    if let Some(dir) = &config.lib_dir {
        // Every linked target: the plugin and the unit-test binaries.
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    }
    // The tests run the host of the main workspace, built by them into its
    // own target directory in this build's profile (tests/e2e/plugins.rs):
    // `cargo test --release` runs them against the release host that ships.
    let manifest = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default();
    let profile = match std::env::var("PROFILE").as_deref() {
        Ok("release") => "release",
        _ => "debug",
    };
    println!("cargo:rustc-env=CARGO_BIN_EXE_stoa={manifest}/../../target/{profile}/stoa");
    println!("cargo:rerun-if-changed=build.rs");
}

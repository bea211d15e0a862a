//! Embeds the app-api this host is built with: `stoa new-app` writes it into
//! each new project, so an installed `stoa` scaffolds an app against its own
//! ABI without the checkout. Generates `$OUT_DIR/app_api_files.rs`, a table
//! of (path inside app-api, `include_str!` of the file).

use std::path::{Path, PathBuf};

fn main() {
    let manifest_dir =
        PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let app_api = manifest_dir.join("../app-api");
    // A directory: cargo rescans everything under it (a new file counts).
    println!("cargo:rerun-if-changed={}", app_api.display());
    let mut files = Vec::new();
    collect(&app_api, &app_api, &mut files);
    files.sort();
    let mut table = String::from("&[\n");
    for (relative, absolute) in &files {
        table.push_str(&format!(
            "    ({relative:?}, include_str!({absolute:?})),\n"
        ));
    }
    table.push_str("]\n");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets it"));
    std::fs::write(out.join("app_api_files.rs"), table).expect("write app_api_files.rs");
}

/// Every file under `dir` but build output: (path relative to `root`, with
/// `/`; absolute path).
fn collect(root: &Path, dir: &Path, files: &mut Vec<(String, String)>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("read {}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if name == "target" || name.starts_with('.') {
            continue;
        }
        if path.is_dir() {
            collect(root, &path, files);
        } else {
            let relative = path.strip_prefix(root).expect("under the root");
            let relative = relative
                .components()
                .map(|c| c.as_os_str().to_string_lossy())
                .collect::<Vec<_>>()
                .join("/");
            let absolute = std::fs::canonicalize(&path).expect("canonical path");
            files.push((relative, absolute.display().to_string()));
        }
    }
}

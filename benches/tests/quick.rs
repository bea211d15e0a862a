//! CI smoke test: `stoa-bench compare --quick` against the `stoa` binary of
//! this test's own profile, with the sample plugins built first. Asserts the
//! table is complete and error-free; never a speed threshold.

use std::path::{Path, PathBuf};
use std::process::Command;

/// `target/<profile>`, where cargo put this test's `stoa-bench` and `stoa`.
fn profile_dir() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_stoa-bench"))
        .parent()
        .expect("the binary lives in target/<profile>")
        .to_path_buf()
}

/// `cargo test` builds the `stoa` binary but not the cdylib plugins: build
/// them (and stoa) in the same profile, from the workspace root.
fn build_server_and_plugins(profile_dir: &Path) {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("benches/ is in the workspace");
    let mut cmd = Command::new(env!("CARGO"));
    cmd.current_dir(workspace).args([
        "build",
        "-p",
        "stoa",
        "-p",
        "hello-project",
        "-p",
        "article",
        "-p",
        "environ",
        "-p",
        "demo",
    ]);
    match profile_dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") | None => {}
        Some("release") => {
            cmd.arg("--release");
        }
        Some(other) => {
            cmd.args(["--profile", other]);
        }
    }
    let status = cmd.status().expect("run cargo build");
    assert!(
        status.success(),
        "cargo build of stoa and the sample plugins failed"
    );
}

/// Runs `stoa-bench compare ARGS` against this profile's stoa, writing
/// under `out`; returns its standard output (the tables) once it succeeded.
fn compare(dir: &Path, args: &[&str], out: &Path) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_stoa-bench"))
        .arg("compare")
        .args(args)
        .arg("--stoa")
        .arg(dir.join("stoa"))
        .arg("--out")
        .arg(out)
        .output()
        .expect("run stoa-bench");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "stoa-bench failed:\n{stdout}\n{stderr}"
    );
    stdout
}

/// The data rows of the markdown tables, each split into its cells.
fn table_rows(stdout: &str) -> Vec<Vec<&str>> {
    stdout
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| server"))
        .map(|l| l.trim_matches('|').split('|').map(str::trim).collect())
        .collect()
}

#[test]
fn quick_compare_is_complete_and_error_free() {
    let dir = profile_dir();
    build_server_and_plugins(&dir);
    let out = std::env::temp_dir().join(format!("stoa-bench-quick-{}", std::process::id()));
    let mut backends = vec!["select", "poll", "epoll"];
    if std::env::var_os("STOA_TEST_SKIP_IO_URING").is_some_and(|v| v == "1") {
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "io_uring SKIPPED in the quick compare (STOA_TEST_SKIP_IO_URING=1)"
        );
    } else {
        backends.push("io_uring");
    }
    let list = backends.join(",");
    let args = [
        "--quick",
        "--requests",
        "500",
        "--max-time",
        "30s",
        "--backends",
        &list,
    ];
    let stdout = compare(&dir, &args, &out);
    // Data rows of the two markdown tables: the matrix, then the idle scenario.
    let rows = table_rows(&stdout);
    let (sweep, idle): (Vec<_>, Vec<_>) = rows.iter().partition(|r| r.len() == 15);
    // Per backend: 1 path x 3 modes x 2 concurrency levels; 2 idle levels.
    let n = backends.len();
    assert_eq!(sweep.len(), 6 * n, "matrix rows:\n{stdout}");
    assert_eq!(idle.len(), 2 * n, "idle rows:\n{stdout}");
    for &backend in &backends {
        assert_eq!(
            sweep.iter().filter(|r| r[0] == backend).count(),
            6,
            "{backend}:\n{stdout}"
        );
    }
    for mode in ["keepalive", "close", "pipelined"] {
        assert_eq!(
            sweep.iter().filter(|r| r[3] == mode).count(),
            2 * n,
            "{mode}:\n{stdout}"
        );
    }
    for r in &sweep {
        assert_eq!(r[1], "thread", "the default worker mode in {r:?}");
        assert_eq!((r[11], r[12]), ("0", "yes"), "errors/complete in {r:?}");
        assert!(r[6].parse::<f64>().is_ok_and(|v| v > 0.0), "req/s in {r:?}");
    }
    for r in &idle {
        assert_eq!((r[9], r[10]), ("0", "yes"), "errors/complete in {r:?}");
    }
    for ext in ["md", "csv", "svg"] {
        let file = out.join(format!("compare-quick.{ext}"));
        let len = std::fs::metadata(&file).map(|m| m.len()).unwrap_or(0);
        assert!(len > 100, "{} missing or empty", file.display());
    }
    let csv = std::fs::read_to_string(out.join("compare-quick.csv")).unwrap_or_default();
    assert_eq!(csv.lines().count(), 1 + 8 * n, "{csv}");
    let _ = std::fs::remove_dir_all(&out);
}

/// Both worker modes: the rows (the table, the CSV, the plot's title) say
/// which, and process mode's CPU per
/// request counts its worker process (the supervisor alone, which only
/// wakes a few times a second, shows about a hundredth of thread mode's).
#[test]
fn process_mode_rows_count_the_workers_cpu() {
    let dir = profile_dir();
    build_server_and_plugins(&dir);
    let out = std::env::temp_dir().join(format!("stoa-bench-process-{}", std::process::id()));
    let args = [
        "--backends",
        "epoll",
        "--worker-mode",
        "thread,process",
        "--paths",
        "/hello/",
        "--modes",
        "keepalive",
        "--concurrency",
        "10",
        "--requests",
        "2000",
        "--runs",
        "1",
        "--no-idle",
        "--max-time",
        "30s",
        "--stoa-arg=--workers=1",
        "--name",
        "process",
    ];
    let stdout = compare(&dir, &args, &out);
    // The CSV and the plot's title say which mode each result ran in.
    let csv = std::fs::read_to_string(out.join("process.csv")).unwrap_or_default();
    let svg = std::fs::read_to_string(out.join("process.svg")).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&out);
    let header: Vec<&str> = csv.lines().next().unwrap_or("").split(',').collect();
    let column = header.iter().position(|h| *h == "worker_mode");
    let column = column.unwrap_or_else(|| panic!("no worker_mode column: {csv}"));
    let csv_modes: Vec<&str> = csv
        .lines()
        .skip(1)
        .filter_map(|l| l.split(',').nth(column))
        .collect();
    assert_eq!(csv_modes, ["thread", "process"], "{csv}");
    assert!(
        svg.contains("stoa-bench compare: stoa in worker modes thread, process"),
        "the plot's title names both modes"
    );
    let rows = table_rows(&stdout);
    let modes: Vec<(&str, &str)> = rows.iter().map(|r| (r[0], r[1])).collect();
    assert_eq!(
        modes,
        [("epoll", "thread"), ("epoll", "process")],
        "{stdout}"
    );
    for r in &rows {
        assert_eq!((r[11], r[12]), ("0", "yes"), "errors/complete in {r:?}");
    }
    let cpu = |r: &Vec<&str>| r[13].parse::<f64>().unwrap_or(0.0);
    let (thread, process) = (cpu(&rows[0]), cpu(&rows[1]));
    assert!(thread > 0.0, "thread mode CPU us/req in {:?}", rows[0]);
    assert!(
        process >= thread / 4.0,
        "process mode {process} us/req against thread mode {thread}:\n{stdout}"
    );
}

//! The bytes of a plugin on their way from the apps directory into the
//! host: a plugin whose initialiser aborts, a file cut inside its loadable
//! segments and a sparse 3 GiB file are each refused with one line (at
//! start-up, dropped into a running host, and on SIGHUP with `--no-watch`)
//! while the other apps serve and a running generation keeps serving; a
//! private-copy directory planted in the temporary directory (world-writable,
//! or a symlink) is never used; and a clean exit leaves nothing in the
//! temporary directory, in both copy modes (memfd, and the private directory
//! forced by `STOA_PLUGIN_COPIES=dir`), with each generation's mapping
//! reported in status. `--max-plugin-size` takes K/M/G suffixes and refuses
//! a value it cannot read. A file without an ELF header is refused before
//! it is copied.

use crate::common::{bytes, fetch, install_atomically, path_of, status, wait_body, wait_log, HOT};
use crate::harness::{plugins, wait_until, Server, TempDir, SAMPLE_APPS, STOA, WAIT};
use rustix::process::Signal;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, SystemTime};

matrix!(
    bad_plugins_at_start_up_are_refused,
    bad_plugins_dropped_in_are_refused,
    bad_plugins_on_sighup_are_refused,
    a_planted_copy_directory_is_never_used,
    a_clean_exit_leaves_nothing_behind,
    max_plugin_size_takes_a_suffix,
);

/// The file name of the test plugin whose initialiser aborts.
const ABORT: &str = "libstoa_test_abort_on_load.so";
/// A copy of the article plugin cut inside its loadable segments.
const CUT: &str = "cut.so";
/// A sparse file over the default `--max-plugin-size` (1 GiB).
const BIG: &str = "big.so";
const BIG_LEN: u64 = 3 << 30;

/// Each bad file and the reason its refusal must give.
const REFUSALS: [(&str, &str); 3] = [
    (ABORT, "crashed while loading: signal 6 (SIGABRT)"),
    (CUT, "truncated: LOAD segment ends at byte"),
    (
        BIG,
        "too large: 3221225472 bytes, over --max-plugin-size 1073741824 bytes",
    ),
];

/// `plugin`'s bytes cut at 60% of the end of its last LOAD segment (the
/// debug info after the segments is never mapped, so a cut there would not
/// matter).
fn truncated(plugin: &str) -> Vec<u8> {
    let mut b = bytes(plugin);
    let u64_at = |b: &[u8], at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
    let phoff = u64_at(&b, 32) as usize;
    let phnum = u16::from_le_bytes([b[56], b[57]]) as usize;
    let end = (0..phnum)
        .map(|i| phoff + i * 56)
        .filter(|h| b[*h..*h + 4] == 1u32.to_le_bytes())
        .map(|h| u64_at(&b, h + 8) + u64_at(&b, h + 32))
        .max()
        .expect("a LOAD segment");
    b.truncate(end as usize * 6 / 10);
    b
}

/// Waits for one refusal line per bad file with its reason, checks status
/// lists each, and that the server never mapped the big file.
fn expect_refusals(server: &Server) {
    for (file, reason) in REFUSALS {
        let path = path_of(server, file);
        wait_log(server, &["refused plugin", &path, reason]);
        let lines = server.log_lines(&["refused plugin", &path]);
        assert_eq!(lines.len(), 1, "one line for {file}: {lines:#?}");
    }
    // Status is published after the scan's log lines: wait for it.
    let listed = |doc: &Value, file: &str, reason: &str| {
        let path = path_of(server, file);
        doc["refused"].as_array().is_some_and(|refused| {
            refused.iter().any(|r| {
                r["file"] == path.as_str()
                    && r["reason"].as_str().is_some_and(|t| t.contains(reason))
            })
        })
    };
    let mut doc = Value::Null;
    wait_until(WAIT, || {
        doc = status(server);
        REFUSALS
            .iter()
            .all(|(file, reason)| listed(&doc, file, reason))
    });
    for (file, reason) in REFUSALS {
        assert!(
            listed(&doc, file, reason),
            "{file} ({reason}) not in refused: {:#}",
            doc["refused"]
        );
    }
    let open: Vec<String> = fd_links(server.pid());
    assert!(
        !open.iter().any(|l| l.contains(BIG)),
        "a copy of {BIG} is open: {open:#?}"
    );
}

/// The sample apps still answer.
fn samples_serve(server: &Server) {
    assert_eq!(fetch(server, "/hello/"), (200, "Hello World!".into()));
    assert_eq!(server.get("/article").body.len(), 49);
    assert_eq!(fetch(server, "/_environ").0, 200);
}

/// Where each of the server's descriptors points.
fn fd_links(pid: u32) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("read the server's fd dir")
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .map(|l| l.display().to_string())
        .collect()
}

/// Writes `contents` (or a sparse file of `sparse` bytes) at `path`, with
/// an mtime 2 s in the past: a finished file, whatever the settle rule.
fn write_settled(path: &Path, contents: &[u8], sparse: u64) {
    std::fs::write(path, contents).expect("write a plugin file");
    let file = std::fs::File::options()
        .write(true)
        .open(path)
        .expect("reopen it");
    if sparse > 0 {
        file.set_len(sparse).expect("size a sparse file");
    }
    file.set_modified(SystemTime::now() - Duration::from_secs(2))
        .expect("set its mtime");
}

fn bad_plugins_at_start_up_are_refused(poller: &str) {
    let mut apps = SAMPLE_APPS.to_vec();
    apps.push("abort-on-load");
    let server = Server::launch(poller)
        .apps(&apps)
        .file(CUT, &truncated("article"))
        .sparse_file(BIG, BIG_LEN)
        .start();
    expect_refusals(&server);
    assert_eq!(server.log_lines(&["refused plugin"]).len(), 3);
    samples_serve(&server);
}

fn bad_plugins_dropped_in_are_refused(poller: &str) {
    let server = Server::launch(poller)
        .apps(SAMPLE_APPS)
        .file(HOT, &bytes("hot-v1"))
        .start();
    wait_body(&server, "/hot", "v1");
    let dir = server.apps_dir();
    install_atomically(&dir, ABORT, &bytes("abort-on-load"));
    install_atomically(&dir, CUT, &truncated("article"));
    let hidden = dir.join(format!(".{BIG}"));
    write_settled(&hidden, b"", BIG_LEN);
    std::fs::rename(&hidden, dir.join(BIG)).expect("rename the big file into place");
    // A crashing replacement of a running app.
    install_atomically(&dir, HOT, &bytes("abort-on-load"));
    expect_refusals(&server);
    wait_log(
        &server,
        &[
            "refused plugin",
            &path_of(&server, HOT),
            "crashed while loading: signal 6 (SIGABRT) (app hot 0.1.0 keeps serving)",
        ],
    );
    assert_eq!(fetch(&server, "/hot"), (200, "v1".into()));
    samples_serve(&server);
}

fn bad_plugins_on_sighup_are_refused(poller: &str) {
    let server = Server::launch(poller)
        .apps(SAMPLE_APPS)
        .file(HOT, &bytes("hot-v1"))
        .args(&["--no-watch"])
        .start();
    assert_eq!(fetch(&server, "/hot"), (200, "v1".into()));
    let dir = server.apps_dir();
    write_settled(&dir.join(ABORT), &bytes("abort-on-load"), 0);
    write_settled(&dir.join(CUT), &truncated("article"), 0);
    write_settled(&dir.join(BIG), b"", BIG_LEN);
    write_settled(&dir.join(HOT), &bytes("abort-on-load"), 0);
    server.signal(Signal::HUP);
    expect_refusals(&server);
    wait_log(
        &server,
        &["refused plugin", &path_of(&server, HOT), "keeps serving"],
    );
    assert_eq!(fetch(&server, "/hot"), (200, "v1".into()));
    samples_serve(&server);
}

/// The names in a directory.
fn entries(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| Some(e.ok()?.file_name().to_string_lossy().into_owned()))
                .collect()
        })
        .unwrap_or_default()
}

/// SIGTERM, and a clean exit within 10 s.
fn terminate(server: &mut Server) {
    server.signal(Signal::TERM);
    let status = server.wait_exit(Duration::from_secs(10));
    assert!(
        status.is_some_and(|s| s.success()),
        "exit after SIGTERM: {status:?}"
    );
}

/// Another user's trap: before the server starts, its old predictable copy
/// directory `$TMPDIR/stoa-<pid>-plugins` exists, world-writable (or as a
/// symlink to such a directory), holding another plugin under the first
/// copy's old name. Nothing of it is used, touched or loaded.
fn a_planted_copy_directory_is_never_used(poller: &str) {
    let evil = plugins()["hot-v1"].display().to_string();
    for mode in ["memfd", "dir"] {
        for symlink in [false, true] {
            let tmp = TempDir::new("tmpdir");
            let target = if symlink {
                "attacker"
            } else {
                "stoa-$$-plugins"
            };
            let mut script = format!(
                "mkdir -m 777 \"$TMPDIR/{target}\" && cp '{evil}' \"$TMPDIR/{target}/1-libarticle.so\""
            );
            if symlink {
                script += " && ln -s \"$TMPDIR/attacker\" \"$TMPDIR/stoa-$$-plugins\"";
            }
            let mut server = Server::launch(poller)
                .apps(SAMPLE_APPS)
                .env("TMPDIR", &tmp.path().display().to_string())
                .env("STOA_PLUGIN_COPIES", mode)
                .shell(&script)
                .start();
            let case = format!(
                "{mode} copies, planted {}",
                if symlink { "symlink" } else { "directory" }
            );
            let own = format!("stoa-{}-plugins", server.pid());
            let planted = tmp
                .path()
                .join(if symlink { "attacker" } else { own.as_str() });
            samples_serve(&server);
            assert_eq!(
                fetch(&server, "/hot").0,
                404,
                "{case}: the planted app is mounted"
            );
            assert!(server.log_lines(&["refused plugin"]).is_empty(), "{case}");
            terminate(&mut server);
            assert_eq!(
                entries(&planted),
                BTreeSet::from(["1-libarticle.so".to_string()]),
                "{case}: the planted directory was written to"
            );
            assert_eq!(
                std::fs::read(planted.join("1-libarticle.so")).expect("the planted file"),
                bytes("hot-v1"),
                "{case}: the planted file was changed"
            );
            let mut expected = BTreeSet::from([own]);
            if symlink {
                expected.insert("attacker".to_string());
            }
            assert_eq!(entries(tmp.path()), expected, "{case}: left in TMPDIR");
        }
    }
}

/// Both copy modes: every generation (two of `hot`) reports its mapped
/// size; memfd mode keeps exactly one descriptor per generation, each with
/// its own name; the directory mode keeps its copies unlinked; after
/// SIGTERM the temporary directory is empty.
fn a_clean_exit_leaves_nothing_behind(poller: &str) {
    for mode in ["memfd", "dir"] {
        let tmp = TempDir::new("tmpdir");
        let mut server = Server::launch(poller)
            .apps(&["article"])
            .file(HOT, &bytes("hot-v1"))
            .env("TMPDIR", &tmp.path().display().to_string())
            .env("STOA_PLUGIN_COPIES", mode)
            .start();
        wait_body(&server, "/hot", "v1");
        install_atomically(&server.apps_dir(), HOT, &bytes("hot-v2"));
        wait_body(&server, "/hot", "v2");
        let doc = status(&server);
        let generations: Vec<&Value> = doc["generations"]
            .as_array()
            .expect("generations")
            .iter()
            .collect();
        assert_eq!(generations.len(), 3, "{mode}: {generations:#?}");
        for g in &generations {
            assert!(
                g["mapped_bytes"].as_u64().is_some_and(|b| b > 0),
                "{mode}: {g}"
            );
        }
        let memfds: BTreeSet<String> = fd_links(server.pid())
            .into_iter()
            .filter(|l| l.starts_with("/memfd:"))
            .collect();
        if mode == "memfd" {
            // A memfd the kernel would not seal (EBUSY, seen once on a
            // loaded machine) is replaced by a private file, with a warning.
            let unsealed = server.log_lines(&["cannot seal the memory file for"]).len();
            assert_eq!(
                memfds.len() + unsealed,
                3,
                "{mode}: one memfd per generation: {memfds:#?}"
            );
            assert!(
                memfds.iter().all(|m| m.starts_with("/memfd:stoa:")),
                "{memfds:#?}"
            );
        } else {
            assert!(memfds.is_empty(), "{mode}: {memfds:#?}");
            let dirs = entries(tmp.path());
            assert_eq!(dirs.len(), 1, "{mode}: one private directory: {dirs:?}");
            let private = tmp.path().join(dirs.iter().next().expect("a directory"));
            use std::os::unix::fs::PermissionsExt;
            let mode_bits = std::fs::symlink_metadata(&private)
                .expect("stat it")
                .permissions()
                .mode();
            assert_eq!(mode_bits & 0o777, 0o700, "{}", private.display());
            assert!(
                entries(&private).is_empty(),
                "copies left linked: {:?}",
                entries(&private)
            );
        }
        terminate(&mut server);
        assert!(
            wait_until(Duration::from_secs(1), || entries(tmp.path()).is_empty()),
            "{mode}: left in TMPDIR: {:?}",
            entries(tmp.path())
        );
    }
}

/// A 900 MB sparse `x.so` with no ELF header (under the default
/// `--max-plugin-size`) is refused on its first bytes, before any copy:
/// the host runs under a file-size limit of 128 MiB (256 MiB where the
/// shell counts `ulimit -f` in KiB), which a copy of it would pass (the
/// kernel's SIGXFSZ, or a failed write), while the sample apps (smaller)
/// are copied and serve. Backend-free: one backend.
#[test]
fn a_file_without_elf_magic_is_refused_before_it_is_copied() {
    let server = Server::launch("epoll")
        .apps(SAMPLE_APPS)
        .sparse_file("x.so", 900 << 20)
        .shell("ulimit -f 262144")
        .start();
    wait_log(
        &server,
        &[
            "refused plugin",
            &path_of(&server, "x.so"),
            "not a loadable shared library (not an ELF file)",
        ],
    );
    samples_serve(&server);
    assert!(!server.log_contains("copy the plugin"), "{}", server.log());
}

/// `--max-plugin-size 64M`: a 100 MiB file is refused with the bound in
/// bytes, the sample apps (smaller) load.
fn max_plugin_size_takes_a_suffix(poller: &str) {
    let server = Server::launch(poller)
        .apps(SAMPLE_APPS)
        .sparse_file(BIG, 100 << 20)
        .args(&["--max-plugin-size", "64M"])
        .start();
    wait_log(
        &server,
        &[
            "refused plugin",
            &path_of(&server, BIG),
            "too large: 104857600 bytes, over --max-plugin-size 67108864 bytes",
        ],
    );
    samples_serve(&server);
}

#[test]
fn a_bad_max_plugin_size_is_refused_by_name() {
    let out = std::process::Command::new(STOA)
        .args(["--max-plugin-size", "12Q"])
        .output()
        .expect("run stoa");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("--max-plugin-size") && stderr.contains("12Q"),
        "{stderr}"
    );
}

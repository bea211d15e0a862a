//! `stoa check` on TLS certificates: a key open to others, a chain out of
//! order or missing its intermediate, and a certificate near its end are
//! warnings (exit 0); an expired certificate and a key that is not the
//! certificate's are problems (exit 1), naming the files.

use crate::common::run_to_exit;
use crate::harness::{TempDir, STOA};
use crate::tls::fixture;
use crate::tls_certs::{chmod, concat, expired, self_signed, shown, with_intermediate};
use std::path::Path;
use std::process::Command;

/// `stoa check` with a TLS bind serving `cert` and `key`: its exit code
/// and what it printed.
fn check(dir: &Path, cert: &Path, key: &Path) -> (i32, String) {
    let apps = dir.join("apps");
    std::fs::create_dir_all(&apps).expect("apps dir");
    let out = run_to_exit(
        Command::new(STOA)
            .args(["check", "--poller", "epoll", "--bind", "tls://127.0.0.1:0"])
            .arg("--apps")
            .arg(&apps)
            .arg("--tls-cert")
            .arg(cert)
            .arg("--tls-key")
            .arg(key)
            .env_remove("STOA_POLLER")
            .env_remove("STOA_BIND")
            .env_remove("STOA_TLS_CERT")
            .env_remove("STOA_TLS_KEY"),
    );
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text)
}

fn lines<'t>(text: &'t str, prefix: &str) -> Vec<&'t str> {
    text.lines().filter(|l| l.starts_with(prefix)).collect()
}

/// `check` of the test certificate (cert.pem) with a copy in `dir` of
/// the test key `key`, of `mode`: the copy, the exit code, the text.
fn check_with_key(dir: &Path, key: &str, mode: u32) -> (std::path::PathBuf, i32, String) {
    let copy = dir.join(key);
    std::fs::copy(fixture(key), &copy).expect("copy a fixture");
    chmod(&copy, mode);
    let (code, text) = check(dir, Path::new(&fixture("cert.pem")), &copy);
    (copy, code, text)
}

#[test]
fn a_key_file_others_can_read_is_a_warning() {
    let dir = TempDir::new("check-key-mode");
    let (key, code, text) = check_with_key(dir.path(), "key.pem", 0o644);
    assert_eq!(code, 0, "{text}");
    let warnings = lines(&text, "warning: ");
    assert_eq!(warnings.len(), 1, "{text}");
    assert!(
        warnings[0].contains(&shown(&key))
            && warnings[0].contains("mode 0644")
            && warnings[0].contains("chmod 600"),
        "{text}"
    );
    assert!(
        text.contains("the configuration is OK, with 1 warning(s)"),
        "{text}"
    );
    assert!(
        text.contains("# tls --tls-cert/--tls-key: ") && text.contains("localhost; notAfter 2126-"),
        "{text}"
    );
    chmod(&key, 0o600);
    let (code, text) = check(dir.path(), Path::new(&fixture("cert.pem")), &key);
    assert_eq!(code, 0, "{text}");
    assert!(lines(&text, "warning: ").is_empty(), "{text}");
}

#[test]
fn a_chain_out_of_order_or_missing_its_intermediate_is_a_warning() {
    let dir = TempDir::new("check-chain");
    let d = dir.path();
    with_intermediate(d);
    let key = d.join("leaf.key");
    let good = concat(d, &["leaf.pem", "inter.pem", "root.pem"], "good.pem");
    let (code, text) = check(d, &good, &key);
    assert_eq!(code, 0, "{text}");
    assert!(lines(&text, "warning: ").is_empty(), "{text}");
    let reordered = concat(d, &["leaf.pem", "root.pem", "inter.pem"], "reordered.pem");
    let (code, text) = check(d, &reordered, &key);
    assert_eq!(code, 0, "{text}");
    let warnings = lines(&text, "warning: ");
    assert!(
        !warnings.is_empty()
            && warnings[0].contains("reordered.pem")
            && warnings[0]
                .contains("certificate 1 (CN=localhost) is issued by CN=Stoa test intermediate")
            && warnings[0].contains("out of order or misses an intermediate"),
        "{text}"
    );
    let missing = concat(d, &["leaf.pem", "root.pem"], "missing.pem");
    let (code, text) = check(d, &missing, &key);
    assert_eq!(code, 0, "{text}");
    assert_eq!(lines(&text, "warning: ").len(), 1, "{text}");
    assert!(text.contains("misses an intermediate"), "{text}");
}

#[test]
fn a_certificate_near_its_end_is_a_warning_and_an_expired_one_a_problem() {
    let dir = TempDir::new("check-expiry");
    let (cert, key) = self_signed(dir.path(), "soon", 3);
    let (code, text) = check(dir.path(), &cert, &key);
    assert_eq!(code, 0, "{text}");
    let warnings = lines(&text, "warning: ");
    assert!(
        warnings.len() == 1
            && warnings[0].contains("soon.pem")
            && (warnings[0].contains("expires in 2 days 23 hours")
                || warnings[0].contains("expires in 3 days")),
        "{text}"
    );
    let (cert, key) = expired(dir.path(), "old");
    let (code, text) = check(dir.path(), &cert, &key);
    assert_eq!(code, 1, "{text}");
    let problems = lines(&text, "problem: ");
    assert!(
        problems.len() == 1
            && problems[0].contains("old.pem")
            && problems[0].contains("expired")
            && problems[0].contains("at 2020-02-01T00:00:00Z"),
        "{text}"
    );
}

#[test]
fn a_key_that_is_not_the_certificates_is_a_problem_naming_both() {
    let dir = TempDir::new("check-mismatch");
    let (key, code, text) = check_with_key(dir.path(), "key2.pem", 0o600);
    assert_eq!(code, 1, "{text}");
    let problems = lines(&text, "problem: ");
    assert!(
        problems.len() == 1
            && problems[0].contains("cert.pem")
            && problems[0].contains(&shown(&key)),
        "{text}"
    );
}

//! Certificates made at test time with the openssl CLI, for what the
//! fixed ones in tests/fixtures/tls cannot be: one that expires in a few
//! days, one already expired (`openssl ca` with its own dates: `-days`
//! takes no past), and a chain through an intermediate CA.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Runs `openssl ARGS` in `dir`; it must succeed.
pub(crate) fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("openssl is needed: `apt-get install -y openssl` ({e})"));
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs `openssl req` with a new P-256 key, `dir/NAME.key` (mode 0600),
/// and `args`.
fn req_with_new_key(dir: &Path, name: &str, args: &[&str]) -> PathBuf {
    let key = format!("{name}.key");
    let mut all = vec![
        "req",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-keyout",
        &key,
    ];
    all.extend_from_slice(args);
    openssl(dir, &all);
    chmod(&dir.join(&key), 0o600);
    dir.join(key)
}

/// A new key `dir/NAME.key` and a request for `subject`, `dir/NAME.csr`.
fn key_and_request(dir: &Path, name: &str, subject: &str) {
    let csr = format!("{name}.csr");
    req_with_new_key(dir, name, &["-new", "-out", &csr, "-subj", subject]);
}

pub(crate) fn chmod(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// A self-signed certificate for localhost valid for `days`:
/// `dir/NAME.pem` and its key `dir/NAME.key` (mode 0600).
pub(crate) fn self_signed(dir: &Path, name: &str, days: u32) -> (PathBuf, PathBuf) {
    let cert = format!("{name}.pem");
    let days = days.to_string();
    let key = req_with_new_key(
        dir,
        name,
        &[
            "-x509",
            "-out",
            &cert,
            "-days",
            &days,
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost",
        ],
    );
    (dir.join(cert), key)
}

/// A self-signed certificate for localhost that expired in 2020:
/// `dir/NAME.pem` and its key `dir/NAME.key`.
pub(crate) fn expired(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    key_and_request(dir, name, "/CN=localhost");
    let ca = dir.join(format!("{name}-ca"));
    std::fs::create_dir_all(&ca).expect("the CA's directory");
    std::fs::write(ca.join("index.txt"), "").expect("index");
    std::fs::write(ca.join("serial"), "01\n").expect("serial");
    std::fs::write(
        ca.join("ca.cnf"),
        "[ca]\ndefault_ca = d\n[d]\ndatabase = index.txt\nnew_certs_dir = .\nserial = serial\n\
         default_md = sha256\npolicy = p\nunique_subject = no\nx509_extensions = ext\n\
         [p]\ncommonName = supplied\n\
         [ext]\nsubjectAltName = DNS:localhost\nbasicConstraints = CA:FALSE\n",
    )
    .expect("the CA's configuration");
    let (key, csr, cert) = (
        dir.join(format!("{name}.key")),
        dir.join(format!("{name}.csr")),
        dir.join(format!("{name}.pem")),
    );
    openssl(
        &ca,
        &[
            "ca",
            "-batch",
            "-config",
            "ca.cnf",
            "-selfsign",
            "-keyfile",
            &shown(&key),
            "-in",
            &shown(&csr),
            "-startdate",
            "20200101000000Z",
            "-enddate",
            "20200201000000Z",
            "-notext",
            "-out",
            &shown(&cert),
        ],
    );
    (cert, key)
}

/// A leaf for localhost signed by an intermediate CA signed by a root:
/// the files `dir/leaf.pem`, `dir/leaf.key`, `dir/inter.pem`,
/// `dir/root.pem`.
pub(crate) fn with_intermediate(dir: &Path) {
    std::fs::write(dir.join("ca.ext"), "basicConstraints=critical,CA:TRUE\n").expect("ca.ext");
    std::fs::write(
        dir.join("leaf.ext"),
        "subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\n",
    )
    .expect("leaf.ext");
    key_and_request(dir, "root", "/CN=Stoa test root");
    openssl(
        dir,
        &[
            "x509", "-req", "-in", "root.csr", "-signkey", "root.key", "-days", "30", "-extfile",
            "ca.ext", "-out", "root.pem",
        ],
    );
    for (name, subject, issuer, ext) in [
        ("inter", "/CN=Stoa test intermediate", "root", "ca.ext"),
        ("leaf", "/CN=localhost", "inter", "leaf.ext"),
    ] {
        key_and_request(dir, name, subject);
        let (ca, ca_key) = (format!("{issuer}.pem"), format!("{issuer}.key"));
        openssl(
            dir,
            &[
                "x509",
                "-req",
                "-in",
                &format!("{name}.csr"),
                "-CA",
                &ca,
                "-CAkey",
                &ca_key,
                "-CAcreateserial",
                "-days",
                "30",
                "-extfile",
                ext,
                "-out",
                &format!("{name}.pem"),
            ],
        );
    }
}

/// The files' text, one after another (a chain file).
pub(crate) fn concat(dir: &Path, parts: &[&str], to: &str) -> PathBuf {
    let text: String = parts
        .iter()
        .map(|p| std::fs::read_to_string(dir.join(p)).expect("a PEM file"))
        .collect();
    let path = dir.join(to);
    std::fs::write(&path, text).expect("the chain file");
    path
}

/// A certificate's notAfter as RFC 3339 (`2126-11-08T06:07:19Z`), as
/// `openssl x509 -enddate` says it.
pub(crate) fn not_after(cert: &Path) -> String {
    let out = Command::new("openssl")
        .args(["x509", "-noout", "-enddate", "-dateopt", "iso_8601", "-in"])
        .arg(cert)
        .output()
        .unwrap_or_else(|e| panic!("openssl is needed: `apt-get install -y openssl` ({e})"));
    let text = String::from_utf8_lossy(&out.stdout);
    let date = text
        .trim()
        .strip_prefix("notAfter=")
        .unwrap_or_else(|| panic!("openssl x509 -enddate: {text:?}"));
    date.replacen(' ', "T", 1)
}

pub(crate) fn shown(path: &Path) -> String {
    path.display().to_string()
}

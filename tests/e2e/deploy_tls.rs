//! The deploy files' TLS, run as an operator would: systemd's HTTPS socket
//! and the service's TLS drop-in (the unit's `ExecStart` under
//! `systemd-socket-activate`, both sockets named as the units name them);
//! the README's TLS `docker run` over the image's `ENV` (HTTPS, and the
//! `HEALTHCHECK`'s URL); and the Kubernetes pod (the stoa container's
//! `args` and `env` over the files its volumes give it, the Secret's
//! `tls.crt` and `tls.key` among them, and its probes over HTTPS).
//! Backend-free: each runs once, on the backend the files choose.

use crate::client::{get, tls_fixture, Client, Response, Transport};
use crate::common::{apps_dir_with, try_get};
use crate::deploy::free_port;
use crate::deploy_files::{read, root};
use crate::harness::{wait_until, Captured, Group, TempDir, START_TIMEOUT, STOA};
use serde_json::Value;
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

/// The values of `key=` in a unit file's lines, in order.
fn unit_values(unit: &str, key: &str) -> Vec<String> {
    read(unit)
        .lines()
        .filter_map(|l| l.strip_prefix(key)?.strip_prefix('='))
        .map(str::to_string)
        .collect()
}

/// The one value of `key=` in a unit file.
fn unit_value(unit: &str, key: &str) -> String {
    let values = unit_values(unit, key);
    match &values[..] {
        [one] => one.clone(),
        _ => panic!("{unit}: {key}= {values:?}, not one value"),
    }
}

/// Copies the test certificate and its key into `dir` as `tls.crt` and
/// `tls.key` (the names the deploy files use), with `key_mode`.
fn certificate_files(dir: &Path, key_mode: u32) {
    std::fs::create_dir_all(dir).expect("the TLS directory");
    std::fs::copy(tls_fixture("cert.pem"), dir.join("tls.crt")).expect("tls.crt");
    let key = dir.join("tls.key");
    std::fs::copy(tls_fixture("key.pem"), &key).expect("tls.key");
    let mode = std::fs::Permissions::from_mode(key_mode);
    std::fs::set_permissions(&key, mode).expect("chmod tls.key");
}

/// `GET path` on a new connection to 127.0.0.1:`port` over `transport`.
fn fetch(port: u16, transport: Transport, path: &str) -> Response {
    Client::connect_over(port, transport).request(&get(path))
}

/// Asserts a host on `port` serves TLS with the test certificate (the
/// client verifies it for `localhost`) and tells the environ app so.
fn serves_https(port: u16, log: &str) {
    let r = fetch(port, Transport::Tls, "/_environ");
    assert_eq!(r.status, 200, "{r:?}\n{log}");
    assert!(r.text().contains("\"scheme\": \"https\""), "{}", r.text());
}

/// Starts `cmd` (a stoa, in a group of its own) and waits until it has
/// printed `lines` `listening on` lines; the group and what it printed.
fn serve(cmd: &mut Command, lines: usize) -> (Group, Arc<Captured>, Arc<Captured>) {
    let mut group = Group::spawn(
        cmd.env_remove("STOA_POLLER")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    )
    .expect("start stoa");
    let stdout = Captured::collect(group.0.stdout.take().expect("piped stdout"));
    let log = Captured::collect(group.0.stderr.take().expect("piped stderr"));
    let listening = stdout.wait(START_TIMEOUT, |t| {
        t.matches("listening on ").count() >= lines
    });
    assert!(listening, "{}\n{}", stdout.text(), log.text());
    (group, stdout, log)
}

/// The port of the `listening on SCHEME://127.0.0.1:PORT` line.
fn port_of(stdout: &Captured, scheme: &str) -> u16 {
    let text = stdout.text();
    let prefix = format!("listening on {scheme}://127.0.0.1:");
    text.lines()
        .find_map(|l| {
            l.strip_prefix(&prefix)?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no {prefix} line: {text}"))
}

/// stoa.service with its TLS drop-in, as systemd starts it: the
/// `ExecStart`, the drop-in's environment naming the files in
/// /etc/stoa/tls (here copies of the test certificate, the key 0640), and
/// the sockets of stoa.socket and stoa-tls.socket passed by name. Both
/// serve, the TLS one with the certificate.
#[test]
fn the_units_tls_socket_and_drop_in_serve_https() {
    let drop_in = "deploy/stoa.service.d/tls.conf";
    let sockets = unit_value(drop_in, "Sockets");
    assert_eq!(sockets, "stoa.socket stoa-tls.socket", "{drop_in}");
    assert!(unit_value(drop_in, "Requires").contains("stoa-tls.socket"));
    assert_eq!(
        unit_value("deploy/stoa-tls.socket", "Service"),
        "stoa.service"
    );
    // stoa.socket names no socket: systemd names it after the unit.
    assert!(unit_values("deploy/stoa.socket", "FileDescriptorName").is_empty());
    let tls_name = unit_value("deploy/stoa-tls.socket", "FileDescriptorName");
    let dir = TempDir::new("systemd-tls");
    let etc = dir.path().join("etc/stoa");
    certificate_files(&etc.join("tls"), 0o640);
    let apps = apps_dir_with(dir.path(), &["hello-project", "article", "environ"]);
    let config = read("deploy/stoa.toml")
        .lines()
        .map(|l| {
            if l.starts_with("apps_dir = ") {
                format!("apps_dir = \"{}\"", apps.display())
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(etc.join("stoa.toml"), config).expect("stoa.toml");
    let mapped = |v: &str| v.replace("/etc/stoa/", &format!("{}/", etc.display()));
    let exec = mapped(&unit_value("deploy/stoa.service", "ExecStart"));
    let mut words = exec.split_whitespace();
    assert_eq!(words.next(), Some("/usr/local/bin/stoa"), "{exec}");
    let plain = free_port();
    let tls = loop {
        let port = free_port();
        if port != plain {
            break port;
        }
    };
    let mut cmd = Command::new("systemd-socket-activate");
    cmd.args(["-l", &format!("127.0.0.1:{plain}")])
        .args(["-l", &format!("127.0.0.1:{tls}")])
        .arg(format!("--fdname=stoa.socket:{tls_name}"));
    let environment = unit_value(drop_in, "Environment");
    for pair in environment.split_whitespace() {
        cmd.arg(format!("--setenv={}", mapped(pair)));
    }
    let mut group = Group::spawn(
        cmd.arg(STOA)
            .args(words)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped()),
    )
    .expect("systemd-socket-activate is needed (apt-get install -y systemd)");
    let log = Captured::collect(group.0.stderr.take().expect("piped stderr"));
    // systemd-socket-activate starts stoa on the first connection.
    let mut last = None;
    let served = wait_until(Duration::from_secs(20), || {
        last = Some(try_get(plain, "/article"));
        last == Some(Ok(200))
    });
    assert!(served, "the plain socket answered {last:?}\n{}", log.text());
    serves_https(tls, &log.text());
}

/// The image's `ENV` (with the plugins it bakes in) and the README's TLS
/// `docker run`: the files mounted read-only at the directory the
/// variables name, HTTPS on the published port, and the plain loopback
/// bind answering the `HEALTHCHECK`'s URL.
#[test]
fn the_tls_docker_run_serves_https_and_its_healthcheck() {
    let dockerfile = read("Dockerfile").replace("\\\n", " ");
    let env_line = dockerfile
        .lines()
        .find(|l| l.starts_with("ENV "))
        .expect("an ENV line in the Dockerfile");
    // The image's variables, which `-e` overrides.
    let mut env: BTreeMap<String, String> = pairs(&env_line[4..]).into_iter().collect();
    let health = dockerfile
        .lines()
        .find_map(|l| l.split("CMD ").nth(1).filter(|_| l.contains("HEALTHCHECK")))
        .expect("a HEALTHCHECK CMD");
    let health: Vec<String> = serde_json::from_str(health).expect("the CMD as a JSON array");
    let health_url = health.last().expect("a URL").clone();
    let exposed = dockerfile
        .lines()
        .find_map(|l| l.strip_prefix("EXPOSE "))
        .expect("EXPOSE");
    assert!(exposed.split_whitespace().any(|p| p == "8443"), "{exposed}");
    let readme = read("deploy/README.md").replace("\\\n", " ");
    let run = readme
        .lines()
        .find(|l| l.starts_with("docker run") && l.contains("STOA_TLS_CERT"))
        .expect("the README's TLS docker run");
    let words: Vec<&str> = run.split_whitespace().collect();
    let flag = |name: &str| -> Vec<&str> {
        words
            .windows(2)
            .filter(|w| w[0] == name)
            .map(|w| w[1])
            .collect()
    };
    let [published] = flag("-p")[..] else {
        panic!("not one -p: {run}")
    };
    let (_, tls_port) = published.split_once(':').expect("HOST:CONTAINER");
    let [volume] = flag("-v")[..] else {
        panic!("not one -v: {run}")
    };
    let (_, in_container) = volume
        .strip_suffix(":ro")
        .and_then(|v| v.split_once(':'))
        .unwrap_or_else(|| panic!("a read-only mount: {volume}"));
    for pair in flag("-e") {
        env.extend(pairs(pair));
    }
    let dir = TempDir::new("docker-tls");
    let tls_dir = format!("{}{in_container}", dir.path().display());
    certificate_files(Path::new(&tls_dir), 0o640);
    let apps = apps_dir_with(dir.path(), &["hello-project", "article", "environ"]);
    // The HEALTHCHECK asks a plain bind on the container's loopback.
    let (health_addr, health_path) = health_url
        .strip_prefix("http://127.0.0.1:")
        .and_then(|rest| rest.split_once('/'))
        .unwrap_or_else(|| panic!("not a loopback URL: {health_url}"));
    let mut cmd = Command::new(STOA);
    for (k, v) in &env {
        let v = match k.as_str() {
            "STOA_APPS" => apps.display().to_string(),
            "STOA_BIND" => {
                let tls = format!("tls://0.0.0.0:{tls_port}");
                let plain = format!("127.0.0.1:{health_addr}");
                let binds: Vec<&str> = v.split(',').collect();
                assert!(binds.contains(&tls.as_str()), "{v} lacks {tls}");
                assert!(binds.contains(&plain.as_str()), "{v} lacks {plain}");
                let free = format!("127.0.0.1:{}", free_port());
                v.replace(&plain, &free).replace(&tls, "tls://127.0.0.1:0")
            }
            _ => v.replace(in_container, &tls_dir),
        };
        cmd.env(k, v);
    }
    let (_group, stdout, log) = serve(&mut cmd, 2);
    let health_path = format!("/{health_path}");
    let r = fetch(port_of(&stdout, "http"), Transport::Plain, &health_path);
    assert_eq!(r.status, 200, "{r:?}");
    serves_https(port_of(&stdout, "https"), &log.text());
}

/// `K=V` words as pairs.
fn pairs(words: &str) -> Vec<(String, String)> {
    words
        .split_whitespace()
        .map(|w| {
            let (k, v) = w.split_once('=').unwrap_or_else(|| panic!("not K=V: {w}"));
            (k.to_string(), v.to_string())
        })
        .collect()
}

/// The YAML documents of a deploy file as JSON, read by PyYAML.
fn yaml(path: &str) -> Vec<Value> {
    let program = "import json, sys, yaml\n\
                   print(json.dumps(list(yaml.safe_load_all(open(sys.argv[1])))))";
    let out = Command::new("python3")
        .args(["-c", program])
        .arg(root().join(path))
        .output()
        .unwrap_or_else(|e| panic!("python3 is needed ({e})"));
    assert!(
        out.status.success(),
        "PyYAML is needed (pip install pyyaml): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the documents as JSON")
}

/// The element of a JSON array whose `name` is `name`.
fn named<'a>(list: &'a Value, name: &str) -> &'a Value {
    list.as_array()
        .and_then(|l| l.iter().find(|v| v["name"] == name))
        .unwrap_or_else(|| panic!("no {name} in {list}"))
}

/// A string field of a manifest.
fn text(v: &Value) -> &str {
    v.as_str().unwrap_or_else(|| panic!("not a string: {v}"))
}

/// Writes what a projected volume's sources give under `at`: the
/// ConfigMap's keys (configmap.yaml) and the TLS Secret's (the test
/// certificate as `tls.crt`, its key as `tls.key`; the Secret is the one
/// the README creates), each with its mode; `retarget` rewrites the paths
/// in the ConfigMap's files.
fn project(sources: &Value, at: &Path, retarget: &dyn Fn(&str) -> String) {
    let configmap = yaml("deploy/k8s/configmap.yaml").remove(0);
    for source in sources.as_array().expect("sources") {
        let (of, is_map) = match (source.get("configMap"), source.get("secret")) {
            (Some(map), _) => (map, true),
            (_, Some(secret)) => (secret, false),
            _ => panic!("a source of another kind: {source}"),
        };
        if is_map {
            assert_eq!(of["name"], configmap["metadata"]["name"]);
        } else {
            let create = format!("kubectl create secret tls {} ", text(&of["name"]));
            assert!(read("deploy/README.md").contains(&create), "{create}");
        }
        for item in of["items"].as_array().expect("items") {
            let key = text(&item["key"]);
            let bytes = match (is_map, key) {
                (true, _) => retarget(text(&configmap["data"][key])).into_bytes(),
                (false, "tls.crt") => std::fs::read(tls_fixture("cert.pem")).expect("cert.pem"),
                (false, "tls.key") => std::fs::read(tls_fixture("key.pem")).expect("key.pem"),
                (false, _) => panic!("a kubernetes.io/tls Secret has no {key}"),
            };
            let path = at.join(text(&item["path"]));
            std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
            std::fs::write(&path, bytes).expect("write an item");
            let mode = item["mode"].as_u64().expect("an item's mode") as u32;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))
                .expect("chmod an item");
        }
    }
}

/// The stoa container of deployment.yaml on the files its volumes give
/// it, here under a directory of the test's (the init container's apps,
/// the projected ConfigMap and Secret): its `args` and `env` serve HTTPS
/// on the port its probes and the Service's `targetPort` name, and the
/// probes' paths answer 200 over HTTPS without verification, as the
/// kubelet asks them.
#[test]
fn the_kubernetes_pod_serves_https_from_its_secret_and_answers_its_probes() {
    let deployment = yaml("deploy/k8s/deployment.yaml").remove(0);
    let pod = &deployment["spec"]["template"]["spec"];
    let stoa = named(&pod["containers"], "stoa");
    let dir = TempDir::new("k8s-tls");
    let mounts: Vec<String> = (stoa["volumeMounts"].as_array().expect("volumeMounts"))
        .iter()
        .map(|m| text(&m["mountPath"]).to_string())
        .collect();
    // The paths into the mounts, as the container sees them, here: a
    // value that starts with one, and quoted ones in a file's text.
    let here = dir.path().display().to_string();
    let inside = |s: &str| -> String {
        if mounts.iter().any(|m| s.starts_with(&format!("{m}/"))) {
            return format!("{here}{s}");
        }
        let mut s = s.to_string();
        for m in &mounts {
            s = s.replace(&format!("\"{m}/"), &format!("\"\0{m}/"));
        }
        s.replace('\0', &here)
    };
    for mount in stoa["volumeMounts"].as_array().expect("volumeMounts") {
        let at = dir
            .path()
            .join(text(&mount["mountPath"]).trim_start_matches('/'));
        let volume = named(&pod["volumes"], text(&mount["name"]));
        if let Some(projected) = volume.get("projected") {
            project(&projected["sources"], &at, &inside);
        } else if volume.get("emptyDir").is_some() {
            std::fs::create_dir_all(&at).expect("an emptyDir");
        } else {
            panic!("a volume of another kind: {volume}");
        }
    }
    // The init container fills the apps volume's `apps` directory.
    let apps_mount = named(&stoa["volumeMounts"], "apps")["mountPath"].clone();
    let apps_volume = dir.path().join(text(&apps_mount).trim_start_matches('/'));
    apps_dir_with(&apps_volume, &["hello-project", "article", "environ"]);
    let args: Vec<String> = (stoa["args"].as_array().expect("args"))
        .iter()
        .map(|a| inside(text(a)))
        .collect();
    let bind = args
        .windows(2)
        .find(|w| w[0] == "--bind")
        .map(|w| w[1].clone())
        .expect("a --bind in args");
    let port = bind
        .strip_prefix("tls://0.0.0.0:")
        .unwrap_or_else(|| panic!("a TLS bind on every address: {bind}"));
    let https = named(&stoa["ports"], "https");
    assert_eq!(https["containerPort"].to_string(), port);
    for probe in ["readinessProbe", "livenessProbe"] {
        let get = &stoa[probe]["httpGet"];
        assert!(
            get["scheme"] == "HTTPS" && get["port"] == "https",
            "{probe}: {get}"
        );
    }
    let service = yaml("deploy/k8s/service.yaml").remove(0);
    assert_eq!(service["spec"]["ports"][0]["targetPort"], "https");
    let mut cmd = Command::new(STOA);
    cmd.args(args.iter().map(|a| a.replace(&bind, "tls://127.0.0.1:0")));
    for var in stoa["env"].as_array().expect("env") {
        cmd.env(text(&var["name"]), inside(text(&var["value"])));
    }
    let (_group, stdout, log) = serve(&mut cmd, 1);
    let port = port_of(&stdout, "https");
    for probe in ["readinessProbe", "livenessProbe"] {
        let path = text(&stoa[probe]["httpGet"]["path"]).to_string();
        let out = Command::new("curl")
            .args(["-sS", "-k", "--max-time", "10", "-o", "/dev/null"])
            .args(["-w", "%{http_code}"])
            .arg(format!("https://127.0.0.1:{port}{path}"))
            .output()
            .unwrap_or_else(|e| panic!("curl is needed ({e})"));
        let code = String::from_utf8_lossy(&out.stdout);
        assert_eq!(code, "200", "{probe} {path}: {}", log.text());
    }
    serves_https(port, &log.text());
}

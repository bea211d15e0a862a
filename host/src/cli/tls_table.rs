//! The `[tls."ADDR"]` tables of the configuration file: what the
//! `tls://ADDR` bind serves, in place of the `tls_*` keys (the flags):
//!
//! ```toml
//! [tls."0.0.0.0:8443"]
//! certs = [
//!   { cert = "example.com.pem", key = "example.com.key" },  # the default
//!   { cert = "api.example.org.pem", key = "api.example.org.key" },
//! ]
//! client_ca = "clients-ca.pem"   # mutual TLS
//! client_auth = "optional"       # or "required" (the default)
//! min_version = "1.3"            # or "1.2" (the default)
//! ```
//!
//! `cert` and `key` (one certificate) may stand for `certs`; a table with
//! neither serves `tls_cert`/`tls_key`.

use super::problem::Problem;
use super::values::nearest;
use crate::settings::{CertPair, ClientAuth, MinVersion};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The keys of a `[tls."ADDR"]` table.
const KEYS: [&str; 7] = [
    "certs",
    "cert",
    "key",
    "client_ca",
    "client_auth",
    "min_version",
    "http2",
];

/// One `[tls."ADDR"]` table as written.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TlsSection {
    pub certs: Vec<CertPair>,
    pub client_ca: Option<PathBuf>,
    pub client_auth: Option<ClientAuth>,
    pub min_version: Option<MinVersion>,
    /// Offer HTTP/2 in ALPN (`--http2` when not given).
    pub http2: Option<bool>,
}

impl TlsSection {
    /// The table as `--print-config` writes it.
    pub(super) fn to_toml(&self) -> toml::Table {
        let mut t = toml::Table::new();
        let text = |p: &PathBuf| toml::Value::String(p.display().to_string());
        if !self.certs.is_empty() {
            let certs = self
                .certs
                .iter()
                .map(|c| {
                    let mut pair = toml::Table::new();
                    pair.insert("cert".into(), text(&c.cert));
                    pair.insert("key".into(), text(&c.key));
                    toml::Value::Table(pair)
                })
                .collect();
            t.insert("certs".into(), toml::Value::Array(certs));
        }
        if let Some(ca) = &self.client_ca {
            t.insert("client_ca".into(), text(ca));
        }
        if let Some(auth) = self.client_auth {
            t.insert("client_auth".into(), auth.name().into());
        }
        if let Some(v) = self.min_version {
            t.insert("min_version".into(), v.name().into());
        }
        if let Some(on) = self.http2 {
            t.insert("http2".into(), on.into());
        }
        t
    }
}

/// The `[tls."ADDR"]` tables, by the address as written.
pub(super) fn tls_sections(
    value: &toml::Value,
) -> Result<BTreeMap<String, TlsSection>, Vec<Problem>> {
    let Some(tables) = value.as_table() else {
        return Err(vec![Problem::value(
            "tls",
            "`tls` must be tables, one per TLS bind ([tls.\"0.0.0.0:8443\"]); the flags' \
             certificate is `tls_cert` and `tls_key`",
        )]);
    };
    let mut sections = BTreeMap::new();
    let mut problems = Vec::new();
    for (addr, table) in tables {
        let name = format!("tls.\"{addr}\"");
        let Some(table) = table.as_table() else {
            problems.push(Problem::value(
                format!("tls.{addr}"),
                format!("`{name}` must be a table ([{name}])"),
            ));
            continue;
        };
        let section = tls_section(addr, &name, table, &mut problems);
        sections.insert(addr.clone(), section);
    }
    match problems.is_empty() {
        true => Ok(sections),
        false => Err(problems),
    }
}

/// The section of one `[tls."ADDR"]` table (`name` as messages show it);
/// each problem of its keys goes to `problems`.
fn tls_section(
    addr: &str,
    name: &str,
    table: &toml::map::Map<String, toml::Value>,
    problems: &mut Vec<Problem>,
) -> TlsSection {
    let mut section = TlsSection::default();
    let mut single = (None, None);
    for (key, v) in table {
        let at = format!("tls.{addr}.{key}");
        let mut bad = |text: String| problems.push(Problem::value(at.clone(), text));
        let path = |v: &toml::Value| v.as_str().map(PathBuf::from);
        match key.as_str() {
            "certs" => match pairs(v) {
                Ok(p) => section.certs = p,
                Err(e) => bad(format!("`{name}.certs`: {e}")),
            },
            "cert" | "key" | "client_ca" => match path(v) {
                Some(p) if key == "cert" => single.0 = Some(p),
                Some(p) if key == "key" => single.1 = Some(p),
                Some(p) => section.client_ca = Some(p),
                None => bad(format!("`{name}.{key}`: expected a file path, got {v}")),
            },
            "client_auth" => match v.as_str().map(ClientAuth::parse) {
                Some(Ok(a)) => section.client_auth = Some(a),
                Some(Err(e)) => bad(format!("`{name}.client_auth`: {e}")),
                None => bad(format!(
                    "`{name}.client_auth`: expected \"required\" or \"optional\", got {v}"
                )),
            },
            "min_version" => match v.as_str().map(MinVersion::parse) {
                Some(Ok(m)) => section.min_version = Some(m),
                Some(Err(e)) => bad(format!("`{name}.min_version`: {e}")),
                None => bad(format!(
                    "`{name}.min_version`: expected \"1.2\" or \"1.3\" (a string), got {v}"
                )),
            },
            "http2" => match v.as_bool() {
                Some(on) => section.http2 = Some(on),
                None => bad(format!("`{name}.http2`: expected true or false, got {v}")),
            },
            other => {
                let hint = nearest(other, &KEYS)
                    .map(|n| format!(" (did you mean `{n}`?)"))
                    .unwrap_or_default();
                problems.push(Problem::key(
                    at.clone(),
                    format!(
                        "unknown key `{name}.{other}`{hint}: a TLS bind's table takes {}",
                        KEYS.join(", ")
                    ),
                ));
            }
        }
    }
    match single {
        (Some(cert), Some(key)) if section.certs.is_empty() => {
            section.certs.push(CertPair { cert, key })
        }
        (None, None) => {}
        (Some(_), Some(_)) => problems.push(Problem::key(
            format!("tls.{addr}.cert"),
            format!("`{name}`: give `cert` and `key`, or `certs`, not both"),
        )),
        (Some(_), None) | (None, Some(_)) => problems.push(Problem::key(
            format!("tls.{addr}"),
            format!("`{name}`: `cert` and `key` go together"),
        )),
    }
    section
}

impl super::Cli {
    /// What the TLS binds serve: the flags' site, and each table's by its
    /// address. A table must name a `tls://` bind's address as written
    /// (not port 0, which is chosen at start); the error names the table
    /// and the binds there are.
    pub fn tls_sites(&self) -> Result<crate::settings::Sites, String> {
        use crate::settings::{Bind, Site, Sites};
        let default = Site {
            certs: match (&self.tls_cert, &self.tls_key) {
                (Some(cert), Some(key)) => vec![CertPair {
                    cert: cert.clone(),
                    key: key.clone(),
                }],
                _ => Vec::new(),
            },
            client_ca: self.tls_client_ca.clone(),
            client_auth: self.tls_client_auth,
            min_version: self.tls_min_version,
            http1_only: !self.http2,
        };
        let binds: Vec<std::net::SocketAddr> = self
            .bind
            .iter()
            .filter_map(|b| match b {
                Bind::Tls(a) => Some(*a),
                _ => None,
            })
            .collect();
        let mut by_addr = Vec::new();
        for (written, section) in &self.tls_sections {
            let table = format!("[tls.\"{written}\"]");
            let shown: Vec<String> = binds.iter().map(|a| format!("tls://{a}")).collect();
            let known = match shown.is_empty() {
                true => "there is no tls:// bind".to_string(),
                false => format!("the tls:// binds are {}", shown.join(", ")),
            };
            let addr: std::net::SocketAddr = written
                .parse()
                .map_err(|_| format!("{table}: expected an IP:PORT of a tls:// bind; {known}"))?;
            if addr.port() == 0 {
                return Err(format!(
                    "{table}: port 0 is chosen at start, so no table can name it; give the \
                     tls:// bind a port"
                ));
            }
            if !binds.contains(&addr) {
                return Err(format!("{table}: no --bind tls://{addr}; {known}"));
            }
            let certs = match section.certs.is_empty() {
                true => default.certs.clone(),
                false => section.certs.clone(),
            };
            if certs.is_empty() {
                return Err(format!(
                    "{table}: no certificate: give it `certs` (or `cert` and `key`), or give \
                     --tls-cert and --tls-key"
                ));
            }
            let site = Site {
                certs,
                client_ca: section.client_ca.clone().or(default.client_ca.clone()),
                client_auth: section.client_auth.unwrap_or(default.client_auth),
                min_version: section.min_version.unwrap_or(default.min_version),
                http1_only: !section.http2.unwrap_or(self.http2),
            };
            by_addr.push((addr, site));
        }
        Ok(Sites { default, by_addr })
    }
}

/// `[{ cert = "...", key = "..." }, ...]`.
fn pairs(v: &toml::Value) -> Result<Vec<CertPair>, String> {
    let Some(items) = v.as_array() else {
        return Err(format!(
            "expected an array of {{ cert = \"FILE\", key = \"FILE\" }}, got {v}"
        ));
    };
    if items.is_empty() {
        return Err("an empty list: give at least one { cert, key }".into());
    }
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let table = item.as_table();
            let file = |k: &str| {
                table
                    .and_then(|t| t.get(k))
                    .and_then(|v| v.as_str())
                    .map(PathBuf::from)
            };
            let extra = table.and_then(|t| t.keys().find(|k| *k != "cert" && *k != "key"));
            match (file("cert"), file("key"), extra) {
                (Some(cert), Some(key), None) => Ok(CertPair { cert, key }),
                (_, _, Some(k)) => Err(format!("item {}: unknown key `{k}` (cert and key)", i + 1)),
                _ => Err(format!(
                    "item {}: expected {{ cert = \"FILE\", key = \"FILE\" }}, got {item}",
                    i + 1
                )),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<BTreeMap<String, TlsSection>, Vec<String>> {
        let table: toml::Table = text.parse().expect("toml");
        tls_sections(&table["tls"]).map_err(|p| p.into_iter().map(|p| p.text).collect())
    }

    #[test]
    fn a_table_with_two_certificates_and_mutual_tls() {
        let s = parse(
            "[tls.\"0.0.0.0:8443\"]\ncerts = [{cert = \"a.pem\", key = \"a.key\"}, {cert = \"b.pem\", key = \"b.key\"}]\n\
             client_ca = \"ca.pem\"\nclient_auth = \"optional\"\nmin_version = \"1.3\"\n",
        )
        .expect("parses");
        let t = &s["0.0.0.0:8443"];
        assert_eq!(t.certs.len(), 2);
        assert_eq!(t.certs[1].key, PathBuf::from("b.key"));
        assert_eq!(t.client_auth, Some(ClientAuth::Optional));
        assert_eq!(t.min_version, Some(MinVersion::Tls13));
        let mut doc = toml::Table::new();
        let mut tls = toml::Table::new();
        tls.insert("0.0.0.0:8443".into(), toml::Value::Table(t.to_toml()));
        doc.insert("tls".into(), toml::Value::Table(tls));
        let again = parse(&toml::to_string(&doc).expect("prints")).expect("loads back");
        assert_eq!(&again["0.0.0.0:8443"], t);
    }

    #[test]
    fn mistakes_are_named() {
        let e = parse("[tls.\"x\"]\nmin_version = \"1.1\"\nclient_auth = \"maybe\"\ncertz = 1\ncert = \"a\"\n")
            .expect_err("refused");
        let all = e.join("\n");
        assert!(all.contains("min_version`: expected 1.2 or 1.3"), "{all}");
        assert!(
            all.contains("client_auth`: expected required or optional"),
            "{all}"
        );
        assert!(
            all.contains("unknown key `tls.\"x\".certz` (did you mean"),
            "{all}"
        );
        assert!(all.contains("`cert` and `key` go together"), "{all}");
    }
}

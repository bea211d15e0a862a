//! The `[apps.NAME]` tables of the configuration file: where to mount the
//! app, whether it may be absent, its own limits (`max_body`,
//! `max_stream_body`, `app_timeout`, `blocking_share`, read by the same parsers as the flags)
//! and its free-form `settings`, handed to its constructor as JSON.

use super::problem::Problem;
use super::values::{nearest, parse_secs, parse_size_usize};
use crate::settings::AppLimits;
use std::collections::BTreeMap;

/// The key for `--apps`: `[apps.NAME]` tables take the name `apps`.
pub(super) const APPS_DIR_KEY: &str = "apps_dir";

/// One `[apps.NAME]` table.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AppSection {
    /// Where to mount the app instead of its own prefix.
    pub mount: Option<String>,
    /// The app may be absent at start-up (it may arrive by hot drop).
    pub optional: bool,
    /// The app's own settings (`[apps.NAME.settings]`), free-form: handed
    /// to its constructor as JSON.
    pub settings: toml::Table,
    /// Its own limits (`max_body`, `max_stream_body`, `app_timeout`,
    /// `blocking_share`), in
    /// place of the server-wide ones.
    pub limits: AppLimits,
    /// The limits as written, for `--print-config`.
    limits_raw: toml::Table,
}

impl AppSection {
    /// Sets one limit from its file value, through the flag's own parser.
    fn set_limit(&mut self, key: &str, value: &toml::Value) -> Result<(), String> {
        let text = match value {
            toml::Value::String(s) => s.clone(),
            toml::Value::Integer(i) => i.to_string(),
            toml::Value::Float(f) => f.to_string(),
            other => return Err(format!("expected a string or a number, got {other}")),
        };
        match key {
            "max_body" => self.limits.max_body = Some(parse_size_usize(&text)?),
            "max_stream_body" => self.limits.max_stream_body = Some(parse_size_usize(&text)?),
            "app_timeout" => self.limits.app_timeout = Some(parse_secs(&text)?),
            _ => {
                let share = text
                    .parse::<u8>()
                    .ok()
                    .filter(|p| (1..=100).contains(p))
                    .ok_or_else(|| format!("expected a percent 1-100, got {text:?}"))?;
                self.limits.blocking_share = Some(share);
            }
        }
        self.limits_raw.insert(key.to_string(), value.clone());
        Ok(())
    }

    /// The table as `--print-config` writes it.
    pub(super) fn to_toml(&self) -> toml::Table {
        let mut t = toml::Table::new();
        if let Some(m) = &self.mount {
            t.insert("mount".into(), toml::Value::String(m.clone()));
        }
        t.insert("optional".into(), toml::Value::Boolean(self.optional));
        t.extend(self.limits_raw.clone());
        if !self.settings.is_empty() {
            t.insert("settings".into(), toml::Value::Table(self.settings.clone()));
        }
        t
    }

    /// The settings as the JSON text an app's constructor receives (TOML
    /// dates and times become strings).
    pub fn settings_json(&self) -> String {
        json(&toml::Value::Table(self.settings.clone())).to_string()
    }
}

/// A TOML value as JSON.
fn json(value: &toml::Value) -> serde_json::Value {
    use serde_json::Value as J;
    match value {
        toml::Value::String(s) => J::String(s.clone()),
        toml::Value::Integer(i) => J::from(*i),
        toml::Value::Float(f) => J::from(*f),
        toml::Value::Boolean(b) => J::Bool(*b),
        toml::Value::Datetime(d) => J::String(d.to_string()),
        toml::Value::Array(items) => J::Array(items.iter().map(json).collect()),
        toml::Value::Table(t) => J::Object(t.iter().map(|(k, v)| (k.clone(), json(v))).collect()),
    }
}

/// The `[apps.NAME]` tables.
pub(super) fn app_sections(
    value: &toml::Value,
) -> Result<BTreeMap<String, AppSection>, Vec<Problem>> {
    let Some(apps) = value.as_table() else {
        return Err(vec![Problem::value(
            "apps",
            format!(
                "`apps` must be tables of apps ([apps.NAME]); the apps directory is `{APPS_DIR_KEY}`"
            ),
        )]);
    };
    let mut sections = BTreeMap::new();
    let mut problems = Vec::new();
    for (name, table) in apps {
        let Some(table) = table.as_table() else {
            problems.push(Problem::value(
                format!("apps.{name}"),
                format!("`apps.{name}` must be a table ([apps.{name}])"),
            ));
            continue;
        };
        let mut section = AppSection::default();
        for (key, v) in table {
            let at = format!("apps.{name}.{key}");
            match (key.as_str(), v) {
                ("mount", toml::Value::String(p)) if p.starts_with('/') => {
                    section.mount = Some(p.clone())
                }
                ("mount", other) => problems.push(Problem::value(
                    at,
                    format!("`apps.{name}.mount`: expected a prefix starting with /, got {other}"),
                )),
                ("optional", toml::Value::Boolean(b)) => section.optional = *b,
                ("optional", other) => problems.push(Problem::value(
                    at,
                    format!("`apps.{name}.optional`: expected true or false, got {other}"),
                )),
                ("settings", toml::Value::Table(t)) => section.settings = t.clone(),
                (key @ ("max_body" | "max_stream_body" | "app_timeout" | "blocking_share"), v) => {
                    if let Err(e) = section.set_limit(key, v) {
                        problems.push(Problem::value(at, format!("`apps.{name}.{key}`: {e}")));
                    }
                }
                ("settings", other) => problems.push(Problem::value(
                    at,
                    format!(
                        "`apps.{name}.settings`: expected a table ([apps.{name}.settings]), got {other}"
                    ),
                )),
                (other, _) => {
                    let keys = [
                        "mount",
                        "optional",
                        "settings",
                        "max_body",
                        "max_stream_body",
                        "app_timeout",
                        "blocking_share",
                    ];
                    let hint = nearest(other, &keys)
                        .map(|n| format!(" (did you mean `{n}`?)"))
                        .unwrap_or_default();
                    problems.push(Problem::key(
                        at,
                        format!(
                            "unknown key `apps.{name}.{other}`{hint}: an app's table takes mount, optional, settings, max_body, max_stream_body, app_timeout and blocking_share"
                        ),
                    ));
                }
            }
        }
        sections.insert(name.clone(), section);
    }
    if problems.is_empty() {
        Ok(sections)
    } else {
        Err(problems)
    }
}

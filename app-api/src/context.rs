//! What an app's constructor receives: its name, its settings from the
//! host's configuration file (`[apps.NAME.settings]`) and the state its
//! previous generation handed over, if any.

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use std::time::Duration;

/// The constructor's context (see `export_app!`'s `new` and `try_new`).
#[derive(Debug, Clone)]
pub struct Context {
    app: String,
    settings: Settings,
    previous_state: Option<Vec<u8>>,
}

impl Context {
    /// A context as the host would hand it (also for apps' unit tests).
    pub fn new(app: &str, settings: Settings, previous_state: Option<Vec<u8>>) -> Self {
        Context {
            app: app.to_string(),
            settings,
            previous_state,
        }
    }

    /// The app's name.
    pub fn app_name(&self) -> &str {
        &self.app
    }

    /// The app's settings (empty when the configuration has none).
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Bytes the app's previous generation handed over (its
    /// [`App::handover`](crate::App::handover)), if any: `None` for a first
    /// load, after a restart of the host, or when the previous generation
    /// handed nothing over. See [the lifecycle](crate::app#lifecycle).
    pub fn previous_state(&self) -> Option<&[u8]> {
        self.previous_state.as_deref()
    }
}

/// A setting that is not what the app expects; its `Display` names the
/// key and the problem, and is what the host logs as the app's refusal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingsError(pub String);

impl std::fmt::Display for SettingsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SettingsError {}

/// The app's `[apps.NAME.settings]` table: free-form, read with the typed
/// getters or deserialised whole into the app's own struct.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    raw: String,
    table: Map<String, Value>,
}

impl Settings {
    /// Parses the settings from their JSON text (a JSON object).
    pub fn from_json(raw: &str) -> Result<Self, SettingsError> {
        let text = if raw.trim().is_empty() { "{}" } else { raw };
        match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(table)) => Ok(Settings {
                raw: text.to_string(),
                table,
            }),
            Ok(other) => Err(SettingsError(format!(
                "settings must be a table, got {other}"
            ))),
            Err(e) => Err(SettingsError(format!("settings are not valid JSON: {e}"))),
        }
    }

    /// The settings as JSON text, for `serde_json::from_str` of one's own.
    pub fn raw_json(&self) -> &str {
        if self.raw.is_empty() {
            "{}"
        } else {
            &self.raw
        }
    }

    /// Deserialises the whole table into the app's own settings struct.
    pub fn deserialize<T: DeserializeOwned>(&self) -> Result<T, SettingsError> {
        serde_json::from_str(self.raw_json()).map_err(|e| SettingsError(format!("settings: {e}")))
    }

    /// The raw value of `key`.
    pub fn value(&self, key: &str) -> Option<&Value> {
        self.table.get(key)
    }

    /// True if there is no setting at all.
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// A string setting; an error if `key` holds something else.
    pub fn get_str(&self, key: &str) -> Result<Option<&str>, SettingsError> {
        self.typed(key, "a string", Value::as_str)
    }

    /// A whole-number setting.
    pub fn get_int(&self, key: &str) -> Result<Option<i64>, SettingsError> {
        self.typed(key, "a whole number", Value::as_i64)
    }

    /// A `true`/`false` setting.
    pub fn get_bool(&self, key: &str) -> Result<Option<bool>, SettingsError> {
        self.typed(key, "true or false", Value::as_bool)
    }

    /// A list of strings.
    pub fn get_str_list(&self, key: &str) -> Result<Option<Vec<String>>, SettingsError> {
        self.typed(key, "a list of strings", |v| {
            v.as_array()?
                .iter()
                .map(|item| item.as_str().map(str::to_string))
                .collect()
        })
    }

    /// A duration: a string with a unit (`"250ms"`, `"5s"`, `"2m"`, `"1h"`)
    /// or a whole number of seconds.
    pub fn get_duration(&self, key: &str) -> Result<Option<Duration>, SettingsError> {
        self.typed(
            key,
            "a duration (\"250ms\", \"5s\", \"2m\", \"1h\" or whole seconds)",
            |v| match v {
                Value::Number(n) => n.as_u64().map(Duration::from_secs),
                Value::String(s) => parse_duration(s),
                _ => None,
            },
        )
    }

    fn typed<'a, T>(
        &'a self,
        key: &str,
        expected: &str,
        get: impl FnOnce(&'a Value) -> Option<T>,
    ) -> Result<Option<T>, SettingsError> {
        match self.table.get(key) {
            None => Ok(None),
            Some(v) => get(v).map(Some).ok_or_else(|| {
                SettingsError(format!("setting `{key}`: expected {expected}, got {v}"))
            }),
        }
    }
}

/// `"250ms"`, `"5s"`, `"2m"`, `"1h"`, or a bare number of seconds.
fn parse_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let n: u64 = number.parse().ok()?;
    match unit.trim() {
        "" | "s" => Some(Duration::from_secs(n)),
        "ms" => Some(Duration::from_millis(n)),
        "m" => n.checked_mul(60).map(Duration::from_secs),
        "h" => n.checked_mul(3600).map(Duration::from_secs),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_getters_read_and_refuse() {
        let s = Settings::from_json(
            r#"{"name":"x","n":3,"on":true,"wait":"250ms","secs":2,"hosts":["a","b"]}"#,
        )
        .unwrap();
        assert_eq!(s.get_str("name"), Ok(Some("x")));
        assert_eq!(s.get_int("n"), Ok(Some(3)));
        assert_eq!(s.get_bool("on"), Ok(Some(true)));
        assert_eq!(s.get_duration("wait"), Ok(Some(Duration::from_millis(250))));
        assert_eq!(s.get_duration("secs"), Ok(Some(Duration::from_secs(2))));
        assert_eq!(
            s.get_str_list("hosts"),
            Ok(Some(vec!["a".to_string(), "b".to_string()]))
        );
        assert_eq!(s.get_str("missing"), Ok(None));
        let err = s.get_int("name").unwrap_err().to_string();
        assert_eq!(err, "setting `name`: expected a whole number, got \"x\"");
    }

    #[test]
    fn the_whole_table_deserialises() {
        #[derive(serde::Deserialize)]
        struct Mine {
            n: u32,
        }
        let s = Settings::from_json(r#"{"n":7}"#).unwrap();
        assert_eq!(s.deserialize::<Mine>().unwrap().n, 7);
        assert!(Settings::from_json("").unwrap().is_empty());
        assert!(Settings::from_json("[1]").is_err());
    }
}

//! The app's `[apps.wsgi.settings]`: which WSGI callable to serve and
//! where Python finds it. (Which peers may set the scheme and the client
//! address through `X-Forwarded-Proto`/`-For` is the host's
//! `--trusted-proxy`: the request arrives with both resolved.)

use stoa_app_api::{Settings, SettingsError};

/// The settings, read and checked by the constructor.
#[derive(Debug, Clone, PartialEq)]
pub struct WsgiSettings {
    /// The module to import (`mysite.wsgi`).
    pub module: String,
    /// The callable's name in it (`application`, the default).
    pub callable: String,
    /// Directories put in front of `sys.path`, in this order.
    pub python_path: Vec<String>,
}

impl WsgiSettings {
    /// Reads the settings; an error names the setting.
    pub fn read(settings: &Settings) -> Result<WsgiSettings, SettingsError> {
        let target = settings.get_str("module")?.ok_or_else(|| {
            SettingsError(
                "setting `module` is required: the WSGI callable as \"package.module:callable\" \
                 (e.g. \"mysite.wsgi:application\")"
                    .to_string(),
            )
        })?;
        let (module, callable) = match target.split_once(':') {
            Some((m, c)) => (m.trim(), c.trim()),
            None => (target.trim(), "application"),
        };
        if module.is_empty() || callable.is_empty() {
            return Err(SettingsError(format!(
                "setting `module`: expected \"package.module:callable\", got {target:?}"
            )));
        }
        for key in settings_keys(settings) {
            if !KNOWN.contains(&key.as_str()) {
                return Err(SettingsError(format!(
                    "unknown setting `{key}` (known: {})",
                    KNOWN.join(", ")
                )));
            }
        }
        Ok(WsgiSettings {
            module: module.to_string(),
            callable: callable.to_string(),
            python_path: settings.get_str_list("python_path")?.unwrap_or_default(),
        })
    }
}

const KNOWN: &[&str] = &["module", "python_path"];

/// The top-level keys of the settings table.
fn settings_keys(settings: &Settings) -> Vec<String> {
    serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(settings.raw_json())
        .map(|table| table.keys().cloned().collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(json: &str) -> Result<WsgiSettings, String> {
        let settings = Settings::from_json(json).map_err(|e| e.to_string())?;
        WsgiSettings::read(&settings).map_err(|e| e.to_string())
    }

    #[test]
    fn module_and_callable() {
        let s = read(r#"{"module":"mysite.wsgi:app","python_path":["/srv"]}"#).unwrap();
        assert_eq!(
            (s.module.as_str(), s.callable.as_str()),
            ("mysite.wsgi", "app")
        );
        assert_eq!(s.python_path, ["/srv"]);
        let s = read(r#"{"module":"hello"}"#).unwrap();
        assert_eq!(s.callable, "application");
        assert!(read("{}").unwrap_err().contains("`module` is required"));
        assert!(read(r#"{"module":"x:"}"#)
            .unwrap_err()
            .contains("setting `module`"));
        assert!(read(r#"{"module":"x","modul":"y"}"#)
            .unwrap_err()
            .contains("unknown setting `modul`"));
    }
}

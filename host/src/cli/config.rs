//! The configuration file (`--config FILE`, `STOA_CONFIG`): TOML whose keys
//! are the flags' long names with `_` for `-` (`max_body = "1M"`), plus
//! `apps_dir` for `--apps` and one `[apps.NAME]` table per app (`mount`,
//! `optional`, and the app's own `settings` table). A file value goes
//! through the same parser as the flag, so it is honoured or refused the
//! same way; precedence is command line >
//! environment > file > defaults. `--print-config` writes the effective
//! configuration back as TOML that loads unchanged.

use super::app_table::{app_sections, AppSection};
use super::Cli;
use clap::parser::ValueSource;
use clap::{ArgAction, ArgMatches, CommandFactory, FromArgMatches};
use std::collections::BTreeMap;
use std::ffi::OsString;

/// Flags that steer this run rather than configure the server.
const NOT_KEYS: [&str; 5] = ["help", "version", "config", "check_config", "print_config"];

/// Keys whose values are text that a number would misread: a port alone
/// is not an address (`bind = [5]` is not `":5"`), and TOML's `0o660`
/// is the number 432 (an octal mode is written `"660"`). A number there
/// is refused, and they are printed as strings.
const TEXT_KEYS: [&str; 2] = ["bind", "unix_mode"];

/// The key for `--apps`: `[apps.NAME]` tables take the name `apps`.
pub(super) const APPS_DIR_KEY: &str = "apps_dir";

/// The flags a file stands for, and its app tables.
type FileArgs = (Vec<String>, BTreeMap<String, AppSection>);

/// Why the command line or the file could not be taken.
pub enum LoadError {
    /// A clap error (including `--help` and `--version`): clap prints it.
    Args(clap::Error),
    /// The configuration file: its path, and one line per problem.
    File(String),
}

/// Parses the command line, the environment and the configuration file.
pub fn load(args: Vec<OsString>) -> Result<Cli, LoadError> {
    let first = Cli::command()
        .try_get_matches_from(&args)
        .map_err(LoadError::Args)?;
    let Some(path) = first.get_one::<std::path::PathBuf>("config").cloned() else {
        let mut cli = Cli::from_arg_matches(&first).map_err(LoadError::Args)?;
        cli.effective_config = render(&first, &cli);
        return Ok(cli);
    };
    let text = std::fs::read_to_string(&path)
        .map_err(|e| LoadError::File(format!("cannot read --config {}: {e}", path.display())))?;
    let table: toml::Table = text
        .parse()
        .map_err(|e| LoadError::File(format!("--config {}: {e}", path.display())))?;
    let (extra, sections) = file_args(&table, &first).map_err(|problems| {
        LoadError::File(format!(
            "--config {}:\n{}",
            path.display(),
            problems.join("\n")
        ))
    })?;
    let mut all = args;
    all.extend(extra.into_iter().map(OsString::from));
    let matches = Cli::command()
        .try_get_matches_from(&all)
        .map_err(|e| LoadError::File(format!("--config {}: {}", path.display(), e.render())))?;
    let mut cli = Cli::from_arg_matches(&matches).map_err(LoadError::Args)?;
    cli.app_sections = sections;
    cli.effective_config = render(&matches, &cli);
    Ok(cli)
}

/// The flags each file key stands for (skipping those the command line or
/// the environment set), and the `[apps.NAME]` tables.
fn file_args(table: &toml::Table, given: &ArgMatches) -> Result<FileArgs, Vec<String>> {
    let keys = flag_keys();
    let mut args = Vec::new();
    let mut sections = BTreeMap::new();
    let mut problems = Vec::new();
    for (key, value) in table {
        if key == "apps" {
            match app_sections(value) {
                Ok(s) => sections = s,
                Err(mut p) => problems.append(&mut p),
            }
            continue;
        }
        let Some(flag) = keys.get(key.as_str()) else {
            let names: Vec<&str> = keys.keys().map(String::as_str).chain(["apps"]).collect();
            let hint = crate::cli::nearest(key, &names)
                .map(|n| format!(" (did you mean `{n}`?)"))
                .unwrap_or_default();
            problems.push(format!("unknown key `{key}`{hint}"));
            continue;
        };
        if matches!(
            given.value_source(&flag.id),
            Some(ValueSource::CommandLine | ValueSource::EnvVariable)
        ) {
            continue;
        }
        match flag_values(key, flag, value) {
            Ok(mut a) => args.append(&mut a),
            Err(e) => problems.push(format!("`{key}`: {e}")),
        }
    }
    // A `[apps.NAME] mount` is a `--mount NAME=PREFIX` unless one was given.
    let given_mounts: Vec<String> = given
        .get_many::<(String, String)>("mounts")
        .map(|m| m.map(|(n, _)| n.clone()).collect())
        .unwrap_or_default();
    for (name, section) in &sections {
        if let Some(prefix) = section
            .mount
            .as_ref()
            .filter(|_| !given_mounts.contains(name))
        {
            args.push(format!("--mount={name}={prefix}"));
        }
    }
    if problems.is_empty() {
        Ok((args, sections))
    } else {
        Err(problems)
    }
}

/// What a file key stands for.
struct FlagKey {
    /// The long flag, without `--`.
    long: String,
    /// clap's argument id.
    id: String,
    /// An on/off switch (`true` gives the flag, `false` nothing).
    switch: bool,
    /// Repeatable: printed as an array.
    multiple: bool,
    /// Text only (`TEXT_KEYS`).
    text: bool,
}

/// Key -> the flag it stands for.
fn flag_keys() -> BTreeMap<String, FlagKey> {
    let mut keys = BTreeMap::new();
    for arg in Cli::command().get_arguments() {
        let id = arg.get_id().as_str().to_string();
        let Some(long) = arg.get_long() else { continue };
        if NOT_KEYS.contains(&id.as_str()) {
            continue;
        }
        let key = if long == "apps" {
            APPS_DIR_KEY.to_string()
        } else {
            long.replace('-', "_")
        };
        let flag = FlagKey {
            long: long.to_string(),
            id,
            switch: matches!(arg.get_action(), ArgAction::SetTrue),
            multiple: matches!(arg.get_action(), ArgAction::Append),
            text: TEXT_KEYS.contains(&key.as_str()),
        };
        keys.insert(key, flag);
    }
    keys
}

/// The command-line form of one file value.
fn flag_values(key: &str, flag: &FlagKey, value: &toml::Value) -> Result<Vec<String>, String> {
    use toml::Value;
    let long = &flag.long;
    if flag.switch {
        return match value {
            Value::Boolean(true) => Ok(vec![format!("--{long}")]),
            Value::Boolean(false) => Ok(Vec::new()),
            other => Err(format!("expected true or false, got {other}")),
        };
    }
    let one = |v: &Value| match v {
        Value::String(s) => Ok(format!("--{long}={s}")),
        Value::Integer(i) if flag.text => Err(text_not_number(key, *i)),
        Value::Integer(i) => Ok(format!("--{long}={i}")),
        Value::Float(f) if flag.text => Err(format!("{f} is a number: write a string")),
        Value::Float(f) => Ok(format!("--{long}={f}")),
        other => Err(format!("expected a string or a number, got {other}")),
    };
    match value {
        Value::Array(items) => items.iter().map(one).collect(),
        v => Ok(vec![one(v)?]),
    }
}

/// The refusal of the number `i` for a text key, with the string to write.
fn text_not_number(key: &str, i: i64) -> String {
    if key != "unix_mode" {
        return format!(
            "{i} is a number, not an address: write it as a string, e.g. \"127.0.0.1:{i}\" \
             (or \":{i}\" for every IPv4 address)"
        );
    }
    // Written 660, the number is decimal; written 0o660, TOML made it 432.
    let digits = i.to_string();
    let as_typed = digits.bytes().all(|b| (b'0'..=b'7').contains(&b));
    let from_octal = (0..=0o777).contains(&i);
    let hint = match (as_typed, from_octal) {
        (true, true) => format!("\"{digits}\" (or \"{i:o}\" if you wrote 0o{i:o})"),
        (true, false) => format!("\"{digits}\""),
        (false, true) => format!("\"{i:o}\" (you wrote 0o{i:o})"),
        (false, false) => "\"660\"".to_string(),
    };
    format!("{i} is a number: write the octal mode as a string, {hint}")
}

/// The effective configuration as TOML: every key with its value as
/// given (or its default), and the app tables, so it loads back the same.
fn render(matches: &ArgMatches, cli: &Cli) -> String {
    let mut table = toml::Table::new();
    for (key, flag) in flag_keys() {
        if flag.switch {
            table.insert(key, toml::Value::Boolean(matches.get_flag(&flag.id)));
            continue;
        }
        let Some(raw) = matches.get_raw(&flag.id) else {
            continue;
        };
        let values: Vec<toml::Value> = raw
            .map(|v| v.to_string_lossy().into_owned())
            .filter(|v| key != "mount" || !from_app_table(v, cli))
            .map(|v| match flag.text {
                true => toml::Value::String(v),
                false => typed(&v),
            })
            .collect();
        let value = match (flag.multiple, values.len()) {
            (true, _) => toml::Value::Array(values),
            (false, 1) => values
                .into_iter()
                .next()
                .unwrap_or(toml::Value::Boolean(false)),
            (false, _) => continue,
        };
        table.insert(key, value);
    }
    let apps: toml::Table = cli
        .app_sections
        .iter()
        .map(|(name, section)| (name.clone(), toml::Value::Table(section.to_toml())))
        .collect();
    if !apps.is_empty() {
        table.insert("apps".into(), toml::Value::Table(apps));
    }
    toml::to_string(&table).unwrap_or_else(|e| format!("# cannot print the configuration: {e}\n"))
}

/// True if `--mount NAME=PREFIX` is what an `[apps.NAME] mount` says (it
/// is printed there, not twice).
fn from_app_table(mount: &str, cli: &Cli) -> bool {
    mount.split_once('=').is_some_and(|(name, prefix)| {
        cli.app_sections
            .get(name)
            .is_some_and(|s| s.mount.as_deref() == Some(prefix))
    })
}

/// A raw flag value as TOML: a whole number as an integer, else a string.
fn typed(raw: &str) -> toml::Value {
    raw.parse::<i64>()
        .map(toml::Value::Integer)
        .unwrap_or_else(|_| toml::Value::String(raw.to_string()))
}

//! The configuration file (`--config FILE`, `STOA_CONFIG`): TOML whose keys
//! are the flags' long names with `_` for `-` (`max_body = "1M"`), plus
//! `apps_dir` for `--apps` and one `[apps.NAME]` table per app (`mount`,
//! `optional`, and the app's own `settings` table). A file value goes
//! through the same parser as the flag, so it is honoured or refused the
//! same way; precedence is command line >
//! environment > file > defaults. `--print-config` writes the effective
//! configuration back as TOML that loads unchanged.

use super::app_table::{app_sections, AppSection, APPS_DIR_KEY};
use super::file_map::Located;
use super::problem::{At, Problem};
use super::tls_table::{tls_sections, TlsSection};
use super::Cli;
use clap::parser::ValueSource;
use clap::{ArgAction, ArgMatches, CommandFactory, FromArgMatches};
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;

/// Flags that steer this run rather than configure the server.
const NOT_KEYS: [&str; 5] = ["help", "version", "config", "check_config", "print_config"];

/// Keys whose values are text that a number would misread: a port alone
/// is not an address (`bind = [5]` is not `":5"`), and TOML's `0o660`
/// is the number 432 (an octal mode is written `"660"`). A number there
/// is refused, and they are printed as strings.
const TEXT_KEYS: [&str; 2] = ["bind", "unix_mode"];

/// The flags a file stands for, its app tables, the (`--flag`, key) of
/// each value it gave, and its TLS tables.
type FileArgs = (
    Vec<String>,
    BTreeMap<String, AppSection>,
    Vec<(String, String)>,
    BTreeMap<String, TlsSection>,
);

/// Why the command line or the file could not be taken.
pub enum LoadError {
    /// A clap error (including `--help` and `--version`): clap prints it.
    Args(clap::Error),
    /// The configuration file: its path, and one line per problem (every
    /// problem of the file, and the command line's, at once).
    File(String),
}

/// Parses the command line, the environment and the configuration file.
/// Every problem of the file is reported at once, each at its line and
/// column, with a problem of the command line or the environment.
pub fn load(args: Vec<OsString>) -> Result<Cli, LoadError> {
    let first = match Cli::command().try_get_matches_from(&args) {
        Ok(m) => Ok(m),
        Err(e) if !is_mistake(&e) => return Err(LoadError::Args(e)),
        Err(e) => Err(e),
    };
    // A mistake on the command line still lets the file be read, so that
    // its problems are reported with the flag's.
    let given = match &first {
        Ok(m) => m.clone(),
        Err(_) => Cli::command()
            .ignore_errors(true)
            .try_get_matches_from(&args)
            .map_err(LoadError::Args)?,
    };
    let path = match &first {
        Ok(m) => m.get_one::<PathBuf>("config").cloned(),
        Err(_) => config_arg(&args),
    };
    let Some(path) = path else {
        let first = first.map_err(LoadError::Args)?;
        let mut cli = Cli::from_arg_matches(&first).map_err(LoadError::Args)?;
        cli.effective_config = render(&first, &cli);
        return Ok(cli);
    };
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(&path)
        .map_err(|e| LoadError::File(format!("cannot read --config {shown}: {e}")))?;
    let mut lines = Vec::new();
    let mut parsed = None;
    let mut origins = Vec::new();
    match Located::parse(&text) {
        Err(syntax) => lines.extend(syntax.iter().map(|e| format!("{shown}:{e}"))),
        Ok(located) => match text.parse::<toml::Table>() {
            Err(e) => lines.push(format!("{shown}: {e}")),
            Ok(table) => {
                let (problems, args) = file_args(&table, &given);
                lines.extend(located.lines(&shown, &problems));
                if let Some((_, _, taken, _)) = &args {
                    origins = taken
                        .iter()
                        .map(|(flag, key)| FileOrigin {
                            flag: flag.clone(),
                            key: key.clone(),
                            place: located.place(&shown, key),
                        })
                        .collect();
                }
                parsed = args;
            }
        },
    }
    if let Err(e) = &first {
        lines.push(args_problem(e));
    }
    let Some((extra, sections, _, tls)) = parsed.filter(|_| lines.is_empty()) else {
        let s = if lines.len() == 1 { "" } else { "s" };
        return Err(LoadError::File(format!(
            "--config {shown}: {} problem{s}:\n{}",
            lines.len(),
            lines.join("\n")
        )));
    };
    let mut all = args;
    all.extend(extra.into_iter().map(OsString::from));
    let matches = Cli::command()
        .try_get_matches_from(&all)
        .map_err(|e| LoadError::File(format!("--config {shown}: {}", e.render())))?;
    let mut cli = Cli::from_arg_matches(&matches).map_err(LoadError::Args)?;
    cli.app_sections = sections;
    cli.tls_sections = tls;
    cli.file_origins = origins;
    cli.effective_config = render(&matches, &cli);
    Ok(cli)
}

/// A value the configuration file gave: its flag, its key and where the
/// value is (`FILE:LINE:COL`).
#[derive(Clone, Debug, Default)]
pub struct FileOrigin {
    pub flag: String,
    pub key: String,
    pub place: String,
}

/// `problem` (a check of values against each other, worded with their
/// flags) with the key and place of each value in it that the file gave:
/// `... (unhealthy_after at stoa.toml:3:19)`.
pub fn with_file_places(problem: String, origins: &[FileOrigin]) -> String {
    let places: Vec<String> = origins
        .iter()
        .filter(|o| mentions(&problem, &o.flag))
        .map(|o| format!("{} at {}", o.key, o.place))
        .collect();
    match places.is_empty() {
        true => problem,
        false => format!("{problem} ({})", places.join("; ")),
    }
}

/// True if `text` names `flag` as a whole (`--workers` is not in
/// `--worker-timeout`, nor `--max-body` in `--max-body-rate`).
fn mentions(text: &str, flag: &str) -> bool {
    text.match_indices(flag).any(|(i, _)| {
        !text[i + flag.len()..]
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '-')
    })
}

/// A path as messages show it: a relative one (`--apps`, `apps_dir`,
/// `pid_file`, ...) with what it is relative to, the working directory
/// (not the configuration file's), and the path it resolves to.
pub fn shown_path(path: &std::path::Path) -> String {
    if path.is_absolute() {
        return path.display().to_string();
    }
    match std::env::current_dir() {
        Ok(cwd) => format!(
            "{} (relative to the working directory {}, not to the configuration file's: {})",
            path.display(),
            cwd.display(),
            cwd.join(path).display()
        ),
        Err(e) => format!(
            "{} (relative to the working directory, unreadable: {e})",
            path.display()
        ),
    }
}

/// The `--config` of arguments clap refused (it stops at their first
/// mistake), else `STOA_CONFIG`.
fn config_arg(args: &[OsString]) -> Option<PathBuf> {
    let mut rest = args.iter().skip(1);
    while let Some(arg) = rest.next() {
        if arg == "--" {
            break;
        }
        if arg == "--config" {
            return rest.next().map(PathBuf::from);
        }
        if let Some(path) = arg.to_str().and_then(|a| a.strip_prefix("--config=")) {
            return Some(PathBuf::from(path));
        }
    }
    std::env::var_os("STOA_CONFIG").map(PathBuf::from)
}

/// A mistake in the flags (not `--help`, `--version` or a bare `stoa`).
fn is_mistake(e: &clap::Error) -> bool {
    use clap::error::ErrorKind;
    !matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    )
}

/// A command-line (or `STOA_*`) mistake as one line among the file's.
fn args_problem(e: &clap::Error) -> String {
    format!("command line or environment: {}", clap_words(e))
}

/// The first line of clap's message, without its `error: `, and the valid
/// values when clap names them (`[possible values: true, false]`).
fn clap_words(e: &clap::Error) -> String {
    let rendered = e.render().to_string();
    let mut lines = rendered.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines.next().unwrap_or_default();
    let first = first.strip_prefix("error: ").unwrap_or(first);
    match lines.find(|l| l.starts_with("[possible values:")) {
        Some(valid) => format!("{first} {valid}"),
        None => first.to_string(),
    }
}

/// The flags each file key stands for (skipping those the command line or
/// the environment set, whose file values are still checked), and the
/// `[apps.NAME]` tables; or every problem.
fn file_args(table: &toml::Table, given: &ArgMatches) -> (Vec<Problem>, Option<FileArgs>) {
    let keys = flag_keys();
    let mut args = Vec::new();
    let mut sections = BTreeMap::new();
    let mut tls = BTreeMap::new();
    let mut problems = Vec::new();
    // (`--flag`, key) of each value the file gives.
    let mut taken = Vec::new();
    for (key, value) in table {
        if key == "apps" {
            match app_sections(value) {
                Ok(s) => sections = s,
                Err(mut p) => problems.append(&mut p),
            }
            continue;
        }
        if key == "tls" {
            match tls_sections(value) {
                Ok(t) => tls = t,
                Err(mut p) => problems.append(&mut p),
            }
            continue;
        }
        let Some(flag) = keys.get(key.as_str()) else {
            let names: Vec<&str> = keys
                .keys()
                .map(String::as_str)
                .chain(["apps", "tls"])
                .collect();
            let hint = crate::cli::nearest(key, &names)
                .map(|n| format!(" (did you mean `{n}`?)"))
                .unwrap_or_default();
            problems.push(Problem::key(key, format!("unknown key `{key}`{hint}")));
            continue;
        };
        let bad = problems.len();
        let mut values = Vec::new();
        for (at, v) in flag_values(key, flag, value) {
            match v.and_then(|v| flag.check(&v).map(|()| v)) {
                Ok(v) => values.push(v),
                Err(e) => problems.push(Problem {
                    key: key.clone(),
                    at,
                    text: format!("`{key}`: {e}"),
                }),
            }
        }
        let overridden = matches!(
            given.value_source(&flag.id),
            Some(ValueSource::CommandLine | ValueSource::EnvVariable)
        );
        if problems.len() == bad && !overridden {
            args.extend(values);
            taken.push((format!("--{}", flag.long), key.clone()));
        }
    }
    // A `[apps.NAME] mount` is a `--mount NAME=PREFIX` unless one was given.
    let given_mounts: Vec<String> = given
        .try_get_many::<(String, String)>("mounts")
        .ok()
        .flatten()
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
        (problems, Some((args, sections, taken, tls)))
    } else {
        (problems, None)
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
    /// The flag, to read a file value with its own parser.
    arg: clap::Arg,
}

impl FlagKey {
    /// Reads one value in its command-line form (`--long=VALUE`) as the
    /// flag would, without the environment: the parser's own words, or
    /// the nearest valid value.
    fn check(&self, flag_form: &str) -> Result<(), String> {
        let arg = self.arg.clone().env(None::<&'static str>);
        let cmd = clap::Command::new("stoa").no_binary_name(true).arg(arg);
        let Err(e) = cmd.try_get_matches_from([flag_form]) else {
            return Ok(());
        };
        let value = flag_form.split_once('=').map_or("", |(_, v)| v);
        if let Some(why) = std::error::Error::source(&e) {
            let why = why.to_string();
            let own = format!("--{} ", self.long);
            let why = why.strip_prefix(&own).unwrap_or(&why);
            // A parser's words that do not show the value get it added.
            return Err(match why.contains(value) {
                true => why.to_string(),
                false => format!("{why}, got {value:?}"),
            });
        }
        let valid: Vec<String> = self
            .arg
            .get_possible_values()
            .iter()
            .map(|p| p.get_name().to_string())
            .collect();
        if valid.is_empty() {
            return Err(clap_words(&e));
        }
        let names: Vec<&str> = valid.iter().map(String::as_str).collect();
        let hint = crate::cli::nearest(value, &names)
            .map(|n| format!(" (did you mean {n:?}?)"))
            .unwrap_or_default();
        Err(format!(
            "unknown value {value:?}{hint}; valid: {}",
            names.join(", ")
        ))
    }
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
            arg: arg.clone(),
        };
        keys.insert(key, flag);
    }
    keys
}

/// The command-line form of a file value: one entry per item (an array's
/// items each at their place), each the flag or why it is refused.
fn flag_values(
    key: &str,
    flag: &FlagKey,
    value: &toml::Value,
) -> Vec<(At, Result<String, String>)> {
    use toml::Value;
    let long = &flag.long;
    if flag.switch {
        return match value {
            Value::Boolean(true) => vec![(At::Value, Ok(format!("--{long}")))],
            Value::Boolean(false) => Vec::new(),
            other => vec![(
                At::Value,
                Err(format!("expected true or false, got {other}")),
            )],
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
        Value::Array(_) if !flag.multiple => vec![(
            At::Value,
            Err(format!("takes one value, not an array: {value}")),
        )],
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, v)| (At::Item(i), one(v)))
            .collect(),
        v => vec![(At::Value, one(v))],
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
    let tls: toml::Table = cli
        .tls_sections
        .iter()
        .map(|(addr, section)| (addr.clone(), toml::Value::Table(section.to_toml())))
        .collect();
    if !tls.is_empty() {
        table.insert("tls".into(), toml::Value::Table(tls));
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

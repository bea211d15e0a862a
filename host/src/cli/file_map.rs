//! Where each key of the configuration file is: its line and column, and
//! those of its value (and of an array's items), so that every problem is
//! reported at its place (`stoa.toml:3:10: ...`), as a compiler does.

use super::problem::{At, Problem};
use std::collections::HashMap;
use toml::de::{DeTable, DeValue};

/// The byte offsets of a key, its value and its value's items.
struct Place {
    key: usize,
    value: usize,
    items: Vec<usize>,
}

/// The places of every key of a file, by dotted name (`apps.demo.mount`).
pub(super) struct Located<'t> {
    text: &'t str,
    places: HashMap<String, Place>,
}

impl<'t> Located<'t> {
    /// Reads the file's places; a file that is not TOML gives every
    /// syntax error, each as `LINE:COL: message`.
    pub(super) fn parse(text: &'t str) -> Result<Self, Vec<String>> {
        let (table, errors) = DeTable::parse_recoverable(text);
        if !errors.is_empty() {
            return Err(errors
                .iter()
                .map(|e| {
                    let (line, col) = line_col(text, e.span().map_or(0, |s| s.start));
                    let message = e.message().trim_end().replace('\n', "; ");
                    format!("{line}:{col}: {message}")
                })
                .collect());
        }
        let mut places = HashMap::new();
        walk(table.get_ref(), "", &mut places);
        Ok(Located { text, places })
    }

    /// Every problem as a line (`line`), in the file's order.
    pub(super) fn lines(&self, file: &str, problems: &[Problem]) -> Vec<String> {
        let mut placed: Vec<(usize, String)> = problems
            .iter()
            .map(|p| (self.offset(p).unwrap_or(0), self.line(file, p)))
            .collect();
        placed.sort_by_key(|(offset, _)| *offset);
        placed.into_iter().map(|(_, line)| line).collect()
    }

    /// Where `problem` points, if its key is found.
    fn offset(&self, problem: &Problem) -> Option<usize> {
        self.places.get(&problem.key).map(|p| match problem.at {
            At::Key => p.key,
            At::Value => p.value,
            At::Item(i) => p.items.get(i).copied().unwrap_or(p.value),
        })
    }

    /// Where `key`'s value is: `FILE:LINE:COL` (the file alone when the
    /// key cannot be found).
    pub(super) fn place(&self, file: &str, key: &str) -> String {
        match self.places.get(key) {
            Some(p) => {
                let (line, col) = line_col(self.text, p.value);
                format!("{file}:{line}:{col}")
            }
            None => file.to_string(),
        }
    }

    /// `problem` as one line: `FILE:LINE:COL: text` (the file alone when
    /// the key cannot be found).
    pub(super) fn line(&self, file: &str, problem: &Problem) -> String {
        match self.offset(problem) {
            Some(offset) => {
                let (line, col) = line_col(self.text, offset);
                format!("{file}:{line}:{col}: {}", problem.text)
            }
            None => format!("{file}: {}", problem.text),
        }
    }
}

/// Records the places of `table`'s keys under `prefix`, and of its tables'.
fn walk(table: &DeTable<'_>, prefix: &str, places: &mut HashMap<String, Place>) {
    for (key, value) in table {
        let name = format!("{prefix}{}", key.get_ref());
        let items = match value.get_ref() {
            DeValue::Array(items) => items.iter().map(|i| i.span().start).collect(),
            _ => Vec::new(),
        };
        if let DeValue::Table(inner) = value.get_ref() {
            walk(inner, &format!("{name}."), places);
        }
        places.insert(
            name,
            Place {
                key: key.span().start,
                value: value.span().start,
                items,
            },
        );
    }
}

/// The 1-based line and column (in characters) of a byte offset.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let start = before.rfind('\n').map_or(0, |i| i + 1);
    let col = before.get(start..).map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_values_and_items_have_their_line_and_column() {
        let text = "poller = \"kqueue\"\nbind = [\"a\", 5]\n\n[apps.demo]\nmout = \"/d\"\n";
        let Ok(located) = Located::parse(text) else {
            panic!("not read as TOML");
        };
        let line = |key: &str, at| {
            located.line(
                "f.toml",
                &Problem {
                    key: key.into(),
                    at,
                    text: "x".into(),
                },
            )
        };
        assert_eq!(line("poller", At::Value), "f.toml:1:10: x");
        assert_eq!(line("poller", At::Key), "f.toml:1:1: x");
        assert_eq!(line("bind", At::Item(1)), "f.toml:2:14: x");
        assert_eq!(line("apps.demo.mout", At::Key), "f.toml:5:1: x");
        assert_eq!(line("nosuch", At::Key), "f.toml: x");
    }

    #[test]
    fn every_syntax_error_has_its_place() {
        let errors = Located::parse("a = \nb = 1\nc = \"x\n")
            .err()
            .expect("errors");
        assert!(errors.len() >= 2, "{errors:?}");
        assert!(errors[0].starts_with("1:"), "{errors:?}");
        assert!(errors.iter().any(|e| e.starts_with("3:")), "{errors:?}");
    }
}

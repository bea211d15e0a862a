//! The shape of the host, checked: every `crate::` path in the sources (in
//! `use` lines and inline, `crate::{..}` groups included) and every
//! `super::` chain that leaves its top-level module must point at a wing
//! listed below its own in `docs/architecture.md` ("Who may import whom");
//! every top-level module must be in exactly one wing. So no import cycle
//! crosses a wing boundary, and the order the document gives is the code's.
//!
//! `cargo test -p stoa --lib architecture -- --nocapture` prints the map:
//! each wing, its modules with their lines, and the wings it imports.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One wing of the document's list: its name and its top-level modules.
struct Wing {
    name: String,
    modules: Vec<String>,
}

/// The numbered list under "## Who may import whom": lines such as
/// "1. **boot** (`main`, `boot`, `checks`): ...", top wing first.
fn wings(doc: &str) -> Vec<Wing> {
    let section = doc
        .split("\n## ")
        .find(|s| s.starts_with("Who may import whom"))
        .expect("docs/architecture.md has a \"## Who may import whom\" section");
    section
        .lines()
        .filter_map(|line| {
            let (number, rest) = line.split_once(". **")?;
            number.trim().parse::<u32>().ok()?;
            let (name, rest) = rest.split_once("**")?;
            let inside = rest.trim_start().strip_prefix('(')?.split_once(')')?.0;
            let modules = inside
                .split(',')
                .map(|m| m.trim().trim_matches('`').to_string())
                .collect();
            Some(Wing {
                name: name.to_string(),
                modules,
            })
        })
        .collect()
}

/// Every `.rs` file under `dir`.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("read host/src")
        .map(|e| e.expect("read host/src entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module path of a file: `server/conn/mod.rs` is `[server, conn]`.
fn module_of(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .with_extension("")
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    parts
}

/// The text without comments and string literals (a message that names
/// a path is no import).
fn code_only(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '/' if chars.peek() == Some(&'/') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            '"' => {
                out.push('"');
                while let Some(c) = chars.next() {
                    match c {
                        '\\' => {
                            chars.next();
                        }
                        '"' => break,
                        '\n' => out.push('\n'),
                        _ => {}
                    }
                }
                out.push('"');
            }
            // A char literal: skip `'"'` and `'\\'` whole; a lifetime's
            // quote stays as it is.
            '\'' => {
                let mut ahead = chars.clone();
                let first = ahead.next();
                let closing = match first {
                    Some('\\') => {
                        ahead.next();
                        ahead.next() == Some('\'')
                    }
                    Some(_) => ahead.next() == Some('\''),
                    None => false,
                };
                if closing {
                    chars = ahead;
                    out.push_str("' '");
                } else {
                    out.push('\'');
                }
            }
            _ => out.push(c),
        }
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The identifier at the start of `s`.
fn ident(s: &str) -> &str {
    let end = s.find(|c| !is_ident(c)).unwrap_or(s.len());
    &s[..end]
}

/// The first names of a `{..}` group's items at its top level.
fn group_heads(group: &str) -> Vec<String> {
    let mut heads = Vec::new();
    let mut depth = 0;
    let mut start = true;
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => start = true,
            c if start && depth == 0 && is_ident(c) => {
                heads.push(ident(&group[i..]).to_string());
                start = false;
            }
            _ => {}
        }
    }
    heads
}

/// The text of the `{..}` group that opens at the start of `s`.
fn group_at(s: &str) -> &str {
    let mut depth = 0;
    for (i, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return &s[1..i];
                }
            }
            _ => {}
        }
    }
    ""
}

/// One arrow: the top-level module a file names, and the line naming it.
struct Arrow {
    to: String,
    line: usize,
}

/// The top-level modules `text` (the file of module `module`) names.
fn arrows_in(module: &[String], text: &str) -> Vec<Arrow> {
    let code = code_only(text);
    let mut found = crate_paths(&code);
    found.extend(super_chains(module, &code));
    found
}

/// `crate::x` and `crate::{x, y::z}`: the first name of each path.
fn crate_paths(code: &str) -> Vec<Arrow> {
    let mut found = Vec::new();
    let line_of = |at: usize| code[..at].matches('\n').count() + 1;
    // `crate::x` and `crate::{x, y::z}`.
    for (at, _) in code.match_indices("crate::") {
        if at > 0 && code[..at].ends_with(|c: char| is_ident(c) || c == '$') {
            continue;
        }
        let rest = &code[at + "crate::".len()..];
        let heads = if rest.starts_with('{') {
            group_heads(group_at(rest))
        } else {
            vec![ident(rest).to_string()]
        };
        for to in heads.into_iter().filter(|h| !h.is_empty()) {
            found.push(Arrow {
                to,
                line: line_of(at),
            });
        }
    }
    found
}

/// `super::` chains, resolved from the module they are written in (inline
/// `mod x { .. }` blocks counted): the top-level module each reaches.
fn super_chains(module: &[String], code: &str) -> Vec<Arrow> {
    let mut found = Vec::new();
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    for (n, line) in code.lines().enumerate() {
        let trimmed = line.trim_start();
        let decl = trimmed
            .strip_prefix("pub(crate) ")
            .or_else(|| trimmed.strip_prefix("pub(super) "))
            .or_else(|| trimmed.strip_prefix("pub "))
            .unwrap_or(trimmed);
        if let Some(rest) = decl.strip_prefix("mod ") {
            let name = ident(rest);
            if rest[name.len()..].trim_start().starts_with('{') {
                inline.push((name.to_string(), depth));
            }
        }
        let mut from = 0;
        while let Some(i) = line[from..].find("super::") {
            let at = from + i;
            from = at + 1;
            if at > 0 && line[..at].ends_with(|c: char| is_ident(c) || c == ':') {
                continue;
            }
            let mut ups = 0;
            let mut rest = &line[at..];
            while let Some(r) = rest.strip_prefix("super::") {
                ups += 1;
                rest = r;
            }
            let mut path: Vec<String> = module.to_vec();
            path.extend(inline.iter().map(|(m, _)| m.clone()));
            if ups > path.len() {
                continue;
            }
            path.truncate(path.len() - ups);
            let to = match path.first() {
                Some(top) => top.clone(),
                None => ident(rest).to_string(),
            };
            found.push(Arrow { to, line: n + 1 });
        }
        for c in line.chars() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth = depth.saturating_sub(1);
                    while inline.last().is_some_and(|(_, d)| *d >= depth) {
                        inline.pop();
                    }
                }
                _ => {}
            }
        }
    }
    found
}

/// One source file: its path under host/src, its lines, its unit tests.
struct Source {
    path: PathBuf,
    lines: usize,
    tests: usize,
}

struct House {
    wings: Vec<Wing>,
    /// Top-level module -> its files (relative to host/src) and lines.
    files: BTreeMap<String, Vec<Source>>,
    /// (from module, to module) -> where, as "file:line".
    arrows: BTreeMap<(String, String), Vec<String>>,
}

fn house() -> House {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("../docs/architecture.md"))
        .expect("read docs/architecture.md");
    let src = root.join("src");
    let mut paths = Vec::new();
    sources(&src, &mut paths);
    let mut files: BTreeMap<String, Vec<Source>> = BTreeMap::new();
    let mut arrows: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for path in paths {
        let rel = path
            .strip_prefix(&src)
            .expect("under host/src")
            .to_path_buf();
        let text = std::fs::read_to_string(&path).expect("read a source file");
        let module = module_of(&rel);
        let top = module.first().cloned().unwrap_or_else(|| "lib".to_string());
        for arrow in arrows_in(&module, &text) {
            if arrow.to != top {
                arrows
                    .entry((top.clone(), arrow.to))
                    .or_default()
                    .push(format!("host/src/{}:{}", rel.display(), arrow.line));
            }
        }
        files.entry(top).or_default().push(Source {
            path: rel,
            lines: text.lines().count(),
            tests: text.lines().filter(|l| l.trim() == "#[test]").count(),
        });
    }
    House {
        wings: wings(&doc),
        files,
        arrows,
    }
}

impl House {
    /// The index of the wing a module is in (0 = the top).
    fn wing_of(&self, module: &str) -> Option<usize> {
        self.wings
            .iter()
            .position(|w| w.modules.iter().any(|m| m == module))
    }

    fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        let mut listed = BTreeSet::new();
        for wing in &self.wings {
            for m in &wing.modules {
                if !listed.insert(m.clone()) {
                    problems.push(format!("module {m} is listed in two wings"));
                }
                if !self.files.contains_key(m) {
                    problems.push(format!(
                        "docs/architecture.md lists module {m} (wing {}), which host/src has not",
                        wing.name
                    ));
                }
            }
        }
        for module in self.files.keys() {
            if module != "lib" && self.wing_of(module).is_none() {
                problems.push(format!(
                    "module {module} is in no wing of docs/architecture.md"
                ));
            }
        }
        for ((from, to), places) in &self.arrows {
            let (Some(a), Some(b)) = (self.wing_of(from), self.wing_of(to)) else {
                continue;
            };
            if a > b {
                problems.push(format!(
                    "{} imports {to} (wing {}), which is listed above its own wing {}: {}",
                    from,
                    self.wings[b].name,
                    self.wings[a].name,
                    places.join(", ")
                ));
            }
        }
        problems
    }

    fn map(&self) -> String {
        let mut out = String::new();
        for (i, wing) in self.wings.iter().enumerate() {
            let sources = || {
                wing.modules
                    .iter()
                    .flat_map(|m| self.files.get(m).into_iter().flatten())
            };
            let lines: usize = sources().map(|s| s.lines).sum();
            let tests: usize = sources().map(|s| s.tests).sum();
            let imports: BTreeSet<&str> = self
                .arrows
                .keys()
                .filter(|(from, to)| {
                    wing.modules.contains(from) && self.wing_of(to).is_some_and(|b| b != i)
                })
                .filter_map(|(_, to)| self.wing_of(to).map(|b| self.wings[b].name.as_str()))
                .collect();
            out.push_str(&format!(
                "{}. {} ({lines} lines, {tests} unit tests) -> {}\n",
                i + 1,
                wing.name,
                imports.into_iter().collect::<Vec<_>>().join(", ")
            ));
            for s in sources() {
                out.push_str(&format!(
                    "     {:<40} {:>5} {:>4}\n",
                    s.path.display(),
                    s.lines,
                    s.tests
                ));
            }
        }
        out
    }
}

#[test]
fn every_import_points_down_the_documented_order() {
    let house = house();
    assert!(
        house.wings.len() >= 5,
        "docs/architecture.md lists {} wings",
        house.wings.len()
    );
    println!("{}", house.map());
    let problems = house.problems();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_reader_sees_every_form_of_path() {
    let module = vec!["server".to_string(), "conn".to_string()];
    let text = "use crate::apps::x;\n\
                use crate::{http::y, ops::{a, b}};\n\
                // crate::budget in a comment\n\
                let s = \"crate::cli in a string\";\n\
                let c = '\"'; let t = crate::stats::bump(&x, 1);\n\
                use super::super::listen::Stream;\n\
                use super::ws::Link;\n\
                mod tests {\n    use super::super::super::inbox::I;\n}\n";
    let mut to: Vec<String> = arrows_in(&module, text).into_iter().map(|a| a.to).collect();
    to.sort();
    assert_eq!(
        to,
        ["apps", "http", "inbox", "listen", "ops", "server", "stats"]
    );
}

fn source(path: &str) -> Source {
    Source {
        path: PathBuf::from(path),
        lines: 1,
        tests: 0,
    }
}

#[test]
fn an_arrow_up_the_list_is_a_problem() {
    let doc = "# x\n\n## Who may import whom\n\n1. **top** (`a`): a.\n2. **low** (`b`): b.\n";
    let mut house = House {
        wings: wings(doc),
        files: BTreeMap::from([
            ("a".to_string(), vec![source("a.rs")]),
            ("b".to_string(), vec![source("b.rs")]),
        ]),
        arrows: BTreeMap::from([(("a".into(), "b".into()), vec!["a.rs:1".into()])]),
    };
    assert!(house.problems().is_empty(), "{:?}", house.problems());
    house
        .arrows
        .insert(("b".into(), "a".into()), vec!["b.rs:3".into()]);
    let problems = house.problems();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].contains("b.rs:3"), "{}", problems[0]);
    house.files.insert("c".into(), vec![source("c.rs")]);
    assert!(house
        .problems()
        .iter()
        .any(|p| p.contains("module c is in no wing")));
}

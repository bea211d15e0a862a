//! The shape of the host, checked, in two ways.
//!
//! - Wings: every path a source file names (`crate::`, `super::` and
//!   `self::` paths and a child module's, in `use` lines and inline,
//!   `{..}` groups included: `reader.rs`) that leaves its top-level module
//!   must point at a wing listed below its own in `docs/architecture.md`
//!   ("Who may import whom"); every top-level module must be in exactly one
//!   wing. So no import cycle crosses a wing boundary, and the order the
//!   document gives is the code's.
//! - Files: each file's arrows to the files whose items it names make a
//!   graph whose loops (inside one wing, as the wings allow no other) must
//!   each be listed, with the reason it is kept, under "## Known loops"
//!   (`loops.rs`).
//!
//! `cargo test -p stoa --lib architecture -- --nocapture` prints the map:
//! each wing, its modules with their lines, and the wings it imports; then
//! the loops between files, each arrow with its line.

mod loops;
mod reader;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use loops::{Loops, Place};

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
    /// The file-level graph and the known loops.
    loops: Loops,
}

fn house() -> House {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("../docs/architecture.md"))
        .expect("read docs/architecture.md");
    let src = root.join("src");
    let mut paths = Vec::new();
    sources(&src, &mut paths);
    let read: Vec<(PathBuf, String)> = paths
        .iter()
        .map(|path| {
            let rel = path.strip_prefix(&src).expect("under host/src");
            let text = std::fs::read_to_string(path).expect("read a source file");
            (rel.to_path_buf(), text)
        })
        .collect();
    // Module path -> its file, for the longest-prefix look-up.
    let modules: BTreeMap<Vec<String>, String> = read
        .iter()
        .map(|(rel, _)| (module_of(rel), rel.display().to_string()))
        .collect();
    let mut files: BTreeMap<String, Vec<Source>> = BTreeMap::new();
    let mut arrows: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    let mut file_loops = Loops {
        known: loops::known(&doc),
        ..Loops::default()
    };
    for (rel, text) in read {
        let module = module_of(&rel);
        let top = module.first().cloned().unwrap_or_else(|| "lib".to_string());
        let name = rel.display().to_string();
        let lines: Vec<&str> = text.lines().collect();
        let code = reader::code_only(&text);
        assert_eq!(code.lines().count(), lines.len(), "{name}: lines kept");
        for named in reader::named_in(&module, &code) {
            if let Some(to) = named.path.first().filter(|to| **to != top) {
                arrows
                    .entry((top.clone(), to.clone()))
                    .or_default()
                    .push(format!("host/src/{name}:{}", named.line));
            }
            if let Some(to) = loops::file_of(&named.path, &modules) {
                let place = Place {
                    line: named.line,
                    text: lines
                        .get(named.line - 1)
                        .map_or("", |l| l.trim())
                        .to_string(),
                    path: named.path.join("::"),
                };
                file_loops.add(&name, to, place);
            }
        }
        files.entry(top).or_default().push(Source {
            path: rel,
            lines: lines.len(),
            tests: lines.iter().filter(|l| l.trim() == "#[test]").count(),
        });
    }
    House {
        wings: wings(&doc),
        files,
        arrows,
        loops: file_loops,
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
        out.push_str(&self.loops.map());
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
fn every_loop_between_files_is_known() {
    let problems = house().loops.problems();
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
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
        loops: Loops::default(),
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

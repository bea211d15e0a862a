//! Import loops between files. The wing check passes over arrows inside
//! one wing, so a loop between two files of one wing (each names an item
//! of the other) would stay hidden; here every file's arrows to the files
//! whose items it names make one graph, its loops are found (strongly
//! connected components of more than one file), and each must be listed
//! under "## Known loops" in `docs/architecture.md` with the reason it is
//! kept. A loop ties its files together: none can be read, tested or
//! moved without the others.

use std::collections::{BTreeMap, BTreeSet};

/// Where one file first names another: its line's number and text, and
/// the path named there.
pub(super) struct Place {
    pub(super) line: usize,
    pub(super) text: String,
    pub(super) path: String,
}

/// One entry under "## Known loops": its files (under `host/src`) and the
/// reason the loop is kept.
pub(super) struct Known {
    files: BTreeSet<String>,
    reason: String,
}

/// The file-level import graph and the loops the document lists.
#[derive(Default)]
pub(super) struct Loops {
    /// File -> each file it names -> the first place it names it.
    pub(super) arrows: BTreeMap<String, BTreeMap<String, Place>>,
    pub(super) known: Vec<Known>,
}

/// The list under "## Known loops": items such as
/// "- `boot.rs`, `checks.rs`: why.", the files before the first colon,
/// the reason after it (an item may run on over indented lines).
pub(super) fn known(doc: &str) -> Vec<Known> {
    let section = doc
        .split("\n## ")
        .find(|s| s.starts_with("Known loops"))
        .expect("docs/architecture.md has a \"## Known loops\" section");
    let mut items: Vec<String> = Vec::new();
    for line in section.lines() {
        if let Some(item) = line.strip_prefix("- ") {
            items.push(item.to_string());
        } else if line.starts_with(' ') && !line.trim().is_empty() {
            if let Some(item) = items.last_mut() {
                item.push(' ');
                item.push_str(line.trim());
            }
        }
    }
    items
        .iter()
        .map(|item| {
            let (head, reason) = item.split_once(':').unwrap_or((item, ""));
            Known {
                files: head
                    .split('`')
                    .skip(1)
                    .step_by(2)
                    .map(str::to_string)
                    .collect(),
                reason: reason.trim().to_string(),
            }
        })
        .collect()
}

/// The file a path lands in: its longest prefix that is some file's
/// module (`[server, conn, Conn]` -> `server/conn/mod.rs`).
pub(super) fn file_of<'a>(
    path: &[String],
    files: &'a BTreeMap<Vec<String>, String>,
) -> Option<&'a String> {
    (0..=path.len()).rev().find_map(|n| files.get(&path[..n]))
}

/// Tarjan's strongly connected components over the arrows: each call of
/// `visit` numbers a file, follows its arrows, and closes a component when
/// no file below it reaches above it.
struct Tarjan<'a> {
    arrows: &'a BTreeMap<String, BTreeMap<String, Place>>,
    index: BTreeMap<&'a str, usize>,
    low: BTreeMap<&'a str, usize>,
    stack: Vec<&'a str>,
    on_stack: BTreeSet<&'a str>,
    found: Vec<Vec<String>>,
}

impl<'a> Tarjan<'a> {
    fn visit(&mut self, file: &'a str) {
        let number = self.index.len();
        self.index.insert(file, number);
        self.low.insert(file, number);
        self.stack.push(file);
        self.on_stack.insert(file);
        for next in self.arrows.get(file).into_iter().flat_map(|m| m.keys()) {
            let reach = match self.index.get(next.as_str()) {
                None => {
                    self.visit(next);
                    self.low[next.as_str()]
                }
                Some(&n) if self.on_stack.contains(next.as_str()) => n,
                Some(_) => continue,
            };
            let low = self.low[file].min(reach);
            self.low.insert(file, low);
        }
        if self.low[file] == number {
            let mut component = Vec::new();
            while let Some(top) = self.stack.pop() {
                self.on_stack.remove(top);
                component.push(top.to_string());
                if top == file {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                self.found.push(component);
            }
        }
    }
}

/// The loops of the graph: each a sorted list of more than one file.
pub(super) fn cycles(arrows: &BTreeMap<String, BTreeMap<String, Place>>) -> Vec<Vec<String>> {
    let mut tarjan = Tarjan {
        arrows,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for file in arrows.keys() {
        if !tarjan.index.contains_key(file.as_str()) {
            tarjan.visit(file);
        }
    }
    tarjan.found.sort();
    tarjan.found
}

impl Loops {
    /// Records that `from` names `to` at `place`, unless it is one file or
    /// the pair has a place already.
    pub(super) fn add(&mut self, from: &str, to: &str, place: Place) {
        if from != to {
            let to_places = self.arrows.entry(from.to_string()).or_default();
            to_places.entry(to.to_string()).or_insert(place);
        }
    }

    /// The arrows inside one loop, one line each: where the import is, the
    /// path it names and the line's text.
    fn arrows_inside(&self, files: &[String]) -> Vec<String> {
        let mut lines = Vec::new();
        for from in files {
            for (to, place) in self.arrows.get(from).into_iter().flatten() {
                if files.contains(to) {
                    lines.push(format!(
                        "    {from} -> {to}: host/src/{from}:{} names {} ({})",
                        place.line, place.path, place.text
                    ));
                }
            }
        }
        lines
    }

    pub(super) fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        let cycles = cycles(&self.arrows);
        for files in &cycles {
            let set: BTreeSet<String> = files.iter().cloned().collect();
            if !self.known.iter().any(|k| k.files == set) {
                problems.push(format!(
                    "an import loop not listed under \"## Known loops\" in \
                     docs/architecture.md: {}; cut one of its arrows, or list it \
                     with the reason it is kept:\n{}",
                    files.join(", "),
                    self.arrows_inside(files).join("\n")
                ));
            }
        }
        for known in &self.known {
            let files: Vec<String> = known.files.iter().cloned().collect();
            if known.files.len() < 2 || known.reason.is_empty() {
                problems.push(format!(
                    "docs/architecture.md's known loop of {} wants two files or \
                     more and a reason after a colon",
                    files.join(", ")
                ));
            } else if !cycles.contains(&files) {
                problems.push(format!(
                    "docs/architecture.md lists a known loop of {}, which host/src \
                     has not (gone, or changed: list it as it is now)",
                    files.join(", ")
                ));
            }
        }
        problems
    }

    pub(super) fn map(&self) -> String {
        let mut out = String::from("Import loops between files:\n");
        for files in cycles(&self.arrows) {
            let reason = self
                .known
                .iter()
                .find(|k| k.files.iter().eq(files.iter()))
                .map_or("NOT LISTED", |k| k.reason.as_str());
            out.push_str(&format!("  - {}: {reason}\n", files.join(", ")));
            for line in self.arrows_inside(&files) {
                out.push_str(&format!("  {line}\n"));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn place(line: usize) -> Place {
        Place {
            line,
            text: "use crate::x;".into(),
            path: "x".into(),
        }
    }

    fn graph(arrows: &[(&str, &str, usize)]) -> Loops {
        let mut loops = Loops::default();
        for (from, to, line) in arrows {
            loops.add(from, to, place(*line));
        }
        loops
    }

    #[test]
    fn a_path_lands_in_the_longest_module_that_is_a_file() {
        let files: BTreeMap<Vec<String>, String> = [
            (vec![], "lib.rs"),
            (vec!["server"], "server/mod.rs"),
            (vec!["server", "conn"], "server/conn/mod.rs"),
            (vec!["server", "conn", "tail"], "server/conn/tail.rs"),
        ]
        .into_iter()
        .map(|(m, f)| (m.into_iter().map(String::from).collect(), f.to_string()))
        .collect();
        for (path, file) in [
            ("server::conn::Conn", "server/conn/mod.rs"),
            ("server::conn::tail::Tail", "server/conn/tail.rs"),
            ("server::conn", "server/conn/mod.rs"),
            ("server::Server", "server/mod.rs"),
            ("Thing", "lib.rs"),
        ] {
            let path: Vec<String> = path.split("::").map(String::from).collect();
            assert_eq!(file_of(&path, &files).map(String::as_str), Some(file));
        }
    }

    #[test]
    fn the_finder_sees_each_loop_once() {
        // a <-> b, c -> d -> e -> c, f -> a (into a loop, not in it), and
        // a file naming itself.
        let loops = graph(&[
            ("a.rs", "b.rs", 1),
            ("b.rs", "a.rs", 2),
            ("c.rs", "d.rs", 3),
            ("d.rs", "e.rs", 4),
            ("e.rs", "c.rs", 5),
            ("f.rs", "a.rs", 6),
            ("g.rs", "g.rs", 7),
        ]);
        assert_eq!(
            cycles(&loops.arrows),
            [vec!["a.rs", "b.rs"], vec!["c.rs", "d.rs", "e.rs"]]
        );
        assert!(cycles(&graph(&[("a.rs", "b.rs", 1), ("b.rs", "c.rs", 2)]).arrows).is_empty());
    }

    #[test]
    fn an_unlisted_loop_is_a_problem() {
        let doc = "# x\n\n## Known loops\n\nWhy loops stay.\n\n\
                   - `a.rs`, `b.rs`: the two halves of one\n  protocol.\n";
        let mut loops = graph(&[("a.rs", "b.rs", 1), ("b.rs", "a.rs", 2)]);
        loops.known = known(doc);
        assert!(loops.problems().is_empty(), "{:?}", loops.problems());
        assert_eq!(loops.known[0].reason, "the two halves of one protocol.");

        loops.add("c.rs", "d.rs", place(3));
        loops.add("d.rs", "c.rs", place(9));
        let problems = loops.problems();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("c.rs, d.rs"), "{}", problems[0]);
        assert!(problems[0].contains("host/src/c.rs:3"), "{}", problems[0]);
        assert!(problems[0].contains("host/src/d.rs:9"), "{}", problems[0]);
        assert!(!problems[0].contains("a.rs:1"), "{}", problems[0]);

        // A listed loop the code no longer has is a problem too.
        let gone = graph(&[("a.rs", "b.rs", 1)]);
        let gone = Loops {
            known: known(doc),
            ..gone
        };
        assert_eq!(gone.problems().len(), 1, "{:?}", gone.problems());
    }
}

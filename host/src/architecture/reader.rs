//! Reading what a source file names: its text without comments and string
//! literals, and every module path in it (`crate::`, `super::`, `self::`
//! and a child module's, in `use` lines and inline, `{..}` groups
//! included), resolved to the absolute path from the crate's root.
//!
//! A name a `use` line brings in and the code then goes through
//! (`use crate::http; http::parse::x()`) is seen at the `use` line only,
//! so an arrow may land on a parent module's file rather than the child
//! file the code reaches through it; the map is no finer than that.

use std::collections::BTreeMap;

/// One path a file names: absolute (the modules from the crate's root,
/// then perhaps an item: `[server, conn, Conn]`), and the line it is on.
pub(super) struct Named {
    pub(super) path: Vec<String>,
    pub(super) line: usize,
}

/// The text without comments and string literals (a message that names
/// a path is no import); lines keep their numbers.
pub(super) fn code_only(text: &str) -> String {
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
            // A raw string (`r"..."`, `r#"..."#`): its quotes do not end it.
            'r' if !out.ends_with(is_ident) && matches!(chars.peek(), Some('"' | '#')) => {
                let mut ahead = chars.clone();
                let mut hashes = 0;
                while ahead.next_if_eq(&'#').is_some() {
                    hashes += 1;
                }
                if ahead.next() != Some('"') {
                    out.push(c);
                    continue;
                }
                chars = ahead;
                out.push('"');
                let closing: String = std::iter::once('"')
                    .chain(std::iter::repeat_n('#', hashes))
                    .collect();
                let mut inside = String::new();
                for c in chars.by_ref() {
                    inside.push(c);
                    if c == '\n' {
                        out.push('\n');
                    }
                    if inside.ends_with(&closing) {
                        break;
                    }
                }
                out.push('"');
            }
            '"' => {
                out.push('"');
                while let Some(c) = chars.next() {
                    match c {
                        // An escape; a line's end escaped (a string
                        // going on over lines) still counts as a line.
                        '\\' => {
                            let escaped = chars.next();
                            if escaped == Some('\n') {
                                out.push('\n');
                            }
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

pub(super) fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The identifier at the start of `s`.
pub(super) fn ident(s: &str) -> &str {
    let end = s.find(|c| !is_ident(c)).unwrap_or(s.len());
    &s[..end]
}

/// The items of a `{..}` group's top level, trimmed, empty ones left out.
fn group_items(group: &str) -> Vec<&str> {
    let mut items = Vec::new();
    let mut depth = 0;
    let mut start = 0;
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(group[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(group[start..].trim());
    items.retain(|i| !i.is_empty());
    items
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

/// The paths the text after `prefix::` goes on to (`a::b`, `a::{b, c::d}`,
/// `{self, x}`, `*`), each relative to the prefix, and how many bytes of
/// `rest` they took.
fn expand(rest: &str) -> (Vec<Vec<String>>, usize) {
    if rest.starts_with('{') {
        let group = group_at(rest);
        let mut tails = Vec::new();
        for item in group_items(group) {
            if ident(item) == "self" {
                tails.push(Vec::new());
            } else {
                tails.extend(expand(item).0);
            }
        }
        return (tails, group.len() + 2);
    }
    let mut path = Vec::new();
    let mut at = 0;
    loop {
        let word = ident(&rest[at..]);
        if word.is_empty() {
            break;
        }
        path.push(word.to_string());
        at += word.len();
        match rest[at..].strip_prefix("::") {
            Some(after) if after.starts_with('{') => {
                let (tails, used) = expand(after);
                let whole = tails
                    .into_iter()
                    .map(|t| path.iter().cloned().chain(t).collect())
                    .collect();
                return (whole, at + 2 + used);
            }
            Some(_) => at += 2,
            None => break,
        }
    }
    (vec![path], at)
}

/// A declaration line's item with its attributes (`#[cfg(test)]`) and
/// visibility (`pub`, `pub(crate)`, `pub(in ..)`) taken off.
fn item_of(line: &str) -> &str {
    let mut item = line.trim_start();
    while item.starts_with("#[") {
        match item.split_once(']') {
            Some((_, rest)) => item = rest.trim_start(),
            None => break,
        }
    }
    if let Some(rest) = item.strip_prefix("pub(") {
        item = rest.split_once(')').map_or(rest, |(_, r)| r).trim_start();
    }
    item.strip_prefix("pub ").unwrap_or(item)
}

/// One line of a file as [`walk`] gives it: its number (from 1), where it
/// starts in the text, the line, and the inline modules (`mod x { .. }`)
/// it is inside, outermost first.
struct Line<'a> {
    number: usize,
    start: usize,
    text: &'a str,
    inline: Vec<String>,
}

/// Each line of `code` with the inline modules it is in.
fn walk(code: &str) -> Vec<Line<'_>> {
    let mut lines = Vec::new();
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (n, text) in code.split('\n').enumerate() {
        if let Some(rest) = item_of(text).strip_prefix("mod ") {
            let name = ident(rest);
            if rest[name.len()..].trim_start().starts_with('{') {
                inline.push((name.to_string(), depth));
            }
        }
        lines.push(Line {
            number: n + 1,
            start,
            text,
            inline: inline.iter().map(|(m, _)| m.clone()).collect(),
        });
        for c in text.chars() {
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
        start += text.len() + 1;
    }
    lines
}

/// The child modules a file declares (`mod x;`, whose code is another
/// file), by name, each with its absolute path.
fn children(module: &[String], lines: &[Line]) -> BTreeMap<String, Vec<String>> {
    let mut found = BTreeMap::new();
    for line in lines {
        let Some(rest) = item_of(line.text).strip_prefix("mod ") else {
            continue;
        };
        let name = ident(rest);
        if rest[name.len()..].trim_start().starts_with(';') {
            let path = module
                .iter()
                .chain(&line.inline)
                .chain(std::iter::once(&name.to_string()))
                .cloned()
                .collect();
            found.insert(name.to_string(), path);
        }
    }
    found
}

/// Every path `code` (the file of module `module`, after [`code_only`])
/// names, resolved from where it is written: `crate::a::b`, `super::`
/// chains and `self::` (inline `mod x { .. }` blocks counted), and a path
/// through a child module the file declares (`use conn::Conn`). A
/// `mod x;` declaration is not a path.
pub(super) fn named_in(module: &[String], code: &str) -> Vec<Named> {
    let lines = walk(code);
    let children = children(module, &lines);
    let mut found = Vec::new();
    // The end of the last path read: a group's items are not paths of
    // their own.
    let mut read_to = 0;
    for line in &lines {
        let here: Vec<String> = module.iter().chain(&line.inline).cloned().collect();
        for (i, c) in line.text.char_indices() {
            let at = line.start + i;
            let starts_word =
                !line.text[..i].ends_with(|p: char| is_ident(p) || matches!(p, ':' | '$' | '.'));
            if at < read_to || !is_ident(c) || !starts_word {
                continue;
            }
            let word = ident(&line.text[i..]);
            let after = at + word.len();
            if !code[after..].starts_with("::") {
                continue;
            }
            let mut rest = &code[after + 2..];
            let base = match word {
                "crate" => Vec::new(),
                "self" => here.clone(),
                "super" => {
                    let mut ups = 1;
                    while let Some(r) = rest.strip_prefix("super::") {
                        ups += 1;
                        rest = r;
                    }
                    if ups > here.len() {
                        continue;
                    }
                    here[..here.len() - ups].to_vec()
                }
                child => match children.get(child) {
                    Some(path) => path.clone(),
                    None => continue,
                },
            };
            let (tails, used) = expand(rest);
            read_to = code.len() - rest.len() + used;
            for tail in tails {
                let path = base.iter().cloned().chain(tail).collect();
                found.push(Named {
                    path,
                    line: line.number,
                });
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(path: &[&str]) -> Vec<String> {
        path.iter().map(|s| s.to_string()).collect()
    }

    fn named(module: &[&str], text: &str) -> Vec<(String, usize)> {
        named_in(&strings(module), &code_only(text))
            .into_iter()
            .map(|n| (n.path.join("::"), n.line))
            .collect()
    }

    #[test]
    fn the_reader_sees_every_form_of_path() {
        let text = "use crate::apps::x;\n\
                    use crate::{http::y, ops::{a, b}};\n\
                    // crate::budget in a comment\n\
                    let s = \"crate::cli in a string\";\n\
                    let r = r#\"crate::control \"in\" a raw string\"#;\n\
                    let c = '\"'; let t = crate::stats::bump(&x, 1);\n\
                    use super::super::listen::Stream;\n\
                    use super::ws::Link;\n\
                    mod tests {\n    use super::super::super::inbox::I;\n}\n";
        let mut tops: Vec<String> = named(&["server", "conn"], text)
            .into_iter()
            .map(|(p, _)| p.split("::").next().unwrap_or_default().to_string())
            .collect();
        tops.sort();
        assert_eq!(
            tops,
            ["apps", "http", "inbox", "listen", "ops", "ops", "server", "stats"]
        );
    }

    #[test]
    fn paths_resolve_from_where_they_are_written() {
        let text = "mod tail;\n\
                    #[cfg(test)]\n\
                    mod tests;\n\
                    pub(crate) use tail::Tail;\n\
                    use self::gone::Gone;\n\
                    use super::{self, ws::{Link, line::Line}};\n\
                    use crate::{\n    http::answer,\n    ops::*,\n};\n\
                    fn f() { let v = Vec::<u8>::new(); let n = x.iter().collect::<Vec<_>>(); }\n\
                    mod inner {\n    use super::super::route::Route;\n    use self::deep::D;\n}\n\
                    use std::io::Read;\n";
        let continued = "let s = \"one \\\n two\";\nuse crate::y::Z;\n";
        assert_eq!(named(&["x"], continued), [("y::Z".to_string(), 3)]);
        assert_eq!(
            named(&["server", "conn"], text),
            [
                ("server::conn::tail::Tail".to_string(), 4),
                ("server::conn::gone::Gone".to_string(), 5),
                ("server".to_string(), 6),
                ("server::ws::Link".to_string(), 6),
                ("server::ws::line::Line".to_string(), 6),
                ("http::answer".to_string(), 7),
                ("ops".to_string(), 7),
                ("server::route::Route".to_string(), 13),
                ("server::conn::inner::deep::D".to_string(), 14),
            ]
        );
    }
}

//! The URLconf: route patterns with typed converters in the manner of
//! Django's `path()` (`"articles/<int:year>/"`), compiled once at start-up,
//! and the resolver that maps a request's PATH_INFO to a view.

use crate::views::{self, View};

/// One entry of the URLconf: a route, its view and its name.
pub struct Path {
    pub route: &'static str,
    pub view: View,
    pub name: &'static str,
}

/// Declares a URL pattern, like Django's `path(route, view, name=...)`.
pub const fn path(route: &'static str, view: View, name: &'static str) -> Path {
    Path { route, view, name }
}

/// The project's URL patterns, tried in order; the first match wins.
pub const URLPATTERNS: &[Path] = &[
    path("", views::index, "index"),
    path("hello/", views::hello, "hello"),
    path("articles/<int:year>/", views::year_archive, "year-archive"),
    path(
        "articles/<int:year>/<slug:slug>/",
        views::article_detail,
        "article-detail",
    ),
];

/// What a `<converter:name>` placeholder accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Converter {
    /// `[0-9]+`, converted to an integer.
    Int,
    /// `[-a-zA-Z0-9_]+`.
    Slug,
    /// Any non-empty text without `/` (the default converter).
    Str,
}

impl Converter {
    fn from_name(name: &str) -> Option<Self> {
        match name {
            "int" => Some(Converter::Int),
            "slug" => Some(Converter::Slug),
            "str" => Some(Converter::Str),
            _ => None,
        }
    }

    fn accepts(self, c: char) -> bool {
        match self {
            Converter::Int => c.is_ascii_digit(),
            Converter::Slug => c.is_ascii_alphanumeric() || c == '-' || c == '_',
            Converter::Str => c != '/',
        }
    }

    fn to_value(self, text: &str) -> Option<Value<'_>> {
        match self {
            Converter::Int => text.parse().ok().map(Value::Int),
            _ => Some(Value::Str(text)),
        }
    }
}

/// A captured, converted path parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Value<'p> {
    Int(u64),
    Str(&'p str),
}

/// The parameters a matched route captured, by name.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Params<'p> {
    values: Vec<(&'static str, Value<'p>)>,
}

impl<'p> Params<'p> {
    /// The integer captured under `name` (an `int` converter).
    pub fn int(&self, name: &str) -> Option<u64> {
        match self.get(name)? {
            Value::Int(n) => Some(n),
            Value::Str(_) => None,
        }
    }

    /// The text captured under `name` (any converter but `int`).
    pub fn str(&self, name: &str) -> Option<&'p str> {
        match self.get(name)? {
            Value::Str(s) => Some(s),
            Value::Int(_) => None,
        }
    }

    fn get(&self, name: &str) -> Option<Value<'p>> {
        self.values
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| *v)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Token {
    Literal(&'static str),
    Param { name: &'static str, conv: Converter },
}

/// A compiled route: literal text and placeholders, matched in full.
#[derive(Debug, PartialEq, Eq)]
pub struct Pattern {
    tokens: Vec<Token>,
    /// The whole route, when it has no placeholders (compared as it is).
    literal: Option<&'static str>,
}

impl Pattern {
    /// Compiles a route such as `"articles/<int:year>/<slug>/"`.
    pub fn compile(route: &'static str) -> Result<Self, String> {
        let mut tokens = Vec::new();
        let mut rest = route;
        while let Some(open) = rest.find('<') {
            if open > 0 {
                tokens.push(Token::Literal(&rest[..open]));
            }
            let after = &rest[open + 1..];
            let close = after
                .find('>')
                .ok_or_else(|| format!("route {route:?}: unclosed '<'"))?;
            let spec = &after[..close];
            let (conv, name) = spec.split_once(':').unwrap_or(("str", spec));
            let conv = Converter::from_name(conv)
                .ok_or_else(|| format!("route {route:?}: unknown converter {conv:?}"))?;
            let is_ident = name
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !is_ident {
                return Err(format!("route {route:?}: bad parameter name {name:?}"));
            }
            tokens.push(Token::Param { name, conv });
            rest = &after[close + 1..];
        }
        if !rest.is_empty() {
            tokens.push(Token::Literal(rest));
        }
        let literal = Pattern::literal_of(&tokens);
        Ok(Pattern { tokens, literal })
    }

    /// Matches the whole of `path` (no leading `/`), returning the captures.
    pub fn matches<'p>(&self, path: &'p str) -> Option<Params<'p>> {
        if let Some(literal) = self.literal {
            // A route without placeholders: one comparison, no backtracking.
            return (path == literal).then(Params::default);
        }
        let mut params = Params::default();
        match_tokens(&self.tokens, path, &mut params.values).then_some(params)
    }

    /// The whole route, when `tokens` hold no placeholders.
    fn literal_of(tokens: &[Token]) -> Option<&'static str> {
        match tokens {
            [] => Some(""),
            [Token::Literal(text)] => Some(text),
            _ => None,
        }
    }
}

/// Backtracking matcher: each placeholder takes the longest run its
/// converter accepts that still lets the rest of the route match.
fn match_tokens<'p>(
    tokens: &[Token],
    input: &'p str,
    out: &mut Vec<(&'static str, Value<'p>)>,
) -> bool {
    match tokens.split_first() {
        None => input.is_empty(),
        Some((Token::Literal(lit), rest)) => input
            .strip_prefix(lit)
            .is_some_and(|tail| match_tokens(rest, tail, out)),
        Some((Token::Param { name, conv }, rest)) => {
            let run = input
                .char_indices()
                .find(|&(_, c)| !conv.accepts(c))
                .map_or(input.len(), |(i, _)| i);
            for end in (1..=run).rev().filter(|&end| input.is_char_boundary(end)) {
                let Some(value) = conv.to_value(&input[..end]) else {
                    continue;
                };
                out.push((name, value));
                if match_tokens(rest, &input[end..], out) {
                    return true;
                }
                out.pop();
            }
            false
        }
    }
}

/// A successful resolution: the view to call and what the route captured.
pub struct Resolved<'p> {
    pub view: View,
    pub name: &'static str,
    pub params: Params<'p>,
}

/// One compiled route: what a match needs, inline.
struct Route {
    pattern: Pattern,
    view: View,
    name: &'static str,
}

/// The compiled URLconf.
pub struct UrlConf {
    routes: Vec<Route>,
}

impl UrlConf {
    /// Compiles every pattern; a malformed route is a configuration error.
    pub fn new(patterns: &'static [Path]) -> Result<Self, String> {
        let routes = patterns
            .iter()
            .map(|p| {
                Pattern::compile(p.route).map(|pattern| Route {
                    pattern,
                    view: p.view,
                    name: p.name,
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(UrlConf { routes })
    }

    /// Resolves a PATH_INFO (`""` or starting with `/`, raw, not decoded).
    pub fn resolve<'p>(&self, path_info: &'p str) -> Option<Resolved<'p>> {
        let path = path_info.strip_prefix('/').unwrap_or(path_info);
        self.routes.iter().find_map(|route| {
            route.pattern.matches(path).map(|params| Resolved {
                view: route.view,
                name: route.name,
                params,
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pat(route: &'static str) -> Pattern {
        Pattern::compile(route).expect("route compiles")
    }

    #[test]
    fn literal_routes_match_exactly() {
        assert!(pat("").matches("").is_some());
        assert!(pat("").matches("x").is_none());
        assert!(pat("hello/").matches("hello/").is_some());
        assert!(pat("hello/").matches("hello").is_none());
        assert!(pat("hello/").matches("hello/x").is_none());
    }

    #[test]
    fn int_converter_takes_digits_and_converts() {
        let p = pat("articles/<int:year>/");
        assert_eq!(
            p.matches("articles/2024/").and_then(|m| m.int("year")),
            Some(2024)
        );
        assert!(p.matches("articles/20x4/").is_none());
        assert!(p.matches("articles//").is_none());
        assert!(p.matches("articles/-1/").is_none());
        // Too large for the integer type: no match rather than a wrong value.
        assert!(p.matches("articles/99999999999999999999999/").is_none());
    }

    #[test]
    fn slug_and_str_converters() {
        let s = |route, path| pat(route).matches(path).and_then(|m| m.str("s"));
        assert_eq!(s("a/<slug:s>/", "a/my-post_2/"), Some("my-post_2"));
        assert_eq!(s("a/<slug:s>/", "a/my.post/"), None);
        assert_eq!(s("a/<s>/", "a/x.y z/"), Some("x.y z"));
        assert_eq!(s("a/<str:s>/", "a/x/y/"), None);
    }

    #[test]
    fn placeholders_backtrack_inside_a_segment() {
        let p = pat("<slug:a>-<int:b>/");
        let m = p.matches("my-post-12/").expect("matches");
        assert_eq!(m.str("a"), Some("my-post"));
        assert_eq!(m.int("b"), Some(12));
        let p = pat("page-<int:n>.html");
        assert_eq!(p.matches("page-3.html").and_then(|m| m.int("n")), Some(3));
    }

    #[test]
    fn wrong_type_lookup_is_none() {
        let m = pat("<int:y>/<slug:s>/").matches("1/x/").expect("matches");
        assert_eq!(m.str("y"), None);
        assert_eq!(m.int("s"), None);
        assert_eq!(m.int("missing"), None);
    }

    #[test]
    fn malformed_routes_are_rejected() {
        assert!(Pattern::compile("a/<int:year/").is_err());
        assert!(Pattern::compile("a/<float:x>/").is_err());
        assert!(Pattern::compile("a/<int:>/").is_err());
        assert!(Pattern::compile("a/<int:1x>/").is_err());
    }

    #[test]
    fn project_urlconf_resolves_every_route() {
        let urls = UrlConf::new(URLPATTERNS).expect("URLconf compiles");
        let name = |p| urls.resolve(p).map(|r| r.name);
        assert_eq!(name(""), Some("index"));
        assert_eq!(name("/"), Some("index"));
        assert_eq!(name("/hello/"), Some("hello"));
        assert_eq!(name("/articles/2024/"), Some("year-archive"));
        assert_eq!(name("/articles/2024/my-post/"), Some("article-detail"));
        assert_eq!(name("/hello"), None);
        assert_eq!(name("//hello/"), None);
        assert_eq!(name("/articles/x/"), None);
    }
}

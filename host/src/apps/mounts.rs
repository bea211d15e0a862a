//! The mount table: which app a request path goes to.

use crate::apps::loader::LoadedApp;
use std::sync::Arc;

/// Routes a path to the app with the longest matching prefix, on
/// path-segment boundaries (`/article` does not match `/articles`).
#[derive(Clone, Default)]
pub struct MountTable {
    /// Sorted by prefix length, longest first.
    apps: Vec<Arc<LoadedApp>>,
    /// The same apps' prefixes, in the same order.
    prefixes: Prefixes,
}

impl MountTable {
    pub fn new(mut apps: Vec<Arc<LoadedApp>>) -> Self {
        apps.sort_by_key(|a| std::cmp::Reverse(a.mount.len()));
        let prefixes = Prefixes::new(apps.iter().map(|a| a.mount.as_str()));
        MountTable { apps, prefixes }
    }

    /// The app for `path` (without query), and the split point
    /// (SCRIPT_NAME = `path[..n]`, PATH_INFO = `path[n..]`).
    pub fn resolve(&self, path: &str) -> Option<(&Arc<LoadedApp>, usize)> {
        let (i, split) = self.prefixes.find(path)?;
        Some((self.apps.get(i)?, split))
    }

    pub fn apps(&self) -> &[Arc<LoadedApp>] {
        &self.apps
    }
}

/// Mount prefixes laid end to end in one string, with each one's span:
/// matching a path reads these two buffers only, not each app it tries
/// (an app behind another, such as the root one, used to cost a few more
/// cache lines per request than the first).
#[derive(Clone, Default)]
struct Prefixes {
    text: String,
    spans: Vec<(usize, usize)>,
}

impl Prefixes {
    fn new<'a>(prefixes: impl Iterator<Item = &'a str>) -> Self {
        let mut table = Prefixes::default();
        for prefix in prefixes {
            let start = table.text.len();
            table.text.push_str(prefix);
            table.spans.push((start, prefix.len()));
        }
        table
    }

    /// The index of the first prefix `path` starts with on a segment
    /// boundary, and that prefix's length.
    fn find(&self, path: &str) -> Option<(usize, usize)> {
        let path = path.as_bytes();
        self.spans
            .iter()
            .enumerate()
            .find_map(|(i, &(start, len))| {
                let prefix = self.text.as_bytes().get(start..start + len)?;
                let rest = path.strip_prefix(prefix)?;
                rest.first().is_none_or(|&b| b == b'/').then_some((i, len))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_prefix_on_a_segment_boundary_wins() {
        // Longest first, as MountTable sorts them; "" is the root mount.
        let table = Prefixes::new(["/article", "/demo", ""].into_iter());
        assert_eq!(table.find("/article"), Some((0, 8)));
        assert_eq!(table.find("/article/items/1"), Some((0, 8)));
        assert_eq!(table.find("/articles"), Some((2, 0)));
        assert_eq!(table.find("/demo/ws"), Some((1, 5)));
        assert_eq!(table.find("/hello/"), Some((2, 0)));
        assert_eq!(table.find("/"), Some((2, 0)));
        let no_root = Prefixes::new(["/article"].into_iter());
        assert_eq!(no_root.find("/articles"), None);
        assert_eq!(no_root.find("/"), None);
        assert_eq!(Prefixes::default().find("/"), None);
    }
}

//! The mount table: which app a request path goes to.

use crate::apps::loader::LoadedApp;
use std::sync::Arc;

/// Routes a path to the app with the longest matching prefix, on
/// path-segment boundaries (`/article` does not match `/articles`), or to
/// a mount held out of service (its app's bytes are quarantined and
/// nothing older can serve): that mount answers 503 with the reason
/// rather than passing its paths to a shorter mount or a 404.
#[derive(Clone, Default)]
pub struct MountTable {
    /// Sorted by prefix length, longest first.
    apps: Vec<Arc<LoadedApp>>,
    /// Held mounts, and why.
    held: Vec<(String, Arc<str>)>,
    /// The prefixes of both, longest first, and which each is.
    prefixes: Prefixes,
    order: Vec<Entry>,
}

#[derive(Clone, Copy)]
enum Entry {
    App(usize),
    Held(usize),
}

/// Where a path goes.
pub enum Resolved<'a> {
    /// An app, and the split point (SCRIPT_NAME = `path[..n]`, PATH_INFO =
    /// `path[n..]`).
    App(&'a Arc<LoadedApp>, usize),
    /// A mount held out of service, and why.
    Held(&'a Arc<str>),
}

impl MountTable {
    #[cfg(test)]
    pub fn new(apps: Vec<Arc<LoadedApp>>) -> Self {
        Self::with_held(apps, Vec::new())
    }

    /// The table of `apps` and of `held` mounts (mount, why); a held mount
    /// an app also has is the app's.
    pub fn with_held(mut apps: Vec<Arc<LoadedApp>>, mut held: Vec<(String, Arc<str>)>) -> Self {
        apps.sort_by_key(|a| std::cmp::Reverse(a.mount.len()));
        held.retain(|(mount, _)| !apps.iter().any(|a| a.mount == *mount));
        held.sort_by(|a, b| a.0.cmp(&b.0));
        held.dedup_by(|a, b| a.0 == b.0);
        let mut order: Vec<(usize, Entry)> = apps
            .iter()
            .enumerate()
            .map(|(i, a)| (a.mount.len(), Entry::App(i)))
            .chain(
                held.iter()
                    .enumerate()
                    .map(|(i, h)| (h.0.len(), Entry::Held(i))),
            )
            .collect();
        order.sort_by_key(|(len, _)| std::cmp::Reverse(*len));
        let prefixes = Prefixes::new(order.iter().map(|(_, e)| match *e {
            Entry::App(i) => apps[i].mount.as_str(),
            Entry::Held(i) => held[i].0.as_str(),
        }));
        let order = order.into_iter().map(|(_, e)| e).collect();
        MountTable {
            apps,
            held,
            prefixes,
            order,
        }
    }

    /// Where `path` (without query) goes, if anywhere.
    #[inline]
    pub fn resolve(&self, path: &str) -> Option<Resolved<'_>> {
        let (i, split) = self.prefixes.find(path)?;
        Some(match *self.order.get(i)? {
            Entry::App(a) => Resolved::App(self.apps.get(a)?, split),
            Entry::Held(h) => Resolved::Held(&self.held.get(h)?.1),
        })
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

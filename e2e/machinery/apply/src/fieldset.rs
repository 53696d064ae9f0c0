//! Sets of field paths, stored as a trie like structured-merge-diff's `fieldpath.Set`.
//!
//! A path is a *member* when the field itself is owned. A node can have children without being a
//! member (a manager owns `.spec.replicas` but not `.spec`). The set operations keep
//! structured-merge-diff's exact semantics, which differ from naive path-set algebra for
//! [`FieldSet::difference`] versus [`FieldSet::recursive_difference`].

use std::collections::{BTreeMap, BTreeSet};

use crate::path::{Path, PathElement};

/// A set of field paths.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldSet {
    pub(crate) members: BTreeSet<PathElement>,
    pub(crate) children: BTreeMap<PathElement, FieldSet>,
}

impl FieldSet {
    /// The empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// A set of the given paths.
    pub fn from_paths<'a>(paths: impl IntoIterator<Item = &'a Path>) -> Self {
        let mut set = Self::new();
        for p in paths {
            set.insert(p);
        }
        set
    }

    /// Adds `path`; its parents do not become members. The empty path (the whole object) is
    /// never tracked.
    pub fn insert(&mut self, path: &Path) {
        match path {
            [] => {}
            [last] => {
                self.members.insert(last.clone());
            }
            [first, rest @ ..] => self.children.entry(first.clone()).or_default().insert(rest),
        }
    }

    /// Whether `path` itself is a member.
    pub fn has(&self, path: &Path) -> bool {
        match path {
            [] => false,
            [last] => self.members.contains(last),
            [first, rest @ ..] => self.children.get(first).is_some_and(|c| c.has(rest)),
        }
    }

    /// Whether the set has no member at any depth.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty() && self.children.values().all(FieldSet::is_empty)
    }

    /// The paths below `pe`, with `pe` stripped.
    pub fn with_prefix(&self, pe: &PathElement) -> FieldSet {
        self.children.get(pe).cloned().unwrap_or_default()
    }

    pub(crate) fn child(&self, pe: &PathElement) -> Option<&FieldSet> {
        self.children.get(pe)
    }

    /// Paths in either set.
    pub fn union(&self, other: &FieldSet) -> FieldSet {
        let mut out = self.clone();
        out.members.extend(other.members.iter().cloned());
        for (pe, child) in &other.children {
            let merged = match out.children.get(pe) {
                Some(mine) => mine.union(child),
                None => child.clone(),
            };
            out.children.insert(pe.clone(), merged);
        }
        out
    }

    /// Paths in both sets.
    pub fn intersection(&self, other: &FieldSet) -> FieldSet {
        let members = self.members.intersection(&other.members).cloned().collect();
        let children = self
            .children
            .iter()
            .filter_map(|(pe, mine)| {
                let theirs = other.children.get(pe)?;
                let both = mine.intersection(theirs);
                (!both.is_empty()).then(|| (pe.clone(), both))
            })
            .collect();
        FieldSet { members, children }
    }

    /// Paths of `self` that are not members of `other`. Only exact paths are removed: if
    /// `other` owns `.a`, `self`'s `.a.b` stays.
    pub fn difference(&self, other: &FieldSet) -> FieldSet {
        let members = self.members.difference(&other.members).cloned().collect();
        let children = self
            .children
            .iter()
            .filter_map(|(pe, mine)| match other.children.get(pe) {
                Some(theirs) => {
                    let rest = mine.difference(theirs);
                    (!rest.is_empty()).then(|| (pe.clone(), rest))
                }
                None => Some((pe.clone(), mine.clone())),
            })
            .collect();
        FieldSet { members, children }
    }

    /// Like [`FieldSet::difference`], but a member of `other` also removes everything below it:
    /// `{.a.b.c} − {.a.b}` is empty. Used to drop reset fields (`.status`) wholesale.
    pub fn recursive_difference(&self, other: &FieldSet) -> FieldSet {
        let members = self.members.difference(&other.members).cloned().collect();
        let children = self
            .children
            .iter()
            .filter_map(|(pe, mine)| {
                if other.members.contains(pe) {
                    return None;
                }
                match other.children.get(pe) {
                    Some(theirs) => {
                        let rest = mine.recursive_difference(theirs);
                        (!rest.is_empty()).then(|| (pe.clone(), rest))
                    }
                    None => Some((pe.clone(), mine.clone())),
                }
            })
            .collect();
        FieldSet { members, children }
    }

    /// Every member path, in the set's order: a node's members first, then its children.
    pub fn paths(&self) -> Vec<Vec<PathElement>> {
        let mut out = Vec::new();
        let mut prefix = Vec::new();
        self.collect_paths(&mut prefix, &mut out);
        out
    }

    fn collect_paths(&self, prefix: &mut Vec<PathElement>, out: &mut Vec<Vec<PathElement>>) {
        for m in &self.members {
            let mut p = prefix.clone();
            p.push(m.clone());
            out.push(p);
        }
        for (pe, child) in &self.children {
            prefix.push(pe.clone());
            child.collect_paths(prefix, out);
            prefix.pop();
        }
    }

    /// The number of member paths.
    pub fn len(&self) -> usize {
        self.members.len() + self.children.values().map(FieldSet::len).sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::path::field;

    fn set(paths: &[&[&str]]) -> FieldSet {
        let owned: Vec<Vec<PathElement>> = paths
            .iter()
            .map(|p| p.iter().map(|s| field(s)).collect())
            .collect();
        FieldSet::from_paths(owned.iter().map(Vec::as_slice))
    }

    #[test]
    fn algebra_follows_structured_merge_diff() {
        let abc = set(&[&["a", "b", "c"], &["a", "d"], &["x"]]);
        let ab = set(&[&["a", "b"], &["x"]]);
        let cases: Vec<(&str, FieldSet, FieldSet)> = vec![
            (
                "union",
                abc.union(&ab),
                set(&[&["a", "b", "c"], &["a", "d"], &["a", "b"], &["x"]]),
            ),
            ("intersection", abc.intersection(&ab), set(&[&["x"]])),
            (
                "difference keeps children of removed member",
                abc.difference(&ab),
                set(&[&["a", "b", "c"], &["a", "d"]]),
            ),
            (
                "recursive difference drops them",
                abc.recursive_difference(&ab),
                set(&[&["a", "d"]]),
            ),
            (
                "difference with itself",
                abc.difference(&abc),
                FieldSet::new(),
            ),
        ];
        for (name, got, want) in cases {
            assert_eq!(got, want, "{name}");
        }
    }

    #[test]
    fn membership_and_iteration() {
        let s = set(&[
            &["spec", "replicas"],
            &["metadata", "labels", "app"],
            &["spec"],
        ]);
        assert!(s.has(&[field("spec")]));
        assert!(s.has(&[field("spec"), field("replicas")]));
        assert!(!s.has(&[field("metadata")]));
        assert!(!s.has(&[]));
        assert_eq!(s.len(), 3);
        let shown: Vec<String> = s
            .paths()
            .iter()
            .map(|p| crate::path::path_string(p))
            .collect();
        assert_eq!(shown, [".spec", ".metadata.labels.app", ".spec.replicas"]);
        assert!(FieldSet::new().is_empty());
        assert_eq!(s.with_prefix(&field("spec")), set(&[&["replicas"]]));
    }
}

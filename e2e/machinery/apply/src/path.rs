//! Path elements: how a field set names one field, list item or set member.
//!
//! Mirrors structured-merge-diff's `fieldpath.PathElement`, including its total order (field
//! names, then keys, then values, then indices), because FieldsV1 is serialized in that order and
//! conflicts are listed in it.

use std::cmp::Ordering;
use std::fmt;

use serde_json::Value;

use crate::gojson;

/// One step into an object.
#[derive(Clone, Debug)]
pub enum PathElement {
    /// A field of a map or struct: `f:<name>`, shown as `.name`.
    Field(String),
    /// An item of a list with `x-kubernetes-list-type: map`, selected by its key fields
    /// (sorted by name): `k:{"name":"c"}`, shown as `[name="c"]`.
    Key(Vec<(String, Value)>),
    /// An item of a list with `x-kubernetes-list-type: set`: `v:"x"`, shown as `[="x"]`.
    Value(Value),
    /// An item of an atomic list by position: `i:0`, shown as `[0]`. The apiserver never
    /// produces these (atomic lists are owned whole) but FieldsV1 may carry them.
    Index(i64),
}

/// A path from the object root.
pub type Path = [PathElement];

impl PathElement {
    /// Builds a key element, sorting the key fields by name as structured-merge-diff does.
    pub fn key(mut fields: Vec<(String, Value)>) -> Self {
        fields.sort_by(|a, b| a.0.cmp(&b.0));
        PathElement::Key(fields)
    }

    fn rank(&self) -> u8 {
        match self {
            PathElement::Field(_) => 0,
            PathElement::Key(_) => 1,
            PathElement::Value(_) => 2,
            PathElement::Index(_) => 3,
        }
    }
}

/// `value.FieldList.Compare`: name, then value, field by field; the shorter list first.
fn compare_keys(a: &[(String, Value)], b: &[(String, Value)]) -> Ordering {
    for ((an, av), (bn, bv)) in a.iter().zip(b.iter()) {
        let c = an.cmp(bn).then_with(|| gojson::compare(av, bv));
        if c != Ordering::Equal {
            return c;
        }
    }
    a.len().cmp(&b.len())
}

impl Ord for PathElement {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (PathElement::Field(a), PathElement::Field(b)) => a.cmp(b),
            (PathElement::Key(a), PathElement::Key(b)) => compare_keys(a, b),
            (PathElement::Value(a), PathElement::Value(b)) => gojson::compare(a, b),
            (PathElement::Index(a), PathElement::Index(b)) => a.cmp(b),
            _ => self.rank().cmp(&other.rank()),
        }
    }
}

impl PartialOrd for PathElement {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for PathElement {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for PathElement {}

impl fmt::Display for PathElement {
    /// The form used in conflict messages: `.spec`, `[name="c"]`, `[="x"]`, `[0]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathElement::Field(name) => write!(f, ".{name}"),
            PathElement::Key(fields) => {
                let parts: Vec<String> = fields
                    .iter()
                    .map(|(name, v)| format!("{name}={}", gojson::to_go_string(v)))
                    .collect();
                write!(f, "[{}]", parts.join(","))
            }
            PathElement::Value(v) => write!(f, "[={}]", gojson::to_go_string(v)),
            PathElement::Index(i) => write!(f, "[{i}]"),
        }
    }
}

/// Renders a whole path as in conflict messages: `.spec.containers[name="c"].image`.
pub fn path_string(path: &Path) -> String {
    path.iter().map(ToString::to_string).collect()
}

/// Shorthand for a field element.
pub fn field(name: &str) -> PathElement {
    PathElement::Field(name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn display_matches_go() {
        let path = vec![
            field("spec"),
            field("containers"),
            PathElement::key(vec![("name".into(), json!("nginx"))]),
            field("ports"),
            PathElement::key(vec![
                ("protocol".into(), json!("TCP")),
                ("containerPort".into(), json!(80)),
            ]),
        ];
        assert_eq!(
            path_string(&path),
            r#".spec.containers[name="nginx"].ports[containerPort=80,protocol="TCP"]"#
        );
        assert_eq!(PathElement::Value(json!("x")).to_string(), r#"[="x"]"#);
        assert_eq!(PathElement::Index(3).to_string(), "[3]");
    }

    #[test]
    fn order_is_fields_keys_values_indices() {
        let mut items = [
            PathElement::Index(0),
            PathElement::Value(json!("a")),
            PathElement::key(vec![("port".into(), json!(8080))]),
            PathElement::key(vec![("port".into(), json!(80))]),
            field("b"),
            field("a"),
        ];
        items.sort();
        let shown: Vec<String> = items.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            [".a", ".b", "[port=80]", "[port=8080]", "[=\"a\"]", "[0]"]
        );
    }
}

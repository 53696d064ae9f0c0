//! What the engine needs to know about an object's type: how lists and maps merge, and which map
//! keys are declared struct fields.
//!
//! structured-merge-diff takes this from OpenAPI. The caller implements [`Schema`] (from a CRD's
//! `openAPIV3Schema`, see [`OpenApiSchema`], or from a table for built-in kinds); [`Deduced`] is
//! the fallback for unknown types. `metadata` is always described by the engine itself
//! ([`with_object_meta`]), as ObjectMeta is the same for every kind.

use serde_json::{Map, Value};

use crate::path::{Path, PathElement};

/// One key field of a list with `x-kubernetes-list-type: map`.
#[derive(Debug, Clone, PartialEq)]
pub struct MapKey {
    /// The key field's name, e.g. `name` or `containerPort`.
    pub name: String,
    /// The value assumed when an item omits the field (`protocol` defaults to `TCP` in
    /// container ports, so `{containerPort: 80}` is keyed `{"containerPort":80,"protocol":"TCP"}`).
    pub default: Option<Value>,
}

impl MapKey {
    /// A key field without default.
    pub fn new(name: &str) -> Self {
        MapKey {
            name: name.to_string(),
            default: None,
        }
    }
}

/// How a list merges (`x-kubernetes-list-type`).
#[derive(Debug, Clone, PartialEq)]
pub enum ListType {
    /// Replaced and owned as a whole (the default).
    Atomic,
    /// A set of scalars, merged and owned per value (`finalizers`).
    Set,
    /// A list of objects merged and owned per key (`containers` by `name`).
    Map(Vec<MapKey>),
}

/// How a map merges (`x-kubernetes-map-type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MapType {
    /// Merged and owned per field (the default).
    Granular,
    /// Replaced and owned as a whole.
    Atomic,
}

/// Type information at a path. Paths contain [`PathElement::Key`] / [`PathElement::Value`]
/// elements for list items, so an implementation walks its schema into `items` on those.
/// Queries are only made where the value is a list (for `list_type`) or a map (for the others).
pub trait Schema {
    /// How the list at `path` merges.
    fn list_type(&self, _path: &Path) -> ListType {
        ListType::Atomic
    }
    /// How the map at `path` merges.
    fn map_type(&self, _path: &Path) -> MapType {
        MapType::Granular
    }
    /// Whether the map at `path` declares `name` as a struct field (OpenAPI `properties`), as
    /// opposed to holding it as a free-form entry (`additionalProperties`, unknown fields).
    /// A declared field with content is not owned itself, only its leaves; a free-form entry is
    /// owned itself too. This is why apply owns `f:labels` children but not `f:labels`.
    fn is_declared_field(&self, _path: &Path, _name: &str) -> bool {
        false
    }
}

/// structured-merge-diff's deduced schema, used for types without a schema: lists are atomic,
/// maps are granular and every field is free-form.
#[derive(Debug, Clone, Copy, Default)]
pub struct Deduced;

impl Schema for Deduced {}

/// ObjectMeta's declared fields.
const OBJECT_META_FIELDS: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

/// OwnerReference's declared fields.
const OWNER_REFERENCE_FIELDS: &[&str] = &[
    "apiVersion",
    "kind",
    "name",
    "uid",
    "controller",
    "blockOwnerDeletion",
];

/// Wraps a kind's schema with the parts every kind shares: top-level `apiVersion`, `kind` and
/// `metadata` are declared, and `metadata` follows ObjectMeta (`finalizers` is a set,
/// `ownerReferences` a map keyed by `uid`, labels and annotations free-form maps).
pub fn with_object_meta(schema: &dyn Schema) -> impl Schema + '_ {
    ObjectMetaAware(schema)
}

struct ObjectMetaAware<'a>(&'a dyn Schema);

fn in_metadata(path: &Path) -> Option<&Path> {
    match path {
        [PathElement::Field(f), rest @ ..] if f == "metadata" => Some(rest),
        _ => None,
    }
}

impl Schema for ObjectMetaAware<'_> {
    fn list_type(&self, path: &Path) -> ListType {
        match in_metadata(path) {
            Some([PathElement::Field(f)]) if f == "finalizers" => ListType::Set,
            Some([PathElement::Field(f)]) if f == "ownerReferences" => {
                ListType::Map(vec![MapKey::new("uid")])
            }
            Some(_) => ListType::Atomic,
            None => self.0.list_type(path),
        }
    }

    fn map_type(&self, path: &Path) -> MapType {
        match in_metadata(path) {
            Some(_) => MapType::Granular,
            None => self.0.map_type(path),
        }
    }

    fn is_declared_field(&self, path: &Path, name: &str) -> bool {
        match (path, in_metadata(path)) {
            ([], _) if matches!(name, "apiVersion" | "kind" | "metadata") => true,
            (_, Some([])) => OBJECT_META_FIELDS.contains(&name),
            (_, Some([PathElement::Field(f), PathElement::Key(_)])) if f == "ownerReferences" => {
                OWNER_REFERENCE_FIELDS.contains(&name)
            }
            (_, Some(_)) => false,
            (_, None) => self.0.is_declared_field(path, name),
        }
    }
}

/// A [`Schema`] read from an OpenAPI v3 structural schema, such as a CRD version's
/// `schema.openAPIV3Schema`: `properties` are declared fields, `additionalProperties` free-form
/// entries, `items` list items, and the `x-kubernetes-list-type`, `x-kubernetes-list-map-keys`
/// (with the key properties' `default`s) and `x-kubernetes-map-type` extensions set the merge
/// strategy. Paths the schema does not describe (unknown or preserved fields) behave as
/// [`Deduced`]. `$ref` into `refs` (e.g. the `components.schemas` of `/openapi/v3`) and a
/// single-entry `allOf` wrapper are followed, so built-in kinds' published schemas work too.
#[derive(Debug, Clone)]
pub struct OpenApiSchema {
    root: Value,
    refs: Map<String, Value>,
}

/// How many `$ref`/`allOf` hops resolve one node before the schema is taken as unknown; stops
/// reference cycles.
const MAX_REF_HOPS: usize = 32;

impl OpenApiSchema {
    /// A schema with no `$ref` targets (CRDs never use `$ref`).
    pub fn new(root: Value) -> Self {
        OpenApiSchema {
            root,
            refs: Map::new(),
        }
    }

    /// A schema whose `$ref: "#/components/schemas/<name>"` (or `#/definitions/<name>`) point
    /// into `refs`.
    pub fn with_refs(root: Value, refs: Map<String, Value>) -> Self {
        OpenApiSchema { root, refs }
    }

    fn deref<'a>(&'a self, mut node: &'a Value) -> Option<&'a Value> {
        for _ in 0..MAX_REF_HOPS {
            if let Some(target) = node.get("$ref").and_then(Value::as_str) {
                let name = target.rsplit('/').next()?;
                node = self.refs.get(name)?;
                continue;
            }
            match node
                .get("allOf")
                .and_then(Value::as_array)
                .map(Vec::as_slice)
            {
                Some([only]) if node.get("properties").is_none() => node = only,
                _ => return Some(node),
            }
        }
        None
    }

    fn resolve(&self, path: &Path) -> Option<&Value> {
        let mut node = self.deref(&self.root)?;
        for pe in path {
            let next = match pe {
                PathElement::Field(name) => node
                    .get("properties")
                    .and_then(|p| p.get(name))
                    .or_else(|| node.get("additionalProperties").filter(|a| a.is_object()))?,
                _ => node.get("items")?,
            };
            node = self.deref(next)?;
        }
        Some(node)
    }
}

impl Schema for OpenApiSchema {
    fn list_type(&self, path: &Path) -> ListType {
        let Some(node) = self.resolve(path) else {
            return ListType::Atomic;
        };
        match node.get("x-kubernetes-list-type").and_then(Value::as_str) {
            Some("set") => ListType::Set,
            Some("map") => {
                let items = node.get("items").and_then(|i| self.deref(i));
                let keys = node
                    .get("x-kubernetes-list-map-keys")
                    .and_then(Value::as_array)
                    .map(|keys| {
                        keys.iter()
                            .filter_map(Value::as_str)
                            .map(|name| MapKey {
                                name: name.to_string(),
                                default: items
                                    .and_then(|i| i.get("properties"))
                                    .and_then(|p| p.get(name))
                                    .and_then(|k| self.deref(k))
                                    .and_then(|k| k.get("default"))
                                    .cloned(),
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                ListType::Map(keys)
            }
            _ => ListType::Atomic,
        }
    }

    fn map_type(&self, path: &Path) -> MapType {
        match self
            .resolve(path)
            .and_then(|n| n.get("x-kubernetes-map-type"))
            .and_then(Value::as_str)
        {
            Some("atomic") => MapType::Atomic,
            _ => MapType::Granular,
        }
    }

    fn is_declared_field(&self, path: &Path, name: &str) -> bool {
        self.resolve(path)
            .and_then(|n| n.get("properties"))
            .is_some_and(|p| p.get(name).is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::path::field;
    use serde_json::json;

    fn crd_schema() -> OpenApiSchema {
        OpenApiSchema::new(json!({
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "properties": {
                        "replicas": {"type": "integer"},
                        "members": {
                            "type": "array",
                            "x-kubernetes-list-type": "map",
                            "x-kubernetes-list-map-keys": ["name", "zone"],
                            "items": {"type": "object", "properties": {
                                "name": {"type": "string"},
                                "zone": {"type": "string", "default": "a"}
                            }}
                        },
                        "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
                        "args": {"type": "array", "items": {"type": "string"}},
                        "selector": {"type": "object", "x-kubernetes-map-type": "atomic",
                            "additionalProperties": {"type": "string"}},
                        "env": {"type": "object", "additionalProperties": {"type": "string"}},
                        "ref": {"allOf": [{"$ref": "#/components/schemas/Ref"}]}
                    }
                }
            }
        }))
    }

    #[test]
    fn openapi_extensions_drive_merge_types() {
        let s = crd_schema();
        let spec = [field("spec")];
        assert_eq!(
            s.list_type(&[field("spec"), field("members")]),
            ListType::Map(vec![
                MapKey::new("name"),
                MapKey {
                    name: "zone".into(),
                    default: Some(json!("a"))
                }
            ])
        );
        assert_eq!(s.list_type(&[field("spec"), field("tags")]), ListType::Set);
        assert_eq!(
            s.list_type(&[field("spec"), field("args")]),
            ListType::Atomic
        );
        assert_eq!(
            s.list_type(&[field("spec"), field("unknown")]),
            ListType::Atomic
        );
        assert_eq!(
            s.map_type(&[field("spec"), field("selector")]),
            MapType::Atomic
        );
        assert_eq!(s.map_type(&spec), MapType::Granular);
        assert!(s.is_declared_field(&[], "spec"));
        assert!(s.is_declared_field(&spec, "replicas"));
        assert!(!s.is_declared_field(&spec, "nope"));
        assert!(!s.is_declared_field(&[field("spec"), field("env")], "A"));
        // Unresolvable $ref: unknown, hence deduced.
        assert!(!s.is_declared_field(&[field("spec"), field("ref")], "x"));
    }

    #[test]
    fn refs_are_followed_and_cycles_stop() {
        let mut refs = Map::new();
        refs.insert(
            "Ref".into(),
            json!({"properties": {"x": {"type": "string"}}}),
        );
        refs.insert("Loop".into(), json!({"$ref": "#/components/schemas/Loop"}));
        let s = OpenApiSchema::with_refs(
            json!({"properties": {"ref": {"allOf": [{"$ref": "#/components/schemas/Ref"}]},
                   "loop": {"$ref": "#/components/schemas/Loop"}}}),
            refs,
        );
        assert!(s.is_declared_field(&[field("ref")], "x"));
        assert!(!s.is_declared_field(&[field("loop")], "x"));
    }

    #[test]
    fn object_meta_is_built_in() {
        let s = with_object_meta(&Deduced);
        let meta = [field("metadata")];
        assert!(s.is_declared_field(&[], "metadata"));
        assert!(!s.is_declared_field(&[], "spec"));
        assert!(s.is_declared_field(&meta, "labels"));
        assert!(!s.is_declared_field(&[field("metadata"), field("labels")], "app"));
        assert_eq!(
            s.list_type(&[field("metadata"), field("finalizers")]),
            ListType::Set
        );
        assert_eq!(
            s.list_type(&[field("metadata"), field("ownerReferences")]),
            ListType::Map(vec![MapKey::new("uid")])
        );
        let owner = [
            field("metadata"),
            field("ownerReferences"),
            PathElement::key(vec![("uid".into(), json!("u"))]),
        ];
        assert!(s.is_declared_field(&owner, "controller"));
    }
}

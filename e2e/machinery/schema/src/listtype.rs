//! `x-kubernetes-list-type: set|map` uniqueness (`apiserver/schema/listtype`), and the
//! matching of list-map elements between an old and a new object.

use std::collections::HashMap;

use serde_json::{Map, Value};

use crate::field_error::{BadValue, FieldError};
use crate::gofmt;
use crate::model::Node;
use crate::path::FieldPath;

/// `ValidateListSetsAndMaps(nil, schema, object)`.
pub(crate) fn validate(node: &Node, obj: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if let Value::Object(map) = obj {
        walk_object(&FieldPath::nil(), node, map, &mut errors);
    }
    errors
}

fn walk_object(
    path: &FieldPath,
    node: &Node,
    map: &Map<String, Value>,
    errors: &mut Vec<FieldError>,
) {
    let mut keys: Vec<&String> = map.keys().collect();
    keys.sort();
    if let Some(values) = node.additional_schema() {
        for k in &keys {
            walk(&path.key(k), values, &map[*k], errors);
        }
    }
    for k in &keys {
        if let Some(prop) = node.properties.get(*k) {
            walk(&path.child(k), prop, &map[*k], errors);
        }
    }
}

fn walk(path: &FieldPath, node: &Node, v: &Value, errors: &mut Vec<FieldError>) {
    match v {
        Value::Object(map) => walk_object(path, node, map, errors),
        Value::Array(items) => {
            match node.list_type.as_deref() {
                Some("set") => {
                    for i in non_unique(items.iter().map(scalar_or_json)) {
                        errors.push(FieldError::duplicate(
                            &path.index(i),
                            BadValue::Json(items[i].clone()),
                        ));
                    }
                }
                Some("map") => errors.extend(validate_map(path, node, items)),
                _ => {}
            }
            if let Some(item_node) = node.items.as_deref() {
                for (i, item) in items.iter().enumerate() {
                    walk(&path.index(i), item_node, item, errors);
                }
            }
        }
        _ => {}
    }
}

fn validate_map(path: &FieldPath, node: &Node, items: &[Value]) -> Vec<FieldError> {
    for (i, item) in items.iter().enumerate() {
        if !item.is_null() && !item.is_object() {
            return vec![FieldError::invalid(
                &path.index(i),
                BadValue::Json(item.clone()),
                "must be an object for an array of list-type map",
            )];
        }
    }
    if items.len() <= 1 {
        return Vec::new();
    }
    // The key of each element: an object of its key fields (absent fields left out).
    let keys: Vec<Map<String, Value>> = items
        .iter()
        .map(|item| {
            let mut key = Map::new();
            if let Some(obj) = item.as_object() {
                for k in &node.list_map_keys {
                    if let Some(v) = obj.get(k) {
                        key.insert(k.clone(), v.clone());
                    }
                }
            }
            key
        })
        .collect();
    let identities = keys.iter().map(|k| {
        if node.list_map_keys.len() == 1 {
            // One key: compare the key values themselves (an absent key is its own value).
            k.values()
                .next()
                .map_or_else(|| "absent".to_owned(), scalar_or_json)
        } else {
            gofmt::json(&Value::Object(k.clone()))
        }
    });
    non_unique(identities)
        .into_iter()
        .map(|i| {
            FieldError::duplicate(
                &path.index(i),
                BadValue::Json(Value::Object(keys[i].clone())),
            )
        })
        .collect()
}

/// The identity Go's `validateListSet` compares: scalars by type and value, compounds by JSON.
fn scalar_or_json(v: &Value) -> String {
    match v {
        Value::Number(n) if n.is_i64() || n.is_u64() => format!("i:{n}"),
        Value::Number(n) => format!("f:{}", n.as_f64().unwrap_or(f64::NAN)),
        Value::String(s) => format!("s:{s}"),
        Value::Bool(b) => format!("b:{b}"),
        Value::Null => "null".to_owned(),
        compound => format!("j:{}", gofmt::json(compound)),
    }
}

/// Indices of the second occurrence of each repeated identity (third and later ones are not
/// reported again, like Go).
fn non_unique(identities: impl Iterator<Item = String>) -> Vec<usize> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out = Vec::new();
    for (i, id) in identities.enumerate() {
        let count = seen.entry(id).or_insert(0);
        *count += 1;
        if *count == 2 {
            out.push(i);
        }
    }
    out
}

/// The element of `olds` that has the same list-map key as `item`, when `node` is a list of
/// type map: the only lists whose elements are matched across an update.
pub(crate) fn correlated<'a>(node: &Node, item: &Value, olds: &'a [Value]) -> Option<&'a Value> {
    if node.list_type.as_deref() != Some("map") || node.list_map_keys.is_empty() {
        return None;
    }
    let key_of = |v: &'a Value| -> Option<Vec<Option<&'a Value>>> {
        let obj = v.as_object()?;
        Some(node.list_map_keys.iter().map(|k| obj.get(k)).collect())
    };
    let wanted: Vec<Option<&Value>> = {
        let obj = item.as_object()?;
        node.list_map_keys.iter().map(|k| obj.get(k)).collect()
    };
    olds.iter().find(|o| {
        key_of(o).is_some_and(|key| {
            key.iter().zip(&wanted).all(|(a, b)| match (a, b) {
                (Some(a), Some(b)) => crate::value_eq::equal(a, b),
                (None, None) => true,
                _ => false,
            })
        })
    })
}

//! Pruning of undeclared fields (`apiserver/schema/pruning`) and of nulls the schema does not
//! allow (`PruneNonNullableNullsWithoutDefaults`), which the apiserver runs together on decode.

use serde_json::{Map, Value};

use crate::model::Node;

/// Values nested deeper than this under undeclared lists are left as they are: the walk is
/// recursive, and serde_json refuses documents deeper than 128 anyway.
const MAX_DEPTH: usize = 512;

const META_FIELDS: [&str; 3] = ["apiVersion", "kind", "metadata"];

/// Removes the fields `root` does not declare from `obj`, a whole object (the root keeps
/// `apiVersion`, `kind` and `metadata` like an embedded resource), then the nulls of fields that
/// are neither nullable nor defaulted. Returns the removed paths, sorted, as the apiserver names
/// them in `unknown field "spec.items[0].bar"`.
pub(crate) fn prune(root: &Node, obj: &mut Value) -> Vec<String> {
    let removed = prune_subtree(root, obj, true);
    prune_nulls(obj, Some(root), 0);
    removed
}

/// Removes the fields `node` does not declare from `v` (keeping `apiVersion`, `kind` and
/// `metadata` when `embedded`), returning their sorted paths relative to `v`.
pub(crate) fn prune_subtree(node: &Node, v: &mut Value, embedded: bool) -> Vec<String> {
    let mut removed = Vec::new();
    prune_value(v, Some(node), embedded, &mut String::new(), &mut removed, 0);
    removed.sort();
    removed
}

fn push_key(path: &mut String, key: &str) {
    if !path.is_empty() {
        path.push('.');
    }
    path.push_str(key);
}

fn prune_value(
    v: &mut Value,
    node: Option<&Node>,
    embedded: bool,
    path: &mut String,
    removed: &mut Vec<String>,
    depth: usize,
) {
    if depth > MAX_DEPTH {
        return;
    }
    if let Some(n) = node
        && n.preserve_unknown
    {
        skip_prune(v, n, embedded, path, removed, depth);
        return;
    }
    let len = path.len();
    match v {
        Value::Object(map) => {
            let Some(n) = node else {
                let mut keys: Vec<String> = map.keys().cloned().collect();
                keys.sort();
                for k in keys {
                    record(path, &k, removed);
                }
                map.clear();
                return;
            };
            let embedded = embedded || n.embedded;
            prune_map(map, n, embedded, path, removed, depth);
        }
        Value::Array(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                path.push_str(&format!("[{i}]"));
                prune_value(
                    item,
                    node.and_then(|n| n.items.as_deref()),
                    false,
                    path,
                    removed,
                    depth + 1,
                );
                path.truncate(len);
            }
        }
        _ => {}
    }
}

fn prune_map(
    map: &mut Map<String, Value>,
    n: &Node,
    embedded: bool,
    path: &mut String,
    removed: &mut Vec<String>,
    depth: usize,
) {
    let len = path.len();
    let keys: Vec<String> = map.keys().cloned().collect();
    for k in keys {
        if embedded && META_FIELDS.contains(&k.as_str()) {
            continue;
        }
        let child_node = n.properties.get(&k).or_else(|| n.additional_schema());
        if child_node.is_some() || n.has_additional() {
            push_key(path, &k);
            if let Some(child) = map.get_mut(&k) {
                let child_embedded = child_node.is_some_and(|c| c.embedded);
                prune_value(child, child_node, child_embedded, path, removed, depth + 1);
            }
            path.truncate(len);
        } else {
            // TypeMeta and ObjectMeta names are dropped silently at the top of the object only.
            if !META_FIELDS.contains(&k.as_str()) || !path.is_empty() {
                record(path, &k, removed);
            }
            map.remove(&k);
        }
    }
}

fn record(path: &str, key: &str, removed: &mut Vec<String>) {
    removed.push(if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    });
}

/// Under `x-kubernetes-preserve-unknown-fields`: unknown fields stay, declared ones are pruned.
fn skip_prune(
    v: &mut Value,
    n: &Node,
    embedded: bool,
    path: &mut String,
    removed: &mut Vec<String>,
    depth: usize,
) {
    if depth > MAX_DEPTH {
        return;
    }
    let len = path.len();
    match v {
        Value::Object(map) => {
            let embedded = embedded || n.embedded;
            let keys: Vec<String> = map.keys().cloned().collect();
            for k in keys {
                if embedded && META_FIELDS.contains(&k.as_str()) {
                    continue;
                }
                let child_node = n.properties.get(&k).or_else(|| n.additional_schema());
                if child_node.is_some() || n.has_additional() {
                    push_key(path, &k);
                    if let Some(child) = map.get_mut(&k) {
                        let child_embedded = child_node.is_some_and(|c| c.embedded);
                        prune_value(child, child_node, child_embedded, path, removed, depth + 1);
                    }
                    path.truncate(len);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_node) = n.items.as_deref() {
                for (i, item) in items.iter_mut().enumerate() {
                    path.push_str(&format!("[{i}]"));
                    skip_prune(item, item_node, false, path, removed, depth + 1);
                    path.truncate(len);
                }
            }
        }
        _ => {}
    }
}

/// Removes `null` from fields whose schema is neither nullable nor defaulted.
fn prune_nulls(v: &mut Value, node: Option<&Node>, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    match v {
        Value::Object(map) => {
            let field_node =
                |k: &str| node.and_then(|n| n.properties.get(k).or_else(|| n.additional_schema()));
            map.retain(|k, child| {
                !(child.is_null()
                    && field_node(k).is_some_and(|s| !s.nullable && s.default.is_none()))
            });
            for (k, child) in map.iter_mut() {
                prune_nulls(child, field_node(k), depth + 1);
            }
        }
        Value::Array(items) => {
            let item_node = node.and_then(|n| n.items.as_deref());
            for item in items {
                prune_nulls(item, item_node, depth + 1);
            }
        }
        _ => {}
    }
}

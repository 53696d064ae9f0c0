//! Defaulting (`apiserver/schema/defaulting`): applied on create and update after pruning, and
//! to objects read from storage.

use serde_json::Value;

use crate::model::Node;

/// Sets the `default` of every absent field, and of every `null` field that is not nullable,
/// then recurses into the fields, map values and list items that the schema describes.
pub(crate) fn apply(v: &mut Value, node: &Node) {
    match v {
        Value::Object(map) => {
            for (k, prop) in &node.properties {
                let Some(default) = &prop.default else {
                    continue;
                };
                let missing_or_null = map.get(k).is_none_or(|cur| cur.is_null() && !prop.nullable);
                if missing_or_null {
                    map.insert(k.clone(), default.clone());
                }
            }
            for (k, child) in map.iter_mut() {
                if let Some(prop) = node.properties.get(k) {
                    apply(child, prop);
                } else if let Some(values) = node.additional_schema() {
                    if child.is_null()
                        && !values.nullable
                        && let Some(default) = &values.default
                    {
                        *child = default.clone();
                    }
                    apply(child, values);
                }
            }
        }
        Value::Array(items) => {
            let Some(item_node) = node.items.as_deref() else {
                return;
            };
            for item in items.iter_mut() {
                if item.is_null()
                    && !item_node.nullable
                    && let Some(default) = &item_node.default
                {
                    *item = default.clone();
                }
                apply(item, item_node);
            }
        }
        _ => {}
    }
}

//! `application/merge-patch+json` (RFC 7386) as kube-apiserver applies it: a strict decode of
//! the body into `map[string]any`, then evanphx/json-patch v4 `MergePatch`.
//!
//! The Go merge follows the RFC with one visible difference: a value added where the document
//! had nothing (or a non-object) is stripped of `null` members all the way down, *including
//! inside arrays' objects*; replacing an existing object by an array keeps the array verbatim.

use serde_json::{Map, Value};

use crate::depth;
use crate::error::PatchError;
use crate::go;

/// Merges `patch` into `doc`: `null` deletes a member, objects merge recursively, anything
/// else replaces.
///
/// Errors as kube-apiserver reports them (400): a body that is not an object
/// (`error decoding patch: json: cannot unmarshal array into Go value of type
/// map[string]interface {}`), or `null` (`Invalid JSON Patch`).
pub fn merge_patch(doc: &Value, patch: &Value) -> Result<Value, PatchError> {
    depth::ensure(doc)?;
    depth::ensure(patch)?;
    let patch = match patch {
        Value::Object(patch) => patch,
        Value::Null => return Err(PatchError::BadRequest("Invalid JSON Patch".into())),
        other => {
            return Err(PatchError::BadRequest(format!(
                "error decoding patch: json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
                go::json_kind(other)
            )));
        }
    };
    match doc {
        Value::Object(doc) => {
            let mut doc = doc.clone();
            merge_members(&mut doc, patch.clone());
            Ok(Value::Object(doc))
        }
        // The library's "Invalid JSON Document"; kube-apiserver never stores such a document.
        Value::Null => Err(PatchError::Internal("Invalid JSON Document".into())),
        // A non-object document is simply replaced by the (pruned) patch.
        _ => {
            let mut patch = Value::Object(patch.clone());
            prune_nulls(&mut patch);
            Ok(patch)
        }
    }
}

fn merge_members(doc: &mut Map<String, Value>, patch: Map<String, Value>) {
    for (key, value) in patch {
        if value.is_null() {
            doc.remove(&key);
            continue;
        }
        match doc.get_mut(&key) {
            Some(current) if !current.is_null() => merge_value(current, value),
            _ => {
                let mut value = value;
                prune_nulls(&mut value);
                doc.insert(key, value);
            }
        }
    }
}

fn merge_value(current: &mut Value, patch: Value) {
    match (current, patch) {
        (Value::Object(current), Value::Object(patch)) => merge_members(current, patch),
        // An object replaced by a non-object: the library returns the patch untouched.
        (current @ Value::Object(_), patch) => *current = patch,
        (current, mut patch) => {
            prune_nulls(&mut patch);
            *current = patch;
        }
    }
}

/// `pruneNulls`: drops null members of objects, recursing through objects and arrays; null
/// array elements stay.
fn prune_nulls(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(prune_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(prune_nulls),
        _ => {}
    }
}

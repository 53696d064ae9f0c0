//! `application/strategic-merge-patch+json` for built-in kinds, as kube-apiserver applies it
//! (`handlers/patch.go` `strategicPatchObject` → `strategicpatch.StrategicMergeMapPatch`).
//!
//! Directives: `$patch: replace|delete` in maps and list items (`merge` is refused as in Go),
//! `$setElementOrder/<list>`, `$deleteFromPrimitiveList/<list>`, `$retainKeys`; a `null` member
//! deletes. Lists merge only where the Go struct tags say so ([`schema`]); other lists are
//! replaced whole and maps merge recursively.

mod merge;
pub(crate) mod schema;

use serde_json::{Map, Value};

use crate::GroupKind;
use crate::depth;
use crate::error::PatchError;
use crate::go;

const DIRECTIVE: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const DELETE_FROM_PRIMITIVE_LIST: &str = "$deleteFromPrimitiveList";
const SET_ELEMENT_ORDER: &str = "$setElementOrder";

/// Applies a strategic merge patch to an object of the built-in `kind`.
///
/// Custom resources (any kind [`schema::supports_strategic_merge`] does not know) get
/// [`PatchError::UnsupportedMediaType`], the 415 kube-apiserver answers. A patch body that is
/// not an object is a 400 with the strict decoder's text; `null` is an empty patch.
pub fn strategic_merge_patch(
    doc: &Value,
    patch: &Value,
    kind: GroupKind<'_>,
) -> Result<Value, PatchError> {
    let schema = schema::root(kind).ok_or(PatchError::UnsupportedMediaType)?;
    depth::ensure(doc)?;
    depth::ensure(patch)?;
    let patch = match patch {
        Value::Object(patch) => patch.clone(),
        Value::Null => Map::new(),
        other => {
            return Err(PatchError::BadRequest(format!(
                "json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
                go::json_kind(other)
            )));
        }
    };
    let Value::Object(doc) = doc else {
        // The stored object always converts to a map; anything else is mergepatch.ErrBadJSONDoc.
        return Err(PatchError::Internal("invalid JSON document".into()));
    };
    merge::merge_map(doc.clone(), patch, schema).map(Value::Object)
}

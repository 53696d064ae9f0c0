//! Nesting limit. The engines recurse along the document, so untrusted input must be measured
//! (without recursion) before any of them runs, and JSON patch must not build deeper documents.

use serde_json::Value;

use crate::error::PatchError;

/// Deepest nesting accepted in a document, a patch, or a JSON-patch result. A scalar or an empty
/// container counts 1. serde_json's own parser stops at 128, so real requests stay far below;
/// the bound keeps every recursive step well inside a 2 MiB thread stack.
pub const MAX_DEPTH: usize = 256;

/// Depth of `value`, counted without recursion; stops early once `limit` is exceeded (the
/// returned number is then only known to be larger than `limit`).
pub(crate) fn depth_up_to(value: &Value, limit: usize) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(value, 1usize)];
    while let Some((v, d)) = stack.pop() {
        deepest = deepest.max(d);
        if deepest > limit {
            break;
        }
        match v {
            Value::Array(items) => stack.extend(items.iter().map(|c| (c, d + 1))),
            Value::Object(map) => stack.extend(map.values().map(|c| (c, d + 1))),
            _ => {}
        }
    }
    deepest
}

/// Refuses a value nested deeper than [`MAX_DEPTH`].
pub(crate) fn ensure(value: &Value) -> Result<(), PatchError> {
    if depth_up_to(value, MAX_DEPTH) > MAX_DEPTH {
        return Err(PatchError::TooDeep(MAX_DEPTH));
    }
    Ok(())
}

/// Refuses placing `value` under `levels` containers when that exceeds [`MAX_DEPTH`].
pub(crate) fn ensure_placed(levels: usize, value: &Value) -> Result<(), PatchError> {
    let room = MAX_DEPTH.saturating_sub(levels);
    if levels >= MAX_DEPTH || depth_up_to(value, room) > room {
        return Err(PatchError::TooDeep(MAX_DEPTH));
    }
    Ok(())
}

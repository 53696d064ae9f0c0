//! `application/json-patch+json` exactly as kube-apiserver applies it: `handlers/patch.go`
//! decodes the operations strictly (`[]jsonPatchOp`), then evanphx/json-patch v4 applies them.
//!
//! The Go library departs from RFC 6902 in ways clients depend on (spec §0.4):
//! - `test` of a missing member compares as `null` (kube-runtime adds its first finalizer with
//!   `test /metadata/finalizers null` on an object that has none);
//! - `replace` of a missing object member adds it;
//! - negative array indices count from the end (`add` at `-1` appends);
//! - `copy` from a missing member copies `null`, a path without a leading `/` drops its first
//!   segment, and `move` removes its source before it looks for the destination.
//!
//! Error texts are the library's own; kube-apiserver answers any of them with a 422.

use serde_json::{Map, Value};

use crate::depth;
use crate::error::{PatchError, panics};
use crate::go;

/// `maxJSONPatchOperations` in kube-apiserver.
pub const MAX_JSON_PATCH_OPERATIONS: usize = 10_000;

/// kube-apiserver's `JSONPatchMaxCopyBytes` (3 MiB): the total size `copy` operations may add.
pub const MAX_COPY_BYTES: usize = 3 * 1024 * 1024;

/// Applies an RFC 6902 patch to `doc` with evanphx/json-patch v4 semantics (see module docs).
pub fn json_patch(doc: &Value, patch: &Value) -> Result<Value, PatchError> {
    depth::ensure(doc)?;
    depth::ensure(patch)?;
    let ops = decode_operations(patch)?;
    if ops.len() > MAX_JSON_PATCH_OPERATIONS {
        return Err(PatchError::TooManyOperations {
            max: MAX_JSON_PATCH_OPERATIONS,
            got: ops.len(),
        });
    }
    let mut doc = match doc {
        Value::Object(_) | Value::Array(_) => doc.clone(),
        // json.Unmarshal of `null` into the library's map leaves it empty.
        Value::Null => Value::Object(Map::new()),
        other => {
            return Err(PatchError::JsonPatch(format!(
                "json: cannot unmarshal {} into Go value of type jsonpatch.partialDoc",
                go::json_kind(other)
            )));
        }
    };
    let mut copied = 0;
    for op in ops {
        apply_operation(&mut doc, op, &mut copied)?;
    }
    Ok(doc)
}

/// The strict-decoding findings kube-apiserver reports for a JSON patch besides hard errors:
/// members other than `op`/`path`/`from`/`value`, in its wording
/// (`json patch unknown field "[0].foo"`). With `fieldValidation=Strict` they fail the request
/// (422 on field `patch`); with `Warn`, the default, they become `Warning` headers.
pub fn json_patch_unknown_fields(patch: &Value) -> Vec<String> {
    let Value::Array(ops) = patch else {
        return Vec::new();
    };
    ops.iter()
        .enumerate()
        .filter_map(|(i, op)| op.as_object().map(|m| (i, m)))
        .flat_map(|(i, op)| {
            op.keys()
                .filter(|k| !matches!(k.as_str(), "op" | "path" | "from" | "value"))
                .map(move |k| {
                    format!(
                        "json patch unknown field {}",
                        go::quote(&format!("[{i}].{k}"))
                    )
                })
        })
        .take(100)
        .collect()
}

/// The strict decode into `[]handlers.jsonPatchOp` that precedes the library (400 on failure).
/// `null` decodes to no operations. Go reports the first type error in document order.
fn decode_operations(patch: &Value) -> Result<&[Value], PatchError> {
    let ops = match patch {
        Value::Null => return Ok(&[]),
        Value::Array(ops) => ops,
        other => {
            return Err(decode_error(format!(
                "json: cannot unmarshal {} into Go value of type []handlers.jsonPatchOp",
                go::json_kind(other)
            )));
        }
    };
    for op in ops {
        match op {
            Value::Null => {}
            Value::Object(fields) => {
                for (name, value) in fields {
                    let typed = matches!(name.as_str(), "op" | "path" | "from");
                    if typed && !matches!(value, Value::String(_) | Value::Null) {
                        return Err(decode_error(format!(
                            "json: cannot unmarshal {} into Go struct field jsonPatchOp.{name} of type string",
                            go::json_kind(value)
                        )));
                    }
                }
            }
            other => {
                return Err(decode_error(format!(
                    "json: cannot unmarshal {} into Go value of type handlers.jsonPatchOp",
                    go::json_kind(other)
                )));
            }
        }
    }
    Ok(ops)
}

fn decode_error(message: String) -> PatchError {
    PatchError::BadRequest(format!("error decoding patch: {message}"))
}

fn failed(message: String) -> PatchError {
    PatchError::JsonPatch(message)
}

/// A string member of an operation; absent, `null` or (after strict decoding, impossible)
/// non-string all read as missing.
fn member<'a>(op: &'a Value, name: &str) -> Option<&'a str> {
    op.get(name).and_then(Value::as_str)
}

/// `Operation.value()`: `None` when the member is absent (Go's nil node).
fn value_of(op: &Value) -> Option<&Value> {
    op.get("value")
}

fn apply_operation(doc: &mut Value, op: &Value, copied: &mut usize) -> Result<(), PatchError> {
    match member(op, "op").unwrap_or("unknown") {
        "add" => add(doc, op),
        "remove" => remove(doc, op),
        "replace" => replace(doc, op),
        "move" => move_op(doc, op),
        "test" => test(doc, op),
        "copy" => copy(doc, op, copied),
        other => Err(failed(format!("Unexpected kind: {other}"))),
    }
}

const MISSING_PATH: &str = "operation missing path field: missing value";
const MISSING_FROM: &str = "operation, missing from field: missing value";

fn add(doc: &mut Value, op: &Value) -> Result<(), PatchError> {
    let path = member(op, "path")
        .ok_or_else(|| failed("add operation failed to decode path: missing value".into()))?;
    let value = value_of(op).cloned().unwrap_or(Value::Null);
    depth::ensure_placed(segments(path), &value)?;
    let (container, key) = find_container(doc, path).ok_or_else(|| {
        failed(format!(
            "add operation does not apply: doc is missing path: \"{path}\": missing value"
        ))
    })?;
    container
        .add(&key, value)
        .map_err(|e| failed(format!("error in add for path: '{path}': {e}")))
}

fn remove(doc: &mut Value, op: &Value) -> Result<(), PatchError> {
    let path = member(op, "path")
        .ok_or_else(|| failed("remove operation failed to decode path: missing value".into()))?;
    let (container, key) = find_container(doc, path).ok_or_else(|| {
        failed(format!(
            "remove operation does not apply: doc is missing path: \"{path}\": missing value"
        ))
    })?;
    container
        .remove(&key)
        .map(drop)
        .map_err(|e| failed(format!("error in remove for path: '{path}': {e}")))
}

fn replace(doc: &mut Value, op: &Value) -> Result<(), PatchError> {
    let path = member(op, "path").ok_or_else(|| {
        failed(format!(
            "replace operation failed to decode path: {MISSING_PATH}"
        ))
    })?;
    if path.is_empty() {
        return match value_of(op) {
            None => Err(PatchError::GoPanic(panics::NIL_DEREFERENCE)),
            Some(v @ (Value::Object(_) | Value::Array(_))) => {
                *doc = v.clone();
                Ok(())
            }
            // The library wraps a nil error here, hence Go's "%!w(<nil>)".
            Some(_) => Err(failed(
                "replace operation value must be object or array: %!w(<nil>)".into(),
            )),
        };
    }
    let value = value_of(op).cloned().unwrap_or(Value::Null);
    depth::ensure_placed(segments(path), &value)?;
    let (container, key) = find_container(doc, path).ok_or_else(|| {
        failed(format!(
            "replace operation does not apply: doc is missing path: {path}: missing value"
        ))
    })?;
    // An object never fails `get`, which is why replace adds a missing member.
    container.get(&key).map_err(|_| {
        failed(format!(
            "replace operation does not apply: doc is missing key: {path}: missing value"
        ))
    })?;
    container
        .set(&key, value)
        .map_err(|e| failed(format!("error in remove for path: '{path}': {e}")))
}

fn move_op(doc: &mut Value, op: &Value) -> Result<(), PatchError> {
    let from = member(op, "from").ok_or_else(|| {
        failed(format!(
            "move operation failed to decode from: {MISSING_FROM}"
        ))
    })?;
    let (container, key) = find_container(doc, from).ok_or_else(|| {
        failed(format!(
            "move operation does not apply: doc is missing from path: {from}: missing value"
        ))
    })?;
    // The library names the key, not the path, in these two messages.
    container
        .get(&key)
        .map_err(|e| failed(format!("error in move for path: '{key}': {e}")))?;
    let value = container
        .remove(&key)
        .map_err(|e| failed(format!("error in move for path: '{key}': {e}")))?;
    let path = member(op, "path").ok_or_else(|| {
        failed(format!(
            "move operation failed to decode path: {MISSING_PATH}"
        ))
    })?;
    depth::ensure_placed(segments(path), &value)?;
    let (container, key) = find_container(doc, path).ok_or_else(|| {
        failed(format!(
            "move operation does not apply: doc is missing destination path: {path}: missing value"
        ))
    })?;
    container
        .add(&key, value)
        .map_err(|e| failed(format!("error in move for path: '{path}': {e}")))
}

fn test(doc: &mut Value, op: &Value) -> Result<(), PatchError> {
    let path = member(op, "path").ok_or_else(|| {
        failed(format!(
            "test operation failed to decode path: {MISSING_PATH}"
        ))
    })?;
    let mismatch = || failed(format!("testing value {path} failed: test failed"));
    let expected = value_of(op);
    if path.is_empty() {
        let expected = expected.ok_or(PatchError::GoPanic(panics::NIL_DEREFERENCE))?;
        return if *doc == *expected {
            Ok(())
        } else {
            Err(mismatch())
        };
    }
    let (container, key) = find_container(doc, path).ok_or_else(|| {
        failed(format!(
            "test operation does not apply: is missing path: {path}: missing value"
        ))
    })?;
    let actual = container
        .get(&key)
        .map_err(|e| failed(format!("error in test for path: '{path}': {e}")))?;
    // A missing member and a JSON null are the same nil node in the library.
    match (actual, expected) {
        (None, None | Some(Value::Null)) => Ok(()),
        (Some(actual), Some(expected)) if actual == expected => Ok(()),
        _ => Err(mismatch()),
    }
}

fn copy(doc: &mut Value, op: &Value, copied: &mut usize) -> Result<(), PatchError> {
    let from = member(op, "from").ok_or_else(|| {
        failed(format!(
            "copy operation failed to decode from: {MISSING_FROM}"
        ))
    })?;
    let (container, key) = find_container(doc, from).ok_or_else(|| {
        failed(format!(
            "copy operation does not apply: doc is missing from path: {from}: missing value"
        ))
    })?;
    let value = container
        .get(&key)
        .map_err(|e| failed(format!("error in copy for from: '{from}': {e}")))?
        .cloned();
    let path = member(op, "path")
        .ok_or_else(|| failed("copy operation failed to decode path: missing value".into()))?;
    let (container, key) = find_container(doc, path).ok_or_else(|| {
        failed(format!(
            "copy operation does not apply: doc is missing destination path: {path}: missing value"
        ))
    })?;
    *copied += value.as_ref().map_or(0, go_encoded_len);
    if *copied > MAX_COPY_BYTES {
        return Err(failed(format!(
            "Unable to complete the copy, the accumulated size increase of copy is {copied}, exceeding the limit {MAX_COPY_BYTES}"
        )));
    }
    let value = value.unwrap_or(Value::Null);
    depth::ensure_placed(segments(path), &value)?;
    container
        .add(&key, value)
        .map_err(|e| failed(format!("error while adding value during copy: {e}")))
}

/// Containers a path crosses, an upper bound on the depth at which a value lands.
fn segments(path: &str) -> usize {
    path.split('/').count()
}

/// RFC 6901 unescaping in one left-to-right pass (`~01` is `~1`, not `/`).
fn unescape(token: &str) -> String {
    let mut out = String::with_capacity(token.len());
    let mut rest = token;
    while let Some(i) = rest.find('~') {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        if let Some(t) = tail.strip_prefix("~1") {
            out.push('/');
            rest = t;
        } else if let Some(t) = tail.strip_prefix("~0") {
            out.push('~');
            rest = t;
        } else {
            out.push('~');
            rest = &tail[1..];
        }
    }
    out.push_str(rest);
    out
}

/// The object or array an operation acts on.
enum Container<'a> {
    Object(&'a mut Map<String, Value>),
    Array(&'a mut Vec<Value>),
}

/// `findObject`: splits on `/`, ignores the first segment (whatever it is), walks every
/// segment but the last, and fails on a missing, null or scalar step.
fn find_container<'a>(doc: &'a mut Value, path: &str) -> Option<(Container<'a>, String)> {
    let parts: Vec<&str> = path.split('/').collect();
    if parts.len() < 2 {
        return None;
    }
    let (last, walk) = parts[1..].split_last()?;
    let mut current = doc;
    for part in walk {
        let part = unescape(part);
        current = match current {
            Value::Object(map) => map.get_mut(&part)?,
            Value::Array(items) => {
                let i = array_index(items.len(), &part).ok()?;
                items.get_mut(i)?
            }
            _ => return None,
        };
    }
    let container = match current {
        Value::Object(map) => Container::Object(map),
        Value::Array(items) => Container::Array(items),
        _ => return None,
    };
    Some((container, unescape(last)))
}

fn invalid_index(i: i64) -> String {
    format!("Unable to access invalid index: {i}: invalid index referenced")
}

/// `partialArray.get`'s index rule: negative counts from the end, must land inside.
fn array_index(len: usize, key: &str) -> Result<usize, String> {
    let len = len as i64;
    let mut i = go::atoi(key)?;
    if i < 0 {
        if i < -len {
            return Err(invalid_index(i));
        }
        i += len;
    }
    if i >= len {
        return Err(invalid_index(i));
    }
    Ok(i as usize)
}

impl Container<'_> {
    /// The member or element; `None` for a missing member or a null (both Go's nil node).
    fn get(&self, key: &str) -> Result<Option<&Value>, String> {
        let found = match self {
            Container::Object(map) => map.get(key),
            Container::Array(items) => Some(&items[array_index(items.len(), key)?]),
        };
        Ok(found.filter(|v| !v.is_null()))
    }

    fn add(self, key: &str, value: Value) -> Result<(), String> {
        match self {
            Container::Object(map) => {
                map.insert(key.to_owned(), value);
            }
            Container::Array(items) if key == "-" => items.push(value),
            Container::Array(items) => {
                let mut i = go::atoi(key)
                    .map_err(|e| format!("value was not a proper array index: '{key}': {e}"))?;
                // Inserting makes room for one more: -1 appends, len is allowed.
                let size = items.len() as i64 + 1;
                if i >= size {
                    return Err(invalid_index(i));
                }
                if i < 0 {
                    if i < -size {
                        return Err(invalid_index(i));
                    }
                    i += size;
                }
                items.insert(i as usize, value);
            }
        }
        Ok(())
    }

    fn remove(self, key: &str) -> Result<Value, String> {
        match self {
            Container::Object(map) => map
                .remove(key)
                .ok_or_else(|| format!("Unable to remove nonexistent key: {key}: missing value")),
            Container::Array(items) => {
                let len = items.len() as i64;
                let mut i = go::atoi(key)?;
                if i >= len {
                    return Err(invalid_index(i));
                }
                if i < 0 {
                    if i < -len {
                        return Err(invalid_index(i));
                    }
                    i += len;
                }
                Ok(items.remove(i as usize))
            }
        }
    }

    fn set(self, key: &str, value: Value) -> Result<(), String> {
        match self {
            Container::Object(map) => {
                map.insert(key.to_owned(), value);
            }
            Container::Array(items) => {
                let i = array_index(items.len(), key)?;
                items[i] = value;
            }
        }
        Ok(())
    }
}

/// Bytes `json.Marshal` produces for `value`, which the copy limit counts: serde_json's
/// compact form plus Go's HTML escaping of `<`, `>`, `&` (6 bytes instead of 1) and of
/// U+2028/U+2029 (6 instead of 3).
fn go_encoded_len(value: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            for window in 0..buf.len() {
                self.0 += match buf[window] {
                    b'<' | b'>' | b'&' => 6,
                    // E2 80 A8 / E2 80 A9: count the lead byte as the whole escape.
                    0xE2 if buf.get(window + 1) == Some(&0x80)
                        && matches!(buf.get(window + 2), Some(0xA8 | 0xA9)) =>
                    {
                        4
                    }
                    _ => 1,
                };
            }
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    match serde_json::to_writer(&mut count, value) {
        Ok(()) => count.0,
        // Serializing a Value cannot fail; count nothing rather than panic.
        Err(_) => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unescape_is_single_pass() {
        assert_eq!(unescape("a~1b"), "a/b");
        assert_eq!(unescape("~01"), "~1");
        assert_eq!(unescape("~0~1"), "~/");
        assert_eq!(unescape("~x~"), "~x~");
    }

    #[test]
    fn encoded_len_counts_go_html_escapes() {
        assert_eq!(go_encoded_len(&json!("a<b")), 2 + 1 + 6 + 1);
        assert_eq!(go_encoded_len(&json!({"k": 1})), 7);
        assert_eq!(go_encoded_len(&json!("\u{2028}")), 2 + 6);
    }
}

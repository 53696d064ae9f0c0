//! Untrusted input: deeply nested documents and patches are refused with an error, never a
//! stack overflow, and nesting within the limit still works.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use localkube_patch::{
    GroupKind, MAX_DEPTH, PatchError, json_patch, merge_patch, strategic_merge_patch,
};
use serde_json::{Map, Value, json};

/// `{"a": {"a": … {"a": 1}}}` with `levels` objects, built without recursion.
fn nested_objects(levels: usize) -> Value {
    let mut value = json!(1);
    for _ in 0..levels {
        let mut map = Map::new();
        map.insert("a".into(), value);
        value = Value::Object(map);
    }
    value
}

/// `[[[ … ]]]` with `levels` arrays.
fn nested_arrays(levels: usize) -> Value {
    let mut value = json!([]);
    for _ in 1..levels {
        value = Value::Array(vec![value]);
    }
    value
}

/// Dropping a very deep `Value` recurses; take it apart iteratively instead.
fn dismantle(value: Value) {
    let mut stack = vec![value];
    while let Some(v) = stack.pop() {
        match v {
            Value::Array(items) => stack.extend(items),
            Value::Object(map) => stack.extend(map.into_iter().map(|(_, v)| v)),
            _ => {}
        }
    }
}

#[test]
fn deep_input_is_refused_by_every_engine() {
    let deep = nested_objects(100_000);
    let deep_add = json!([{"op": "add", "path": "/x", "value": nested_arrays(1_000)}]);
    let deployment = GroupKind::new("apps", "Deployment");
    let too_deep = PatchError::TooDeep(MAX_DEPTH);
    let results = [
        merge_patch(&json!({}), &deep),
        merge_patch(&deep, &json!({"a": null})),
        strategic_merge_patch(&json!({}), &deep, deployment),
        strategic_merge_patch(&deep, &json!({}), deployment),
        json_patch(&json!({}), &deep_add),
        json_patch(&deep, &json!([])),
    ];
    for (i, result) in results.into_iter().enumerate() {
        let error = result.expect_err("deep input must be refused");
        assert_eq!(error, too_deep, "case {i}");
        assert_eq!(error.http_status(), 400, "case {i}");
    }
    dismantle(deep);
    dismantle(deep_add);
}

#[test]
fn json_patch_cannot_grow_a_document_past_the_limit() {
    // Each copy of /a into /a/a nests the document one level deeper.
    let ops: Vec<Value> = (0..MAX_DEPTH + 10)
        .map(|_| json!({"op": "copy", "from": "/a", "path": "/a/a"}))
        .collect();
    let error = json_patch(&json!({"a": {}}), &Value::Array(ops)).unwrap_err();
    assert_eq!(error, PatchError::TooDeep(MAX_DEPTH));
}

#[test]
fn nesting_within_the_limit_is_merged() {
    let levels = MAX_DEPTH - 2;
    let doc = nested_objects(levels);
    let patch = nested_objects(levels);
    assert_eq!(merge_patch(&doc, &patch).unwrap(), doc);
    assert_eq!(
        strategic_merge_patch(&doc, &patch, GroupKind::new("", "ConfigMap")).unwrap(),
        doc
    );
    let path = "/a".repeat(levels);
    assert_eq!(
        json_patch(&doc, &json!([{"op": "test", "path": path, "value": 1}])).unwrap(),
        doc
    );
}

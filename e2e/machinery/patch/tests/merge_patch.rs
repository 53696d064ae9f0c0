//! JSON merge patch (RFC 7386) as evanphx/json-patch v4 applies it behind kube-apiserver.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use localkube_patch::{PatchError, merge_patch};
use serde_json::{Value, json};

#[test]
fn merges_like_rfc_7386_with_the_go_null_pruning() {
    let cases: [(&str, Value, Value, Value); 8] = [
        (
            "null deletes, objects merge, scalars replace",
            json!({"metadata": {"labels": {"a": "1", "b": "2"}}, "spec": {"replicas": 1}}),
            json!({"metadata": {"labels": {"a": null, "c": "3"}}, "spec": {"replicas": 2}}),
            json!({"metadata": {"labels": {"b": "2", "c": "3"}}, "spec": {"replicas": 2}}),
        ),
        (
            "arrays are replaced whole",
            json!({"spec": {"containers": [{"name": "a"}, {"name": "b"}]}}),
            json!({"spec": {"containers": [{"name": "c"}]}}),
            json!({"spec": {"containers": [{"name": "c"}]}}),
        ),
        (
            "deleting a missing member is a no-op",
            json!({"a": 1}),
            json!({"zz": null}),
            json!({"a": 1}),
        ),
        (
            "a new object loses its null members at every level",
            json!({}),
            json!({"status": {"a": null, "b": {"c": null, "d": 1}}}),
            json!({"status": {"b": {"d": 1}}}),
        ),
        (
            "a new array's objects lose their null members too (Go, not the RFC)",
            json!({}),
            json!({"l": [{"a": null, "b": 1}, null]}),
            json!({"l": [{"b": 1}, null]}),
        ),
        (
            "an array replacing an object is kept verbatim",
            json!({"x": {"k": 1}}),
            json!({"x": [{"a": null}]}),
            json!({"x": [{"a": null}]}),
        ),
        (
            "an object replacing a scalar is pruned",
            json!({"x": "s"}),
            json!({"x": {"a": null, "b": 2}}),
            json!({"x": {"b": 2}}),
        ),
        (
            "kube-rs Recorder updates an event series",
            json!({"kind": "Event", "note": "n", "series": {"count": 1, "lastObservedTime": "t1"}}),
            json!({"series": {"count": 2, "lastObservedTime": "t2"}}),
            json!({"kind": "Event", "note": "n", "series": {"count": 2, "lastObservedTime": "t2"}}),
        ),
    ];
    for (name, doc, patch, want) in cases {
        assert_eq!(merge_patch(&doc, &patch), Ok(want), "{name}");
    }
}

#[test]
fn non_object_patches_are_400() {
    let cases = [
        (Value::Null, "Invalid JSON Patch"),
        (
            json!([{"a": 1}]),
            "error decoding patch: json: cannot unmarshal array into Go value of type map[string]interface {}",
        ),
        (
            json!("x"),
            "error decoding patch: json: cannot unmarshal string into Go value of type map[string]interface {}",
        ),
        (
            json!(3),
            "error decoding patch: json: cannot unmarshal number into Go value of type map[string]interface {}",
        ),
    ];
    for (patch, text) in cases {
        let error = merge_patch(&json!({"a": 1}), &patch).unwrap_err();
        assert_eq!(error, PatchError::BadRequest(text.into()));
        assert_eq!(error.http_status(), 400);
    }
}

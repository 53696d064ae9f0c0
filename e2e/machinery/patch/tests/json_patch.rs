//! JSON patch as kube-apiserver applies it (evanphx/json-patch v4), including the departures
//! from RFC 6902 that real clients rely on, and the exact error texts and statuses.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use localkube_patch::{
    MAX_COPY_BYTES, PatchError, UNPROCESSABLE_MESSAGE, json_patch, json_patch_unknown_fields,
};
use serde_json::{Value, json};

/// One case: a document, a patch, and the document or library error text expected.
struct Case {
    name: &'static str,
    doc: Value,
    patch: Value,
    want: Result<Value, &'static str>,
}

fn ok(name: &'static str, doc: Value, patch: Value, want: Value) -> Case {
    Case {
        name,
        doc,
        patch,
        want: Ok(want),
    }
}

fn err(name: &'static str, doc: Value, patch: Value, text: &'static str) -> Case {
    Case {
        name,
        doc,
        patch,
        want: Err(text),
    }
}

fn run(cases: Vec<Case>) {
    for case in cases {
        let got = json_patch(&case.doc, &case.patch);
        match (&case.want, got) {
            (Ok(want), Ok(got)) => assert_eq!(&got, want, "{}", case.name),
            (Err(text), Err(e)) => assert_eq!(e.to_string(), *text, "{}", case.name),
            (want, got) => panic!("{}: wanted {want:?}, got {got:?}", case.name),
        }
    }
}

fn pod() -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"}})
}

#[test]
fn go_semantics_that_clients_rely_on() {
    let finalizer_patch = json!([
        {"op": "test", "path": "/metadata/finalizers", "value": null},
        {"op": "add", "path": "/metadata/finalizers", "value": ["example.com/cleanup"]}
    ]);
    let mut with_finalizers = pod();
    with_finalizers["metadata"]["finalizers"] = json!(["other"]);
    let mut finalized = pod();
    finalized["metadata"]["finalizers"] = json!(["example.com/cleanup"]);
    run(vec![
        ok(
            "kube-runtime finalizer patch on an object without finalizers",
            pod(),
            finalizer_patch.clone(),
            finalized,
        ),
        err(
            "the same patch once finalizers exist",
            with_finalizers,
            finalizer_patch,
            "testing value /metadata/finalizers failed: test failed",
        ),
        ok(
            "test without a value passes on a missing member",
            json!({"a": 1}),
            json!([{"op": "test", "path": "/b"}]),
            json!({"a": 1}),
        ),
        err(
            "test without a value fails on a present member",
            json!({"a": 1}),
            json!([{"op": "test", "path": "/a"}]),
            "testing value /a failed: test failed",
        ),
        ok(
            "test null passes on an explicit null",
            json!({"a": null}),
            json!([{"op": "test", "path": "/a", "value": null}]),
            json!({"a": null}),
        ),
        err(
            "test below a missing parent is not null",
            json!({}),
            json!([{"op": "test", "path": "/a/b", "value": null}]),
            "test operation does not apply: is missing path: /a/b: missing value",
        ),
        ok(
            "replace of a missing member adds it",
            json!({"spec": {"a": 1}}),
            json!([{"op": "replace", "path": "/spec/replicas", "value": 3}]),
            json!({"spec": {"a": 1, "replicas": 3}}),
        ),
        err(
            "replace past the end of an array",
            json!({"l": [1, 2]}),
            json!([{"op": "replace", "path": "/l/5", "value": 0}]),
            "replace operation does not apply: doc is missing key: /l/5: missing value",
        ),
        ok(
            "test and replace compare whole values",
            json!({"m": {"k": [1, {"x": "y"}]}}),
            json!([
                {"op": "test", "path": "/m", "value": {"k": [1, {"x": "y"}]}},
                {"op": "replace", "path": "/m/k/1/x", "value": "z"}
            ]),
            json!({"m": {"k": [1, {"x": "z"}]}}),
        ),
        err(
            "numbers compare by their Go type: 1 is not 1.0",
            json!({"n": 1}),
            json!([{"op": "test", "path": "/n", "value": 1.0}]),
            "testing value /n failed: test failed",
        ),
        ok(
            "test of the whole document",
            json!({"a": 1}),
            json!([{"op": "test", "path": "", "value": {"a": 1}}]),
            json!({"a": 1}),
        ),
        ok(
            "replace of the whole document",
            json!({"a": 1}),
            json!([{"op": "replace", "path": "", "value": {"b": 2}}]),
            json!({"b": 2}),
        ),
        err(
            "replace of the whole document by a scalar",
            json!({"a": 1}),
            json!([{"op": "replace", "path": "", "value": 5}]),
            "replace operation value must be object or array: %!w(<nil>)",
        ),
        ok(
            "add without a value adds null",
            json!({}),
            json!([{"op": "add", "path": "/a"}]),
            json!({"a": null}),
        ),
        ok(
            "a path without a leading slash drops its first segment",
            json!({"a": 1}),
            json!([{"op": "add", "path": "x/b", "value": 2}]),
            json!({"a": 1, "b": 2}),
        ),
        ok(
            "JSON pointer escapes",
            json!({"metadata": {"annotations": {}}}),
            json!([
                {"op": "add", "path": "/metadata/annotations/example.com~1owner", "value": "me"},
                {"op": "add", "path": "/metadata/annotations/a~0b", "value": "tilde"},
                {"op": "add", "path": "/metadata/annotations/~01", "value": "one pass"}
            ]),
            json!({"metadata": {"annotations": {
                "example.com/owner": "me", "a~b": "tilde", "~1": "one pass"
            }}}),
        ),
    ]);
}

#[test]
fn arrays_append_and_count_negative_indices_from_the_end() {
    let doc = json!({"l": ["a", "b", "c"]});
    run(vec![
        ok(
            "- appends",
            doc.clone(),
            json!([{"op": "add", "path": "/l/-", "value": "d"}]),
            json!({"l": ["a", "b", "c", "d"]}),
        ),
        ok(
            "add at len appends",
            doc.clone(),
            json!([{"op": "add", "path": "/l/3", "value": "d"}]),
            json!({"l": ["a", "b", "c", "d"]}),
        ),
        ok(
            "add at -1 appends (the array is one longer after insertion)",
            doc.clone(),
            json!([{"op": "add", "path": "/l/-1", "value": "d"}]),
            json!({"l": ["a", "b", "c", "d"]}),
        ),
        ok(
            "add at -4 inserts first",
            doc.clone(),
            json!([{"op": "add", "path": "/l/-4", "value": "z"}]),
            json!({"l": ["z", "a", "b", "c"]}),
        ),
        err(
            "add at -5 is out of range",
            doc.clone(),
            json!([{"op": "add", "path": "/l/-5", "value": "z"}]),
            "error in add for path: '/l/-5': Unable to access invalid index: -5: invalid index referenced",
        ),
        err(
            "add past len",
            doc.clone(),
            json!([{"op": "add", "path": "/l/4", "value": "z"}]),
            "error in add for path: '/l/4': Unable to access invalid index: 4: invalid index referenced",
        ),
        err(
            "add at a non-numeric index",
            doc.clone(),
            json!([{"op": "add", "path": "/l/x", "value": "z"}]),
            "error in add for path: '/l/x': value was not a proper array index: 'x': strconv.Atoi: parsing \"x\": invalid syntax",
        ),
        ok(
            "remove -1 removes the last item",
            doc.clone(),
            json!([{"op": "remove", "path": "/l/-1"}]),
            json!({"l": ["a", "b"]}),
        ),
        ok(
            "replace -3 replaces the first item",
            doc.clone(),
            json!([{"op": "replace", "path": "/l/-3", "value": "A"}]),
            json!({"l": ["A", "b", "c"]}),
        ),
        ok(
            "test -2 and walk through a negative index",
            json!({"l": [{"n": 1}, {"n": 2}]}),
            json!([
                {"op": "test", "path": "/l/-2/n", "value": 1},
                {"op": "replace", "path": "/l/-1/n", "value": 3}
            ]),
            json!({"l": [{"n": 1}, {"n": 3}]}),
        ),
        err(
            "remove at -4 of three items",
            doc.clone(),
            json!([{"op": "remove", "path": "/l/-4"}]),
            "error in remove for path: '/l/-4': Unable to access invalid index: -4: invalid index referenced",
        ),
        err(
            "remove at a non-numeric index",
            doc,
            json!([{"op": "remove", "path": "/l/x"}]),
            "error in remove for path: '/l/x': strconv.Atoi: parsing \"x\": invalid syntax",
        ),
    ]);
}

#[test]
fn move_and_copy() {
    run(vec![
        ok(
            "move a member between objects",
            json!({"a": {"x": 1}, "b": {}}),
            json!([{"op": "move", "from": "/a/x", "path": "/b/y"}]),
            json!({"a": {}, "b": {"y": 1}}),
        ),
        ok(
            "move the first item to the end",
            json!({"l": [1, 2, 3]}),
            json!([{"op": "move", "from": "/l/0", "path": "/l/-"}]),
            json!({"l": [2, 3, 1]}),
        ),
        err(
            "move into its own child: the source is gone before the destination is found",
            json!({"a": {"b": 1}}),
            json!([{"op": "move", "from": "/a", "path": "/a/c"}]),
            "move operation does not apply: doc is missing destination path: /a/c: missing value",
        ),
        err(
            "move from a missing member names the key",
            json!({"a": 1}),
            json!([{"op": "move", "from": "/b", "path": "/c"}]),
            "error in move for path: 'b': Unable to remove nonexistent key: b: missing value",
        ),
        err(
            "move without from",
            json!({"a": 1}),
            json!([{"op": "move", "path": "/c"}]),
            "move operation failed to decode from: operation, missing from field: missing value",
        ),
        ok(
            "copy an object",
            json!({"a": {"k": [1]}}),
            json!([{"op": "copy", "from": "/a", "path": "/b"}]),
            json!({"a": {"k": [1]}, "b": {"k": [1]}}),
        ),
        ok(
            "copy into an array position",
            json!({"l": ["x", "y"]}),
            json!([{"op": "copy", "from": "/l/1", "path": "/l/0"}]),
            json!({"l": ["y", "x", "y"]}),
        ),
        ok(
            "copy from a missing member copies null",
            json!({"a": 1}),
            json!([{"op": "copy", "from": "/nope", "path": "/b"}]),
            json!({"a": 1, "b": null}),
        ),
        err(
            "copy to a missing parent",
            json!({"a": 1}),
            json!([{"op": "copy", "from": "/a", "path": "/x/y"}]),
            "copy operation does not apply: doc is missing destination path: /x/y: missing value",
        ),
    ]);
}

#[test]
fn operation_errors_use_the_library_wording() {
    run(vec![
        err(
            "remove of a missing member",
            json!({"a": 1}),
            json!([{"op": "remove", "path": "/x"}]),
            "error in remove for path: '/x': Unable to remove nonexistent key: x: missing value",
        ),
        err(
            "add below a missing parent",
            json!({}),
            json!([{"op": "add", "path": "/a/b/c", "value": 1}]),
            "add operation does not apply: doc is missing path: \"/a/b/c\": missing value",
        ),
        err(
            "add below a scalar",
            json!({"a": "s"}),
            json!([{"op": "add", "path": "/a/b", "value": 1}]),
            "add operation does not apply: doc is missing path: \"/a/b\": missing value",
        ),
        err(
            "add at the root path",
            json!({}),
            json!([{"op": "add", "path": "", "value": 1}]),
            "add operation does not apply: doc is missing path: \"\": missing value",
        ),
        err(
            "unknown op",
            json!({}),
            json!([{"op": "frobnicate", "path": "/a"}]),
            "Unexpected kind: frobnicate",
        ),
        err(
            "op missing",
            json!({}),
            json!([{"path": "/a"}]),
            "Unexpected kind: unknown",
        ),
        err(
            "a null operation",
            json!({}),
            json!([null]),
            "Unexpected kind: unknown",
        ),
        err(
            "add without path",
            json!({}),
            json!([{"op": "add", "value": 1}]),
            "add operation failed to decode path: missing value",
        ),
        err(
            "replace without path",
            json!({}),
            json!([{"op": "replace", "value": 1}]),
            "replace operation failed to decode path: operation missing path field: missing value",
        ),
        err(
            "test without path",
            json!({}),
            json!([{"op": "test", "value": 1}]),
            "test operation failed to decode path: operation missing path field: missing value",
        ),
        err(
            "copy without path",
            json!({"a": 1}),
            json!([{"op": "copy", "from": "/a"}]),
            "copy operation failed to decode path: missing value",
        ),
        err(
            "an earlier failure stops the patch",
            json!({"a": 1}),
            json!([
                {"op": "remove", "path": "/zz"},
                {"op": "add", "path": "/b", "value": 2}
            ]),
            "error in remove for path: '/zz': Unable to remove nonexistent key: zz: missing value",
        ),
    ]);
}

#[test]
fn apply_failures_are_422_with_the_generic_message() {
    let error = json_patch(&json!({}), &json!([{"op": "remove", "path": "/x"}])).unwrap_err();
    assert!(matches!(error, PatchError::JsonPatch(_)));
    let status = error.status();
    assert_eq!(
        (status.code, status.reason, status.message.as_str()),
        (422, "Invalid", UNPROCESSABLE_MESSAGE)
    );
    assert!(status.empty_details);
    assert_eq!(error.http_status(), 422);
}

#[test]
fn malformed_patch_documents_are_400_with_the_strict_decoder_text() {
    let cases = [
        (
            json!({"op": "add"}),
            "error decoding patch: json: cannot unmarshal object into Go value of type []handlers.jsonPatchOp",
        ),
        (
            json!("add"),
            "error decoding patch: json: cannot unmarshal string into Go value of type []handlers.jsonPatchOp",
        ),
        (
            json!([{"op": "add", "path": "/a"}, 5]),
            "error decoding patch: json: cannot unmarshal number into Go value of type handlers.jsonPatchOp",
        ),
        (
            json!([["add"]]),
            "error decoding patch: json: cannot unmarshal array into Go value of type handlers.jsonPatchOp",
        ),
        (
            json!([{"op": "add", "path": 7, "value": 1}]),
            "error decoding patch: json: cannot unmarshal number into Go struct field jsonPatchOp.path of type string",
        ),
        (
            json!([{"op": true, "path": "/a"}]),
            "error decoding patch: json: cannot unmarshal bool into Go struct field jsonPatchOp.op of type string",
        ),
        (
            json!([{"op": "move", "from": {}, "path": "/a"}]),
            "error decoding patch: json: cannot unmarshal object into Go struct field jsonPatchOp.from of type string",
        ),
    ];
    for (patch, text) in cases {
        let error = json_patch(&json!({"a": 1}), &patch).unwrap_err();
        assert_eq!(error, PatchError::BadRequest(text.into()), "{patch}");
        let status = error.status();
        assert_eq!((status.code, status.reason), (400, "BadRequest"));
        assert_eq!(status.message, text);
        assert!(!status.empty_details);
    }
}

#[test]
fn null_patch_is_no_operation() {
    assert_eq!(
        json_patch(&json!({"a": 1}), &Value::Null),
        Ok(json!({"a": 1}))
    );
    assert_eq!(
        json_patch(&json!({"a": 1}), &json!([])),
        Ok(json!({"a": 1}))
    );
}

#[test]
fn more_than_ten_thousand_operations_is_413() {
    let op = json!({"op": "test", "path": "/a", "value": 1});
    let at_limit = Value::Array(vec![op.clone(); 10_000]);
    assert!(json_patch(&json!({"a": 1}), &at_limit).is_ok());
    let over = Value::Array(vec![op; 10_001]);
    let error = json_patch(&json!({"a": 1}), &over).unwrap_err();
    let status = error.status();
    assert_eq!((status.code, status.reason), (413, "RequestEntityTooLarge"));
    assert_eq!(
        status.message,
        "Request entity too large: The allowed maximum operations in a JSON patch is 10000, got 10001"
    );
}

#[test]
fn copies_may_add_at_most_three_mebibytes() {
    let big = "x".repeat(1024 * 1024);
    let doc = json!({"big": big});
    let copies = |n: usize| {
        Value::Array(
            (0..n)
                .map(|i| json!({"op": "copy", "from": "/big", "path": format!("/c{i}")}))
                .collect(),
        )
    };
    // Each copy counts the encoded string: 1 MiB plus its two quotes.
    assert!(json_patch(&doc, &copies(2)).is_ok());
    let error = json_patch(&doc, &copies(3)).unwrap_err();
    let each = 1024 * 1024 + 2;
    assert_eq!(
        error.to_string(),
        format!(
            "Unable to complete the copy, the accumulated size increase of copy is {}, exceeding the limit {MAX_COPY_BYTES}",
            3 * each
        )
    );
    assert_eq!(error.http_status(), 422);
}

#[test]
fn unknown_operation_members_are_reported_like_strict_decoding() {
    let patch = json!([
        {"op": "add", "path": "/a", "value": 1},
        {"op": "add", "path": "/b", "value": 2, "Value": 3, "comment": "x"}
    ]);
    assert_eq!(
        json_patch_unknown_fields(&patch),
        vec![
            "json patch unknown field \"[1].Value\"".to_owned(),
            "json patch unknown field \"[1].comment\"".to_owned(),
        ]
    );
    assert!(json_patch_unknown_fields(&json!([{"op": "remove", "path": "/a"}])).is_empty());
}

#[test]
fn go_panics_become_plain_text_500() {
    let error = json_patch(&json!({"a": 1}), &json!([{"op": "replace", "path": ""}])).unwrap_err();
    assert!(matches!(error, PatchError::GoPanic(_)));
    let status = error.status();
    assert_eq!(status.code, 500);
    assert!(status.plain_text);
    assert_eq!(
        status.message,
        "This request caused apiserver to panic. Look in the logs for details."
    );
}

#[test]
fn root_arrays_and_null_documents() {
    assert_eq!(
        json_patch(
            &json!([1, 2]),
            &json!([{"op": "add", "path": "/0", "value": 0}])
        ),
        Ok(json!([0, 1, 2]))
    );
    assert_eq!(
        json_patch(
            &Value::Null,
            &json!([{"op": "add", "path": "/a", "value": 1}])
        ),
        Ok(json!({"a": 1}))
    );
    assert_eq!(
        json_patch(&json!("s"), &json!([])).unwrap_err().to_string(),
        "json: cannot unmarshal string into Go value of type jsonpatch.partialDoc"
    );
}

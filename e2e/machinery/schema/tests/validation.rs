//! Validation, pruning and defaulting keyword by keyword, with kube-openapi's and the
//! apiextensions' exact messages.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use localkube_schema::StructuralSchema;
use localkube_schema::strict::duplicate_fields;
use serde_json::{Value, json};

fn schema(spec: Value) -> StructuralSchema {
    let root = json!({"type": "object", "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": {"type": "object"}, "spec": spec}});
    StructuralSchema::compile(&root).unwrap_or_else(|e| panic!("{e:#?}"))
}

fn validate(s: &StructuralSchema, spec: Value) -> Vec<String> {
    s.validate(&json!({"spec": spec}), None)
        .iter()
        .map(ToString::to_string)
        .collect()
}

#[test]
fn keywords_and_their_messages() {
    let s = schema(json!({
        "type": "object",
        "required": ["name"],
        "minProperties": 1,
        "maxProperties": 6,
        "properties": {
            "name": {"type": "string", "maxLength": 5},
            "code": {"type": "string", "minLength": 2, "pattern": "^[a-z]+$"},
            "count": {"type": "integer", "format": "int32", "minimum": 0, "exclusiveMinimum": true, "multipleOf": 2},
            "ratio": {"type": "number", "maximum": 1.5},
            "when": {"type": "string", "format": "date-time"},
            "data": {"type": "string", "format": "byte"},
            "tags": {"type": "array", "minItems": 1, "maxItems": 2, "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
            "labels": {"type": "object", "additionalProperties": {"type": "string", "maxLength": 3}},
            "maybe": {"type": "string", "nullable": true},
            "port": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]},
            "mode": {"type": "string", "not": {"enum": ["off"]}},
            "level": {"type": "integer", "oneOf": [{"minimum": 10}, {"maximum": 20}]}
        }
    }));
    let cases: Vec<(Value, Vec<&str>)> = vec![
        (json!({"name": "ok"}), vec![]),
        (
            json!({}),
            vec![
                "spec: Invalid value: 0: spec in body should have at least 1 properties",
                "spec.name: Required value",
            ],
        ),
        (
            json!({"name": "toolong"}),
            vec!["spec.name: Too long: may not be more than 5 bytes"],
        ),
        (
            json!({"name": "a", "code": "x"}),
            vec![
                "spec.code: Invalid value: \"x\": spec.code in body should be at least 2 chars long",
            ],
        ),
        (
            json!({"name": "a", "code": "X1"}),
            vec!["spec.code: Invalid value: \"X1\": spec.code in body should match '^[a-z]+$'"],
        ),
        (
            json!({"name": "a", "count": 0}),
            vec!["spec.count: Invalid value: 0: spec.count in body should be greater than 0"],
        ),
        (
            json!({"name": "a", "count": 3}),
            vec!["spec.count: Invalid value: 3: spec.count in body should be a multiple of 2"],
        ),
        (
            json!({"name": "a", "count": 3_000_000_000_i64}),
            vec![
                "<nil>: Invalid value: \"\": Checked value must be of type integer with format int32 in spec.count",
            ],
        ),
        (
            json!({"name": "a", "ratio": 2.5}),
            vec![
                "spec.ratio: Invalid value: 2.5: spec.ratio in body should be less than or equal to 1.5",
            ],
        ),
        (json!({"name": "a", "ratio": 1}), vec![]),
        (json!({"name": "a", "count": 2.0}), vec![]),
        (
            json!({"name": "a", "when": "yesterday"}),
            vec![
                "spec.when: Invalid value: \"yesterday\": spec.when in body must be of type date-time: \"yesterday\"",
            ],
        ),
        (json!({"name": "a", "when": "2024-05-01T10:00:00Z"}), vec![]),
        (
            json!({"name": "a", "data": "%%%"}),
            vec![
                "spec.data: Invalid value: \"%%%\": spec.data in body must be of type byte: \"%%%\"",
            ],
        ),
        (
            json!({"name": "a", "tags": []}),
            vec!["spec.tags: Invalid value: 0: spec.tags in body should have at least 1 items"],
        ),
        (
            json!({"name": "a", "tags": ["x", "y", "z"]}),
            vec!["spec.tags: Too many: 3: must have at most 2 items"],
        ),
        (
            json!({"name": "a", "tags": ["x", "x"]}),
            vec!["spec.tags[1]: Duplicate value: \"x\""],
        ),
        (
            json!({"name": "a", "labels": {"k": "long"}}),
            vec!["spec.labels.k: Too long: may not be more than 3 bytes"],
        ),
        (json!({"name": "a", "maybe": null}), vec![]),
        (
            json!({"name": null}),
            vec![
                "spec.name: Invalid value: \"null\": spec.name in body must be of type string: \"null\"",
            ],
        ),
        (
            json!({"name": 5}),
            vec![
                "spec.name: Invalid value: \"integer\": spec.name in body must be of type string: \"integer\"",
            ],
        ),
        (json!({"name": "a", "port": 80}), vec![]),
        (json!({"name": "a", "port": "http"}), vec![]),
        (
            json!({"name": "a", "port": true}),
            vec![
                "spec.port: Invalid value: \"boolean\": spec.port in body must be of type integer,string: \"boolean\"",
                "<nil>: Invalid value: \"\": \"spec.port\" must validate at least one schema (anyOf)",
                "spec.port: Invalid value: \"boolean\": spec.port in body must be of type integer: \"boolean\"",
            ],
        ),
        (
            json!({"name": "a", "mode": "off"}),
            vec!["<nil>: Invalid value: \"\": \"spec.mode\" must not validate the schema (not)"],
        ),
        (json!({"name": "a", "mode": "on"}), vec![]),
        (
            json!({"name": "a", "level": 15}),
            vec![
                "<nil>: Invalid value: \"\": \"spec.level\" must validate one and only one schema (oneOf). Found 2 valid alternatives",
            ],
        ),
        (json!({"name": "a", "level": 5}), vec![]),
        (
            json!({"name": "a", "code": "ab", "count": 2, "ratio": 0.5, "tags": ["x"], "labels": {"k": "v"}, "extra": 1}),
            vec!["spec: Too many: 7: must have at most 6 items"],
        ),
    ];
    for (spec, want) in cases {
        assert_eq!(validate(&s, spec.clone()), want, "{spec}");
    }
}

#[test]
fn list_map_with_composite_keys() {
    let s = schema(json!({
        "type": "array",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["port", "protocol"],
        "items": {"type": "object", "required": ["port"], "properties": {
            "port": {"type": "integer"}, "protocol": {"type": "string", "default": "TCP"}}}
    }));
    let mut obj = json!({"spec": [{"port": 80}, {"port": 80, "protocol": "UDP"}, {"port": 80}]});
    s.apply_defaults(&mut obj);
    assert_eq!(obj["spec"][0], json!({"port": 80, "protocol": "TCP"}));
    let errors: Vec<String> = s
        .validate(&obj, None)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        errors,
        vec!["spec[2]: Duplicate value: {\"port\":80,\"protocol\":\"TCP\"}"]
    );
}

#[test]
fn cel_messages_reasons_and_field_paths() {
    let s = schema(json!({
        "type": "object",
        "properties": {
            "min": {"type": "integer"},
            "max": {"type": "integer"},
            "name": {"type": "string"}
        },
        "x-kubernetes-validations": [
            {"rule": "self.min <= self.max", "messageExpression": "'min ' + string(self.min) + ' exceeds max ' + string(self.max)", "fieldPath": ".min"},
            {"rule": "!has(self.name) || self.name != 'root'", "reason": "FieldValueForbidden", "message": "root is reserved"},
            {"rule": "self.min >= 0"}
        ]
    }));
    let cases: Vec<(Value, Vec<&str>)> = vec![
        (json!({"min": 1, "max": 2}), vec![]),
        (
            json!({"min": 3, "max": 2}),
            vec!["spec.min: Invalid value: min 3 exceeds max 2"],
        ),
        (
            json!({"min": 1, "max": 2, "name": "root"}),
            vec!["spec: Forbidden: root is reserved"],
        ),
        (
            json!({"min": -1, "max": 2}),
            vec!["spec: Invalid value: failed rule: self.min >= 0"],
        ),
        (
            json!({"max": 2}),
            vec![
                "spec: Invalid value: \"object\": no such key: min evaluating rule: self.min <= self.max",
                "spec: Invalid value: \"object\": no such key: min evaluating rule: self.min >= 0",
            ],
        ),
    ];
    for (spec, want) in cases {
        assert_eq!(validate(&s, spec.clone()), want, "{spec}");
    }
}

#[test]
fn pruning_honours_preserve_unknown_fields_and_embedded_resources() {
    let s = schema(json!({
        "type": "object",
        "properties": {
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {"known": {"type": "object", "properties": {"a": {"type": "string"}}}}},
            "template": {"type": "object", "x-kubernetes-embedded-resource": true, "properties": {"spec": {"type": "object"}}},
            "items": {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "string"}}}},
            "keep": {"type": "string", "nullable": true},
            "drop": {"type": "string"},
            "dflt": {"type": "string", "default": "d"}
        }
    }));
    let mut obj = json!({
        "apiVersion": "x/v1", "kind": "K", "metadata": {"name": "n"}, "stray": 1,
        "spec": {
            "free": {"anything": {"deep": 1}, "known": {"a": "x", "b": "y"}},
            "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}, "status": {}},
            "items": [{"a": "x", "bar": 1}, {"bar": 2}],
            "keep": null, "drop": null, "dflt": null
        }
    });
    let removed = s.prune(&mut obj);
    assert_eq!(
        removed,
        vec![
            "spec.free.known.b",
            "spec.items[0].bar",
            "spec.items[1].bar",
            "spec.template.status",
            "stray"
        ]
    );
    assert_eq!(obj["spec"]["free"]["anything"], json!({"deep": 1}));
    assert_eq!(obj["spec"]["template"]["metadata"], json!({"name": "p"}));
    assert!(
        obj["spec"].get("drop").is_none(),
        "a non-nullable null without default is dropped"
    );
    assert_eq!(obj["spec"]["keep"], Value::Null);
    s.apply_defaults(&mut obj);
    assert_eq!(
        obj["spec"]["dflt"],
        json!("d"),
        "a non-nullable null takes the default"
    );
    assert_eq!(obj["metadata"], json!({"name": "n"}));
}

#[test]
fn deep_values_do_not_overflow_the_stack() {
    let s = schema(json!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
        "x-kubernetes-validations": [{"rule": "has(self.x)", "message": "x is required"}]
    }));
    let mut deep = json!(1);
    for _ in 0..5000 {
        let mut m = serde_json::Map::new();
        m.insert("x".into(), deep);
        deep = Value::Object(m);
    }
    let obj = {
        let mut m = serde_json::Map::new();
        m.insert("spec".into(), deep);
        Value::Object(m)
    };
    let result = std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn(move || {
            let out = std::thread::scope(|scope| {
                std::thread::Builder::new()
                    .stack_size(1 << 20)
                    .spawn_scoped(scope, || {
                        let mut copy_errors = s.validate(&obj, None);
                        copy_errors.extend(s.validate(&obj, Some(&obj)));
                        copy_errors
                            .iter()
                            .map(ToString::to_string)
                            .collect::<Vec<_>>()
                    })
                    .unwrap()
                    .join()
                    .unwrap()
            });
            drop(obj);
            out
        })
        .unwrap()
        .join()
        .unwrap();
    assert_eq!(result.len(), 2, "{result:?}");
    assert!(
        result[0].starts_with("spec: Invalid value: \"object\": object is nested too deeply"),
        "{result:?}"
    );
}

#[test]
fn duplicate_keys_of_a_request_body() {
    let body = br#"{"apiVersion":"etcd.operator.rs/v1alpha1","kind":"EtcdCluster","spec":{"size":1,"size":3,"version":"3.5.17"}}"#;
    assert_eq!(duplicate_fields(body).unwrap(), vec!["spec.size"]);
}

#[test]
fn compiled_schemas_can_be_shared_between_threads() {
    fn shareable<T: Send + Sync>() {}
    shareable::<StructuralSchema>();
}

//! What CRD registration refuses, with the apiserver's messages.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use localkube_schema::StructuralSchema;
use serde_json::{Value, json};

fn errors_of(schema: Value) -> Vec<String> {
    match StructuralSchema::compile(&schema) {
        Ok(_) => Vec::new(),
        Err(errors) => errors.iter().map(ToString::to_string).collect(),
    }
}

fn with_spec(spec: Value) -> Value {
    json!({"type": "object", "properties": {"spec": spec}})
}

#[test]
fn unsupported_cel_function_refuses_the_crd() {
    let schema = with_spec(json!({
        "type": "object",
        "properties": {"foo": {"type": "string"}},
        "x-kubernetes-validations": [{"rule": "self.foo.bogusFn()"}]
    }));
    assert_eq!(
        errors_of(schema),
        vec![
            "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Invalid value: \
             {\"Rule\":\"self.foo.bogusFn()\",\"Message\":\"\",\"MessageExpression\":\"\",\"Reason\":null,\"FieldPath\":\"\",\"OptionalOldSelf\":null}: \
             compilation failed: ERROR: <input>:1:17: undeclared reference to 'bogusFn' (in container '')\n | self.foo.bogusFn()\n | ................^"
        ]
    );
}

#[test]
fn cel_problems_found_at_registration() {
    let cases = [
        (
            json!({"type": "object", "properties": {"a": {"type": "integer"}}, "x-kubernetes-validations": [{"rule": "self.b > 0"}]}),
            "undefined field 'b'",
        ),
        (
            json!({"type": "object", "x-kubernetes-validations": [{"rule": "other > 0"}]}),
            "undeclared reference to 'other'",
        ),
        (
            json!({"type": "object", "x-kubernetes-validations": [{"rule": "self.a >"}]}),
            "compilation failed: ERROR: <input>:1:",
        ),
        (
            json!({"type": "object", "x-kubernetes-validations": [{"rule": "true", "messageExpression": "bogus()"}]}),
            "messageExpression compilation failed: ERROR: <input>:1:6: undeclared reference to 'bogus' (in container '')",
        ),
        (
            json!({"type": "array", "items": {"type": "string", "x-kubernetes-validations": [{"rule": "self == oldSelf"}]}}),
            "properties[spec].items.x-kubernetes-validations[0].rule: Invalid value: \"self == oldSelf\": oldSelf cannot be used on the uncorrelatable portion of the schema within spec.validation.openAPIV3Schema.properties[spec]",
        ),
        (
            json!({"type": "object", "x-kubernetes-validations": [{"rule": "true", "optionalOldSelf": true}]}),
            "x-kubernetes-validations[0].optionalOldSelf: Invalid value: true: may not be set if oldSelf is not used in rule",
        ),
        (
            json!({"type": "object", "x-kubernetes-validations": [{"rule": " "}]}),
            "x-kubernetes-validations[0].rule: Required value: rule is not specified",
        ),
        (
            json!({"type": "object", "x-kubernetes-validations": [{"rule": "true", "reason": "Nope"}]}),
            "x-kubernetes-validations[0].reason: Unsupported value: \"Nope\": supported values: \"FieldValueDuplicate\", \"FieldValueForbidden\", \"FieldValueInvalid\", \"FieldValueRequired\"",
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "string"}}, "x-kubernetes-validations": [{"rule": "true", "fieldPath": ".b"}]}),
            "x-kubernetes-validations[0].fieldPath: Invalid value: \".b\": must be a valid path",
        ),
    ];
    for (spec, want) in cases {
        let errors = errors_of(with_spec(spec.clone()));
        assert!(
            errors.iter().any(|e| e.contains(want)),
            "{spec}\nwant {want}\ngot {errors:#?}"
        );
    }
}

#[test]
fn non_structural_schemas_are_refused() {
    let cases: Vec<(Value, &str)> = vec![
        (
            with_spec(json!({"properties": {"a": {"type": "string"}}})),
            "spec.validation.openAPIV3Schema.properties[spec].type: Required value: must not be empty for specified object fields",
        ),
        (
            json!({"properties": {}}),
            "spec.validation.openAPIV3Schema.type: Required value: must not be empty at the root",
        ),
        (
            json!({"type": "string"}),
            "spec.validation.openAPIV3Schema.type: Invalid value: \"string\": must be object at the root",
        ),
        (
            with_spec(json!({"type": "array"})),
            "spec.validation.openAPIV3Schema.properties[spec].items: Required value: must be specified",
        ),
        (
            with_spec(json!({"type": "array", "items": {}})),
            "spec.validation.openAPIV3Schema.properties[spec].items.type: Required value: must not be empty for specified array items",
        ),
        (
            with_spec(json!({"$ref": "#/definitions/x", "type": "object"})),
            "spec.validation.openAPIV3Schema.properties[spec].$ref: Forbidden: $ref is not supported",
        ),
        (
            with_spec(json!({"type": "object", "anyOf": [{"type": "object"}]})),
            "spec.validation.openAPIV3Schema.properties[spec].anyOf[0].type: Forbidden: must be empty to be structural",
        ),
        (
            with_spec(json!({"type": "string", "uniqueItems": true})),
            "spec.validation.openAPIV3Schema.properties[spec].uniqueItems: Forbidden: uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
        ),
        (
            json!({"type": "object", "properties": {"metadata": {"type": "object", "properties": {"labels": {"type": "object"}}}}}),
            "spec.validation.openAPIV3Schema.properties[metadata]: Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified",
        ),
        (
            json!({"type": "object", "properties": {"metadata": {"type": "object", "default": {}}}}),
            "spec.validation.openAPIV3Schema.properties[metadata].default: Forbidden: must not be set in top-level metadata",
        ),
        (
            json!({"type": "object", "nullable": true}),
            "spec.validation.openAPIV3Schema.nullable: Forbidden: nullable cannot be true at the root",
        ),
        (
            with_spec(
                json!({"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "string"}}),
            ),
            "spec.validation.openAPIV3Schema.properties[spec].additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive",
        ),
        (
            with_spec(json!({"type": "string", "pattern": "^(?!x)"})),
            "spec.validation.openAPIV3Schema.properties[spec].pattern: Invalid value: \"^(?!x)\": must be a valid regular expression, but isn't: error parsing regexp: invalid or unsupported Perl syntax: `(?!`",
        ),
        (
            with_spec(json!({"type": "null"})),
            "spec.validation.openAPIV3Schema.properties[spec].type: Unsupported value: \"null\": supported values: \"array\", \"boolean\", \"integer\", \"number\", \"object\", \"string\"",
        ),
        (
            with_spec(json!({"type": "object", "x-kubernetes-embedded-resource": true})),
            "spec.validation.openAPIV3Schema.properties[spec].properties: Required value: must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields",
        ),
        (
            json!({"type": "object", "properties": {"spec": {"type": "object"}}, "anyOf": [{"properties": {"other": {}}}]}),
            "spec.validation.openAPIV3Schema.properties[other]: Required value: because it is defined in spec.validation.openAPIV3Schema.anyOf[0].properties[other]",
        ),
    ];
    for (schema, want) in cases {
        let errors = errors_of(schema.clone());
        assert!(
            errors.iter().any(|e| e == want),
            "{schema}\nwant {want}\ngot {errors:#?}"
        );
    }
}

#[test]
fn list_maps_and_defaults_are_checked() {
    let cases: Vec<(Value, &str)> = vec![
        (
            with_spec(
                json!({"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                "items": {"type": "object", "properties": {"name": {"type": "string"}}}}),
            ),
            "spec.validation.openAPIV3Schema.properties[spec].items.properties[name].default: Required value: this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property",
        ),
        (
            with_spec(
                json!({"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["id"],
                "items": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}}),
            ),
            "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-list-map-keys: Invalid value: [\"id\"]: entries must all be names of item properties",
        ),
        (
            with_spec(
                json!({"type": "array", "x-kubernetes-list-type": "bag", "items": {"type": "string"}}),
            ),
            "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-list-type: Unsupported value: \"bag\": supported values: \"atomic\", \"set\", \"map\"",
        ),
        (
            with_spec(
                json!({"type": "object", "properties": {"size": {"type": "integer", "minimum": 1, "default": 0}}}),
            ),
            "spec.validation.openAPIV3Schema.properties[spec].properties[size].default: Invalid value: 0:  in body should be greater than or equal to 1",
        ),
        (
            with_spec(
                json!({"type": "object", "default": {"unknown": 1}, "properties": {"a": {"type": "string"}}}),
            ),
            "spec.validation.openAPIV3Schema.properties[spec].default: Invalid value: {\"unknown\":1}: must not have unknown fields",
        ),
        (
            with_spec(
                json!({"type": "object", "default": {"a": "x"}, "properties": {"a": {"type": "string"}},
                "x-kubernetes-validations": [{"rule": "self.a != 'x'", "message": "not x"}]}),
            ),
            "spec.validation.openAPIV3Schema.properties[spec].default: Invalid value: not x",
        ),
    ];
    for (schema, want) in cases {
        let errors = errors_of(schema.clone());
        assert!(
            errors.iter().any(|e| e == want),
            "{schema}\nwant {want}\ngot {errors:#?}"
        );
    }
}

#[test]
fn versions_with_their_own_schema_report_under_their_path() {
    let errors = StructuralSchema::compile_at(
        &json!({"type": "string"}),
        "spec.versions[1].schema.openAPIV3Schema",
    )
    .unwrap_err();
    assert_eq!(
        errors[0].to_string(),
        "spec.versions[1].schema.openAPIV3Schema.type: Invalid value: \"string\": must be object at the root"
    );
}

/// Wraps `v` `depth` times without recursion (`json!` would serialize the inner value recursively).
fn nest(mut v: Value, depth: usize, wrap: impl Fn(Value) -> Value) -> Value {
    for _ in 0..depth {
        v = wrap(v);
    }
    v
}

#[test]
fn hostile_schemas_give_errors_not_crashes() {
    // 5000 levels of nesting: refused at the depth limit instead of overflowing the stack.
    let schema = nest(json!({"type": "string"}), 5000, |inner| {
        let mut props = serde_json::Map::new();
        props.insert("a".into(), inner);
        let mut node = serde_json::Map::new();
        node.insert("type".into(), json!("object"));
        node.insert("properties".into(), Value::Object(props));
        Value::Object(node)
    });
    // Compiling runs on a 1 MiB stack; only dropping the 5000-deep input needs a big one.
    let errors = std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn(move || {
            let result = std::thread::scope(|scope| {
                std::thread::Builder::new()
                    .stack_size(1 << 20)
                    .spawn_scoped(scope, || {
                        StructuralSchema::compile(&schema)
                            .map(|_| ())
                            .map_err(|e| e.len())
                    })
                    .unwrap()
                    .join()
                    .unwrap()
            });
            drop(schema);
            result
        })
        .unwrap()
        .join()
        .unwrap();
    assert_eq!(errors, Err(1));

    for garbage in [
        json!(null),
        json!([]),
        json!({"type": 5}),
        json!({"type": "object", "properties": {"a": 1}}),
    ] {
        assert!(StructuralSchema::compile(&garbage).is_err(), "{garbage}");
    }
}

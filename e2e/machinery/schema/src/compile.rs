//! What CRD registration checks in an `openAPIV3Schema`, with the apiserver's messages
//! (`apiextensions/validation/validation.go` and `apiserver/schema/validation.go`), and the
//! construction of the [`Node`] tree.
//!
//! Two passes, like the apiserver: the schema checks first; only a schema without errors gets
//! its CEL rules compiled and its defaults validated (errors there would be noise otherwise).

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::cel;
use crate::field_error::{BadValue, FieldError};
use crate::model::{Additional, Node, Pattern, SchemaType};
use crate::path::FieldPath;
use crate::{formats, gofmt, goregex, openapi, prune};

/// Deeper schemas are refused: every walk over a schema is recursive.
pub(crate) const MAX_SCHEMA_DEPTH: usize = 64;

/// The type names the apiserver accepts, in the order it lists them.
const TYPES: [&str; 6] = ["array", "boolean", "integer", "number", "object", "string"];

#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
    Root,
    Item,
    Field,
}

/// Where in the schema a node sits, as far as the rules are concerned.
#[derive(Clone)]
struct Ctx {
    level: Level,
    /// Inside `allOf`/`anyOf`/`oneOf`/`not`: value validations only.
    nested: bool,
    /// `None` when defaults are allowed, else why not ("in top-level metadata"...).
    no_defaults: Option<String>,
    /// Inside the `apiVersion`, `kind` or `metadata` of the root or of an embedded resource.
    inside_meta: bool,
}

/// Compiles `schema`, reporting problems under `base` (e.g. `spec.validation.openAPIV3Schema`).
pub(crate) fn compile(schema: &Value, base: &FieldPath) -> Result<Node, Vec<FieldError>> {
    let mut errors = Vec::new();
    let ctx = Ctx {
        level: Level::Root,
        nested: false,
        no_defaults: None,
        inside_meta: false,
    };
    let mut root = build(schema, base, &ctx, &mut errors, 0);
    if root.nullable {
        errors.push(FieldError::forbidden(
            &base.child("nullable"),
            "nullable cannot be true at the root",
        ));
    }
    if let Some(obj) = schema.as_object() {
        completeness(obj, base, &mut errors);
    }
    if errors.is_empty() {
        compile_rules(&mut root, base, true, None, &mut errors);
    }
    if errors.is_empty() {
        validate_defaults(&root, &root, base, &mut errors);
    }
    if errors.is_empty() {
        Ok(root)
    } else {
        // The apiserver sorts structural errors by text; map iteration makes the rest random.
        errors.sort_by_key(|e| e.to_string());
        errors.dedup();
        Err(errors)
    }
}

/// Reads a keyword, reporting a value of the wrong JSON type.
struct Keywords<'a> {
    obj: &'a Map<String, Value>,
    path: &'a FieldPath,
}

impl Keywords<'_> {
    fn wrong(&self, key: &str, v: &Value, what: &str, errors: &mut Vec<FieldError>) {
        // Rendered (depth-limited) rather than cloned: the value may be anything.
        errors.push(FieldError::invalid(
            &self.path.child(key),
            BadValue::Rendered(gofmt::json(v)),
            format!("must be {what}"),
        ));
    }

    fn string(&self, key: &str, errors: &mut Vec<FieldError>) -> Option<String> {
        match self.obj.get(key)? {
            Value::String(s) => Some(s.clone()),
            Value::Null => None,
            v => {
                self.wrong(key, v, "a string", errors);
                None
            }
        }
    }

    fn boolean(&self, key: &str, errors: &mut Vec<FieldError>) -> Option<bool> {
        match self.obj.get(key)? {
            Value::Bool(b) => Some(*b),
            Value::Null => None,
            v => {
                self.wrong(key, v, "a boolean", errors);
                None
            }
        }
    }

    fn number(&self, key: &str, errors: &mut Vec<FieldError>) -> Option<f64> {
        match self.obj.get(key)? {
            Value::Number(n) => n.as_f64(),
            Value::Null => None,
            v => {
                self.wrong(key, v, "a number", errors);
                None
            }
        }
    }

    fn integer(&self, key: &str, errors: &mut Vec<FieldError>) -> Option<i64> {
        match self.obj.get(key)? {
            Value::Number(n) if n.as_i64().is_some() => n.as_i64(),
            Value::Null => None,
            v => {
                self.wrong(key, v, "an integer", errors);
                None
            }
        }
    }

    fn strings(&self, key: &str, errors: &mut Vec<FieldError>) -> Vec<String> {
        match self.obj.get(key) {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) if items.iter().all(Value::is_string) => items
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect(),
            Some(v) => {
                self.wrong(key, v, "a list of strings", errors);
                Vec::new()
            }
        }
    }

    /// Present with a non-zero value (what Go's `reflect.DeepEqual` with the zero value sees).
    fn set(&self, key: &str) -> bool {
        match self.obj.get(key) {
            None | Some(Value::Null) | Some(Value::Bool(false)) => false,
            Some(Value::String(s)) => !s.is_empty(),
            Some(Value::Array(a)) => !a.is_empty(),
            Some(Value::Object(o)) => !o.is_empty(),
            Some(_) => true,
        }
    }
}

fn build(
    raw: &Value,
    path: &FieldPath,
    ctx: &Ctx,
    errors: &mut Vec<FieldError>,
    depth: usize,
) -> Node {
    if depth > MAX_SCHEMA_DEPTH {
        errors.push(FieldError::forbidden(
            path,
            format!("must not be nested more than {MAX_SCHEMA_DEPTH} levels deep"),
        ));
        return Node::default();
    }
    let Some(obj) = raw.as_object() else {
        errors.push(FieldError::invalid(
            path,
            BadValue::Rendered(gofmt::json(raw)),
            "must be a JSON schema object",
        ));
        return Node::default();
    };
    let kw = Keywords { obj, path };
    let mut node = Node::default();

    // --- type, format, generic keywords
    let type_name = kw.string("type", errors).unwrap_or_default();
    if !type_name.is_empty() && !TYPES.contains(&type_name.as_str()) {
        let supported: Vec<String> = TYPES.iter().map(|t| (*t).to_owned()).collect();
        errors.push(FieldError::not_supported(
            &path.child("type"),
            BadValue::string(&type_name),
            &supported,
        ));
    }
    if type_name == "null" {
        errors.push(FieldError::forbidden(
            &path.child("type"),
            "type cannot be set to null, use nullable as an alternative",
        ));
    }
    node.ty = SchemaType::parse(&type_name);
    node.nullable = kw.boolean("nullable", errors).unwrap_or(false);
    node.int_or_string = kw
        .boolean("x-kubernetes-int-or-string", errors)
        .unwrap_or(false);
    node.embedded = kw
        .boolean("x-kubernetes-embedded-resource", errors)
        .unwrap_or(false);
    let preserve = kw.boolean("x-kubernetes-preserve-unknown-fields", errors);
    node.preserve_unknown = preserve == Some(true);
    node.format = kw
        .string("format", errors)
        .filter(|f| formats::supported(f, node.ty));
    node.default = obj.get("default").filter(|d| !d.is_null()).cloned();
    node.list_type = kw.string("x-kubernetes-list-type", errors);
    node.list_map_keys = kw.strings("x-kubernetes-list-map-keys", errors);
    node.map_type = kw.string("x-kubernetes-map-type", errors);

    // --- value validations
    node.enumeration = match obj.get("enum") {
        None | Some(Value::Null) => None,
        Some(Value::Array(values)) => Some(values.clone()),
        Some(v) => {
            kw.wrong("enum", v, "a list", errors);
            None
        }
    };
    node.maximum = kw.number("maximum", errors);
    node.exclusive_maximum = kw.boolean("exclusiveMaximum", errors).unwrap_or(false);
    node.minimum = kw.number("minimum", errors);
    node.exclusive_minimum = kw.boolean("exclusiveMinimum", errors).unwrap_or(false);
    node.multiple_of = kw.number("multipleOf", errors);
    node.max_length = kw.integer("maxLength", errors);
    node.min_length = kw.integer("minLength", errors);
    node.max_items = kw.integer("maxItems", errors);
    node.min_items = kw.integer("minItems", errors);
    node.max_properties = kw.integer("maxProperties", errors);
    node.min_properties = kw.integer("minProperties", errors);
    node.unique_items = kw.boolean("uniqueItems", errors).unwrap_or(false);
    node.required = kw.strings("required", errors);
    if let Some(pattern) = kw.string("pattern", errors).filter(|p| !p.is_empty()) {
        match goregex::compile(&pattern) {
            Ok(regex) => {
                node.pattern = Some(Pattern {
                    source: pattern,
                    regex,
                })
            }
            Err(why) => errors.push(FieldError::invalid(
                &path.child("pattern"),
                BadValue::string(&pattern),
                format!("must be a valid regular expression, but isn't: {why}"),
            )),
        }
    }

    standard_checks(&kw, &node, ctx, errors);
    if node.unique_items {
        errors.push(FieldError::forbidden(
            &path.child("uniqueItems"),
            "uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
        ));
    }

    // --- children
    let no_properties = Map::new();
    let properties = match obj.get("properties") {
        Some(Value::Object(p)) => p,
        None | Some(Value::Null) => &no_properties,
        Some(v) => {
            kw.wrong("properties", v, "an object", errors);
            &no_properties
        }
    };
    match obj.get("additionalProperties") {
        None | Some(Value::Null) => {}
        Some(Value::Bool(b)) => {
            if !properties.is_empty() && !*b {
                errors.push(FieldError::forbidden(
                    &path.child("additionalProperties"),
                    "additionalProperties and properties are mutual exclusive",
                ));
            }
            node.additional = Additional::Bool(*b);
        }
        Some(schema) => {
            if !properties.is_empty() {
                errors.push(FieldError::forbidden(
                    &path.child("additionalProperties"),
                    "additionalProperties and properties are mutual exclusive",
                ));
            }
            let mut sub = Ctx {
                level: Level::Field,
                ..ctx.clone()
            };
            if ctx.inside_meta {
                sub.no_defaults =
                    Some("inside additionalProperties applying to object metadata".to_owned());
            }
            node.additional = Additional::Schema(Box::new(build(
                schema,
                &path.child("additionalProperties"),
                &sub,
                errors,
                depth + 1,
            )));
        }
    }
    let checks_metadata = ctx.level == Level::Root || node.embedded;
    let mut props = BTreeMap::new();
    for (name, schema) in properties {
        let mut sub = Ctx {
            level: Level::Field,
            ..ctx.clone()
        };
        if checks_metadata
            && matches!(name.as_str(), "metadata" | "kind" | "apiVersion")
            && !ctx.nested
        {
            sub.inside_meta = true;
            if ctx.level == Level::Root {
                sub.no_defaults = Some(format!("in top-level {name}"));
            }
        }
        let child_path = path.child("properties").key(name);
        props.insert(
            name.clone(),
            build(schema, &child_path, &sub, errors, depth + 1),
        );
    }
    node.properties = props;
    match obj.get("items") {
        None | Some(Value::Null) => {}
        Some(Value::Array(_)) => {
            errors.push(FieldError::forbidden(
                &path.child("items"),
                "items must be a schema object and not an array",
            ));
        }
        Some(schema) => {
            let sub = Ctx {
                level: Level::Item,
                ..ctx.clone()
            };
            node.items = Some(Box::new(build(
                schema,
                &path.child("items"),
                &sub,
                errors,
                depth + 1,
            )));
        }
    }
    let nested = Ctx {
        nested: true,
        ..ctx.clone()
    };
    let int_or_string_any_of = is_int_or_string_pair(obj.get("anyOf"));
    for (key, target) in [
        ("allOf", &mut node.all_of),
        ("anyOf", &mut node.any_of),
        ("oneOf", &mut node.one_of),
    ] {
        match obj.get(key) {
            None | Some(Value::Null) => {}
            Some(Value::Array(branches)) => {
                for (i, branch) in branches.iter().enumerate() {
                    let branch_path = path.child(key).index(i);
                    // The int-or-string idiom `anyOf: [{type: integer}, {type: string}]` may name types.
                    let built = if key == "anyOf" && int_or_string_any_of {
                        build(branch, &branch_path, &nested, &mut Vec::new(), depth + 1)
                    } else {
                        build(branch, &branch_path, &nested, errors, depth + 1)
                    };
                    target.push(built);
                }
            }
            Some(v) => kw.wrong(key, v, "a list of schemas", errors),
        }
    }
    if let Some(not) = obj.get("not").filter(|v| !v.is_null()) {
        node.not = Some(Box::new(build(
            not,
            &path.child("not"),
            &nested,
            errors,
            depth + 1,
        )));
    }

    extension_checks(&kw, &node, preserve, errors);
    if ctx.nested {
        nested_checks(&kw, &node, errors);
    } else {
        structural_checks(&kw, &node, ctx, errors);
        node.rules = cel::read_rules(raw, &node, path, errors);
    }
    node
}

/// `anyOf: [{type: integer}, {type: string}]` exactly.
fn is_int_or_string_pair(any_of: Option<&Value>) -> bool {
    let Some(Value::Array(branches)) = any_of else {
        return false;
    };
    branches.len() == 2
        && branches[0] == serde_json::json!({"type": "integer"})
        && branches[1] == serde_json::json!({"type": "string"})
}

/// `specStandardValidatorV3.validate`: keywords CRDs never support, and defaults where the
/// apiserver cannot apply them.
fn standard_checks(kw: &Keywords<'_>, node: &Node, ctx: &Ctx, errors: &mut Vec<FieldError>) {
    let path = kw.path;
    if node.default.is_some()
        && let Some(reason) = &ctx.no_defaults
    {
        errors.push(FieldError::forbidden(
            &path.child("default"),
            format!("must not be set {reason}"),
        ));
    }
    for (key, message) in [
        ("id", "id is not supported"),
        ("additionalItems", "additionalItems is not supported"),
        ("patternProperties", "patternProperties is not supported"),
        ("definitions", "definitions is not supported"),
        ("dependencies", "dependencies is not supported"),
        ("$ref", "$ref is not supported"),
    ] {
        if kw.set(key) {
            errors.push(FieldError::forbidden(&path.child(key), message));
        }
    }
    if ctx.inside_meta && node.embedded {
        errors.push(FieldError::forbidden(
            &path.child("x-kubernetes-embedded-resource"),
            "must not be used inside of resource meta",
        ));
    }
}

/// The `x-kubernetes-*` extension rules of `ValidateCustomResourceDefinitionOpenAPISchema`.
fn extension_checks(
    kw: &Keywords<'_>,
    node: &Node,
    preserve: Option<bool>,
    errors: &mut Vec<FieldError>,
) {
    let path = kw.path;
    let type_name = node.ty.map(SchemaType::name).unwrap_or("");
    if preserve == Some(false) {
        errors.push(FieldError::invalid(
            &path.child("x-kubernetes-preserve-unknown-fields"),
            BadValue::Json(Value::Bool(false)),
            "must be true or undefined",
        ));
    }
    if let Some(map_type) = &node.map_type {
        if node.ty != Some(SchemaType::Object) {
            let detail = "must be object if x-kubernetes-map-type is specified";
            errors.push(type_error(path, type_name, detail));
        }
        if map_type != "atomic" && map_type != "granular" {
            errors.push(FieldError::not_supported(
                &path.child("x-kubernetes-map-type"),
                BadValue::string(map_type),
                &["atomic".into(), "granular".into()],
            ));
        }
    }
    if let Some(list_type) = &node.list_type {
        if node.ty != Some(SchemaType::Array) {
            errors.push(type_error(
                path,
                type_name,
                "must be array if x-kubernetes-list-type is specified",
            ));
        } else if list_type == "set"
            && let Some(items) = node.items.as_deref()
        {
            let atomic = "must be atomic as item of a list with x-kubernetes-list-type=set";
            match items.ty {
                Some(SchemaType::Array)
                    if items.list_type.as_deref().is_some_and(|t| t != "atomic") =>
                {
                    let v = BadValue::string(items.list_type.clone().unwrap_or_default());
                    errors.push(FieldError::invalid(
                        &path.child("items").child("x-kubernetes-list-type"),
                        v,
                        atomic,
                    ));
                }
                Some(SchemaType::Object) if items.map_type.as_deref() != Some("atomic") => {
                    let v = items
                        .list_type
                        .clone()
                        .map_or(BadValue::Json(Value::Null), BadValue::string);
                    errors.push(FieldError::invalid(
                        &path.child("items").child("x-kubernetes-map-type"),
                        v,
                        atomic,
                    ));
                }
                _ => {}
            }
        }
        if !matches!(list_type.as_str(), "atomic" | "set" | "map") {
            errors.push(FieldError::not_supported(
                &path.child("x-kubernetes-list-type"),
                BadValue::string(list_type),
                &["atomic".into(), "set".into(), "map".into()],
            ));
        }
    }
    if !node.list_map_keys.is_empty() {
        match node.list_type.as_deref() {
            None => errors.push(FieldError::required(
                &path.child("x-kubernetes-list-type"),
                "must be map if x-kubernetes-list-map-keys is non-empty",
            )),
            Some("map") => {}
            Some(other) => errors.push(FieldError::invalid(
                &path.child("x-kubernetes-list-type"),
                BadValue::string(other),
                "must be map if x-kubernetes-list-map-keys is non-empty",
            )),
        }
    }
    if node.list_type.as_deref() == Some("map") {
        list_map_checks(path, node, errors);
    }
}

fn type_error(path: &FieldPath, type_name: &str, detail: &str) -> FieldError {
    if type_name.is_empty() {
        FieldError::required(&path.child("type"), detail)
    } else {
        FieldError::invalid(&path.child("type"), BadValue::string(type_name), detail)
    }
}

fn list_map_checks(path: &FieldPath, node: &Node, errors: &mut Vec<FieldError>) {
    let keys_path = path.child("x-kubernetes-list-map-keys");
    let keys_value = || BadValue::Json(Value::from(node.list_map_keys.clone()));
    if node.list_map_keys.is_empty() {
        errors.push(FieldError::required(
            &keys_path,
            "must not be empty if x-kubernetes-list-type is map",
        ));
    }
    let Some(items) = node.items.as_deref() else {
        errors.push(FieldError::required(
            &path.child("items"),
            "must have a schema if x-kubernetes-list-type is map",
        ));
        return;
    };
    if items.ty != Some(SchemaType::Object) {
        errors.push(FieldError::invalid(
            &path.child("items").child("type"),
            BadValue::string(items.ty.map(SchemaType::name).unwrap_or("")),
            "must be object if parent array's x-kubernetes-list-type is map",
        ));
        return;
    }
    let mut seen = std::collections::HashSet::new();
    for k in &node.list_map_keys {
        match items.properties.get(k) {
            Some(prop) if matches!(prop.ty, Some(SchemaType::Array | SchemaType::Object)) => errors
                .push(FieldError::invalid(
                    &path.child("items").child("properties").key(k).child("type"),
                    BadValue::string("object"),
                    "must be a scalar type if parent array's x-kubernetes-list-type is map",
                )),
            Some(_) => {}
            None => errors.push(FieldError::invalid(
                &keys_path,
                keys_value(),
                "entries must all be names of item properties",
            )),
        }
        if !seen.insert(k) {
            errors.push(FieldError::invalid(
                &keys_path,
                keys_value(),
                "must not contain duplicate entries",
            ));
        }
    }
    // validateMapListKeysMapSet: keys must be present in every element, and never null.
    if items.nullable {
        errors.push(FieldError::forbidden(
            &path.child("items").child("nullable"),
            "cannot be nullable when x-kubernetes-list-type is map",
        ));
    }
    for k in &node.list_map_keys {
        let Some(prop) = items.properties.get(k) else {
            continue;
        };
        let key_path = path.child("items").child("properties").key(k);
        if !items.required.contains(k) && prop.default.is_none() {
            errors.push(FieldError::required(
                &key_path.child("default"),
                "this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property",
            ));
        }
        if prop.nullable {
            errors.push(FieldError::forbidden(
                &key_path.child("nullable"),
                "this property is in x-kubernetes-list-map-keys, so it cannot be nullable",
            ));
        }
    }
}

/// `validateStructuralInvariants` for a node of the structural part.
fn structural_checks(kw: &Keywords<'_>, node: &Node, ctx: &Ctx, errors: &mut Vec<FieldError>) {
    let path = kw.path;
    if node.list_type.as_deref() == Some("set")
        && let Some(items) = node.items.as_deref()
        && items.nullable
    {
        errors.push(FieldError::forbidden(
            &path.child("items").child("nullable"),
            "cannot be nullable when x-kubernetes-list-type is set",
        ));
    }
    if node.ty == Some(SchemaType::Array)
        && node.items.is_none()
        && !kw.obj.get("items").is_some_and(Value::is_array)
    {
        errors.push(FieldError::required(
            &path.child("items"),
            "must be specified",
        ));
    }
    if node.has_additional() && ctx.level == Level::Root {
        errors.push(FieldError::forbidden(
            &path.child("additionalProperties"),
            "must not be used at the root",
        ));
    }
    if node.int_or_string && node.preserve_unknown {
        errors.push(FieldError::invalid(
            &path.child("x-kubernetes-preserve-unknown-fields"),
            BadValue::Json(Value::Bool(true)),
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    if node.int_or_string && node.embedded {
        errors.push(FieldError::invalid(
            &path.child("x-kubernetes-embedded-resource"),
            BadValue::Json(Value::Bool(true)),
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    let type_name = node.ty.map(SchemaType::name).unwrap_or("");
    if node.embedded && node.ty != Some(SchemaType::Object) {
        errors.push(type_error(
            path,
            type_name,
            "must be object if x-kubernetes-embedded-resource is true",
        ));
    } else if node.ty.is_none() && !node.int_or_string && !node.preserve_unknown {
        let detail = match ctx.level {
            Level::Root => "must not be empty at the root",
            Level::Item => "must not be empty for specified array items",
            Level::Field => "must not be empty for specified object fields",
        };
        // An unknown type name was already reported as unsupported.
        if kw
            .obj
            .get("type")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            errors.push(FieldError::required(&path.child("type"), detail));
        }
    }
    if node.embedded && node.has_additional() {
        errors.push(FieldError::forbidden(
            &path.child("additionalProperties"),
            "must not be used if x-kubernetes-embedded-resource is set",
        ));
    }
    if ctx.level == Level::Root && node.ty.is_some_and(|t| t != SchemaType::Object) {
        errors.push(FieldError::invalid(
            &path.child("type"),
            BadValue::string(type_name),
            "must be object at the root",
        ));
    }
    let checks_metadata = ctx.level == Level::Root || node.embedded;
    if checks_metadata {
        for meta in ["kind", "apiVersion"] {
            if let Some(prop) = node.properties.get(meta)
                && prop.ty != Some(SchemaType::String)
            {
                errors.push(FieldError::invalid(
                    &path.child("properties").key(meta).child("type"),
                    BadValue::string(prop.ty.map(SchemaType::name).unwrap_or("")),
                    "must be string",
                ));
            }
        }
    }
    if let Some(meta) = node.properties.get("metadata") {
        let meta_path = path.child("properties").key("metadata");
        if checks_metadata && meta.ty != Some(SchemaType::Object) {
            errors.push(FieldError::invalid(
                &meta_path.child("type"),
                BadValue::string(meta.ty.map(SchemaType::name).unwrap_or("")),
                "must be object",
            ));
        }
        if ctx.level == Level::Root
            && let Some(raw_meta) = kw
                .obj
                .get("properties")
                .and_then(|p| p.get("metadata"))
                .and_then(Value::as_object)
            && !metadata_only_names(raw_meta)
        {
            errors.push(FieldError::forbidden(
                &meta_path,
                "must not specify anything other than name and generateName, but metadata is implicitly specified",
            ));
        }
    }
    if node.embedded && !node.preserve_unknown && node.properties.is_empty() {
        errors.push(FieldError::required(
            &path.child("properties"),
            "must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields",
        ));
    }
}

/// The root `metadata` schema may only restrict `name` and `generateName` (and state its type).
fn metadata_only_names(meta: &Map<String, Value>) -> bool {
    let kw = Keywords {
        obj: meta,
        path: &FieldPath::nil(),
    };
    meta.keys().all(|k| match k.as_str() {
        "type" | "default" => true,
        "properties" => meta
            .get("properties")
            .and_then(Value::as_object)
            .is_none_or(|p| {
                p.keys()
                    .all(|name| name == "name" || name == "generateName")
            }),
        other => !kw.set(other),
    })
}

/// What a schema under `allOf`/`anyOf`/`oneOf`/`not` may not say (`validateNestedValueValidation`).
fn nested_checks(kw: &Keywords<'_>, node: &Node, errors: &mut Vec<FieldError>) {
    let path = kw.path;
    let forbid = |key: &str, message: &str, errors: &mut Vec<FieldError>| {
        errors.push(FieldError::forbidden(&path.child(key), message));
    };
    if node.ty.is_some() || kw.set("type") {
        forbid("type", "must be empty to be structural", errors);
    }
    if node.has_additional() {
        forbid(
            "additionalProperties",
            "must be undefined to be structural",
            errors,
        );
    }
    if node.default.is_some() {
        forbid("default", "must be undefined to be structural", errors);
    }
    for (key, message) in [
        ("title", "must be empty to be structural"),
        ("description", "must be empty to be structural"),
        ("nullable", "must be false to be structural"),
        (
            "x-kubernetes-preserve-unknown-fields",
            "must be false to be structural",
        ),
        (
            "x-kubernetes-embedded-resource",
            "must be false to be structural",
        ),
        (
            "x-kubernetes-int-or-string",
            "must be false to be structural",
        ),
        (
            "x-kubernetes-list-map-keys",
            "must be empty to be structural",
        ),
        (
            "x-kubernetes-list-type",
            "must be undefined to be structural",
        ),
        (
            "x-kubernetes-map-type",
            "must be undefined to be structural",
        ),
        ("x-kubernetes-validations", "must be empty to be structural"),
    ] {
        if kw.set(key) {
            forbid(key, message, errors);
        }
    }
    if node.properties.contains_key("metadata") {
        errors.push(FieldError::forbidden(
            &path.child("properties").key("metadata"),
            "must not be specified in a nested context",
        ));
    }
}

/// `validateStructuralCompleteness` (the apiserver checks the root's value validations only):
/// a field or list named under `allOf`/`anyOf`/`oneOf`/`not` must exist in the structural part.
fn completeness(root: &Map<String, Value>, base: &FieldPath, errors: &mut Vec<FieldError>) {
    for key in ["not", "allOf", "anyOf", "oneOf"] {
        let branches: Vec<(FieldPath, &Value)> = match root.get(key) {
            Some(Value::Array(list)) => list
                .iter()
                .enumerate()
                .map(|(i, b)| (base.child(key).index(i), b))
                .collect(),
            Some(v @ Value::Object(_)) => vec![(base.child(key), v)],
            _ => Vec::new(),
        };
        for (vpath, branch) in branches {
            nested_completeness(branch, Some(root), base, &vpath, errors, 0);
        }
    }
}

fn nested_completeness(
    v: &Value,
    s: Option<&Map<String, Value>>,
    spath: &FieldPath,
    vpath: &FieldPath,
    errors: &mut Vec<FieldError>,
    depth: usize,
) {
    if depth > MAX_SCHEMA_DEPTH {
        return;
    }
    let Some(v) = v.as_object() else { return };
    let Some(s) = s else {
        errors.push(FieldError::required(
            spath,
            format!("because it is defined in {vpath}"),
        ));
        return;
    };
    for key in ["not", "allOf", "anyOf", "oneOf"] {
        match v.get(key) {
            Some(Value::Array(list)) => {
                for (i, b) in list.iter().enumerate() {
                    nested_completeness(
                        b,
                        Some(s),
                        spath,
                        &vpath.child(key).index(i),
                        errors,
                        depth + 1,
                    );
                }
            }
            Some(b @ Value::Object(_)) => {
                nested_completeness(b, Some(s), spath, &vpath.child(key), errors, depth + 1)
            }
            _ => {}
        }
    }
    if let Some(items) = v.get("items") {
        let s_items = s.get("items").and_then(Value::as_object);
        nested_completeness(
            items,
            s_items,
            &spath.child("items"),
            &vpath.child("items"),
            errors,
            depth + 1,
        );
    }
    if let Some(Value::Object(props)) = v.get("properties") {
        for (k, vfld) in props {
            let s_fld = s
                .get("properties")
                .and_then(|p| p.get(k))
                .and_then(Value::as_object);
            let sp = spath.child("properties").key(k);
            let vp = vpath.child("properties").key(k);
            if s_fld.is_none() {
                errors.push(FieldError::required(
                    &sp,
                    format!("because it is defined in {vp}"),
                ));
            } else {
                nested_completeness(vfld, s_fld, &sp, &vp, errors, depth + 1);
            }
        }
    }
}

/// Second pass: compiles the CEL rules of every node of the structural part.
fn compile_rules(
    node: &mut Node,
    path: &FieldPath,
    is_resource_root: bool,
    uncorrelatable: Option<&FieldPath>,
    errors: &mut Vec<FieldError>,
) {
    let mut rules = std::mem::take(&mut node.rules);
    cel::compile_rules(
        &mut rules,
        node,
        is_resource_root,
        uncorrelatable,
        path,
        errors,
    );
    node.rules = rules;

    let map_correlatable = node
        .map_type
        .as_deref()
        .is_none_or(|t| t == "granular" || t == "atomic");
    for (name, child) in node.properties.iter_mut() {
        let below = if map_correlatable {
            uncorrelatable.cloned()
        } else {
            Some(path.clone())
        };
        compile_rules(
            child,
            &path.child("properties").key(name),
            child.embedded,
            below.as_ref(),
            errors,
        );
    }
    if let Additional::Schema(values) = &mut node.additional {
        compile_rules(
            values,
            &path.child("additionalProperties"),
            values.embedded,
            uncorrelatable,
            errors,
        );
    }
    let list_is_map = node.list_type.as_deref() == Some("map");
    if let Some(items) = node.items.as_deref_mut() {
        let below = if list_is_map || uncorrelatable.is_some() {
            uncorrelatable.cloned()
        } else {
            Some(path.clone())
        };
        compile_rules(
            items,
            &path.child("items"),
            items.embedded,
            below.as_ref(),
            errors,
        );
    }
}

/// Second pass: every `default` must survive pruning and validate against its schema
/// (`structuraldefaulting.ValidateDefaults`).
fn validate_defaults(node: &Node, root: &Node, path: &FieldPath, errors: &mut Vec<FieldError>) {
    if let Some(default) = &node.default {
        let at = path.child("default");
        let mut pruned = default.clone();
        let is_root = std::ptr::eq(node, root);
        prune::prune_subtree(node, &mut pruned, is_root || node.embedded);
        if &pruned != default {
            errors.push(FieldError::invalid(
                &at,
                BadValue::Json(default.clone()),
                "must not have unknown fields",
            ));
        }
        let schema_errors = openapi::validate(node, &at, default, None);
        if schema_errors.is_empty() {
            cel::eval::Evaluator::new().validate(node, &at, default, Some(default), false, errors);
        } else {
            errors.extend(schema_errors);
        }
    }
    for (name, child) in &node.properties {
        validate_defaults(child, root, &path.child("properties").key(name), errors);
    }
    if let Some(items) = node.items.as_deref() {
        validate_defaults(items, root, &path.child("items"), errors);
    }
}

/// A node compiled without checks, for unit tests of the modules that read nodes.
#[cfg(test)]
pub(crate) fn compile_node_for_tests(schema: &Value) -> Node {
    let mut errors = Vec::new();
    let ctx = Ctx {
        level: Level::Field,
        nested: false,
        no_defaults: None,
        inside_meta: false,
    };
    build(schema, &FieldPath::new("test"), &ctx, &mut errors, 0)
}

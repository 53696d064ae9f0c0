//! Schema validation with kube-openapi's algorithm and words (`pkg/validation/validate`), and the
//! apiextensions mapping of its results to field errors (`kubeOpenAPIResultToFieldErrors`).
//!
//! Each node runs the validators in kube-openapi's order: type, allOf/anyOf/oneOf/not, string,
//! format, number, array, enum, object. Messages name the field with its kube-openapi path
//! (`spec.size in body should be ...`); error paths are that name below `base`.

use serde_json::{Map, Value};

use crate::field_error::{BadValue, FieldError};
use crate::formats;
use crate::gofmt;
use crate::model::{Additional, Node, SchemaType};
use crate::path::FieldPath;

/// Validates `v` against `node`. `base` is the field path the names hang from (the nil path for
/// a whole object, `...default` for a default value). `old` enables ratcheting on update:
/// a value equal to the old value at the same place reports nothing.
pub(crate) fn validate(
    node: &Node,
    base: &FieldPath,
    v: &Value,
    old: Option<&Value>,
) -> Vec<FieldError> {
    let mut run = Run {
        base,
        errors: Vec::new(),
    };
    run.node(node, "", v, old);
    run.errors
}

struct Run<'a> {
    base: &'a FieldPath,
    errors: Vec<FieldError>,
}

impl Run<'_> {
    /// The field path of a kube-openapi name: `base.child(name without its leading dot)`.
    fn path(&self, name: &str) -> FieldPath {
        if name.is_empty() || name == "." {
            self.base.clone()
        } else {
            self.base.child(name.trim_start_matches('.'))
        }
    }

    /// Errors kube-openapi creates with `errors.New` (not `*Validation`): the apiserver reports
    /// them on `base` with an empty value.
    fn plain(&mut self, message: String) {
        self.errors.push(FieldError::invalid(
            self.base,
            BadValue::string(""),
            message,
        ));
    }

    fn invalid(&mut self, name: &str, value: Value, message: String) {
        let path = self.path(name);
        self.errors
            .push(FieldError::invalid(&path, BadValue::Json(value), message));
    }

    fn node(&mut self, node: &Node, name: &str, v: &Value, old: Option<&Value>) {
        if old.is_some_and(|o| crate::value_eq::equal(o, v)) {
            return;
        }
        if v.is_null() {
            self.type_check(node, name, v);
            self.enumeration(node, name, v);
            return;
        }
        // A type error does not stop the other validators (kube-openapi merges them all).
        self.type_check(node, name, v);
        self.combinators(node, name, v);
        if let Value::String(s) = v {
            self.string(node, name, s);
            self.format(node, name, s);
        }
        if let Value::Number(n) = v {
            self.number(node, name, n);
        }
        if let Value::Array(items) = v {
            self.array(node, name, items, old.and_then(Value::as_array));
        }
        self.enumeration(node, name, v);
        if let Value::Object(map) = v {
            self.object(node, name, map, old.and_then(Value::as_object));
        }
    }

    /// The schema's `type` as kube-openapi holds it (`integer,string` for int-or-string).
    fn types(node: &Node) -> Vec<&'static str> {
        if node.int_or_string {
            vec!["integer", "string"]
        } else {
            node.ty.map(|t| vec![t.name()]).unwrap_or_default()
        }
    }

    /// The type validator.
    fn type_check(&mut self, node: &Node, name: &str, v: &Value) {
        let types = Self::types(node);
        let format = node.format.as_deref().unwrap_or("");
        if types.is_empty() && format.is_empty() {
            return;
        }
        let has = |t: &str| types.contains(&t);
        let fail = |run: &mut Self, expected: &str, got: &str| {
            let message = format!(
                "{name} in body must be of type {expected}: {}",
                gofmt::quote(got)
            );
            let path = run.path(name);
            run.errors.push(FieldError::type_invalid(
                &path,
                BadValue::string(got),
                message,
            ));
        };
        if v.is_null() {
            if !types.is_empty() && !node.nullable {
                fail(self, &types.join(","), "null");
            }
            return;
        }
        let (actual, actual_format) = match v {
            Value::Bool(_) => ("boolean", ""),
            Value::String(_) => ("string", ""),
            Value::Number(n) if n.is_i64() || n.is_u64() => ("integer", "int64"),
            Value::Number(_) => ("number", "float64"),
            Value::Array(_) => ("array", ""),
            Value::Object(_) => ("object", ""),
            Value::Null => ("null", ""),
        };
        let is_float_int = actual == "number"
            && v.as_f64()
                .is_some_and(|f| f.fract() == 0.0 && f.is_finite())
            && has("integer");
        let is_int_float = actual == "integer" && has("number");
        let is_string_or_array = matches!(v, Value::String(_) | Value::Array(_));
        if !(is_string_or_array
            || format.is_empty()
            || has(actual)
            || format == actual_format
            || is_float_int
            || is_int_float)
        {
            return fail(self, format, actual_format);
        }
        // A string format on a non-numeric type skips the type check (kube-openapi quirk).
        if is_string_or_array && !(has("number") || has("integer") || format.is_empty()) {
            return;
        }
        if !(has(actual) || is_float_int || is_int_float) {
            fail(self, &types.join(","), actual);
        }
    }

    fn combinators(&mut self, node: &Node, name: &str, v: &Value) {
        let quoted = gofmt::quote(name);
        if !node.any_of.is_empty() {
            let results: Vec<Vec<FieldError>> =
                node.any_of.iter().map(|b| self.sub(b, name, v)).collect();
            if !results.iter().any(Vec::is_empty) {
                self.plain(format!(
                    "{quoted} must validate at least one schema (anyOf)"
                ));
                // kube-openapi keeps the errors of the branch that matched best; the first one here.
                if let Some(first) = results.into_iter().next() {
                    self.errors.extend(first);
                }
            }
        }
        if !node.one_of.is_empty() {
            let results: Vec<Vec<FieldError>> =
                node.one_of.iter().map(|b| self.sub(b, name, v)).collect();
            let valid = results.iter().filter(|r| r.is_empty()).count();
            if valid != 1 {
                let detail = if valid == 0 {
                    "Found none valid".to_owned()
                } else {
                    format!("Found {valid} valid alternatives")
                };
                self.plain(format!(
                    "{quoted} must validate one and only one schema (oneOf). {detail}"
                ));
                if valid == 0
                    && let Some(first) = results.into_iter().next()
                {
                    self.errors.extend(first);
                }
            }
        }
        if !node.all_of.is_empty() {
            let mut valid = 0;
            for branch in &node.all_of {
                let errs = self.sub(branch, name, v);
                if errs.is_empty() {
                    valid += 1;
                }
                self.errors.extend(errs);
            }
            if valid != node.all_of.len() {
                let detail = if valid == 0 { ". None validated" } else { "" };
                self.plain(format!(
                    "{quoted} must validate all the schemas (allOf){detail}"
                ));
            }
        }
        if let Some(not) = &node.not
            && self.sub(not, name, v).is_empty()
        {
            self.plain(format!("{quoted} must not validate the schema (not)"));
        }
    }

    /// Validates against another schema at the same place, collecting its errors apart.
    fn sub(&mut self, node: &Node, name: &str, v: &Value) -> Vec<FieldError> {
        let mut run = Run {
            base: self.base,
            errors: Vec::new(),
        };
        run.node(node, name, v, None);
        run.errors
    }

    fn string(&mut self, node: &Node, name: &str, s: &str) {
        let len = s.chars().count() as i64;
        if let Some(max) = node.max_length
            && len > max
        {
            let path = self.path(name);
            self.errors.push(FieldError::too_long(&path, max));
            return;
        }
        if let Some(min) = node.min_length
            && len < min
        {
            self.invalid(
                name,
                Value::String(s.to_owned()),
                format!("{name} in body should be at least {min} chars long"),
            );
            return;
        }
        if let Some(p) = &node.pattern
            && !p.regex.is_match(s)
        {
            self.invalid(
                name,
                Value::String(s.to_owned()),
                format!("{name} in body should match '{}'", p.source),
            );
        }
    }

    fn format(&mut self, node: &Node, name: &str, s: &str) {
        let Some(format) = node.format.as_deref() else {
            return;
        };
        if formats::is_string_format(format) && !formats::validates(format, s) {
            let path = self.path(name);
            let message = format!(
                "{name} in body must be of type {format}: {}",
                gofmt::quote(s)
            );
            self.errors.push(FieldError::type_invalid(
                &path,
                BadValue::string(s),
                message,
            ));
        }
    }

    fn number(&mut self, node: &Node, name: &str, n: &serde_json::Number) {
        let int_type = node.ty == Some(SchemaType::Integer);
        let format = node.format.as_deref().unwrap_or("");
        // "Checked value must be of type integer with format int32 in spec.x"
        if int_type && format == "int32" && n.as_i64().is_some_and(|i| i32::try_from(i).is_err()) {
            self.plain(format!(
                "Checked value must be of type integer with format int32 in {name}"
            ));
        }
        let data = n.as_f64().unwrap_or(f64::NAN);
        let value = Value::Number(n.clone());
        // A bound that fits the field's format is compared in the value's own type, and printed so.
        let bound_fits = |b: f64| -> bool {
            if int_type {
                let limit = if format == "int32" {
                    f64::from(i32::MAX)
                } else {
                    i64::MAX as f64
                };
                b.fract() == 0.0 && b.abs() <= limit
            } else {
                true
            }
        };
        let show = |b: f64| -> String {
            if n.is_i64() && bound_fits(b) {
                (b as i64).to_string()
            } else {
                gofmt::float_v(b)
            }
        };
        let as_int = n.as_i64();
        if let Some(factor) = node.multiple_of {
            let ok = match as_int {
                Some(i) if bound_fits(factor) && factor as i64 > 0 => i % (factor as i64) == 0,
                _ if factor > 0.0 => {
                    let m = if factor < 1.0 {
                        1.0 / factor * data
                    } else {
                        data / factor
                    };
                    m.fract() == 0.0
                }
                _ => false,
            };
            if !ok {
                self.invalid(
                    name,
                    value.clone(),
                    format!("{name} in body should be a multiple of {}", show(factor)),
                );
            }
        }
        if let Some(min) = node.minimum {
            let below = match as_int {
                Some(i) if bound_fits(min) => {
                    let m = min as i64;
                    if node.exclusive_minimum {
                        i <= m
                    } else {
                        i < m
                    }
                }
                _ => {
                    if node.exclusive_minimum {
                        data <= min
                    } else {
                        data < min
                    }
                }
            };
            if below {
                let words = if node.exclusive_minimum {
                    "greater than"
                } else {
                    "greater than or equal to"
                };
                self.invalid(
                    name,
                    value.clone(),
                    format!("{name} in body should be {words} {}", show(min)),
                );
            }
        }
        if let Some(max) = node.maximum {
            let above = match as_int {
                Some(i) if bound_fits(max) => {
                    let m = max as i64;
                    if node.exclusive_maximum {
                        i >= m
                    } else {
                        i > m
                    }
                }
                _ => {
                    if node.exclusive_maximum {
                        data >= max
                    } else {
                        data > max
                    }
                }
            };
            if above {
                let words = if node.exclusive_maximum {
                    "less than"
                } else {
                    "less than or equal to"
                };
                self.invalid(
                    name,
                    value,
                    format!("{name} in body should be {words} {}", show(max)),
                );
            }
        }
    }

    fn array(&mut self, node: &Node, name: &str, items: &[Value], old: Option<&Vec<Value>>) {
        if let Some(item_node) = node.items.as_deref() {
            for (i, item) in items.iter().enumerate() {
                let old_item = old.and_then(|o| crate::listtype::correlated(node, item, o));
                self.node(item_node, &format!("{name}[{i}]"), item, old_item);
            }
        }
        let size = items.len() as i64;
        if let Some(min) = node.min_items
            && size < min
        {
            self.invalid(
                name,
                Value::from(size),
                format!("{name} in body should have at least {min} items"),
            );
        }
        if let Some(max) = node.max_items
            && size > max
        {
            let path = self.path(name);
            self.errors.push(FieldError::too_many(&path, size, max));
        }
        if node.unique_items {
            let rendered: Vec<String> = items.iter().map(gofmt::json).collect();
            let mut seen = std::collections::HashSet::new();
            if !rendered.iter().all(|r| seen.insert(r)) {
                let path = self.path(name);
                self.errors.push(FieldError::invalid(
                    &path,
                    BadValue::string(""),
                    format!("{name} in body shouldn't contain duplicates"),
                ));
            }
        }
    }

    fn enumeration(&mut self, node: &Node, name: &str, v: &Value) {
        let Some(allowed) = &node.enumeration else {
            return;
        };
        if allowed.is_empty() || allowed.iter().any(|a| enum_equal(v, a)) {
            return;
        }
        let supported: Vec<String> = allowed
            .iter()
            .map(|a| match a {
                Value::String(s) => s.clone(),
                other => gofmt::json(other),
            })
            .collect();
        let path = self.path(name);
        self.errors.push(FieldError::not_supported(
            &path,
            BadValue::Json(v.clone()),
            &supported,
        ));
    }

    fn object(
        &mut self,
        node: &Node,
        name: &str,
        map: &Map<String, Value>,
        old: Option<&Map<String, Value>>,
    ) {
        let size = map.len() as i64;
        if let Some(min) = node.min_properties
            && size < min
        {
            self.invalid(
                name,
                Value::from(size),
                format!("{name} in body should have at least {min} properties"),
            );
        }
        if let Some(max) = node.max_properties
            && size > max
        {
            let path = self.path(name);
            self.errors.push(FieldError::too_many(&path, size, max));
        }
        let mut keys: Vec<&String> = map.keys().collect();
        keys.sort();
        let child_name = |k: &str| {
            if name.is_empty() {
                k.to_owned()
            } else {
                format!("{name}.{k}")
            }
        };
        match &node.additional {
            Additional::Bool(false) => {
                for k in &keys {
                    if !node.properties.contains_key(*k) {
                        let message = format!("{name}.{k} in body is a forbidden property");
                        self.invalid(name, Value::String((*k).clone()), message);
                    }
                }
            }
            Additional::Schema(values) => {
                for k in &keys {
                    if !node.properties.contains_key(*k) {
                        let old_v = old.and_then(|o| o.get(*k));
                        self.node(values, &format!("{name}.{k}"), &map[*k], old_v);
                    }
                }
            }
            Additional::Absent | Additional::Bool(true) => {}
        }
        for (k, prop) in &node.properties {
            if let Some(child) = map.get(k) {
                self.node(prop, &child_name(k), child, old.and_then(|o| o.get(k)));
            }
        }
        for k in &node.required {
            if !map.contains_key(k) {
                let path = self.path(&format!("{name}.{k}"));
                self.errors.push(FieldError::required(&path, ""));
            }
        }
    }
}

/// kube-openapi's enum comparison: equal after converting the value to the enum entry's type
/// (numbers compare numerically, so `1` matches `1.0`).
fn enum_equal(v: &Value, allowed: &Value) -> bool {
    match (v, allowed) {
        (Value::Number(a), Value::Number(b)) => match (a.as_i64(), b.as_i64()) {
            (Some(x), Some(y)) => x == y,
            _ => a.as_f64() == b.as_f64(),
        },
        _ => v == allowed,
    }
}

//! Evaluation of the compiled rules over an object, in the order and with the messages of the
//! apiserver's CEL validator (`apiextensions-apiserver/pkg/apiserver/schema/cel/validation.go`).

use std::sync::Arc;

use kube_cel::KubeCelExt;
use kube_cel::cel::objects::OptionalValue;
use kube_cel::cel::{Context, ExecutionError, Value as CelValue};
use serde_json::Value;

use super::CelRule;
use super::value::to_cel;
use crate::field_error::{BadValue, ErrorKind, FieldError};
use crate::model::Node;
use crate::path::FieldPath;

/// A CEL environment with the Kubernetes libraries, built once per validation.
pub(crate) struct Evaluator {
    base: Context<'static>,
}

impl Evaluator {
    pub(crate) fn new() -> Self {
        Self {
            base: Context::default().with_all(),
        }
    }

    /// Runs the rules of `node` and of everything below it on `obj` (with `old`, the value at
    /// the same place in the previous object when it can be matched), appending failures.
    /// With `ratchet` (updates), failures of rules that ignore `oldSelf` are dropped where the
    /// value did not change (CRD validation ratcheting, on by default since Kubernetes 1.30).
    pub(crate) fn validate(
        &self,
        node: &Node,
        path: &FieldPath,
        obj: &Value,
        old: Option<&Value>,
        ratchet: bool,
        errors: &mut Vec<FieldError>,
    ) {
        // Rules validate non-null values only; presence is checked from the enclosing object.
        if obj.is_null() {
            return;
        }
        let old = old.filter(|o| !o.is_null());
        if !node.rules.is_empty() {
            self.rules_at(node, path, obj, old, ratchet, errors);
        }
        for branch in &node.all_of {
            self.validate(branch, path, obj, old, ratchet, errors);
        }
        match obj {
            Value::Array(items) => {
                let Some(item_node) = node.items.as_deref() else {
                    return;
                };
                let old_items = old.and_then(Value::as_array);
                for (i, item) in items.iter().enumerate() {
                    let old_item =
                        old_items.and_then(|olds| crate::listtype::correlated(node, item, olds));
                    self.validate(item_node, &path.index(i), item, old_item, ratchet, errors);
                }
            }
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                let correlatable = node
                    .map_type
                    .as_deref()
                    .is_none_or(|t| t == "granular" || t == "atomic");
                let old_map = old.and_then(Value::as_object).filter(|_| correlatable);
                if let Some(values) = node.additional_schema() {
                    for k in &keys {
                        let old_v = old_map.and_then(|m| m.get(*k));
                        self.validate(values, &path.key(k), &map[*k], old_v, ratchet, errors);
                    }
                }
                for k in &keys {
                    if let Some(prop) = node.properties.get(*k) {
                        let old_v = old_map.and_then(|m| m.get(*k));
                        self.validate(prop, &path.child(k), &map[*k], old_v, ratchet, errors);
                    }
                }
            }
            _ => {}
        }
    }

    fn rules_at(
        &self,
        node: &Node,
        path: &FieldPath,
        obj: &Value,
        old: Option<&Value>,
        ratchet: bool,
        errors: &mut Vec<FieldError>,
    ) {
        let type_value = || BadValue::string(node.type_name());
        let self_val = match to_cel(obj, Some(node)) {
            Ok(v) => v,
            Err(_) => {
                errors.push(FieldError::invalid(
                    path,
                    type_value(),
                    "object is nested too deeply to evaluate validation rules",
                ));
                return;
            }
        };
        let old_val = match old.map(|o| to_cel(o, Some(node))) {
            Some(Ok(v)) => Some(v),
            Some(Err(_)) => {
                errors.push(FieldError::invalid(
                    path,
                    type_value(),
                    "object is nested too deeply to evaluate validation rules",
                ));
                return;
            }
            None => None,
        };
        let unchanged = ratchet && old.is_some_and(|o| crate::value_eq::equal(o, obj));

        for rule in node.rules.iter() {
            let Some(program) = &rule.program else {
                continue;
            };
            let optional_old_self = rule.optional_old_self == Some(true);
            if rule.uses_old_self && old_val.is_none() && !optional_old_self {
                // Transition rules run only when there is a value to compare with.
                continue;
            }
            let mut ctx = self.base.new_inner_scope();
            ctx.add_variable_from_value("self", self_val.clone());
            if optional_old_self {
                let opt = match &old_val {
                    Some(v) => OptionalValue::of(v.clone()),
                    None => OptionalValue::none(),
                };
                ctx.add_variable_from_value("oldSelf", CelValue::Opaque(Arc::new(opt)));
            } else if let Some(v) = &old_val {
                ctx.add_variable_from_value("oldSelf", v.clone());
            }

            match program.execute(&ctx) {
                Ok(CelValue::Bool(true)) => continue,
                Ok(_) => {}
                Err(err) => {
                    errors.push(runtime_error(path, node, rule, &err));
                    continue;
                }
            }
            if !rule.uses_old_self && unchanged {
                continue;
            }
            let at = if rule.normalized_field_path.is_empty() {
                path.clone()
            } else {
                path.child(&rule.normalized_field_path)
            };
            let detail = rule
                .message_program
                .as_ref()
                .and_then(|p| message_from(p.execute(&ctx)))
                .unwrap_or_else(|| {
                    if rule.message.is_empty() {
                        format!("failed rule: {}", rule.error_string())
                    } else {
                        rule.message.trim().to_owned()
                    }
                });
            let value = if matches!(node.type_name(), "object" | "array") {
                BadValue::Omitted
            } else {
                BadValue::Json(obj.clone())
            };
            errors.push(error_for_reason(&at, value, detail, rule.reason.as_deref()));
        }
    }
}

/// The evaluated `messageExpression`, when it gives a usable message (a non-empty string on
/// one line); otherwise the apiserver falls back to the static message.
fn message_from(result: Result<CelValue, ExecutionError>) -> Option<String> {
    match result {
        Ok(CelValue::String(s)) => {
            let trimmed = s.trim();
            (!trimmed.is_empty() && !trimmed.contains('\n') && trimmed.len() <= 5 * 1024)
                .then(|| trimmed.to_owned())
        }
        _ => None,
    }
}

/// `fieldErrorForReason`.
fn error_for_reason(
    path: &FieldPath,
    value: BadValue,
    detail: String,
    reason: Option<&str>,
) -> FieldError {
    match reason {
        Some("FieldValueForbidden") => FieldError::forbidden(path, detail),
        Some("FieldValueRequired") => FieldError::required(path, detail),
        Some("FieldValueDuplicate") => FieldError::new(ErrorKind::Duplicate, path, value, ""),
        _ => FieldError::invalid(path, value, detail),
    }
}

/// A rule that failed to evaluate, worded like the apiserver (with cel-go's error texts).
fn runtime_error(
    path: &FieldPath,
    node: &Node,
    rule: &CelRule,
    err: &ExecutionError,
) -> FieldError {
    let value = BadValue::string(node.type_name());
    let text = match err {
        ExecutionError::NoSuchKey(k) => format!("no such key: {k}"),
        ExecutionError::DivisionByZero(_) => "division by zero".to_owned(),
        ExecutionError::RemainderByZero(_) => "modulus by zero".to_owned(),
        ExecutionError::Overflow(..) => "integer overflow".to_owned(),
        ExecutionError::IndexOutOfBounds(i) => format!("index out of bounds: {}", cel_scalar(i)),
        ExecutionError::NoSuchOverload
        | ExecutionError::UnsupportedBinaryOperator(..)
        | ExecutionError::UnsupportedUnaryOperator(..)
        | ExecutionError::ValuesNotComparable(..) => {
            return FieldError::invalid(
                path,
                value,
                format!(
                    "'no such overload': call arguments did not match a supported operator, function or macro signature for rule: {}",
                    rule.error_string()
                ),
            );
        }
        other => other.to_string(),
    };
    FieldError::invalid(
        path,
        value,
        format!("{text} evaluating rule: {}", rule.error_string()),
    )
}

fn cel_scalar(v: &CelValue) -> String {
    match v {
        CelValue::Int(i) => i.to_string(),
        CelValue::UInt(u) => u.to_string(),
        other => format!("{other:?}"),
    }
}

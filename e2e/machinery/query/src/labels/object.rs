//! `metav1.LabelSelector` objects (`{matchLabels, matchExpressions}`) as Deployments,
//! ReplicaSets, StatefulSets, DaemonSets, Jobs, PodDisruptionBudgets and NetworkPolicies carry
//! them: validation worded like `k8s.io/apimachinery/pkg/apis/meta/v1/validation`
//! `ValidateLabelSelector`, and conversion like `metav1.LabelSelectorAsSelector`.

use serde_json::Value;

use super::selector::{LabelSelector, Operator, Requirement, RequirementError};
use crate::field_error::FieldError;
use crate::validation;

/// One `matchExpressions` entry, with the operator kept as sent so validation can name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelectorExpression {
    pub key: String,
    pub operator: String,
    pub values: Vec<String>,
}

/// A decoded `metav1.LabelSelector`.
///
/// Empty versus absent, which the controllers depend on:
/// - absent or `null` → [`LabelSelector::Nothing`]: selects no object;
/// - `{}` (no `matchLabels`, no `matchExpressions`) → selects every object. A policy/v1
///   PodDisruptionBudget with `selector: {}` covers all pods of its namespace.
/// - Deployments, ReplicaSets, StatefulSets, DaemonSets (and Jobs with `manualSelector`) reject an
///   empty selector in their own validation (`empty selector is invalid for deployment`); that
///   per-kind check belongs to the kind's strategy, which can ask [`LabelSelectorObject::is_empty`].
/// - A Service's `spec.selector` is a plain map, not this type: see
///   [`LabelSelector::from_match_labels`] and the crate docs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LabelSelectorObject {
    /// Sorted by key (JSON object order is not significant).
    pub match_labels: Vec<(String, String)>,
    pub match_expressions: Vec<SelectorExpression>,
}

/// The JSON is not shaped like a `metav1.LabelSelector` (wrong types). The message names the
/// offending member; a real server would have refused such a body while decoding it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed label selector: {0}")]
pub struct MalformedSelector(pub String);

fn string_list(v: Option<&Value>, what: &str) -> Result<Vec<String>, MalformedSelector> {
    match v {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| {
                i.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| MalformedSelector(format!("{what} must hold strings")))
            })
            .collect(),
        Some(_) => Err(MalformedSelector(format!("{what} must be a list"))),
    }
}

fn string_member(
    v: &serde_json::Map<String, Value>,
    name: &str,
    what: &str,
) -> Result<String, MalformedSelector> {
    match v.get(name) {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(_) => Err(MalformedSelector(format!("{what}.{name} must be a string"))),
    }
}

impl LabelSelectorObject {
    /// Decodes a selector; `None` for an absent or `null` one (which selects nothing).
    pub fn from_value(value: Option<&Value>) -> Result<Option<Self>, MalformedSelector> {
        let obj = match value {
            None | Some(Value::Null) => return Ok(None),
            Some(Value::Object(o)) => o,
            Some(_) => return Err(MalformedSelector("selector must be an object".into())),
        };
        let mut match_labels = Vec::new();
        match obj.get("matchLabels") {
            None | Some(Value::Null) => {}
            Some(Value::Object(m)) => {
                for (k, v) in m {
                    let v = v.as_str().ok_or_else(|| {
                        MalformedSelector(format!("matchLabels[{k}] must be a string"))
                    })?;
                    match_labels.push((k.clone(), v.to_string()));
                }
            }
            Some(_) => return Err(MalformedSelector("matchLabels must be an object".into())),
        }
        match_labels.sort();
        let mut match_expressions = Vec::new();
        match obj.get("matchExpressions") {
            None | Some(Value::Null) => {}
            Some(Value::Array(items)) => {
                for (i, item) in items.iter().enumerate() {
                    let what = format!("matchExpressions[{i}]");
                    let e = item
                        .as_object()
                        .ok_or_else(|| MalformedSelector(format!("{what} must be an object")))?;
                    match_expressions.push(SelectorExpression {
                        key: string_member(e, "key", &what)?,
                        operator: string_member(e, "operator", &what)?,
                        values: string_list(e.get("values"), &format!("{what}.values"))?,
                    });
                }
            }
            Some(_) => return Err(MalformedSelector("matchExpressions must be a list".into())),
        }
        Ok(Some(Self {
            match_labels,
            match_expressions,
        }))
    }

    /// No `matchLabels` and no `matchExpressions`: selects everything.
    pub fn is_empty(&self) -> bool {
        self.match_labels.is_empty() && self.match_expressions.is_empty()
    }

    /// `ValidateLabelSelector` under `path` (e.g. `spec.selector`), with upstream's default
    /// options (unknown operators and invalid values refused). `matchLabels` entries are checked
    /// in key order, as Go's map order is random anyway.
    pub fn validate(&self, path: &str) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let labels_path = format!("{path}.matchLabels");
        for (k, v) in &self.match_labels {
            for msg in validation::label_key_errors(k) {
                errs.push(FieldError::invalid(labels_path.clone(), k.as_str(), msg));
            }
            for msg in validation::label_value_errors(v) {
                errs.push(FieldError::invalid(labels_path.clone(), v.as_str(), msg));
            }
        }
        for (i, e) in self.match_expressions.iter().enumerate() {
            let at = format!("{path}.matchExpressions[{i}]");
            match e.operator.as_str() {
                "In" | "NotIn" if e.values.is_empty() => errs.push(FieldError::required(
                    format!("{at}.values"),
                    "must be specified when `operator` is 'In' or 'NotIn'",
                )),
                "Exists" | "DoesNotExist" if !e.values.is_empty() => {
                    errs.push(FieldError::forbidden(
                        format!("{at}.values"),
                        "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                    ))
                }
                "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
                other => errs.push(FieldError::invalid(
                    format!("{at}.operator"),
                    other,
                    "not a valid selector operator",
                )),
            }
            for msg in validation::label_key_errors(&e.key) {
                errs.push(FieldError::invalid(
                    format!("{at}.key"),
                    e.key.as_str(),
                    msg,
                ));
            }
            for (j, v) in e.values.iter().enumerate() {
                for msg in validation::label_value_errors(v) {
                    errs.push(FieldError::invalid(
                        format!("{at}.values[{j}]"),
                        v.as_str(),
                        msg,
                    ));
                }
            }
        }
        errs
    }

    /// `LabelSelectorAsSelector`; an empty selector selects everything.
    pub fn to_selector(&self) -> Result<LabelSelector, SelectorConversionError> {
        if self.is_empty() {
            return Ok(LabelSelector::everything());
        }
        let mut requirements =
            Vec::with_capacity(self.match_labels.len() + self.match_expressions.len());
        for (k, v) in &self.match_labels {
            requirements.push(Requirement::new(k, Operator::Equals, vec![v.clone()])?);
        }
        for e in &self.match_expressions {
            let op = match e.operator.as_str() {
                "In" => Operator::In,
                "NotIn" => Operator::NotIn,
                "Exists" => Operator::Exists,
                "DoesNotExist" => Operator::DoesNotExist,
                other => {
                    return Err(SelectorConversionError::Operator(crate::gofmt::quote(
                        other,
                    )));
                }
            };
            requirements.push(Requirement::new(&e.key, op, e.values.clone())?);
        }
        requirements.sort_by(|a, b| a.key().cmp(b.key()));
        Ok(LabelSelector::from_requirements(requirements))
    }
}

/// Converts an optional selector object: `None` (absent/`null`) selects nothing.
pub fn selector_from_object(
    object: Option<&LabelSelectorObject>,
) -> Result<LabelSelector, SelectorConversionError> {
    object.map_or(Ok(LabelSelector::Nothing), LabelSelectorObject::to_selector)
}

/// Why `LabelSelectorAsSelector` refused a selector that skipped validation.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SelectorConversionError {
    /// Holds the Go-quoted operator.
    #[error("{0} is not a valid label selector operator")]
    Operator(String),
    #[error(transparent)]
    Requirement(#[from] RequirementError),
}

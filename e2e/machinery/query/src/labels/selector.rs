//! Label selector requirements and their matching, as `k8s.io/apimachinery/pkg/labels`
//! (`Requirement`, `internalSelector`, `Nothing`).

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;

use crate::field_error::{self, FieldError};
use crate::validation;

/// `selection.Operator`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operator {
    In,
    NotIn,
    Equals,
    DoubleEquals,
    NotEquals,
    Exists,
    DoesNotExist,
    GreaterThan,
    LessThan,
}

/// Anything labels can be looked up in. `serde_json` maps count only string values, so a
/// malformed `metadata.labels` never matches by accident.
pub trait Labels {
    fn label(&self, key: &str) -> Option<&str>;
}

impl Labels for BTreeMap<String, String> {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key).map(String::as_str)
    }
}

impl<S: std::hash::BuildHasher> Labels for HashMap<String, String, S> {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key).map(String::as_str)
    }
}

impl Labels for serde_json::Map<String, Value> {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(Value::as_str)
    }
}

/// A JSON object of labels; anything else (null, absent, wrong type) has no labels.
impl Labels for Value {
    fn label(&self, key: &str) -> Option<&str> {
        self.as_object().and_then(|m| m.label(key))
    }
}

/// One `key op values` term.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    key: String,
    operator: Operator,
    values: Vec<String>,
}

impl Requirement {
    /// `labels.NewRequirement`: validates the key, the number of values for the operator, integer
    /// values for `>`/`<` and every value's label syntax. The error is the aggregated field error
    /// list as Go prints it (`key: Invalid value: ...`, `values[0][app]: Invalid value: ...`).
    pub fn new(
        key: &str,
        operator: Operator,
        values: Vec<String>,
    ) -> Result<Self, RequirementError> {
        let mut errs = Vec::new();
        let key_errs = validation::label_key_errors(key);
        if !key_errs.is_empty() {
            errs.push(FieldError::invalid("key", key, key_errs.join("; ")));
        }
        // Go prints the slice it was given as JSON; an empty one reached here as nil: `null`.
        let as_json = || {
            if values.is_empty() {
                Value::Null
            } else {
                Value::Array(values.iter().cloned().map(Value::String).collect())
            }
        };
        match operator {
            Operator::In | Operator::NotIn => {
                if values.is_empty() {
                    errs.push(FieldError::invalid(
                        "values",
                        as_json(),
                        "for 'in', 'notin' operators, values set can't be empty",
                    ));
                }
            }
            Operator::Equals | Operator::DoubleEquals | Operator::NotEquals => {
                if values.len() != 1 {
                    errs.push(FieldError::invalid(
                        "values",
                        as_json(),
                        "exact-match compatibility requires one single value",
                    ));
                }
            }
            Operator::Exists | Operator::DoesNotExist => {
                if !values.is_empty() {
                    errs.push(FieldError::invalid(
                        "values",
                        as_json(),
                        "values set must be empty for exists and does not exist",
                    ));
                }
            }
            Operator::GreaterThan | Operator::LessThan => {
                if values.len() != 1 {
                    errs.push(FieldError::invalid(
                        "values",
                        as_json(),
                        "for 'Gt', 'Lt' operators, exactly one value is required",
                    ));
                }
                for (i, v) in values.iter().enumerate() {
                    if v.parse::<i64>().is_err() {
                        errs.push(FieldError::invalid(
                            format!("values[{i}]"),
                            v.as_str(),
                            "for 'Gt', 'Lt' operators, the value must be an integer",
                        ));
                    }
                }
            }
        }
        for (i, v) in values.iter().enumerate() {
            let value_errs = validation::label_value_errors(v);
            if !value_errs.is_empty() {
                errs.push(FieldError::invalid(
                    format!("values[{i}][{key}]"),
                    v.as_str(),
                    value_errs.join("; "),
                ));
            }
        }
        if errs.is_empty() {
            Ok(Self {
                key: key.to_string(),
                operator,
                values,
            })
        } else {
            Err(RequirementError(errs))
        }
    }

    pub fn key(&self) -> &str {
        &self.key
    }

    pub fn operator(&self) -> Operator {
        self.operator
    }

    pub fn values(&self) -> &[String] {
        &self.values
    }

    /// `Requirement.Matches`: `!=`/`notin` also match when the label is absent; `>`/`<` need
    /// the label to be a 64-bit integer.
    pub fn matches<L: Labels + ?Sized>(&self, labels: &L) -> bool {
        let value = labels.label(&self.key);
        let has = |v: &str| self.values.iter().any(|x| x == v);
        match self.operator {
            Operator::In | Operator::Equals | Operator::DoubleEquals => value.is_some_and(has),
            Operator::NotIn | Operator::NotEquals => !value.is_some_and(has),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
            Operator::GreaterThan | Operator::LessThan => {
                let (Some(Ok(have)), [want]) =
                    (value.map(str::parse::<i64>), self.values.as_slice())
                else {
                    return false;
                };
                let Ok(want) = want.parse::<i64>() else {
                    return false;
                };
                if self.operator == Operator::GreaterThan {
                    have > want
                } else {
                    have < want
                }
            }
        }
    }
}

/// `Requirement.String()`: `!k`, `k`, `k=v`, `k in (a,b)` (values sorted).
impl std::fmt::Display for Requirement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.operator == Operator::DoesNotExist {
            f.write_str("!")?;
        }
        f.write_str(&self.key)?;
        let op = match self.operator {
            Operator::Equals => "=",
            Operator::DoubleEquals => "==",
            Operator::NotEquals => "!=",
            Operator::In => " in ",
            Operator::NotIn => " notin ",
            Operator::GreaterThan => ">",
            Operator::LessThan => "<",
            Operator::Exists | Operator::DoesNotExist => return Ok(()),
        };
        f.write_str(op)?;
        let mut values: Vec<&str> = self.values.iter().map(String::as_str).collect();
        values.sort_unstable();
        let set = matches!(self.operator, Operator::In | Operator::NotIn);
        if set {
            f.write_str("(")?;
        }
        f.write_str(&values.join(","))?;
        if set {
            f.write_str(")")?;
        }
        Ok(())
    }
}

/// The field errors of one invalid requirement; displays as Go's aggregate.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}", field_error::aggregate(.0))]
pub struct RequirementError(pub Vec<FieldError>);

/// A label selector: the AND of its requirements, or upstream's `labels.Nothing()`.
///
/// No requirements selects everything (the empty query string, an empty `metav1.LabelSelector`
/// `{}`); [`LabelSelector::Nothing`] selects nothing (a `null` `metav1.LabelSelector`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LabelSelector {
    Nothing,
    All(Vec<Requirement>),
}

impl LabelSelector {
    pub fn everything() -> Self {
        Self::All(Vec::new())
    }

    pub(crate) fn from_requirements(requirements: Vec<Requirement>) -> Self {
        Self::All(requirements)
    }

    /// `labels.SelectorFromSet`: `k=v` for each entry, without validation (as upstream). An empty
    /// map selects everything; see the crate docs for why a Service's empty map must not get here.
    pub fn from_match_labels<'a>(set: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        let mut requirements: Vec<Requirement> = set
            .into_iter()
            .map(|(k, v)| Requirement {
                key: k.to_string(),
                operator: Operator::Equals,
                values: vec![v.to_string()],
            })
            .collect();
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Self::All(requirements)
    }

    pub fn requirements(&self) -> &[Requirement] {
        match self {
            Self::Nothing => &[],
            Self::All(r) => r,
        }
    }

    /// True when the selector does not restrict anything (`Selector.Empty()`).
    pub fn is_everything(&self) -> bool {
        matches!(self, Self::All(r) if r.is_empty())
    }

    pub fn matches<L: Labels + ?Sized>(&self, labels: &L) -> bool {
        match self {
            Self::Nothing => false,
            Self::All(requirements) => requirements.iter().all(|r| r.matches(labels)),
        }
    }

    /// Matches an object's `metadata.labels`.
    pub fn matches_object(&self, object: &Value) -> bool {
        self.matches(object.pointer("/metadata/labels").unwrap_or(&Value::Null))
    }

    /// `RequiresExactMatch`: the value a `=`, `==` or one-value `in` requirement on `key` pins.
    pub fn requires_exact_match(&self, key: &str) -> Option<&str> {
        let r = self.requirements().iter().find(|r| r.key == key)?;
        match (r.operator, r.values.as_slice()) {
            (Operator::Equals | Operator::DoubleEquals | Operator::In, [v]) => Some(v),
            _ => None,
        }
    }
}

/// `String()`: requirements joined by `,`; `Nothing` prints as the empty string, as upstream.
impl std::fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self
            .requirements()
            .iter()
            .map(ToString::to_string)
            .collect();
        f.write_str(&parts.join(","))
    }
}

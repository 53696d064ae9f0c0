//! A field-level validation error worded like `k8s.io/apimachinery/pkg/util/validation/field`
//! `Error`: `<field>: <Type>[: <value>][: <detail>]`. The server puts [`FieldError::reason`],
//! [`FieldError::field`] and [`FieldError::body`] into `Status.details.causes` of a 422 and the
//! whole [`Display`](std::fmt::Display) text into the message.

use serde_json::Value;

use crate::gofmt;

/// The `field.ErrorType`s this crate produces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldErrorType {
    /// `FieldValueInvalid`, printed `Invalid value: <value>`.
    Invalid,
    /// `FieldValueRequired`, printed `Required value`.
    Required,
    /// `FieldValueForbidden`, printed `Forbidden`.
    Forbidden,
}

/// One validation error on one field.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    pub kind: FieldErrorType,
    /// The field path as Go prints it (`spec.selector.matchExpressions[0].values`); `<nil>` when
    /// the upstream code had no path, as in label-selector query-string errors.
    pub field: String,
    /// Printed only for [`FieldErrorType::Invalid`]: strings Go-quoted, anything else as JSON
    /// (so an absent list prints `null`, as Go's `json.Marshal` of a nil slice does).
    pub bad_value: Value,
    pub detail: String,
}

impl FieldError {
    pub fn invalid(
        field: impl Into<String>,
        bad_value: impl Into<Value>,
        detail: impl Into<String>,
    ) -> Self {
        Self {
            kind: FieldErrorType::Invalid,
            field: field.into(),
            bad_value: bad_value.into(),
            detail: detail.into(),
        }
    }

    pub fn required(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            kind: FieldErrorType::Required,
            field: field.into(),
            bad_value: Value::Null,
            detail: detail.into(),
        }
    }

    pub fn forbidden(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            kind: FieldErrorType::Forbidden,
            field: field.into(),
            bad_value: Value::Null,
            detail: detail.into(),
        }
    }

    /// The `reason` of a `Status` cause (`CauseType`).
    pub fn reason(&self) -> &'static str {
        match self.kind {
            FieldErrorType::Invalid => "FieldValueInvalid",
            FieldErrorType::Required => "FieldValueRequired",
            FieldErrorType::Forbidden => "FieldValueForbidden",
        }
    }

    /// `ErrorBody()`: the message without the field, as used for `causes[].message`.
    pub fn body(&self) -> String {
        let mut s = match self.kind {
            FieldErrorType::Invalid => {
                let value = match &self.bad_value {
                    Value::String(s) => gofmt::quote(s),
                    other => other.to_string(),
                };
                format!("Invalid value: {value}")
            }
            FieldErrorType::Required => "Required value".to_string(),
            FieldErrorType::Forbidden => "Forbidden".to_string(),
        };
        if !self.detail.is_empty() {
            s.push_str(": ");
            s.push_str(&self.detail);
        }
        s
    }
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.body())
    }
}

impl std::error::Error for FieldError {}

/// `field.ErrorList.ToAggregate().Error()`.
pub fn aggregate(errors: &[FieldError]) -> String {
    let messages: Vec<String> = errors.iter().map(ToString::to_string).collect();
    gofmt::aggregate(&messages)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn formats_like_go() {
        assert_eq!(
            FieldError::invalid("a.b", "x\"y", "bad").to_string(),
            r#"a.b: Invalid value: "x\"y": bad"#
        );
        assert_eq!(
            FieldError::invalid("v", Value::Null, "d").to_string(),
            "v: Invalid value: null: d"
        );
        assert_eq!(
            FieldError::invalid("v", json!(["a"]), "d").to_string(),
            r#"v: Invalid value: ["a"]: d"#
        );
        assert_eq!(
            FieldError::required("v", "").to_string(),
            "v: Required value"
        );
        assert_eq!(
            FieldError::forbidden("v", "no").to_string(),
            "v: Forbidden: no"
        );
        assert_eq!(
            FieldError::forbidden("v", "no").reason(),
            "FieldValueForbidden"
        );
    }
}

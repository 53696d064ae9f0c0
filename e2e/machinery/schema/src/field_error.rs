//! Field errors that print exactly like apimachinery's `field.Error`.
//!
//! The apiserver puts `err.ErrorBody()` into each `Status` cause, `err.Type` into its reason and
//! `err.Error()` into the aggregated message; kubectl and helm show those texts verbatim.

use std::fmt;

use serde_json::Value;

use crate::gofmt;
use crate::path::FieldPath;

/// The kind of a field error (Go's `field.ErrorType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// `FieldValueNotFound`: "Not found".
    NotFound,
    /// `FieldValueRequired`: "Required value".
    Required,
    /// `FieldValueDuplicate`: "Duplicate value".
    Duplicate,
    /// `FieldValueInvalid`: "Invalid value".
    Invalid,
    /// `FieldValueNotSupported`: "Unsupported value".
    NotSupported,
    /// `FieldValueForbidden`: "Forbidden".
    Forbidden,
    /// `FieldValueTooLong`: "Too long".
    TooLong,
    /// `FieldValueTooMany`: "Too many".
    TooMany,
    /// `InternalError`: "Internal error".
    Internal,
    /// `FieldValueTypeInvalid`: printed as "Invalid value" too.
    TypeInvalid,
}

impl ErrorKind {
    /// The `Status` cause reason (`field.ErrorType`'s string value).
    pub fn reason(self) -> &'static str {
        match self {
            Self::NotFound => "FieldValueNotFound",
            Self::Required => "FieldValueRequired",
            Self::Duplicate => "FieldValueDuplicate",
            Self::Invalid => "FieldValueInvalid",
            Self::NotSupported => "FieldValueNotSupported",
            Self::Forbidden => "FieldValueForbidden",
            Self::TooLong => "FieldValueTooLong",
            Self::TooMany => "FieldValueTooMany",
            Self::Internal => "InternalError",
            Self::TypeInvalid => "FieldValueTypeInvalid",
        }
    }

    /// The words Go prints for the kind (`ErrorType.String()`).
    pub fn words(self) -> &'static str {
        match self {
            Self::NotFound => "Not found",
            Self::Required => "Required value",
            Self::Duplicate => "Duplicate value",
            Self::Invalid | Self::TypeInvalid => "Invalid value",
            Self::NotSupported => "Unsupported value",
            Self::Forbidden => "Forbidden",
            Self::TooLong => "Too long",
            Self::TooMany => "Too many",
            Self::Internal => "Internal error",
        }
    }

    /// Kinds whose body never shows the bad value (Go prints only the kind for them).
    fn hides_value(self) -> bool {
        matches!(
            self,
            Self::Required | Self::Forbidden | Self::TooLong | Self::Internal
        )
    }
}

/// The offending value as Go would print it inside `Invalid value: <here>`.
#[derive(Clone, Debug, PartialEq)]
pub enum BadValue {
    /// `field.OmitValueType{}`: only the kind is printed (CEL rules on objects and arrays).
    Omitted,
    /// An unstructured JSON value: strings as `%q`, numbers and booleans as `%v`, the rest as JSON.
    Json(Value),
    /// A value already rendered the way Go renders it (a Go struct marshalled to JSON, for example).
    Rendered(String),
}

impl BadValue {
    /// A string value (printed quoted).
    pub fn string(s: impl Into<String>) -> Self {
        Self::Json(Value::String(s.into()))
    }

    fn render(&self) -> Option<String> {
        match self {
            Self::Omitted => None,
            Self::Rendered(s) => Some(s.clone()),
            Self::Json(Value::String(s)) => Some(gofmt::quote(s)),
            Self::Json(Value::Number(n)) => Some(gofmt::number_v(n)),
            Self::Json(Value::Bool(b)) => Some(b.to_string()),
            Self::Json(other) => Some(gofmt::json(other)),
        }
    }
}

/// One validation failure on one field.
#[derive(Clone, Debug, PartialEq)]
pub struct FieldError {
    /// The field path as Go prints it (`spec.size`, `status.members[0]`, or `<nil>`).
    pub field: String,
    /// What went wrong.
    pub kind: ErrorKind,
    /// The offending value.
    pub bad_value: BadValue,
    /// The explanation after the value.
    pub detail: String,
}

impl FieldError {
    pub(crate) fn new(
        kind: ErrorKind,
        field: &FieldPath,
        bad_value: BadValue,
        detail: impl Into<String>,
    ) -> Self {
        Self {
            field: field.to_string(),
            kind,
            bad_value,
            detail: detail.into(),
        }
    }

    /// `field.Invalid(path, value, detail)`.
    pub(crate) fn invalid(field: &FieldPath, value: BadValue, detail: impl Into<String>) -> Self {
        Self::new(ErrorKind::Invalid, field, value, detail)
    }

    /// `field.TypeInvalid(path, value, detail)`.
    pub(crate) fn type_invalid(
        field: &FieldPath,
        value: BadValue,
        detail: impl Into<String>,
    ) -> Self {
        Self::new(ErrorKind::TypeInvalid, field, value, detail)
    }

    /// `field.Required(path, detail)`.
    pub(crate) fn required(field: &FieldPath, detail: impl Into<String>) -> Self {
        Self::new(ErrorKind::Required, field, BadValue::string(""), detail)
    }

    /// `field.Forbidden(path, detail)`.
    pub(crate) fn forbidden(field: &FieldPath, detail: impl Into<String>) -> Self {
        Self::new(ErrorKind::Forbidden, field, BadValue::string(""), detail)
    }

    /// `field.Duplicate(path, value)`.
    pub(crate) fn duplicate(field: &FieldPath, value: BadValue) -> Self {
        Self::new(ErrorKind::Duplicate, field, value, "")
    }

    /// `field.NotSupported(path, value, valid)`: the detail lists the quoted supported values.
    pub(crate) fn not_supported(field: &FieldPath, value: BadValue, supported: &[String]) -> Self {
        let detail = if supported.is_empty() {
            String::new()
        } else {
            let quoted: Vec<String> = supported.iter().map(|s| gofmt::quote(s)).collect();
            format!("supported values: {}", quoted.join(", "))
        };
        Self::new(ErrorKind::NotSupported, field, value, detail)
    }

    /// `field.TooLong(path, _, max)`: "may not be more than N bytes".
    pub(crate) fn too_long(field: &FieldPath, max: i64) -> Self {
        let detail = if max >= 0 {
            format!(
                "may not be more than {max} {}",
                if max == 1 { "byte" } else { "bytes" }
            )
        } else {
            "value is too long".to_owned()
        };
        Self::new(
            ErrorKind::TooLong,
            field,
            BadValue::string("<value omitted>"),
            detail,
        )
    }

    /// `field.TooMany(path, actual, max)`: "must have at most N items".
    pub(crate) fn too_many(field: &FieldPath, actual: i64, max: i64) -> Self {
        let detail = if max >= 0 {
            format!(
                "must have at most {max} {}",
                if max == 1 { "item" } else { "items" }
            )
        } else {
            "has too many items".to_owned()
        };
        let value = if actual >= 0 {
            BadValue::Json(Value::from(actual))
        } else {
            BadValue::Omitted
        };
        Self::new(ErrorKind::TooMany, field, value, detail)
    }

    /// The `Status` cause reason, e.g. `FieldValueInvalid`.
    pub fn reason(&self) -> &'static str {
        self.kind.reason()
    }

    /// Go's `ErrorBody()`: the message of a `Status` cause, without the field.
    pub fn body(&self) -> String {
        let mut s = self.kind.words().to_owned();
        if !self.kind.hides_value()
            && let Some(v) = self.bad_value.render()
        {
            s.push_str(": ");
            s.push_str(&v);
        }
        if !self.detail.is_empty() {
            s.push_str(": ");
            s.push_str(&self.detail);
        }
        s
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.body())
    }
}

impl std::error::Error for FieldError {}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn prints_like_go_field_errors() {
        let size = FieldPath::new("spec").child("size");
        let cases = [
            (
                FieldError::invalid(
                    &size,
                    BadValue::Json(json!(0)),
                    "spec.size in body should be greater than or equal to 1",
                ),
                "spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1",
            ),
            (
                FieldError::type_invalid(
                    &size,
                    BadValue::string("string"),
                    "spec.size in body must be of type integer: \"string\"",
                ),
                "spec.size: Invalid value: \"string\": spec.size in body must be of type integer: \"string\"",
            ),
            (FieldError::required(&size, ""), "spec.size: Required value"),
            (
                FieldError::forbidden(&size, "nope"),
                "spec.size: Forbidden: nope",
            ),
            (
                FieldError::too_long(&size, 5),
                "spec.size: Too long: may not be more than 5 bytes",
            ),
            (
                FieldError::too_many(&size, 4, 1),
                "spec.size: Too many: 4: must have at most 1 item",
            ),
            (
                FieldError::not_supported(&size, BadValue::string("x"), &["a".into(), "b".into()]),
                "spec.size: Unsupported value: \"x\": supported values: \"a\", \"b\"",
            ),
            (
                FieldError::duplicate(&size, BadValue::Json(json!({"type": "Ready"}))),
                "spec.size: Duplicate value: {\"type\":\"Ready\"}",
            ),
            (
                FieldError::invalid(&FieldPath::nil(), BadValue::Omitted, "bad"),
                "<nil>: Invalid value: bad",
            ),
            (
                FieldError::invalid(&size, BadValue::Json(json!(1.5)), "x"),
                "spec.size: Invalid value: 1.5: x",
            ),
        ];
        for (err, want) in cases {
            assert_eq!(err.to_string(), want);
        }
        assert_eq!(
            FieldError::required(&size, "").reason(),
            "FieldValueRequired"
        );
    }
}

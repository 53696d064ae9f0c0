//! The 422 `Invalid` status built by `apierrors.NewInvalid`, and the 400 strict-decoding message.

use crate::field_error::FieldError;

/// One `details.causes[]` entry of an `Invalid` status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatusCause {
    /// `reason` (`FieldValueInvalid`, ...).
    pub reason: &'static str,
    /// `message`: the error body without the field.
    pub message: String,
    /// `field`.
    pub field: String,
}

/// `field.ErrorList.ToAggregate()`: the errors whose text was not seen before, in order.
pub fn dedup(errors: &[FieldError]) -> Vec<&FieldError> {
    let mut seen = std::collections::HashSet::new();
    errors
        .iter()
        .filter(|e| seen.insert(e.to_string()))
        .collect()
}

/// The message of `apierrors.NewInvalid(kind, name, errs)`:
/// `EtcdCluster.etcd.operator.rs "x" is invalid: spec.size: Invalid value: 0: ...` for one error,
/// `... is invalid: [e1, e2]` for several (duplicates removed), `... is invalid` for none.
/// `group` is empty for the core group, which drops the `.group` suffix like `GroupKind.String()`.
pub fn invalid_message(kind: &str, group: &str, name: &str, errors: &[FieldError]) -> String {
    let qualified = if group.is_empty() {
        kind.to_owned()
    } else {
        format!("{kind}.{group}")
    };
    let head = format!("{qualified} {} is invalid", crate::gofmt::quote(name));
    let unique = dedup(errors);
    match unique.as_slice() {
        [] => head,
        [one] => format!("{head}: {one}"),
        many => {
            let texts: Vec<String> = many.iter().map(|e| e.to_string()).collect();
            format!("{head}: [{}]", texts.join(", "))
        }
    }
}

/// The `details.causes` of an `Invalid` status: one per error, duplicates kept (as Go does).
pub fn causes(errors: &[FieldError]) -> Vec<StatusCause> {
    errors
        .iter()
        .map(|e| StatusCause {
            reason: e.reason(),
            message: e.body(),
            field: e.field.clone(),
        })
        .collect()
}

/// The text after `cannot be handled as a <Kind>: ` in the 400 answer to a strict create/update:
/// `strict decoding error: duplicate field "spec.size", unknown field "spec.foo"`.
/// Duplicates come first (the JSON decoder reports them), then the fields pruning removed.
pub fn strict_decoding_message(duplicate_fields: &[String], unknown_fields: &[String]) -> String {
    let mut parts: Vec<String> = duplicate_fields
        .iter()
        .map(|p| format!("duplicate field {}", crate::gofmt::quote(p)))
        .collect();
    // The apiserver formats unknown fields with `"%s"`, not `%q`: no escaping.
    parts.extend(
        unknown_fields
            .iter()
            .map(|p| format!("unknown field \"{p}\"")),
    );
    format!("strict decoding error: {}", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::field_error::BadValue;
    use crate::path::FieldPath;
    use serde_json::json;

    fn size_error(v: i64) -> FieldError {
        FieldError::invalid(
            &FieldPath::new("spec").child("size"),
            BadValue::Json(json!(v)),
            "spec.size in body should be greater than or equal to 1",
        )
    }

    #[test]
    fn one_error_is_inline() {
        assert_eq!(
            invalid_message("EtcdCluster", "etcd.operator.rs", "x", &[size_error(0)]),
            "EtcdCluster.etcd.operator.rs \"x\" is invalid: spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1"
        );
    }

    #[test]
    fn several_errors_are_bracketed_and_deduplicated() {
        let other = FieldError::required(&FieldPath::new("spec").child("version"), "");
        let msg = invalid_message(
            "EtcdCluster",
            "etcd.operator.rs",
            "x",
            &[size_error(0), other.clone(), size_error(0)],
        );
        assert_eq!(
            msg,
            "EtcdCluster.etcd.operator.rs \"x\" is invalid: [spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1, spec.version: Required value]"
        );
        // Two copies of the same error collapse to the single-error form.
        let msg = invalid_message("Pod", "", "p", &[other.clone(), other]);
        assert_eq!(msg, "Pod \"p\" is invalid: spec.version: Required value");
        assert_eq!(invalid_message("Pod", "", "p", &[]), "Pod \"p\" is invalid");
    }

    #[test]
    fn causes_carry_reason_body_and_field() {
        let c = causes(&[size_error(0)]);
        assert_eq!(c[0].reason, "FieldValueInvalid");
        assert_eq!(c[0].field, "spec.size");
        assert_eq!(
            c[0].message,
            "Invalid value: 0: spec.size in body should be greater than or equal to 1"
        );
    }

    #[test]
    fn strict_message_lists_duplicates_then_unknowns() {
        assert_eq!(
            strict_decoding_message(
                &["spec.size".into()],
                &["spec.foo".into(), "spec.items[0].bar".into()]
            ),
            "strict decoding error: duplicate field \"spec.size\", unknown field \"spec.foo\", unknown field \"spec.items[0].bar\""
        );
    }
}

//! The JSON a Go client would have sent: `encoding/json` applied to the Go struct that the
//! protobuf message decodes into.
//!
//! The protobuf wire does not say what the JSON looks like, the Go struct tags do. gogo-generated
//! marshallers write every non-pointer field, even when it is empty, and write pointer fields only
//! when they are set. Go's `encoding/json` then drops zero values of `omitempty` fields, never drops
//! a struct-valued field (`"status":{}`, `"creationTimestamp":null`), and writes `null` for a nil
//! slice or map that lacks `omitempty`. Each message field therefore carries one of four rules:
//!
//! | rule | Go field | JSON |
//! |---|---|---|
//! | [`omit`] | value type with `omitempty` | written unless it is Go's zero value |
//! | [`ptr`] | pointer | written when set, even when it points at a zero value |
//! | [`always`] | struct value, or a field without `omitempty` | always written; Go's zero value when absent |
//! | [`inline`] | embedded struct (`json:",inline"`) | its fields are merged into the parent object |
//!
//! The [`go_json!`](crate::go_json) macro turns one table per message into a [`ToJson`] impl; it
//! destructures the message exhaustively, so a field added to `k8s-pb` breaks the build instead
//! of being dropped silently.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::DecodeError;

/// A protobuf value that has a Go JSON form: scalars, bytes, the hand-written well-known types and
/// every message listed in a [`json_table!`] table.
pub(crate) trait ToJson {
    /// What Go's `encoding/json` writes for this value.
    fn to_json(&self) -> Result<Value, DecodeError>;

    /// Go's `omitempty` test. Structs are never empty for `encoding/json`, hence the default.
    fn is_go_zero(&self) -> bool {
        false
    }
}

/// A message field as prost stores it: `Option<T>` (optional scalar or message), `Vec<T>`
/// (repeated) or `BTreeMap<String, T>` (map).
pub(crate) trait Field {
    /// Whether the field was on the wire, i.e. whether the Go pointer is non-nil.
    fn is_set(&self) -> bool;
    /// Whether the Go field holds its zero value, which `omitempty` drops.
    fn is_go_zero(&self) -> bool;
    /// The JSON of the Go field, Go's zero value when the field was absent.
    fn go_value(&self) -> Result<Value, DecodeError>;
}

impl<T: ToJson + Default> Field for Option<T> {
    fn is_set(&self) -> bool {
        self.is_some()
    }

    fn is_go_zero(&self) -> bool {
        self.as_ref().is_none_or(ToJson::is_go_zero)
    }

    fn go_value(&self) -> Result<Value, DecodeError> {
        match self {
            Some(value) => value.to_json(),
            None => T::default().to_json(),
        }
    }
}

impl<T: ToJson> Field for Vec<T> {
    fn is_set(&self) -> bool {
        !self.is_empty()
    }

    fn is_go_zero(&self) -> bool {
        self.is_empty()
    }

    /// An empty repeated field decodes to a nil slice, which Go writes as `null`.
    fn go_value(&self) -> Result<Value, DecodeError> {
        if self.is_empty() {
            return Ok(Value::Null);
        }
        self.iter()
            .map(ToJson::to_json)
            .collect::<Result<_, _>>()
            .map(Value::Array)
    }
}

impl<T: ToJson> Field for BTreeMap<String, T> {
    fn is_set(&self) -> bool {
        !self.is_empty()
    }

    fn is_go_zero(&self) -> bool {
        self.is_empty()
    }

    /// An empty map field decodes to a nil map, which Go writes as `null`.
    fn go_value(&self) -> Result<Value, DecodeError> {
        if self.is_empty() {
            return Ok(Value::Null);
        }
        self.iter()
            .map(|(key, value)| Ok((key.clone(), value.to_json()?)))
            .collect::<Result<Map<_, _>, _>>()
            .map(Value::Object)
    }
}

/// Rule for a value-type field tagged `omitempty`.
pub(crate) fn omit(
    out: &mut Map<String, Value>,
    name: &str,
    field: &impl Field,
) -> Result<(), DecodeError> {
    if !field.is_go_zero() {
        out.insert(name.to_owned(), field.go_value()?);
    }
    Ok(())
}

/// Rule for a pointer field.
pub(crate) fn ptr(
    out: &mut Map<String, Value>,
    name: &str,
    field: &impl Field,
) -> Result<(), DecodeError> {
    if field.is_set() {
        out.insert(name.to_owned(), field.go_value()?);
    }
    Ok(())
}

/// Rule for a struct-valued field or a field without `omitempty`.
pub(crate) fn always(
    out: &mut Map<String, Value>,
    name: &str,
    field: &impl Field,
) -> Result<(), DecodeError> {
    out.insert(name.to_owned(), field.go_value()?);
    Ok(())
}

/// Rule for an embedded struct: Go promotes its fields into the parent object.
pub(crate) fn inline(out: &mut Map<String, Value>, field: &impl Field) -> Result<(), DecodeError> {
    if let Value::Object(fields) = field.go_value()? {
        out.extend(fields);
    }
    Ok(())
}

/// Implements [`ToJson`] for messages from a table of `field: rule "jsonName"` lines
/// (`field: inline` for embedded structs). The field list must be complete: the message is
/// destructured without `..`.
macro_rules! json_table {
    ($($message:ident { $($field:ident : $rule:ident $($json:literal)?),* $(,)? })*) => {
        $(
            impl $crate::go_json::ToJson for $message {
                fn to_json(&self) -> ::core::result::Result<::serde_json::Value, $crate::DecodeError> {
                    let $message { $($field),* } = self;
                    let mut out = ::serde_json::Map::new();
                    $( $crate::go_json::$rule(&mut out, $($json,)? $field)?; )*
                    Ok(::serde_json::Value::Object(out))
                }
            }
        )*
    };
}
pub(crate) use json_table;

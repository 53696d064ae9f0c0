//! Go JSON of protobuf scalars and of the apimachinery types whose Go JSON is hand-written
//! (`MarshalJSON`): `Time`, `MicroTime`, `Quantity`, `IntOrString`, `FieldsV1`.

use base64::Engine as _;
use k8s_pb::apimachinery::pkg::api::resource::Quantity;
use k8s_pb::apimachinery::pkg::apis::meta::v1::{FieldsV1, MicroTime, Time};
use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::Value;

use crate::DecodeError;
use crate::go_json::ToJson;
use crate::timestamp;

impl ToJson for String {
    fn to_json(&self) -> Result<Value, DecodeError> {
        Ok(Value::String(self.clone()))
    }

    fn is_go_zero(&self) -> bool {
        self.is_empty()
    }
}

impl ToJson for bool {
    fn to_json(&self) -> Result<Value, DecodeError> {
        Ok(Value::Bool(*self))
    }

    fn is_go_zero(&self) -> bool {
        !*self
    }
}

impl ToJson for i32 {
    fn to_json(&self) -> Result<Value, DecodeError> {
        Ok(Value::from(*self))
    }

    fn is_go_zero(&self) -> bool {
        *self == 0
    }
}

impl ToJson for i64 {
    fn to_json(&self) -> Result<Value, DecodeError> {
        Ok(Value::from(*self))
    }

    fn is_go_zero(&self) -> bool {
        *self == 0
    }
}

/// `[]byte`: Go writes standard base64 with padding (Secret `data`, ConfigMap `binaryData`).
impl ToJson for Vec<u8> {
    fn to_json(&self) -> Result<Value, DecodeError> {
        Ok(Value::String(
            base64::engine::general_purpose::STANDARD.encode(self),
        ))
    }

    fn is_go_zero(&self) -> bool {
        self.is_empty()
    }
}

/// `metav1.Time`: second precision, `null` for the zero time. Go's protobuf decoder drops the
/// nanoseconds and reads an empty message as the zero time.
impl ToJson for Time {
    fn to_json(&self) -> Result<Value, DecodeError> {
        if self.seconds.is_none() && self.nanos.is_none() {
            return Ok(Value::Null);
        }
        let seconds = self.seconds.unwrap_or(0);
        if seconds == timestamp::GO_ZERO_UNIX_SECONDS {
            return Ok(Value::Null);
        }
        timestamp::rfc3339(seconds, None).map(Value::String)
    }
}

/// `metav1.MicroTime`: microsecond precision (six digits), `null` for the zero time.
impl ToJson for MicroTime {
    fn to_json(&self) -> Result<Value, DecodeError> {
        if self.seconds.is_none() && self.nanos.is_none() {
            return Ok(Value::Null);
        }
        let (seconds, micros) =
            timestamp::normalize_micros(self.seconds.unwrap_or(0), self.nanos.unwrap_or(0));
        if seconds == timestamp::GO_ZERO_UNIX_SECONDS && micros == 0 {
            return Ok(Value::Null);
        }
        timestamp::rfc3339(seconds, Some(micros)).map(Value::String)
    }
}

/// `resource.Quantity` travels as its canonical string in both encodings; an unset one is `"0"`.
impl ToJson for Quantity {
    fn to_json(&self) -> Result<Value, DecodeError> {
        Ok(Value::String(
            self.string.clone().unwrap_or_else(|| "0".to_owned()),
        ))
    }
}

/// `intstr.IntOrString`: type 0 is the number `intVal`, type 1 the string `strVal`.
impl ToJson for IntOrString {
    fn to_json(&self) -> Result<Value, DecodeError> {
        match self.r#type.unwrap_or(0) {
            0 => Ok(Value::from(self.int_val.unwrap_or(0))),
            1 => Ok(Value::String(self.str_val.clone().unwrap_or_default())),
            other => Err(DecodeError::Malformed(format!(
                "impossible IntOrString.Type {other}"
            ))),
        }
    }
}

/// `metav1.FieldsV1`: `raw` holds the JSON object itself.
impl ToJson for FieldsV1 {
    fn to_json(&self) -> Result<Value, DecodeError> {
        match &self.raw {
            None => Ok(Value::Null),
            Some(raw) => serde_json::from_slice(raw).map_err(|error| {
                DecodeError::Malformed(format!("managedFields fieldsV1 is not JSON: {error}"))
            }),
        }
    }
}

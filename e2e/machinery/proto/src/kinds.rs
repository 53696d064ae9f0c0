//! The kinds real clients send as protobuf, and the decoding of one `raw` message into its JSON.

use k8s_pb::api::batch::v1::Job;
use k8s_pb::api::core::v1::{ConfigMap, Event, Namespace, Secret, ServiceAccount};
use k8s_pb::api::policy::v1::Eviction;
use k8s_pb::apimachinery::pkg::apis::meta::v1::DeleteOptions;
use serde_json::Value;

use crate::DecodeError;
use crate::envelope::Envelope;
use crate::go_json::ToJson;

/// `(apiVersion, kind)` pairs [`crate::decode`] accepts. `DeleteOptions` is accepted under every
/// apiVersion: client-go stamps it with the group version of the client that sends it (`v1`,
/// `apps/v1`, `batch/v1`…), because `metav1.AddToGroupVersion` registers it in every group.
pub const SUPPORTED: &[(&str, &str)] = &[
    ("v1", "Secret"),
    ("v1", "ConfigMap"),
    ("v1", "Namespace"),
    ("v1", "Event"),
    ("v1", "ServiceAccount"),
    ("policy/v1", "Eviction"),
    ("batch/v1", "Job"),
    ("*", "DeleteOptions"),
];

/// Decodes `envelope.raw` as the message of its kind and returns the Go JSON of the object with
/// `apiVersion` and `kind` from the envelope (the message itself carries no type fields).
pub(crate) fn to_json(envelope: &Envelope) -> Result<Value, DecodeError> {
    let raw = envelope.raw.as_slice();
    let object = match (envelope.api_version.as_str(), envelope.kind.as_str()) {
        (_, "DeleteOptions") => message::<DeleteOptions>(raw)?,
        ("v1", "Secret") => message::<Secret>(raw)?,
        ("v1", "ConfigMap") => message::<ConfigMap>(raw)?,
        ("v1", "Namespace") => message::<Namespace>(raw)?,
        ("v1", "Event") => message::<Event>(raw)?,
        ("v1", "ServiceAccount") => message::<ServiceAccount>(raw)?,
        ("policy/v1", "Eviction") => message::<Eviction>(raw)?,
        ("batch/v1", "Job") => message::<Job>(raw)?,
        _ => {
            return Err(DecodeError::UnsupportedKind {
                api_version: envelope.api_version.clone(),
                kind: envelope.kind.clone(),
            });
        }
    };
    let Value::Object(fields) = object else {
        return Err(DecodeError::Malformed(format!(
            "{} is not an object",
            envelope.kind
        )));
    };
    let mut typed = serde_json::Map::with_capacity(fields.len() + 2);
    typed.insert("kind".to_owned(), Value::String(envelope.kind.clone()));
    typed.insert(
        "apiVersion".to_owned(),
        Value::String(envelope.api_version.clone()),
    );
    typed.extend(fields);
    Ok(Value::Object(typed))
}

fn message<M: prost::Message + Default + ToJson>(raw: &[u8]) -> Result<Value, DecodeError> {
    M::decode(raw)
        .map_err(|error| DecodeError::Malformed(error.to_string()))?
        .to_json()
}

//! Kubernetes protobuf request bodies (the `k8s\0` envelope) decoded into the JSON the API server
//! stores, for the kinds real clients send as protobuf.
//!
//! client-go ≥ v0.32 typed clients (helm 3.17/4.x release Secrets, kubectl 1.32+ `create secret|
//! configmap|namespace|job`, typed `Delete` bodies) send `application/vnd.kubernetes.protobuf`
//! and do not retry as JSON after a 415. [`decode`] returns exactly the JSON object the same Go
//! client would have sent with `application/json`, so the server keeps a single JSON code path:
//! camelCase names, Go's `omitempty` rules (`"creationTimestamp":null`, `"spec":{}`), bytes as
//! base64, times as RFC 3339.
//!
//! Known limit: messages come from `k8s-pb` 0.9 (Kubernetes 1.35). Fields a newer client adds
//! are skipped, as protobuf skips unknown fields.

mod envelope;
mod go_json;
mod kinds;
mod messages;
mod scalars;
#[cfg(feature = "testing")]
pub mod testing;
mod timestamp;

pub use envelope::MAGIC;
pub use kinds::SUPPORTED;

/// `Content-Type` of a Kubernetes protobuf body.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// Why a protobuf body was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The body lacks the `k8s\0` magic: answer 400 BadRequest.
    #[error("the body does not start with the Kubernetes protobuf prefix \"k8s\\x00\"")]
    NotProtobuf,
    /// The envelope or the message is not valid protobuf, or holds a value Go could not have
    /// written (bad timestamp, `fieldsV1` that is not JSON…): answer 400 BadRequest.
    #[error("malformed protobuf body: {0}")]
    Malformed(String),
    /// A kind this crate has no decoder for (see [`SUPPORTED`]): answer 415 UnsupportedMediaType.
    #[error("no protobuf decoder for kind {kind:?} in version {api_version:?}")]
    UnsupportedKind {
        /// `apiVersion` from the envelope.
        api_version: String,
        /// `kind` from the envelope.
        kind: String,
    },
}

/// Decodes a whole `application/vnd.kubernetes.protobuf` request body into the JSON object the
/// client would have sent as JSON, `apiVersion` and `kind` included.
pub fn decode(body: &[u8]) -> Result<serde_json::Value, DecodeError> {
    kinds::to_json(&envelope::open(body)?)
}

//! The `k8s\0` envelope: a magic prefix, then a `runtime.Unknown` whose `raw` holds the object.

use k8s_pb::apimachinery::pkg::runtime::Unknown;
use prost::Message as _;

use crate::{DecodeError, MEDIA_TYPE};

/// The four bytes every Kubernetes protobuf body starts with (`k8s` and a NUL).
pub const MAGIC: [u8; 4] = *b"k8s\0";

/// An opened envelope: the object's type and its still-encoded message.
#[derive(Debug)]
pub(crate) struct Envelope {
    pub(crate) api_version: String,
    pub(crate) kind: String,
    pub(crate) raw: Vec<u8>,
}

/// Checks the magic, decodes the `runtime.Unknown` and insists on the one encoding clients use:
/// `contentEncoding` empty and `contentType` empty (what the Go serializer writes) or the
/// protobuf media type itself. Both type fields must be present, since no URL default is known
/// here.
pub(crate) fn open(body: &[u8]) -> Result<Envelope, DecodeError> {
    let rest = body.strip_prefix(&MAGIC).ok_or(DecodeError::NotProtobuf)?;
    let unknown = Unknown::decode(rest)
        .map_err(|error| DecodeError::Malformed(format!("envelope: {error}")))?;
    if let Some(encoding) = unknown
        .content_encoding
        .as_deref()
        .filter(|encoding| !encoding.is_empty())
    {
        return Err(DecodeError::Malformed(format!(
            "unsupported contentEncoding {encoding:?}"
        )));
    }
    if let Some(content_type) = unknown
        .content_type
        .as_deref()
        .filter(|t| !t.is_empty() && *t != MEDIA_TYPE)
    {
        return Err(DecodeError::Malformed(format!(
            "unsupported contentType {content_type:?}"
        )));
    }
    let type_meta = unknown.type_meta.unwrap_or_default();
    let api_version = type_meta.api_version.unwrap_or_default();
    let kind = type_meta.kind.unwrap_or_default();
    if kind.is_empty() {
        return Err(DecodeError::Malformed(
            "Object 'Kind' is missing in the envelope".to_owned(),
        ));
    }
    if api_version.is_empty() {
        return Err(DecodeError::Malformed(
            "Object 'apiVersion' is missing in the envelope".to_owned(),
        ));
    }
    Ok(Envelope {
        api_version,
        kind,
        raw: unknown.raw.unwrap_or_default(),
    })
}

//! Builds protobuf request bodies the way client-go does, for tests here and in the server.

use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
use prost::Message;

use crate::MAGIC;

/// A request body as client-go's protobuf serializer writes it: the magic, then a
/// `runtime.Unknown` with the type, the encoded message and empty `contentEncoding` and
/// `contentType` (gogo writes empty non-pointer strings).
pub fn envelope(api_version: &str, kind: &str, message: &impl Message) -> Vec<u8> {
    envelope_raw(api_version, kind, message.encode_to_vec())
}

/// Like [`envelope`], with `raw` given as bytes (for corrupt or foreign messages).
pub fn envelope_raw(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
    let unknown = Unknown {
        type_meta: Some(TypeMeta {
            api_version: Some(api_version.to_owned()),
            kind: Some(kind.to_owned()),
        }),
        raw: Some(raw),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    let mut body = MAGIC.to_vec();
    body.extend(unknown.encode_to_vec());
    body
}

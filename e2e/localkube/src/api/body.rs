//! Request bodies and response encodings: JSON, YAML (apply patches), Kubernetes protobuf for
//! the kinds real clients send that way; responses are always JSON (spec §a1).

use axum::http::HeaderMap;
use serde_json::Value;

use super::status::ApiError;

/// kube-apiserver's request body limit (3 MiB).
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

pub fn content_type(headers: &HeaderMap) -> String {
    headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        })
        .unwrap_or_default()
}

/// Decode a create/update body by its media type.
pub fn decode_object(headers: &HeaderMap, body: &[u8]) -> Result<Value, ApiError> {
    let media = content_type(headers);
    let value = match media.as_str() {
        "" | "application/json" | "*/*" => parse_json(body)?,
        "application/yaml" | "application/apply-patch+yaml" => parse_yaml(body)?,
        localkube_proto::MEDIA_TYPE => localkube_proto::decode(body).map_err(proto_error)?,
        other => {
            return Err(ApiError::unsupported_media_type(format!(
                "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf (got {other})"
            )));
        }
    };
    if !value.is_object() {
        return Err(ApiError::bad_request(
            "Object 'Kind' is missing in the request body",
        ));
    }
    Ok(value)
}

pub fn proto_error(e: localkube_proto::DecodeError) -> ApiError {
    match e {
        localkube_proto::DecodeError::UnsupportedKind { api_version, kind } => {
            ApiError::unsupported_media_type(format!(
                "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml (protobuf is not served for {kind} in {api_version})"
            ))
        }
        other => ApiError::bad_request(other.to_string()),
    }
}

pub fn parse_json(body: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding request body: {e}")))
}

/// YAML is a superset of JSON; kube-rs sends JSON under `application/apply-patch+yaml`.
pub fn parse_yaml(body: &[u8]) -> Result<Value, ApiError> {
    if let Ok(v) = serde_json::from_slice::<Value>(body) {
        return Ok(v);
    }
    let text = std::str::from_utf8(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?;
    serde_saphyr::from_str::<Value>(text)
        .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))
}

/// Whether the client accepts a JSON answer (every client we know lists it, often after
/// protobuf). `as=Table` requests are handled separately.
pub fn accepts_json(headers: &HeaderMap) -> bool {
    let Some(accept) = headers
        .get(axum::http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
    else {
        return true;
    };
    accept.split(',').any(|part| {
        let media = part.split(';').next().unwrap_or("").trim();
        matches!(
            media,
            "application/json" | "application/*" | "*/*" | "" | "application/yaml"
        )
    })
}

/// Whether the client asked for a server-side `meta.k8s.io/v1 Table` (kubectl get).
pub fn wants_table(headers: &HeaderMap) -> bool {
    headers
        .get(axum::http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .map(|accept| {
            accept
                .split(',')
                .next()
                .is_some_and(|first| first.contains("as=Table") && first.contains("g=meta.k8s.io"))
        })
        .unwrap_or(false)
}

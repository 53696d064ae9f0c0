//! Errors of the apply engine.

use crate::conflict::ApplyConflict;

/// A FieldsV1 document that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FieldsV1Error {
    /// A trie node, or the document, is not a JSON object.
    #[error("expected a JSON object")]
    NotAnObject,
    /// The text is not JSON.
    #[error("invalid JSON: {0}")]
    Json(String),
    /// A key is not a valid path element.
    #[error("{0}")]
    Element(String),
    /// Nested deeper than any real object.
    #[error("fieldsV1 nested too deeply")]
    TooDeep,
}

/// Why an apply (or the typed walk of an object) failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ApplyError {
    /// Fields owned by other managers would change: HTTP 409 (see [`ApplyConflict::to_status`]).
    #[error("{0}")]
    Conflict(ApplyConflict),
    /// The request itself is malformed (kube-apiserver answers 400 BadRequest with this text),
    /// e.g. `metadata.managedFields must be nil`.
    #[error("{0}")]
    BadRequest(String),
    /// The applied configuration or the live object does not fit its schema, in
    /// structured-merge-diff's wording, e.g.
    /// `.spec.containers: duplicate entries for key [name="a"]`, or `errors:\n  <e1>\n  <e2>` for
    /// several. kube-apiserver answers 500 (a Status without reason) with the message
    /// `failed to create typed patch object (<ns>/<name>; apps/v1, Kind=Deployment): <this>`
    /// (`/v1, Kind=Service` for the core group).
    #[error("{0}")]
    Invalid(String),
    /// The live object's managedFields cannot be decoded (kube-apiserver: 500,
    /// `failed to decode managed fields: ...`).
    #[error("failed to decode managed fields: {0}")]
    ManagedFields(String),
}

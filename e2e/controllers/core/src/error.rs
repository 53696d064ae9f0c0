//! The one error type of the crate. A reconcile that fails with it is logged and retried with
//! per-object backoff; it never ends [`crate::run`].

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("encoding an object: {0}")]
    Json(#[from] serde_json::Error),
    #[error("{object}: {reason}")]
    Invalid { object: String, reason: String },
    #[error("discovery: {0}")]
    Discovery(String),
}

impl Error {
    pub(crate) fn invalid(object: impl Into<String>, reason: impl Into<String>) -> Error {
        Error::Invalid {
            object: object.into(),
            reason: reason.into(),
        }
    }
}

/// Whether an API error is a 404 (the object, or its kind, is gone).
pub(crate) fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// Whether an API error is a 409 (AlreadyExists on create, a stale resourceVersion on update).
pub(crate) fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

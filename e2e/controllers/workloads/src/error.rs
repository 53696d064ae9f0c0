//! The crate's error type. Errors end one reconcile (which is retried with backoff), never the
//! controllers.

/// What can go wrong while reconciling one object.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The API server refused or could not answer a request.
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    /// An object observed from the API lacks something every real object has (name, uid, ...).
    #[error("{kind} {name}: {reason}")]
    Invalid {
        kind: &'static str,
        name: String,
        reason: String,
    },
    /// A watch behind a controller ended with an error it could not recover from.
    #[error("{controller} controller stopped: {reason}")]
    Stopped {
        controller: &'static str,
        reason: String,
    },
}

impl Error {
    pub(crate) fn invalid(kind: &'static str, name: &str, reason: impl Into<String>) -> Error {
        Error::Invalid {
            kind,
            name: name.to_string(),
            reason: reason.into(),
        }
    }
}

/// The HTTP status of an API error, if the server answered one.
pub(crate) fn status_code(err: &kube::Error) -> Option<u16> {
    match err {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

/// True when the error says the object is already gone (404), which deletes treat as done.
pub(crate) fn is_not_found(err: &kube::Error) -> bool {
    status_code(err) == Some(404)
}

/// True when a create found the name taken (409 AlreadyExists).
pub(crate) fn is_already_exists(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(status) if status.code == 409 && status.reason == "AlreadyExists")
}

//! The errors of the three patch engines and how kube-apiserver turns each into a response.
//!
//! `Display` is the text of the Go library error (what kube-apiserver logs or puts in its
//! message); [`PatchError::status`] is what the client actually receives, which is not always
//! the same: `NewGenericServerResponse(422, …)` replaces the library text with a fixed sentence.

/// What kube-apiserver writes back for a failed patch: the fields of its `metav1.Status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorStatus {
    /// HTTP status code (also `Status.code`).
    pub code: u16,
    /// `Status.reason`; empty when Go leaves it unset (plain errors become a 500 without reason).
    pub reason: &'static str,
    /// `Status.message`, or the plain-text body when `plain_text` is set.
    pub message: String,
    /// `NewGenericServerResponse` always sets `details` to an object whose fields are all empty,
    /// so the JSON carries `"details":{}`; other constructors omit `details`.
    pub empty_details: bool,
    /// A Go runtime panic: the panic filter answers `text/plain`, not a `Status`.
    pub plain_text: bool,
}

/// Body of kube-apiserver's answer to a request whose handler panicked (`filters/wrap.go`).
pub const PANIC_BODY: &str =
    "This request caused apiserver to panic. Look in the logs for details.";

/// The fixed message `NewGenericServerResponse` uses for every 422 (the library text is dropped).
pub const UNPROCESSABLE_MESSAGE: &str =
    "the server rejected our request due to an error in our request";

/// Media types the apiextensions server accepts for a patch of a custom resource, in its order.
pub const CUSTOM_RESOURCE_PATCH_TYPES: &str =
    "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml";

/// A patch that cannot be applied. Each variant is one way kube-apiserver answers.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatchError {
    /// The body does not have the shape the patch type needs (not an array of operations, not an
    /// object, a field of the wrong JSON type): 400 BadRequest carrying this exact text.
    #[error("{0}")]
    BadRequest(String),
    /// More JSON-patch operations than kube-apiserver accepts (`maxJSONPatchOperations`): 413.
    #[error("The allowed maximum operations in a JSON patch is {max}, got {got}")]
    TooManyOperations {
        /// The limit, 10000.
        max: usize,
        /// How many operations the patch had.
        got: usize,
    },
    /// evanphx/json-patch refused an operation (missing path, failed `test`, bad index…):
    /// 422 Invalid with the generic message; the text here is the library's.
    #[error("{0}")]
    JsonPatch(String),
    /// `mergepatch.ErrNoListOfLists`: 422 Invalid with the generic message.
    #[error("lists of lists are not supported")]
    NoListOfLists,
    /// `mergepatch.ErrBadPatchFormatForPrimitiveList`: 400.
    #[error("invalid patch format of primitive list")]
    BadPatchFormatForPrimitiveList,
    /// `mergepatch.ErrBadPatchFormatForRetainKeys`: 400.
    #[error("invalid patch format of retainKeys")]
    BadPatchFormatForRetainKeys,
    /// `mergepatch.ErrBadPatchFormatForSetElementOrderList`: 400.
    #[error("invalid patch format of setElementOrder list")]
    BadPatchFormatForSetElementOrderList,
    /// Any other strategic-merge failure (missing merge key, mixed element types, unknown
    /// `$patch` value…). `interpretStrategicMergePatchError` passes these through unchanged, so
    /// the client gets a 500 with no reason and this text as the message.
    #[error("{0}")]
    Internal(String),
    /// Strategic merge patch of a kind without Go struct tags (custom resources): the
    /// apiextensions server does not list the media type, so the request gets 415.
    #[error(
        "the body of the request was in an unknown format - accepted media types include: {CUSTOM_RESOURCE_PATCH_TYPES}"
    )]
    UnsupportedMediaType,
    /// The Go code would panic on this input (nil dereference, comparing or hashing a map);
    /// the text is the Go runtime message, the client gets a plain-text 500.
    #[error("{0}")]
    GoPanic(&'static str),
    /// The document or patch nests deeper than this engine recurses ([`crate::MAX_DEPTH`]).
    #[error("the patch or the object nests deeper than {0} levels")]
    TooDeep(usize),
}

impl PatchError {
    /// The HTTP status kube-apiserver answers with.
    pub fn http_status(&self) -> u16 {
        self.status().code
    }

    /// The full response kube-apiserver gives for this error (code, reason, message).
    pub fn status(&self) -> ErrorStatus {
        let plain = |code: u16, reason: &'static str, message: String| ErrorStatus {
            code,
            reason,
            message,
            empty_details: false,
            plain_text: false,
        };
        match self {
            Self::BadRequest(_)
            | Self::BadPatchFormatForPrimitiveList
            | Self::BadPatchFormatForRetainKeys
            | Self::BadPatchFormatForSetElementOrderList
            | Self::TooDeep(_) => plain(400, "BadRequest", self.to_string()),
            Self::TooManyOperations { .. } => plain(
                413,
                "RequestEntityTooLarge",
                format!("Request entity too large: {self}"),
            ),
            Self::JsonPatch(_) | Self::NoListOfLists => ErrorStatus {
                empty_details: true,
                ..plain(422, "Invalid", UNPROCESSABLE_MESSAGE.to_owned())
            },
            Self::Internal(_) => plain(500, "", self.to_string()),
            Self::UnsupportedMediaType => plain(415, "UnsupportedMediaType", self.to_string()),
            Self::GoPanic(_) => ErrorStatus {
                plain_text: true,
                ..plain(500, "", PANIC_BODY.to_owned())
            },
        }
    }
}

/// Go runtime panic texts for the inputs on which the Go code panics.
pub(crate) mod panics {
    pub(crate) const NIL_DEREFERENCE: &str =
        "runtime error: invalid memory address or nil pointer dereference";
    pub(crate) const COMPARE_MAP: &str =
        "runtime error: comparing uncomparable type map[string]interface {}";
    pub(crate) const COMPARE_SLICE: &str =
        "runtime error: comparing uncomparable type []interface {}";
    pub(crate) const HASH_MAP: &str =
        "runtime error: hash of unhashable type map[string]interface {}";
    pub(crate) const HASH_SLICE: &str = "runtime error: hash of unhashable type []interface {}";
}

//! Kubernetes patch semantics for the local control plane: JSON patch as the Go library applies
//! it, JSON merge patch, strategic merge patch for built-in kinds.
//!
//! Every engine takes the stored object and the decoded request body as `serde_json::Value`s
//! and returns the patched object or a [`PatchError`] whose [`PatchError::status`] is the
//! response kube-apiserver gives for the same input (spec §0.4, §0.5 and a5).
//!
//! - [`json_patch`]: `application/json-patch+json` (evanphx/json-patch v4 rules).
//! - [`merge_patch`]: `application/merge-patch+json` (RFC 7386).
//! - [`strategic_merge_patch`]: `application/strategic-merge-patch+json`, built-in kinds only;
//!   [`supports_strategic_merge`] and [`list_merge_key`] expose its table of struct tags.

mod depth;
mod error;
mod go;
mod json_patch;
mod merge_patch;
mod strategic;

pub use depth::MAX_DEPTH;
pub use error::{
    CUSTOM_RESOURCE_PATCH_TYPES, ErrorStatus, PANIC_BODY, PatchError, UNPROCESSABLE_MESSAGE,
};
pub use json_patch::{
    MAX_COPY_BYTES, MAX_JSON_PATCH_OPERATIONS, json_patch, json_patch_unknown_fields,
};
pub use merge_patch::merge_patch;
pub use strategic::schema::{ListStrategy, list_merge_key, supports_strategic_merge};
pub use strategic::strategic_merge_patch;

/// An API group and kind, e.g. `GroupKind { group: "apps", kind: "Deployment" }`; the core
/// group is `""`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GroupKind<'a> {
    /// API group, `""` for core/v1.
    pub group: &'a str,
    /// Kind, e.g. `Pod`.
    pub kind: &'a str,
}

impl<'a> GroupKind<'a> {
    /// A group and kind.
    pub const fn new(group: &'a str, kind: &'a str) -> Self {
        Self { group, kind }
    }
}

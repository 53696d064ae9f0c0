//! Label and field selectors and the RBAC authorizer of the local control plane: parsing,
//! matching, and the real API server's wording. Everything here is pure: objects are
//! `serde_json::Value`s in their wire form, and the caller does all I/O.
//!
//! How the server uses it (spec §a7, §a11):
//! - `?labelSelector=` → [`parse_label_selector`]; an error is a 400 BadRequest whose message is
//!   the error's `Display` (e.g. `unable to parse requirement: found '', expected: identifier`).
//!   Match objects with [`LabelSelector::matches_object`].
//! - `?fieldSelector=` → [`parse_field_selector`] (400 on a syntax error), then
//!   [`FieldSelector::resolve`] against the kind's [`FieldSchema`] (400 with the kind's own
//!   wording, e.g. `field label not supported: spec.foo`), then
//!   [`ResolvedFieldSelector::matches`].
//! - Selectors inside objects (`spec.selector` of Deployments, ReplicaSets, PDBs...) →
//!   [`LabelSelectorObject`]: validation errors as [`FieldError`]s for the 422, and
//!   [`LabelSelectorObject::to_selector`]. An absent/`null` selector selects nothing, `{}`
//!   everything (see [`LabelSelectorObject`] for the per-kind rules). A Service's map selector
//!   goes through [`LabelSelector::from_match_labels`], but only when the map is non-empty: a
//!   Service without selector (absent, or `{}`, which protobuf storage turns into absent upstream)
//!   gets no endpoints.
//! - Every request by an identity outside `system:masters` → [`authorize`] with an
//!   [`RbacPolicy`] built from the stored ClusterRoles, Roles and bindings; on
//!   [`Decision::Deny`] answer 403 Forbidden with [`Forbidden::message`]. At start-up create the
//!   objects of [`bootstrap_policy`].
//!
//! Wording follows kube-apiserver 1.35–1.37 (label key/value messages changed in 1.35, see the
//! `validation` module).

mod field_error;
mod fields;
mod gofmt;
mod labels;
mod rbac;
mod validation;

pub use field_error::{FieldError, FieldErrorType};
pub use fields::{
    FieldOperator, FieldRequirement, FieldSchema, FieldSelector, FieldSelectorError,
    ResolvedFieldSelector, escape_value, parse_field_selector, unescape_value,
};
pub use labels::{
    LabelSelector, LabelSelectorObject, LabelSelectorParseError, Labels, MalformedSelector,
    Operator, Requirement, RequirementError, SelectorConversionError, SelectorExpression,
    parse_label_selector, selector_from_object,
};
pub use rbac::{
    Attributes, Decision, Forbidden, RbacPolicy, Request, ResourceRequest, SYSTEM_MASTERS,
    authorize, bootstrap_policy,
};
pub use validation::{label_key_errors, label_value_errors};

//! Server-side apply for the local control plane: field ownership in managedFields (FieldsV1),
//! conflicts between managers, and the merge of an applied configuration.
//!
//! helm 4 installs and upgrades with server-side apply (`fieldManager=helm`), `kubectl apply
//! --server-side` uses it, and kube-rs `Patch::Apply` too; `kube-lease-manager` even relies on
//! its conflicts for mutual exclusion. So ownership must be honest: this crate reproduces
//! sigs.k8s.io/structured-merge-diff (the `typed` walkers and `merge.Updater`) and
//! kube-apiserver's field manager chain (`k8s.io/apimachinery/pkg/util/managedfields`) on
//! `serde_json::Value` objects.
//!
//! The server calls [`apply`] for `application/apply-patch+yaml` patches and
//! [`record_update`] after every other write (create, update, JSON/merge/strategic patch, on the
//! resource or a subresource). The type information comes from a [`Schema`]: [`OpenApiSchema`]
//! for CRDs, a table for built-in kinds, [`Deduced`] otherwise.
//!
//! Known differences from kube-apiserver: all managers are taken to be at the request's API
//! version (no conversion between versions), and the Update sets recorded on *create* start
//! from `{}` where Go starts from the kind's zero struct, so built-in kinds may show an extra
//! `".":{}` under fields like `f:spec`.

mod conflict;
mod error;
mod field_manager;
mod fieldset;
mod fieldsv1;
mod gojson;
mod limits;
mod managed;
mod path;
mod schema;
mod typed;
mod updater;

pub use conflict::{ApplyConflict, ConflictCause};
pub use error::{ApplyError, FieldsV1Error};
pub use field_manager::{
    LAST_APPLIED_ANNOTATION, ManagedFieldsEntry, Request, apply, managed_fields, record_update,
};
pub use fieldset::FieldSet;
pub use managed::Operation;
pub use path::{Path, PathElement, field, path_string};
pub use schema::{Deduced, ListType, MapKey, MapType, OpenApiSchema, Schema, with_object_meta};

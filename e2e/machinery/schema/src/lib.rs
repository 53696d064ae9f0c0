//! Structural schemas of CustomResourceDefinitions for the local control plane: what the
//! apiserver does with a CRD's `openAPIV3Schema`, in apiextensions order — decode, prune,
//! default, validate — with kube-apiserver's words, since clients compare error texts.
//!
//! * [`StructuralSchema::compile`] is what CRD registration checks: a structural schema,
//!   compilable patterns, list-map keys, valid defaults, and CEL rules that compile. An
//!   unsupported CEL function refuses the CRD ("fail closed"), it is never skipped.
//! * [`StructuralSchema::prune`], [`StructuralSchema::apply_defaults`] and
//!   [`StructuralSchema::validate`] run on every create and update of a custom resource.
//! * [`status`] builds the 422 `Invalid` and 400 strict-decoding messages, [`names`] checks
//!   object names, [`strict`] finds duplicate keys that `serde_json` would silently merge.
//!
//! Everything is pure: no I/O, and every input is treated as untrusted (deep nesting gives an
//! error, not a stack overflow).

mod cel;
mod compile;
mod default;
mod field_error;
mod formats;
mod gofmt;
mod goregex;
mod listtype;
mod model;
pub mod names;
mod openapi;
mod path;
mod prune;
pub mod status;
pub mod strict;
mod value_eq;

use serde_json::Value;

pub use field_error::{BadValue, ErrorKind, FieldError};

use crate::path::FieldPath;

/// Where the apiserver reports problems of a CRD's single (or shared) schema.
pub const DEFAULT_SCHEMA_PATH: &str = "spec.validation.openAPIV3Schema";

/// A compiled `openAPIV3Schema`, ready to prune, default and validate objects. Cheap to share
/// between threads (`Send + Sync`).
#[derive(Debug)]
pub struct StructuralSchema {
    root: model::Node,
}

impl StructuralSchema {
    /// Checks and compiles a CRD version's `openAPIV3Schema` as CRD registration does, reporting
    /// problems under `spec.validation.openAPIV3Schema` (where the apiserver puts them when all
    /// versions share one schema), e.g.
    /// `spec.validation.openAPIV3Schema.properties[spec].type: Required value: must not be empty for specified object fields`.
    pub fn compile(schema: &Value) -> Result<Self, Vec<FieldError>> {
        Self::compile_at(schema, DEFAULT_SCHEMA_PATH)
    }

    /// Like [`compile`](Self::compile), reporting problems under `path`
    /// (`spec.versions[1].schema.openAPIV3Schema` for a version with its own schema).
    pub fn compile_at(schema: &Value, path: &str) -> Result<Self, Vec<FieldError>> {
        compile::compile(schema, &FieldPath::new(path)).map(|root| Self { root })
    }

    /// Removes from a whole object the fields the schema does not declare (honouring
    /// `x-kubernetes-preserve-unknown-fields`, `x-kubernetes-embedded-resource` and
    /// `additionalProperties`; `apiVersion`, `kind` and `metadata` at the root are the server's),
    /// then the `null`s of fields that are neither nullable nor defaulted.
    /// Returns the removed paths, sorted, as in `unknown field "spec.items[0].bar"`.
    pub fn prune(&self, obj: &mut Value) -> Vec<String> {
        prune::prune(&self.root, obj)
    }

    /// Applies `default`s: to absent fields, and to `null` fields that are not nullable, in every
    /// object the schema describes. Used on create, update and when reading from storage.
    pub fn apply_defaults(&self, obj: &mut Value) {
        default::apply(obj, &self.root);
    }

    /// Validates a whole (pruned, defaulted) object; `old` is the stored object on update.
    /// In the apiserver's order: the schema (kube-openapi messages), list sets and maps, then
    /// the CEL rules — skipped, with the apiserver's notice, when the object is already invalid
    /// in a way that could make rules misbehave. On update, unchanged values do not report
    /// errors (CRD validation ratcheting) and transition rules see `oldSelf`.
    pub fn validate(&self, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
        let mut errors = openapi::validate(&self.root, &FieldPath::nil(), obj, old);
        let list_errors = listtype::validate(&self.root, obj);
        if old.is_none_or(|o| listtype::validate(&self.root, o).is_empty()) {
            errors.extend(list_errors);
        }
        if !self.has_rules() {
            return errors;
        }
        let blocking = errors.iter().any(|e| {
            matches!(
                e.kind,
                ErrorKind::NotSupported
                    | ErrorKind::Required
                    | ErrorKind::TooLong
                    | ErrorKind::TooMany
                    | ErrorKind::TypeInvalid
            )
        });
        if blocking {
            errors.push(FieldError::invalid(
                &FieldPath::nil(),
                BadValue::Json(Value::Null),
                "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
            ));
        } else {
            cel::eval::Evaluator::new().validate(
                &self.root,
                &FieldPath::nil(),
                obj,
                old,
                old.is_some(),
                &mut errors,
            );
        }
        errors
    }

    fn has_rules(&self) -> bool {
        fn any(n: &model::Node) -> bool {
            !n.rules.is_empty()
                || n.properties.values().any(any)
                || n.items.as_deref().is_some_and(any)
                || n.additional_schema().is_some_and(any)
                || n.all_of.iter().any(any)
        }
        any(&self.root)
    }
}

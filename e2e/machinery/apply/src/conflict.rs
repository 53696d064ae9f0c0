//! The 409 an apply gets when it would change fields other managers own, worded as
//! kube-apiserver's `NewConflictError` (`managedfields/internal/conflict.go`).

use std::collections::BTreeMap;
use std::fmt;

use serde_json::{Value, json};

use crate::fieldset::FieldSet;
use crate::managed::ManagerId;
use crate::path::path_string;

/// One conflicting field (a `metav1.StatusCause` of type `FieldManagerConflict`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConflictCause {
    /// `conflict with "helm"`, `conflict with "kubectl-client-side-apply" using apps/v1`.
    pub message: String,
    /// The field, e.g. `.spec.replicas`.
    pub field: String,
}

/// An apply conflict: the message and causes of the apiserver's Status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApplyConflict {
    /// `Apply failed with 1 conflict: conflict with "helm": .spec.replicas`, or for several:
    /// `Apply failed with 2 conflicts: conflicts with "a":\n- .x\nconflicts with "b" using v1:\n- .y`.
    pub message: String,
    /// One cause per conflicting field, grouped by manager in identifier order.
    pub causes: Vec<ConflictCause>,
}

impl ApplyConflict {
    /// Builds the error from each other manager's conflicting fields, keyed by manager
    /// identifier (which is also the order managers are listed in).
    pub(crate) fn new(conflicts: &BTreeMap<String, (ManagerId, FieldSet)>) -> Self {
        let mut causes = Vec::new();
        let mut lines = Vec::new();
        let mut only = String::new();
        for (id, set) in conflicts.values() {
            let who = id.describe();
            lines.push(format!("conflicts with {who}:"));
            for path in set.paths() {
                let field = path_string(&path);
                only = format!("conflict with {who}: {field}");
                lines.push(format!("- {field}"));
                causes.push(ConflictCause {
                    message: format!("conflict with {who}"),
                    field,
                });
            }
        }
        let message = if causes.len() == 1 {
            format!("Apply failed with 1 conflict: {only}")
        } else {
            format!(
                "Apply failed with {} conflicts: {}",
                causes.len(),
                lines.join("\n")
            )
        };
        ApplyConflict { message, causes }
    }

    /// The complete `metav1.Status` body kube-apiserver sends with the 409.
    pub fn to_status(&self) -> Value {
        let causes: Vec<Value> = self
            .causes
            .iter()
            .map(|c| json!({"reason": "FieldManagerConflict", "message": c.message, "field": c.field}))
            .collect();
        json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": "Conflict",
            "details": {"causes": causes},
            "code": 409
        })
    }
}

impl fmt::Display for ApplyConflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

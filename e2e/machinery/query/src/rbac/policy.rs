//! RBAC objects (`rbac.authorization.k8s.io/v1` ClusterRole, Role, ClusterRoleBinding,
//! RoleBinding) read from their JSON form. Reading is forgiving on purpose: whatever is
//! malformed (a rule that is not an object, a non-string verb, a binding without `roleRef`)
//! contributes no permission and never an error, because one bad object must not take
//! authorization down for everybody.

use std::collections::BTreeMap;

use serde_json::Value;

/// One `rules[]` entry. Empty lists match nothing, as upstream.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PolicyRule {
    pub verbs: Vec<String>,
    pub api_groups: Vec<String>,
    pub resources: Vec<String>,
    pub resource_names: Vec<String>,
    pub non_resource_urls: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SubjectKind {
    User,
    Group,
    ServiceAccount,
    Other,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Subject {
    pub kind: SubjectKind,
    pub name: String,
    pub namespace: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RoleRef {
    pub kind: String,
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Binding {
    pub name: String,
    pub namespace: String,
    pub subjects: Vec<Subject>,
    pub role_ref: RoleRef,
}

/// Everything the authorizer reads, indexed by name. Build it from the stored objects with
/// [`RbacPolicy::from_objects`] (or the `add_*` methods when the kind is known out of band).
#[derive(Debug, Clone, Default)]
pub struct RbacPolicy {
    pub(crate) cluster_roles: BTreeMap<String, Vec<PolicyRule>>,
    /// Keyed by (namespace, name).
    pub(crate) roles: BTreeMap<(String, String), Vec<PolicyRule>>,
    /// Sorted by name, for a deterministic order of evaluation and of error reasons.
    pub(crate) cluster_role_bindings: BTreeMap<String, Binding>,
    /// Keyed by (namespace, name).
    pub(crate) role_bindings: BTreeMap<(String, String), Binding>,
}

fn string_at<'v>(v: &'v Value, pointer: &str) -> &'v str {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// The strings of a JSON list; anything that is not a list of strings yields what strings it has.
fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

fn rules(object: &Value) -> Vec<PolicyRule> {
    let Some(items) = object.get("rules").and_then(Value::as_array) else {
        return Vec::new();
    };
    items
        .iter()
        .filter(|r| r.is_object())
        .map(|r| PolicyRule {
            verbs: strings(r.get("verbs")),
            api_groups: strings(r.get("apiGroups")),
            resources: strings(r.get("resources")),
            resource_names: strings(r.get("resourceNames")),
            non_resource_urls: strings(r.get("nonResourceURLs")),
        })
        .collect()
}

fn binding(object: &Value) -> Option<Binding> {
    let role_ref = object.get("roleRef").filter(|r| r.is_object())?;
    let subjects = object
        .get("subjects")
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                // A subject without a name cannot pass API validation; ignoring it keeps a
                // malformed binding from matching an equally malformed user name.
                .filter(|s| !string_at(s, "/name").is_empty())
                .map(|s| Subject {
                    kind: match string_at(s, "/kind") {
                        "User" => SubjectKind::User,
                        "Group" => SubjectKind::Group,
                        "ServiceAccount" => SubjectKind::ServiceAccount,
                        _ => SubjectKind::Other,
                    },
                    name: string_at(s, "/name").to_string(),
                    namespace: string_at(s, "/namespace").to_string(),
                })
                .collect()
        })
        .unwrap_or_default();
    Some(Binding {
        name: string_at(object, "/metadata/name").to_string(),
        namespace: string_at(object, "/metadata/namespace").to_string(),
        subjects,
        role_ref: RoleRef {
            kind: string_at(role_ref, "/kind").to_string(),
            name: string_at(role_ref, "/name").to_string(),
        },
    })
}

impl RbacPolicy {
    /// Sorts objects by their `kind`; objects of other kinds are ignored.
    pub fn from_objects<'a>(objects: impl IntoIterator<Item = &'a Value>) -> Self {
        let mut policy = Self::default();
        for object in objects {
            match string_at(object, "/kind") {
                "ClusterRole" => policy.add_cluster_role(object),
                "Role" => policy.add_role(object),
                "ClusterRoleBinding" => policy.add_cluster_role_binding(object),
                "RoleBinding" => policy.add_role_binding(object),
                _ => {}
            }
        }
        policy
    }

    /// Only `rules` count: an `aggregationRule` is the aggregation controller's business, which
    /// writes the aggregated `rules` back into the object.
    pub fn add_cluster_role(&mut self, object: &Value) {
        let name = string_at(object, "/metadata/name");
        if !name.is_empty() {
            self.cluster_roles.insert(name.to_string(), rules(object));
        }
    }

    pub fn add_role(&mut self, object: &Value) {
        let name = string_at(object, "/metadata/name");
        let namespace = string_at(object, "/metadata/namespace");
        if !name.is_empty() {
            self.roles
                .insert((namespace.to_string(), name.to_string()), rules(object));
        }
    }

    pub fn add_cluster_role_binding(&mut self, object: &Value) {
        if let Some(b) = binding(object) {
            self.cluster_role_bindings.insert(b.name.clone(), b);
        }
    }

    pub fn add_role_binding(&mut self, object: &Value) {
        if let Some(b) = binding(object) {
            self.role_bindings
                .insert((b.namespace.clone(), b.name.clone()), b);
        }
    }
}

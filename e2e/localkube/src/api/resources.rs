//! The table of served resources: the built-in kinds of spec §a10 and, added at run time, the
//! custom resources of every Established CRD. Discovery, OpenAPI, routing and storage keys all
//! read this one table, so a kind is either fully served or not at all.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use serde_json::Value;

use super::status::GroupResource;

/// How a custom resource is checked: its structural schema and printer columns.
#[derive(Debug)]
pub struct CustomResourceInfo {
    pub schema: Option<localkube_schema::StructuralSchema>,
    pub printer_columns: Vec<Value>,
    /// The CRD's `spec.versions[].subresources.scale`, when declared.
    pub scale: Option<Value>,
    /// The raw openAPIV3Schema, for /openapi/v3.
    pub openapi_schema: Option<Value>,
}

#[derive(Debug)]
pub struct ResourceType {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub list_kind: String,
    pub plural: String,
    pub singular: String,
    pub namespaced: bool,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    /// Subresources served, e.g. `status`, `scale`, `log`, `eviction`, `binding`, `token`.
    pub subresources: Vec<String>,
    /// Storage key prefix without the trailing slash: `/registry/services/specs`.
    pub storage_prefix: String,
    /// `Some` for custom resources.
    pub custom: Option<CustomResourceInfo>,
}

impl ResourceType {
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    pub fn group_resource(&self) -> GroupResource {
        GroupResource::new(&self.group, &self.plural)
    }

    /// `Pod` or `EtcdCluster.etcd.operator.rs`, as in 422 messages.
    pub fn qualified_kind(&self) -> String {
        if self.group.is_empty() {
            self.kind.clone()
        } else {
            format!("{}.{}", self.kind, self.group)
        }
    }

    pub fn has_subresource(&self, sub: &str) -> bool {
        self.subresources.iter().any(|s| s == sub)
    }

    /// The etcd key of one object.
    pub fn key(&self, namespace: Option<&str>, name: &str) -> String {
        match namespace {
            Some(ns) if self.namespaced => format!("{}/{}/{}", self.storage_prefix, ns, name),
            _ => format!("{}/{}", self.storage_prefix, name),
        }
    }

    /// The etcd prefix of a list or watch. It always ends in `/`, otherwise namespace `default`
    /// would also match `default-2` (kube-apiserver's store.go forces the same).
    pub fn list_prefix(&self, namespace: Option<&str>) -> String {
        match namespace {
            Some(ns) if self.namespaced => format!("{}/{}/", self.storage_prefix, ns),
            _ => format!("{}/", self.storage_prefix),
        }
    }

    pub fn verbs(&self) -> Vec<&'static str> {
        vec![
            "create",
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "update",
            "watch",
        ]
    }
}

struct Builtin {
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
    namespaced: bool,
    short_names: &'static [&'static str],
    subresources: &'static [&'static str],
    /// Storage prefix under /registry when it is not the plural (kube-apiserver's overrides).
    storage: Option<&'static str>,
}

const fn b(
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
    namespaced: bool,
    short_names: &'static [&'static str],
    subresources: &'static [&'static str],
) -> Builtin {
    Builtin {
        group,
        version,
        kind,
        plural,
        namespaced,
        short_names,
        subresources,
        storage: None,
    }
}

/// Spec §a10. Storage prefixes follow `pkg/kubeapiserver/default_storage_factory_builder.go`.
const BUILTINS: &[Builtin] = &[
    b(
        "",
        "v1",
        "Namespace",
        "namespaces",
        false,
        &["ns"],
        &["status", "finalize"],
    ),
    b(
        "",
        "v1",
        "Pod",
        "pods",
        true,
        &["po"],
        &["status", "log", "eviction", "binding"],
    ),
    Builtin {
        storage: Some("services/specs"),
        ..b("", "v1", "Service", "services", true, &["svc"], &["status"])
    },
    Builtin {
        storage: Some("services/endpoints"),
        ..b("", "v1", "Endpoints", "endpoints", true, &["ep"], &[])
    },
    b("", "v1", "Secret", "secrets", true, &[], &[]),
    b("", "v1", "ConfigMap", "configmaps", true, &["cm"], &[]),
    b(
        "",
        "v1",
        "ServiceAccount",
        "serviceaccounts",
        true,
        &["sa"],
        &["token"],
    ),
    b(
        "",
        "v1",
        "PersistentVolumeClaim",
        "persistentvolumeclaims",
        true,
        &["pvc"],
        &["status"],
    ),
    b(
        "",
        "v1",
        "PersistentVolume",
        "persistentvolumes",
        false,
        &["pv"],
        &["status"],
    ),
    b("", "v1", "Event", "events", true, &["ev"], &[]),
    Builtin {
        storage: Some("minions"),
        ..b("", "v1", "Node", "nodes", false, &["no"], &["status"])
    },
    b(
        "apps",
        "v1",
        "Deployment",
        "deployments",
        true,
        &["deploy"],
        &["status", "scale"],
    ),
    b(
        "apps",
        "v1",
        "ReplicaSet",
        "replicasets",
        true,
        &["rs"],
        &["status", "scale"],
    ),
    b("batch", "v1", "Job", "jobs", true, &[], &["status"]),
    b(
        "batch",
        "v1",
        "CronJob",
        "cronjobs",
        true,
        &["cj"],
        &["status"],
    ),
    b(
        "discovery.k8s.io",
        "v1",
        "EndpointSlice",
        "endpointslices",
        true,
        &[],
        &[],
    ),
    b(
        "coordination.k8s.io",
        "v1",
        "Lease",
        "leases",
        true,
        &[],
        &[],
    ),
    Builtin {
        storage: Some("events"),
        ..b("events.k8s.io", "v1", "Event", "events", true, &["ev"], &[])
    },
    b(
        "policy",
        "v1",
        "PodDisruptionBudget",
        "poddisruptionbudgets",
        true,
        &["pdb"],
        &["status"],
    ),
    b(
        "rbac.authorization.k8s.io",
        "v1",
        "Role",
        "roles",
        true,
        &[],
        &[],
    ),
    b(
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRole",
        "clusterroles",
        false,
        &[],
        &[],
    ),
    b(
        "rbac.authorization.k8s.io",
        "v1",
        "RoleBinding",
        "rolebindings",
        true,
        &[],
        &[],
    ),
    b(
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRoleBinding",
        "clusterrolebindings",
        false,
        &[],
        &[],
    ),
    b(
        "storage.k8s.io",
        "v1",
        "StorageClass",
        "storageclasses",
        false,
        &["sc"],
        &[],
    ),
    Builtin {
        storage: Some("apiextensions.k8s.io/customresourcedefinitions"),
        ..b(
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
            "customresourcedefinitions",
            false,
            &["crd", "crds"],
            &["status"],
        )
    },
];

/// Built-in kinds that `kubectl get all` includes.
const IN_CATEGORY_ALL: &[&str] = &[
    "pods",
    "services",
    "deployments",
    "replicasets",
    "jobs",
    "cronjobs",
    "replicationcontrollers",
    "statefulsets",
    "daemonsets",
];

fn builtin(def: &Builtin) -> ResourceType {
    let categories = if IN_CATEGORY_ALL.contains(&def.plural) && def.group != "events.k8s.io" {
        vec!["all".to_string()]
    } else {
        vec![]
    };
    ResourceType {
        group: def.group.into(),
        version: def.version.into(),
        kind: def.kind.into(),
        list_kind: format!("{}List", def.kind),
        plural: def.plural.into(),
        singular: def.kind.to_lowercase(),
        namespaced: def.namespaced,
        short_names: def.short_names.iter().map(|s| s.to_string()).collect(),
        categories,
        subresources: def.subresources.iter().map(|s| s.to_string()).collect(),
        storage_prefix: format!("/registry/{}", def.storage.unwrap_or(def.plural)),
        custom: None,
    }
}

/// (group, version, plural) → the served type.
type ResourceMap = BTreeMap<(String, String, String), Arc<ResourceType>>;

/// The served resources, keyed by (group, version, plural). Cheap to clone.
#[derive(Clone)]
pub struct Registry {
    inner: Arc<RwLock<ResourceMap>>,
}

impl Default for Registry {
    fn default() -> Self {
        Self::new()
    }
}

impl Registry {
    pub fn new() -> Self {
        let map = BUILTINS
            .iter()
            .map(|d| {
                let rt = builtin(d);
                (
                    (rt.group.clone(), rt.version.clone(), rt.plural.clone()),
                    Arc::new(rt),
                )
            })
            .collect();
        Self {
            inner: Arc::new(RwLock::new(map)),
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, ResourceMap> {
        self.inner
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn get(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceType>> {
        self.read()
            .get(&(group.to_string(), version.to_string(), plural.to_string()))
            .cloned()
    }

    pub fn by_kind(&self, api_version: &str, kind: &str) -> Option<Arc<ResourceType>> {
        self.read()
            .values()
            .find(|r| r.api_version() == api_version && r.kind == kind)
            .cloned()
    }

    pub fn all(&self) -> Vec<Arc<ResourceType>> {
        self.read().values().cloned().collect()
    }

    /// Group → versions served, in the order discovery lists them (core first, then by name).
    pub fn group_versions(&self) -> BTreeMap<String, Vec<String>> {
        let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for r in self.read().values() {
            let versions = out.entry(r.group.clone()).or_default();
            if !versions.contains(&r.version) {
                versions.push(r.version.clone());
            }
        }
        out
    }

    pub fn in_group_version(&self, group: &str, version: &str) -> Vec<Arc<ResourceType>> {
        self.read()
            .values()
            .filter(|r| r.group == group && r.version == version)
            .cloned()
            .collect()
    }

    /// Replace every served version of one CRD (by group and plural) with `types`.
    pub fn set_custom(&self, group: &str, plural: &str, types: Vec<ResourceType>) {
        let mut map = self
            .inner
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        map.retain(|(g, _, p), r| !(g == group && p == plural && r.custom.is_some()));
        for t in types {
            map.insert(
                (t.group.clone(), t.version.clone(), t.plural.clone()),
                Arc::new(t),
            );
        }
    }

    pub fn remove_custom(&self, group: &str, plural: &str) {
        self.set_custom(group, plural, vec![]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_keys_follow_kube_apiserver() {
        let reg = Registry::new();
        let svc = reg.get("", "v1", "services").unwrap();
        assert_eq!(
            svc.key(Some("default"), "kubernetes"),
            "/registry/services/specs/default/kubernetes"
        );
        assert_eq!(
            svc.list_prefix(Some("default")),
            "/registry/services/specs/default/"
        );
        let node = reg.get("", "v1", "nodes").unwrap();
        assert_eq!(node.key(None, "n1"), "/registry/minions/n1");
        let ev = reg.get("events.k8s.io", "v1", "events").unwrap();
        assert_eq!(ev.list_prefix(Some("a")), "/registry/events/a/");
        let crd = reg
            .get("apiextensions.k8s.io", "v1", "customresourcedefinitions")
            .unwrap();
        assert_eq!(
            crd.key(None, "x.y"),
            "/registry/apiextensions.k8s.io/customresourcedefinitions/x.y"
        );
    }
}

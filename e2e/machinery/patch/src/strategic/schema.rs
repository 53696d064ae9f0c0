//! The `patchStrategy` / `patchMergeKey` struct tags of the built-in kinds, as a tree per kind.
//!
//! kube-apiserver reads these tags from the Go structs (`PatchMetaFromStruct`). Only the path
//! from each kind down to a tagged field is modelled; every other field is [`Node::Any`]: maps
//! merge recursively and lists are replaced whole, which is exactly what Go does for untagged
//! fields. Tags come from kubernetes/api (core, apps, batch, policy) and apimachinery
//! (ObjectMeta); discovery, coordination, events, rbac and storage carry none, and the
//! apiextensions tag (`x-kubernetes-validations`) sits under `spec.versions`, a list without a
//! strategy that is therefore replaced whole, so CRDs merge like untagged objects.

use crate::GroupKind;

/// The schema node for the values of a field (for a list: of its elements).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Node {
    /// No tagged field below: plain recursive merge, lists replaced.
    Any,
    /// Elements of a primitive list, with the Go kind name used in error texts.
    Scalar(&'static str),
    /// A struct with tagged fields somewhere below.
    Struct(&'static [Field]),
}

impl Node {
    /// `LookupPatchMeta.Name()`: the Go kind of the type, as error texts print it.
    pub(crate) fn go_kind(self) -> &'static str {
        match self {
            Node::Scalar(kind) => kind,
            Node::Any | Node::Struct(_) => "struct",
        }
    }

    /// The field's metadata; an unlisted field has no tag and an [`Node::Any`] value.
    pub(crate) fn field(self, name: &str) -> FieldMeta {
        let found = match self {
            Node::Struct(fields) => fields.iter().find(|f| f.name == name),
            Node::Any | Node::Scalar(_) => None,
        };
        found.map_or(
            FieldMeta {
                node: Node::Any,
                strategy: "",
                merge_key: "",
            },
            |f| FieldMeta {
                node: f.node,
                strategy: f.strategy,
                merge_key: f.merge_key,
            },
        )
    }
}

/// One tagged (or tag-bearing-below) struct field.
#[derive(Debug)]
pub(crate) struct Field {
    name: &'static str,
    /// The raw `patchStrategy` tag, e.g. `merge,retainKeys`.
    strategy: &'static str,
    merge_key: &'static str,
    node: Node,
}

/// What a lookup returns: the child node, the raw strategy tag and the merge key.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FieldMeta {
    pub(crate) node: Node,
    pub(crate) strategy: &'static str,
    pub(crate) merge_key: &'static str,
}

impl FieldMeta {
    /// `extractRetainKeysPatchStrategy`: the strategy once `retainKeys` is set aside (it only
    /// matters to patch generation; `$retainKeys` is honoured wherever it appears).
    pub(crate) fn strategy(&self) -> &'static str {
        self.strategy
            .split(',')
            .find(|s| *s != "retainKeys")
            .unwrap_or("")
    }
}

/// How a list field of a built-in kind is patched, from its struct tags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListStrategy {
    /// No strategy: the patch's list replaces the whole list.
    Replace,
    /// `patchStrategy:"merge"` on a list of scalars (`metadata.finalizers`): a set union in
    /// which `$deleteFromPrimitiveList` removes items.
    MergePrimitives,
    /// `patchStrategy:"merge"` with `patchMergeKey`: items with the same key merge.
    MergeByKey(&'static str),
}

const fn field(name: &'static str, node: Node) -> Field {
    Field {
        name,
        strategy: "",
        merge_key: "",
        node,
    }
}

const fn merge_by(name: &'static str, merge_key: &'static str, node: Node) -> Field {
    Field {
        name,
        strategy: "merge",
        merge_key,
        node,
    }
}

const fn tagged(name: &'static str, strategy: &'static str, merge_key: &'static str) -> Field {
    Field {
        name,
        strategy,
        merge_key,
        node: Node::Any,
    }
}

const fn merge_scalars(name: &'static str) -> Field {
    Field {
        name,
        strategy: "merge",
        merge_key: "",
        node: Node::Scalar("string"),
    }
}

// apimachinery meta/v1 ObjectMeta.
const OBJECT_META: &[Field] = &[
    merge_by("ownerReferences", "uid", Node::Any),
    merge_scalars("finalizers"),
];
const METADATA: Field = field("metadata", Node::Struct(OBJECT_META));
const METADATA_ONLY: &[Field] = &[METADATA];
// The `conditions` list every status below keys by `type`.
const CONDITIONS: &[Field] = &[merge_by("conditions", "type", Node::Any)];

// core/v1 Container and EphemeralContainer (EphemeralContainerCommon carries the same tags).
const CONTAINER: &[Field] = &[
    merge_by("ports", "containerPort", Node::Any),
    merge_by("env", "name", Node::Any),
    merge_by("volumeMounts", "mountPath", Node::Any),
    merge_by("volumeDevices", "devicePath", Node::Any),
];
const POD_SPEC: &[Field] = &[
    tagged("volumes", "merge,retainKeys", "name"),
    merge_by("initContainers", "name", Node::Struct(CONTAINER)),
    merge_by("containers", "name", Node::Struct(CONTAINER)),
    merge_by("ephemeralContainers", "name", Node::Struct(CONTAINER)),
    merge_by("imagePullSecrets", "name", Node::Any),
    merge_by("hostAliases", "ip", Node::Any),
    merge_by("topologySpreadConstraints", "topologyKey", Node::Any),
    merge_by("schedulingGates", "name", Node::Any),
    tagged("resourceClaims", "merge,retainKeys", "name"),
    merge_by("evictionResponders", "name", Node::Any),
];
const NODE_ALLOCATABLE_CLAIM_STATUS: &[Field] = &[
    merge_by("mapping", "name", Node::Any),
    merge_by("overhead", "name", Node::Any),
];
const POD_STATUS: &[Field] = &[
    merge_by("conditions", "type", Node::Any),
    merge_by("hostIPs", "ip", Node::Any),
    merge_by("podIPs", "ip", Node::Any),
    tagged("resourceClaimStatuses", "merge,retainKeys", "name"),
    merge_by(
        "nodeAllocatableResourceClaimStatuses",
        "resourceClaimName",
        Node::Struct(NODE_ALLOCATABLE_CLAIM_STATUS),
    ),
];
const POD: &[Field] = &[
    METADATA,
    field("spec", Node::Struct(POD_SPEC)),
    field("status", Node::Struct(POD_STATUS)),
];
const POD_TEMPLATE_SPEC: &[Field] = &[METADATA, field("spec", Node::Struct(POD_SPEC))];
const TEMPLATE: Field = field("template", Node::Struct(POD_TEMPLATE_SPEC));

const SERVICE_SPEC: &[Field] = &[merge_by("ports", "port", Node::Any)];
const SERVICE: &[Field] = &[
    METADATA,
    field("spec", Node::Struct(SERVICE_SPEC)),
    field("status", Node::Struct(CONDITIONS)),
];
const SERVICE_ACCOUNT: &[Field] = &[METADATA, merge_by("secrets", "name", Node::Any)];
const NODE_SPEC: &[Field] = &[merge_scalars("podCIDRs")];
const NODE_STATUS: &[Field] = &[
    merge_by("conditions", "type", Node::Any),
    merge_by("addresses", "type", Node::Any),
];
const NODE: &[Field] = &[
    METADATA,
    field("spec", Node::Struct(NODE_SPEC)),
    field("status", Node::Struct(NODE_STATUS)),
];
const WITH_STATUS_CONDITIONS: &[Field] = &[METADATA, field("status", Node::Struct(CONDITIONS))];
const VOLUME_HEALTH_STATUS: &[Field] = &[merge_by("healthConditions", "status", Node::Any)];
const PVC_STATUS: &[Field] = &[
    merge_by("conditions", "type", Node::Any),
    field("healthStatus", Node::Struct(VOLUME_HEALTH_STATUS)),
];
const PVC: &[Field] = &[METADATA, field("status", Node::Struct(PVC_STATUS))];

// apps/v1
const DEPLOYMENT_SPEC: &[Field] = &[TEMPLATE, tagged("strategy", "retainKeys", "")];
const DEPLOYMENT: &[Field] = &[
    METADATA,
    field("spec", Node::Struct(DEPLOYMENT_SPEC)),
    field("status", Node::Struct(CONDITIONS)),
];
const REPLICA_SET: &[Field] = &[
    METADATA,
    field("spec", Node::Struct(&[TEMPLATE])),
    field("status", Node::Struct(CONDITIONS)),
];

// batch/v1
const JOB_SCHEDULING: &[Field] = &[merge_by("resourceClaims", "name", Node::Any)];
const JOB_SPEC: &[Field] = &[TEMPLATE, field("scheduling", Node::Struct(JOB_SCHEDULING))];
const JOB: &[Field] = &[
    METADATA,
    field("spec", Node::Struct(JOB_SPEC)),
    field("status", Node::Struct(CONDITIONS)),
];
const JOB_TEMPLATE_SPEC: &[Field] = &[METADATA, field("spec", Node::Struct(JOB_SPEC))];
const CRON_JOB_SPEC: &[Field] = &[field("jobTemplate", Node::Struct(JOB_TEMPLATE_SPEC))];
const CRON_JOB: &[Field] = &[METADATA, field("spec", Node::Struct(CRON_JOB_SPEC))];

// policy/v1: the selector is replaced, not merged.
const PDB_SPEC: &[Field] = &[tagged("selector", "replace", "")];
const PDB: &[Field] = &[
    METADATA,
    field("spec", Node::Struct(PDB_SPEC)),
    field("status", Node::Struct(CONDITIONS)),
];

/// Built-in kinds the strategic merge engine knows, by (group, kind).
const KINDS: &[(&str, &str, &[Field])] = &[
    ("", "Pod", POD),
    ("", "Service", SERVICE),
    ("", "Secret", METADATA_ONLY),
    ("", "ConfigMap", METADATA_ONLY),
    ("", "ServiceAccount", SERVICE_ACCOUNT),
    ("", "Namespace", WITH_STATUS_CONDITIONS),
    ("", "PersistentVolumeClaim", PVC),
    ("", "PersistentVolume", METADATA_ONLY),
    ("", "Node", NODE),
    ("", "Event", METADATA_ONLY),
    ("", "Endpoints", METADATA_ONLY),
    ("apps", "Deployment", DEPLOYMENT),
    ("apps", "ReplicaSet", REPLICA_SET),
    ("autoscaling", "Scale", METADATA_ONLY),
    ("batch", "Job", JOB),
    ("batch", "CronJob", CRON_JOB),
    ("discovery.k8s.io", "EndpointSlice", METADATA_ONLY),
    ("coordination.k8s.io", "Lease", METADATA_ONLY),
    ("events.k8s.io", "Event", METADATA_ONLY),
    ("policy", "PodDisruptionBudget", PDB),
    ("rbac.authorization.k8s.io", "Role", METADATA_ONLY),
    ("rbac.authorization.k8s.io", "ClusterRole", METADATA_ONLY),
    ("rbac.authorization.k8s.io", "RoleBinding", METADATA_ONLY),
    (
        "rbac.authorization.k8s.io",
        "ClusterRoleBinding",
        METADATA_ONLY,
    ),
    ("storage.k8s.io", "StorageClass", METADATA_ONLY),
    (
        "apiextensions.k8s.io",
        "CustomResourceDefinition",
        METADATA_ONLY,
    ),
];

/// The schema root of a built-in kind, `None` for anything else (custom resources).
pub(crate) fn root(kind: GroupKind<'_>) -> Option<Node> {
    KINDS
        .iter()
        .find(|(g, k, _)| *g == kind.group && *k == kind.kind)
        .map(|(_, _, fields)| Node::Struct(fields))
}

/// Whether kube-apiserver accepts `application/strategic-merge-patch+json` for this kind
/// (built-in kinds only; custom resources get 415).
pub fn supports_strategic_merge(kind: GroupKind<'_>) -> bool {
    root(kind).is_some()
}

/// How the list at `path` (field names from the object root, list indices left out, e.g.
/// `["spec", "template", "spec", "containers", "ports"]`) of a built-in kind is patched.
/// `None` when the kind is not built in.
///
/// These are the strategic-merge tags. Server-side apply reads the OpenAPI list types instead,
/// which agree on the keys of most lists but not all (container `ports` are keyed by
/// `containerPort` and `protocol` there, Service `ports` by `port` and `protocol`).
pub fn list_merge_key(kind: GroupKind<'_>, path: &[&str]) -> Option<ListStrategy> {
    let mut node = root(kind)?;
    let Some((last, walk)) = path.split_last() else {
        return Some(ListStrategy::Replace);
    };
    for name in walk {
        node = node.field(name).node;
    }
    let meta = node.field(last);
    Some(match (meta.strategy(), meta.merge_key) {
        ("merge", "") => ListStrategy::MergePrimitives,
        ("merge", key) => ListStrategy::MergeByKey(key),
        _ => ListStrategy::Replace,
    })
}

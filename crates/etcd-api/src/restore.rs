//! `EtcdRestore`: rebuild an EtcdCluster from a snapshot in S3 after quorum loss.

// clippy reads repeated `printcolumn(type_ = ...)` arguments of the kube derive as duplicated
// attributes; they are separate columns.
#![allow(clippy::duplicated_attributes)]

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::cluster::EtcdClusterSpec;

/// Annotation the restore operator puts on an EtcdCluster while it rebuilds it; the value is the
/// EtcdRestore's name. While it is present the cluster operator takes no action on that cluster
/// (it reports phase `Restoring`), so the two operators never act on the same members at once.
pub const RESTORING_ANNOTATION: &str = "etcd.operator.rs/restoring";
/// Label the restore operator puts on the PVCs of the members it replaces; the value is the
/// EtcdRestore's name. Neither operator ever deletes a PVC carrying it, and new members never
/// reuse its ordinal.
pub const RETAINED_BY_RESTORE_LABEL: &str = "etcd.operator.rs/retained-by-restore";
use crate::common::{LocalObjectReference, S3Connection};
use crate::condition::Condition;

/// Rebuilds an EtcdCluster from a snapshot.
///
/// The restore operator builds a one-member seed whose data directory is restored from the
/// snapshot (downloaded, SHA-256 checked, `etcdutl snapshot restore` with a new cluster token);
/// the cluster operator then adopts the seed and grows it back to `spec.size`. The old members'
/// PVCs are kept, labelled as retained by this restore. An EtcdRestore runs once.
#[derive(CustomResource, KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "etcd.operator.rs",
    version = "v1alpha1",
    kind = "EtcdRestore",
    plural = "etcdrestores",
    namespaced,
    status = "EtcdRestoreStatus",
    derive = "PartialEq",
    doc = "Rebuilds an etcd cluster from a snapshot stored in S3.",
    printcolumn(name = "Cluster", type_ = "string", json_path = ".spec.clusterName"),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(
        name = "Step",
        type_ = "string",
        json_path = ".status.step",
        description = "The step the restore is at"
    ),
    printcolumn(
        name = "Status",
        type_ = "string",
        json_path = ".status.message",
        description = "The step the restore is at, or why it failed"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct EtcdRestoreSpec {
    /// Name of the EtcdCluster to rebuild, in this namespace. Immutable.
    #[schemars(
        length(min = 1, max = 50),
        regex(pattern = r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
    )]
    #[x_kube(validation = kube::core::Rule::new("self == oldSelf").message("clusterName is immutable"))]
    pub cluster_name: String,

    /// The snapshot to restore. Immutable.
    #[x_kube(validation = kube::core::Rule::new("self == oldSelf").message("source is immutable once set"))]
    pub source: RestoreSource,

    /// The EtcdCluster to create when `clusterName` does not exist (restoring into a new
    /// cluster). Ignored when the cluster exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_spec: Option<EtcdClusterSpec>,

    /// Restore even though the cluster still has quorum, replacing its current data with the
    /// snapshot's. Without it, a cluster with quorum is refused and left untouched.
    #[serde(default)]
    pub force: bool,

    /// Give up after this many seconds of waiting, counted from `status.startTime`: on the seed
    /// to start, old member Pods to stop, the old members' quorum to be known, or the cluster to
    /// grow back. Before the seed served clients the restore then fails and removes the seed
    /// (reason `TimedOut`); after, it fails without deleting anything (`GrowBackTimedOut`) and
    /// the cluster operator keeps growing the cluster. Default 3600.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 30, max = 604800))]
    pub timeout_seconds: Option<i64>,
}

/// `spec.timeoutSeconds` when it is not set.
pub const DEFAULT_RESTORE_TIMEOUT_SECONDS: i64 = 3600;

/// Where the snapshot comes from: exactly one of `backupRef` and `s3`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = kube::core::Rule::new("has(self.backupRef) != has(self.s3)")
    .message("exactly one of source.backupRef and source.s3 must be set"))]
pub struct RestoreSource {
    /// A Succeeded EtcdBackup in this namespace; its artifact gives the object and its SHA-256.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup_ref: Option<LocalObjectReference>,

    /// An S3 object holding an etcd snapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub s3: Option<S3ObjectSource>,

    /// Expected lowercase hex SHA-256 of the whole object. With `backupRef` it must match the
    /// backup's artifact if set; with `s3` the download is refused on mismatch. etcd's own
    /// integrity trailer is checked either way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[a-f0-9]{64}$"))]
    pub sha256: Option<String>,
}

/// An object in an S3-compatible store.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct S3ObjectSource {
    /// Bucket and connection settings.
    #[serde(flatten)]
    pub connection: S3Connection,

    /// Object key, e.g. `prod/etcd/main/20261122T101500Z-rev4711-1f0c.db`.
    #[schemars(
        length(min = 1, max = 1024),
        regex(pattern = r"^[A-Za-z0-9!_.*'()-][A-Za-z0-9!_.*'()/-]*$")
    )]
    pub key: String,
}

/// Progress of an EtcdRestore.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct EtcdRestoreStatus {
    /// `Pending`, `Running`, `Succeeded` or `Failed`. Succeeded and Failed are final.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<RestorePhase>,

    /// `Complete` once finished; `Failed` with the reason when it failed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = kube::core::ListMerge::Map(vec!["type".into()]))]
    pub conditions: Vec<Condition>,

    /// PascalCase cause of a failure, e.g. `BackupNotFound`, `ChecksumMismatch`, `QuorumHeld`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,

    /// The step the restore is at: `PreparingSeed`, `StoppingOldMembers`,
    /// `WaitingForQuorumVerdict`, `SeedServing`, `RemovingSeed`, `GrowingBack`, `Succeeded` or
    /// `Failed` (the printer column; `message` says it in words).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
    /// Human-readable detail of the outcome.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,

    /// etcd revision of the restored snapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restored_revision: Option<i64>,

    /// Name of the seed member built from the snapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed_member: Option<String>,

    /// When the restore started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,

    /// When the restore succeeded or failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,
}

/// Phase of an EtcdRestore.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum RestorePhase {
    /// Accepted, not started.
    Pending,
    /// Building the seed or waiting for the cluster to grow back.
    Running,
    /// The cluster is Available at full size and serves the restored revision.
    Succeeded,
    /// The restore stopped; the existing cluster and its data were left untouched.
    Failed,
}

impl RestorePhase {
    /// Succeeded and Failed are final: such a restore is never run again.
    pub fn is_finished(self) -> bool {
        matches!(self, RestorePhase::Succeeded | RestorePhase::Failed)
    }
}

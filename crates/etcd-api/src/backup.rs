//! `EtcdBackup`: one verified snapshot of an etcd cluster, streamed to S3.

// clippy reads repeated `printcolumn(type_ = ...)` arguments of the kube derive as duplicated
// attributes; they are separate columns.
#![allow(clippy::duplicated_attributes)]

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::S3Connection;
use crate::condition::Condition;

/// The timeout used when `spec.timeoutSeconds` is not set.
pub const DEFAULT_BACKUP_TIMEOUT_SECONDS: i64 = 1800;

/// One snapshot of an etcd cluster, taken once and stored in S3.
///
/// An EtcdBackup runs once: the backup operator streams `Maintenance.Snapshot` from the healthy
/// member with the highest revision into an S3 multipart upload, verifies the SHA-256 that etcd
/// appends, and records the object in `status.artifact`. It never overwrites an object.
#[derive(CustomResource, KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "etcd.operator.rs",
    version = "v1alpha1",
    kind = "EtcdBackup",
    plural = "etcdbackups",
    namespaced,
    status = "EtcdBackupStatus",
    derive = "PartialEq",
    doc = "A verified snapshot of an etcd cluster, streamed to S3.",
    printcolumn(name = "Cluster", type_ = "string", json_path = ".spec.clusterName"),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(
        name = "Size",
        type_ = "string",
        json_path = ".status.artifact.size",
        description = "Snapshot size, human-readable (e.g. 1.2 GiB)"
    ),
    printcolumn(
        name = "Bytes",
        type_ = "integer",
        json_path = ".status.artifact.sizeBytes",
        description = "Snapshot size in bytes",
        priority = 1
    ),
    printcolumn(
        name = "Revision",
        type_ = "integer",
        json_path = ".status.artifact.revision",
        description = "etcd revision of the snapshot"
    ),
    printcolumn(
        name = "Reason",
        type_ = "string",
        json_path = ".status.reason",
        description = "Why the backup failed or was interrupted"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = kube::core::Rule::new("has(self.clusterName) != has(self.endpoints)")
        .message("exactly one of spec.clusterName and spec.endpoints must be set"),
    validation = kube::core::Rule::new("self == oldSelf")
        .message("spec is immutable: an EtcdBackup runs once; create a new one instead"),
    validation = kube::core::Rule::new("!has(self.tlsSecretRef) || has(self.endpoints)")
        .message("tlsSecretRef is for spec.endpoints: with clusterName the cluster's own TLS settings are used"),
)]
pub struct EtcdBackupSpec {
    /// Name of the EtcdCluster to back up, in this namespace. Exactly one of `clusterName` and
    /// `endpoints`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63))]
    pub cluster_name: Option<String>,

    /// Client URLs of an etcd cluster the operator does not manage, e.g.
    /// `http://etcd-0.etcd.db.svc:2379`. Exactly one of `clusterName` and `endpoints`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(min = 1, max = 16),
        inner(length(max = 512), regex(pattern = r"^https?://[^\s/]+/?$"))
    )]
    pub endpoints: Option<Vec<String>>,

    /// For `https://` `endpoints`: a Secret with `ca.crt` (the CA that signed the members'
    /// certificates) and, when the members require client certificates, `tls.crt` and
    /// `tls.key` (a `kubernetes.io/tls` Secret with `ca.crt` added). With `clusterName` the
    /// cluster's own settings are used (its `spec.tls`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_secret_ref: Option<crate::LocalObjectReference>,

    /// Where to store the snapshot.
    pub s3: S3Destination,

    /// Give up (and abort the upload) after this many seconds. Default 1800.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 10, max = 86400))]
    pub timeout_seconds: Option<i64>,
}

/// An S3 bucket and key prefix to write snapshots under.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct S3Destination {
    /// Bucket and connection settings.
    #[serde(flatten)]
    pub connection: S3Connection,

    /// Key prefix, e.g. `prod/etcd/`. The object key is
    /// `<prefix><cluster>/<UTC time>-rev<revision>-<backup UID>.db`, unique per backup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(max = 512),
        regex(pattern = r"^([A-Za-z0-9!_.*'()-][A-Za-z0-9!_.*'()/-]*)?$")
    )]
    #[x_kube(validation = kube::core::Rule::new("!self.contains('//') && !self.contains('..')").message("prefix must not contain '//' or '..'"))]
    pub prefix: Option<String>,
}

/// Progress of an EtcdBackup.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct EtcdBackupStatus {
    /// `Pending`, `Running`, `Succeeded` or `Failed`. Succeeded and Failed are final.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<BackupPhase>,

    /// `Complete` once finished; `Failed` with the reason when it failed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = kube::core::ListMerge::Map(vec!["type".into()]))]
    pub conditions: Vec<Condition>,

    /// PascalCase cause of a failure, e.g. `BucketNotFound`, `ChecksumMismatch`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,

    /// Human-readable detail of the outcome.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,

    /// When the operator started the snapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,

    /// When the backup succeeded or failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,

    /// The stored snapshot, once the backup succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact: Option<BackupArtifact>,
}

/// Phase of an EtcdBackup.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum BackupPhase {
    /// Accepted, not started.
    Pending,
    /// Streaming the snapshot to S3.
    Running,
    /// The snapshot is stored and verified; see `artifact`.
    Succeeded,
    /// Nothing was stored; `reason` and `message` say why.
    Failed,
}

impl BackupPhase {
    /// Succeeded and Failed are final: such a backup is never run again.
    pub fn is_finished(self) -> bool {
        matches!(self, BackupPhase::Succeeded | BackupPhase::Failed)
    }
}

/// `bytes` in binary units with one decimal (`512 B`, `20.0 KiB`, `1.2 GiB`).
pub fn human_size(bytes: i64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    if bytes < 1024 {
        return format!("{} B", bytes.max(0));
    }
    // Display only: the f64 rounding of a byte count is far below the one decimal shown.
    #[allow(clippy::cast_precision_loss)]
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// A snapshot stored in S3.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct BackupArtifact {
    /// `s3://<bucket>/<key>`.
    pub uri: String,
    /// Size of the object in bytes (the snapshot including etcd's 32-byte SHA-256 trailer).
    pub size_bytes: i64,
    /// `sizeBytes` for people, in binary units (`512 B`, `20.0 KiB`, `1.2 GiB`): the printer
    /// column.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub size: String,
    /// Lowercase hex SHA-256 of the whole object.
    pub sha256: String,
    /// A lower bound of the snapshot's revision: the chosen member's revision read just before
    /// the snapshot started. The snapshot holds every write up to this revision, and may hold a
    /// few later ones (writes that landed between the read and the start of the stream). The
    /// exact revision is inside the snapshot's bolt database, which is streamed to S3 without
    /// ever being held whole; a restore reports it exactly (`EtcdRestore.status.restoredRevision`,
    /// read by `etcdutl snapshot restore`).
    pub revision: i64,
    /// etcd server version of the member the snapshot came from.
    pub etcd_version: String,
    /// etcd cluster ID (hexadecimal) the snapshot came from.
    #[serde(rename = "clusterID")]
    pub cluster_id: String,
}

#[cfg(test)]
mod tests {
    use super::human_size;

    #[test]
    fn human_sizes() {
        assert_eq!(human_size(0), "0 B");
        assert_eq!(human_size(1023), "1023 B");
        assert_eq!(human_size(1024), "1.0 KiB");
        assert_eq!(human_size(20_512), "20.0 KiB");
        assert_eq!(human_size(1_288_490_189), "1.2 GiB");
        assert_eq!(human_size(i64::MAX), "8192.0 PiB");
        assert_eq!(human_size(-5), "0 B");
    }
}

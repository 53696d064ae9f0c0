//! The custom resources of the etcd operator: group `etcd.operator.rs`, version `v1alpha1`.
//!
//! ```text
//!   EtcdCluster ──owns──▶ member Pods + PVCs, Services, PodDisruptionBudget
//!        ▲                        (cluster operator)
//!        │ clusterName
//!   EtcdBackup  ──writes──▶ s3://bucket/<prefix><cluster>/…db   (backup operator)
//!        ▲
//!        │ source.backupRef
//!   EtcdRestore ──seeds──▶ a one-member EtcdCluster, grown back by the cluster operator
//!                                 (restore operator)
//! ```
//!
//! The Rust types here are the single source of truth: the CRD YAML in the Helm chart is
//! generated from them by `crdgen` (`make crds`), and a test fails when it is stale. Doc comments
//! on fields are the user documentation that `kubectl explain` shows. Validation lives in the
//! schema where a schema can express it (ranges, patterns, enums, CEL rules) and in
//! [`validation`] for what needs knowledge of etcd or of the current state.
//!
//! This crate has no client code: it is types, validation and condition helpers only.

pub mod backup;
pub mod cluster;
pub mod common;
pub mod condition;
pub mod crd;
pub mod cron;
pub mod network;
pub mod reference;
pub mod restore;
pub mod tls;
pub mod validation;
pub mod values_doc;

pub use backup::{
    BackupArtifact, BackupPhase, EtcdBackup, EtcdBackupSpec, EtcdBackupStatus, S3Destination,
    human_size,
};
pub use cluster::{
    AutoCompactionMode, ClusterPhase, DefragSpec, EtcdCluster, EtcdClusterSpec, EtcdClusterStatus,
    EtcdOptions, MaintenanceSpec, MemberStatus, PodPolicy, ReclaimPolicy, ScheduledBackupSpec,
    StorageSpec,
};
pub use common::{LocalObjectReference, S3Connection};
pub use restore::{
    EtcdRestore, EtcdRestoreSpec, EtcdRestoreStatus, RestorePhase, RestoreSource, S3ObjectSource,
};
pub use tls::{CertManagerSource, ClientTls, IssuerReference, PeerTls, TlsSpec};

/// API group of the three resources.
pub const GROUP: &str = "etcd.operator.rs";
/// API version of the three resources.
pub const VERSION: &str = "v1alpha1";
/// `apiVersion` as written in manifests.
pub const API_VERSION: &str = "etcd.operator.rs/v1alpha1";

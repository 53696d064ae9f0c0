//! The EtcdRestore operator: rebuilds a lost etcd cluster from a snapshot in S3.
//!
//! ```text
//!   observe (I/O) ──▶ plan::Observed ──▶ plan::next_step (pure) ──▶ status (pure) + execute (I/O)
//!        ▲                                                                              │
//!        └──────────────────────────────── re-observe ◀────────────────────────────────┘
//! ```
//!
//! - [`plan`]: the next step of one restore, from what is observed; every crash point resumes.
//! - [`build`]: the seed member's Pod and PVC (the cluster operator's member, plus an init
//!   container) and a cluster created from `spec.clusterSpec` (pure).
//! - [`status`]: the EtcdRestore's status and events per step (pure).
//! - [`observe`]: the source, credentials, cluster, Pods, PVCs, the seed's init container and
//!   etcd's answers (I/O; conversions pure).
//! - [`execute`]: one step's object changes (I/O).
//! - [`controller`]: the loop (I/O).
//! - [`metrics`]: the Prometheus series of each restore and of the reconciles (pure).
//! - [`seed`]: `prepare-seed`, the seed Pod's init container: downloads the snapshot from S3,
//!   checks its SHA-256 and etcd's trailer, and restores it into the seed's data directory with
//!   `etcdutl`, never touching a data directory that already holds a member.
//!
//! The hand-over contract with the cluster operator is in `etcd_api::restore`: the
//! `etcd.operator.rs/restoring` annotation holds the cluster, the
//! `etcd.operator.rs/retained-by-restore` label keeps old volumes.

pub mod build;
pub mod controller;
pub mod execute;
pub mod metrics;
pub mod observe;
pub mod plan;
pub mod seed;
pub mod status;

pub use seed::{SeedError, SeedOutcome, SeedSpec, SnapshotInfo, prepare_seed};

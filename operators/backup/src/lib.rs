//! The EtcdBackup operator: one verified etcd snapshot per EtcdBackup, streamed into S3.
//!
//! ```text
//!   controller ──▶ plan::next_step ──Start──▶ execute::resolve (Kubernetes reads)
//!   (kube-runtime)   (pure)                    execute::execute (etcd + S3)
//!        │                                        │ select::select_member (pure)
//!        └── status (pure) ◀── outcome ───────────┘
//!   create-backup (CronJob) ──▶ retention::plan_retention (pure) ──▶ deletes
//! ```
//!
//! Pure modules: [`plan`], [`select`], [`credentials`], [`status`], [`retention`], [`metrics`].
//! I/O: [`execute`] (etcd, S3, Kubernetes reads).
#![forbid(unsafe_code)]

pub mod controller;
pub mod create;
pub mod execute;
pub mod metrics;
pub mod plan;
pub mod retention;
pub mod select;
pub mod status;

/// S3 credentials from a Secret: read by the one S3 adapter (crates/etcd-snapshot).
pub use etcd_snapshot::credentials;

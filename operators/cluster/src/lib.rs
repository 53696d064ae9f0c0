//! The EtcdCluster operator.
//!
//! ```text
//!   observe (I/O) ──▶ state::Observed ──▶ plan::next_action (pure) ──▶ execute (I/O) ──┐
//!        ▲                                                                            │
//!        └──────────────────────────── re-observe ◀──────────────────────────────────┘
//! ```
//!
//! - [`naming`]: member names, Pod/PVC names and URLs, derived from the cluster alone.
//! - [`state`]: the observed state as plain data.
//! - [`plan`]: one next action from the observed state, gated on quorum. Exhaustively unit-tested.
//! - [`build`]: the Pods, PVCs, Services and PodDisruptionBudget of a cluster (pure).
//! - [`status`]: the status to report from what was observed and planned (pure).
//! - [`observe`]: gathers the observed state from the API and from etcd (I/O).
//! - [`execute`]: performs one action (I/O).
//! - [`controller`]: the watch-driven loop that ties them together (I/O).
//! - [`metrics`]: the Prometheus series of each cluster and of the reconciles (pure).

pub mod build;
pub mod cert_manager;
pub mod certs;
pub mod controller;
pub mod execute;
#[cfg(test)]
mod fixtures;
pub mod metrics;
pub mod naming;
pub mod network_policy;
pub mod observe;
pub mod plan;
pub mod state;
pub mod status;
pub mod tls;

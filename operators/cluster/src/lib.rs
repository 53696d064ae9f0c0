//! The EtcdCluster operator.
//!
//! ```text
//!   observe (I/O) ──▶ state::Observed ──▶ plan::next_action (pure) ──▶ execute (I/O) ──┐
//!        ▲                                                                            │
//!        └──────────────────────────── re-observe ◀──────────────────────────────────┘
//! ```
//!
//! From the membership core ([`etcd_member`], shared with the restore operator):
//! - [`naming`]: member names, Pod/PVC names and URLs, derived from the cluster alone.
//! - [`state`]: the observed state as plain data.
//! - [`plan`]: one next action from the observed state, gated on quorum. Exhaustively unit-tested.
//! - [`build`]: the Pods, PVCs, Services and PodDisruptionBudget of a cluster (pure).
//! - [`observe`]: gathers the observed state from the API and from etcd (I/O at the edges).
//!
//! This operator's own:
//! - [`status`]: the status to report from what was observed and planned (pure).
//! - [`execute`]: performs one action (I/O).
//! - [`controller`]: the watch-driven loop that ties them together (I/O).
//! - [`metrics`]: the Prometheus series of each cluster and of the reconciles (pure).
//! - [`trust`]: whether members started on the certificate Secrets as they are now would
//!   trust and be trusted by the running ones (a CA change needs an overlap; pure).
//! - [`overlap`]: Secrets' data read into [`plan::ca_overlap`]'s inputs, and the mounted
//!   copies built from its writes (pure; not wired yet).

pub mod cert_manager;
pub mod certs;
pub mod controller;
pub mod execute;
pub mod member_watch;
pub mod metrics;
pub mod network_policy;
pub mod overlap;
pub mod scheduled_backup;
pub mod status;
pub mod tls;
pub mod trust;

// The membership core under the names this operator's modules have always used.
#[cfg(test)]
use etcd_member::fixtures;
pub use etcd_member::{build, desired, naming, observe, plan, state};

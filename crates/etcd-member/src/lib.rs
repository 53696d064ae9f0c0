//! The membership core of an EtcdCluster: what both the cluster operator and the restore
//! operator need to agree on, so that neither depends on the other.
//!
//! ```text
//!   observe (reads) ──▶ state::Observed ─┐
//!   spec ──▶ desired::Desired (validated) ─┴▶ plan::next_action (pure) ──▶ the operator's executor
//!                                                 │
//!                  destructive actions carry the proof of plan::quorum_gate (plan::QuorumChecked)
//! ```
//!
//! - [`naming`]: member names, Pod/PVC names and URLs, derived from the cluster alone (pure).
//! - [`state`]: the observed state as plain data.
//! - [`desired`]: the spec, validated once into the types the planner decides with.
//! - [`observe`]: lists a cluster's member Pods and PVCs and asks etcd (I/O at the edges); the
//!   conversion of what was read into [`state::Observed`] is pure and unit-tested.
//! - [`plan`]: one next action from the observed state, gated on quorum. Exhaustively unit-tested.
//! - [`build`]: the member Pod and PVC, the Services and the PodDisruptionBudget (pure). The
//!   restore operator builds its seed with the same builder, so the cluster operator adopts it.

#![forbid(unsafe_code)]

pub mod build;
pub mod desired;
#[cfg(any(test, feature = "fixtures"))]
#[allow(clippy::unwrap_used, clippy::expect_used)]
pub mod fixtures;
pub mod naming;
pub mod observe;
pub mod plan;
pub mod state;

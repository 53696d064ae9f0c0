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
//!
//! The observer, the executor and the controller wiring come with the local control plane.

pub mod naming;
pub mod plan;
pub mod state;

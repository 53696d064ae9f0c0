//! etcd membership and health for the operators, over etcd's gRPC API (etcd-client).
//!
//! - [`observe`]: one [`ClusterView`] of a cluster: every member's own [`MemberStatus`], and the
//!   member list only from a member that confirmed it is part of a quorum. The cluster operator
//!   observes through it each reconcile; the backup operator picks its member from the statuses.
//! - [`EtcdAdmin`]: membership changes one step at a time (add learner/voter, promote, remove)
//!   and the confirmed member list, with errors classified into [`AdminError`] variants that
//!   say whether to retry later or whether the step is already done.
//! - [`initial_cluster`]: the `--initial-cluster` for a member joining after an add.
//! - [`defragment`], [`compact_to_current`], [`disarm_no_space`]: database maintenance, the
//!   steps that clear a NOSPACE alarm.
//!
//! Every call has a timeout: an unreachable member (refused, DNS failure, partitioned) never
//! stalls a caller longer than about twice the given timeout. Learners exist in etcd ≥ 3.4,
//! so both supported versions (3.4, 3.5) take them.

mod admin;
mod error;
mod maintenance;
mod observe;
mod pool;
mod tls;
mod types;
mod version;

pub use admin::EtcdAdmin;
pub use error::{AdminError, ErrorClass, classify, classify_error};
pub use maintenance::{compact_to_current, defragment, disarm_no_space};
pub use observe::{
    STARTING_MEMBER_WAIT, member_status, member_status_tls, observe, observe_pooled, observe_tls,
};
pub use pool::{ClientPool, IDLE_EXPIRY, OnDial};
pub use tls::{ClientIdentity, ClientTls, MissingKey};
pub use types::{Alarm, ClusterView, MemberInfo, MemberStatus, initial_cluster};
pub use version::{
    APPLY_GAP_CAUGHT_UP, RaftProgress, cluster_version, cluster_version_tls, cluster_versions_tls,
    raft_progress_each, v2_snapshots_saved_each_tls, v2_snapshots_saved_tls,
};

//! The observed state of one EtcdCluster, as plain data: what the planner decides from. No I/O.
//!
//! The observer (I/O, not in this module) fills it from the EtcdCluster, its Pods and PVCs, and
//! etcd's answers. Two rules for the observer, which the planner relies on:
//! - `Membership::Known` only from a member that is part of a quorum (it reports a leader and
//!   its answer is linearizable). A stale list from a partitioned member could make an active
//!   member's Pod look like an orphan.
//! - `unhealthy_for` counts from the first failed observation this process made; after a restart
//!   it starts again from zero, which only delays a replacement.

use std::collections::BTreeMap;
use std::time::Duration;

use etcd_api::validation::EtcdVersion;
use etcd_api::{EtcdClusterSpec, StorageSpec};

use crate::desired::ClusterSize;
use crate::naming::ClusterName;

/// Everything the planner knows about one cluster at one moment.
#[derive(Clone, Debug, PartialEq)]
pub struct Observed {
    /// Namespace and name of the EtcdCluster.
    pub cluster: ClusterName,
    /// Its spec.
    pub spec: EtcdClusterSpec,
    /// The EtcdRestore rebuilding it (its `etcd.operator.rs/restoring` annotation), if any.
    pub restoring: Option<String>,
    /// `status.clusterID`: set once a member ever answered. A cluster with a recorded ID is
    /// never bootstrapped again, whatever is left of it.
    pub recorded_cluster_id: Option<String>,
    /// Member names in the last status written, for when no member answers.
    pub last_known_members: Vec<String>,
    /// `status.currentVersion`, for when no member answers.
    pub last_known_version: Option<EtcdVersion>,
    /// The storage the existing members' PVCs were created with; `None` before the first PVC.
    pub member_storage: Option<StorageSpec>,
    /// etcd's view of the membership.
    pub membership: Membership,
    /// etcd's cluster ID, from the answer that gave the member list.
    pub cluster_id: Option<u64>,
    /// etcd's cluster version (`MAJOR.MINOR`, the `etcdcluster` of `GET /version`): the lowest
    /// any answering member reports; `None` when none reported one. Gates minor upgrades.
    pub cluster_version: Option<(u64, u64)>,
    /// Member Pods of this cluster, by name.
    pub pods: BTreeMap<String, PodState>,
    /// Member PVCs of this cluster, by name.
    pub pvcs: BTreeMap<String, PvcState>,
    /// Alarms the members report (NOSPACE, CORRUPT), by the member that raised them; sorted.
    /// Not ill health: a member with an alarm still votes and serves reads.
    pub alarms: Vec<MemberAlarm>,
    /// The revision this operator process last compacted the key space to (to clear NOSPACE),
    /// if it did: a key space still at that revision is not compacted again.
    pub compacted_revision: Option<i64>,
    /// The revision at which this operator process last defragmented each member under
    /// NOSPACE: writes are refused until the alarm is disarmed, so the revision does not move,
    /// and a member is not defragmented twice for the same alarm.
    pub defragmented_at: BTreeMap<String, i64>,
    /// TLS clusters: the [`crate::build::member_tls_hash`] each member's Pod should carry, from
    /// the certificate Secrets as they are now (by member name; a member whose Secrets are not
    /// known yet is absent). A Pod carrying another hash is rolled.
    pub tls_hashes: BTreeMap<String, String>,
    /// When this was observed, in Unix seconds (UTC): opens and closes the windows of
    /// `spec.maintenance.defrag.schedule`. `None`: not known, no window is open.
    pub wall_clock: Option<i64>,
    /// The EtcdCluster carries [`crate::plan::tls_switch::ANNOTATION_DROP_PLAINTEXT_CLIENTS`]:
    /// a switch to TLS may stop serving plaintext clients.
    pub drop_plaintext_clients: bool,
}

/// An etcd alarm and the member that raised it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct MemberAlarm {
    /// The member's name (its peer URL, or its hexadecimal ID, when not one of ours).
    pub member: String,
    /// `NOSPACE`, `CORRUPT`.
    pub alarm: String,
}

/// What etcd said about its members.
#[derive(Clone, Debug, PartialEq)]
pub enum Membership {
    /// No member answered with a member list.
    Unknown,
    /// The member list from a member in quorum, with each member's own status answer.
    Known(Vec<Member>),
}

/// One etcd member.
#[derive(Clone, Debug, PartialEq)]
pub struct Member {
    /// etcd member ID.
    pub id: u64,
    /// Name the member gave itself; empty until it has started once.
    pub name: String,
    /// Its peer URL (ours embed the member name, see [`crate::naming`]).
    pub peer_url: String,
    /// Its advertised client URL; `None` until it has started once.
    pub client_url: Option<String>,
    /// One of its advertised client URLs is on port 2378 (`https://` there: a member of a
    /// cluster switched from plaintext, plan/tls_switch.rs).
    pub client_url_on_switch_port: bool,
    /// A non-voting learner.
    pub learner: bool,
    /// Its own answer to a status request.
    pub health: MemberHealth,
    /// Its backend database, when it answered its status request.
    pub db: Option<DbStats>,
}

/// A member's backend database, from its status answer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DbStats {
    /// Size of the database file, bytes.
    pub size: u64,
    /// Bytes in use; `size - in_use` is free space a defragmentation gives back.
    pub in_use: u64,
    /// Its backend quota (etcd 3.6 reports it; 0 before).
    pub quota: u64,
    /// The revision of the key space it reports.
    pub revision: i64,
}

impl DbStats {
    /// Free space in the file: what a defragmentation gives back.
    pub fn free(&self) -> u64 {
        self.size.saturating_sub(self.in_use)
    }
}

/// A member's answer to a status request.
#[derive(Clone, Debug, PartialEq)]
pub enum MemberHealth {
    /// It answered and reports no error.
    Healthy {
        /// Its server version.
        version: EtcdVersion,
        /// It is the raft leader.
        leader: bool,
    },
    /// It did not answer, or answered with an error, for this long.
    Unhealthy {
        /// Time since the first failed observation.
        unhealthy_for: Duration,
    },
}

/// A member Pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodState {
    /// Its deletion has been requested.
    pub terminating: bool,
    /// The kubelet reports it Ready: its readiness probe (etcd's `/health?exclude=NOSPACE`: a
    /// leader, a read served) passes. A second observer, independent of the operator's network
    /// path to the member.
    pub ready: bool,
    /// The [`crate::build::config_hash`] it was built from (its `etcd.operator.rs/config-hash`
    /// annotation); `None` for a Pod built by an operator that did not record one.
    pub config_hash: Option<String>,
    /// The [`crate::build::member_tls_hash`] of the Secrets it mounted when created (its
    /// `etcd.operator.rs/tls-hash` annotation); `None` without TLS or for a Pod built by an
    /// operator that did not record one.
    pub tls_hash: Option<String>,
    /// Built to take a v2 snapshot before an upgrade to etcd 3.6 (`--snapshot-count=1`, see
    /// [`PvcState::snapshot_before_upgrade`]).
    pub snapshot_before_upgrade: bool,
    /// For such a Pod: its etcd saved a v2 snapshot since it started (read from the member's
    /// metrics; `false` when unknown).
    pub v2_snapshot_saved: bool,
    /// Its member did not answer a client this pass, its etcd started within etcd's publish
    /// window ([`Observed::publish_window`]), and its etcd's metrics port says raft has it
    /// caught up: it follows the leader and applied all it knows committed (read by the
    /// controller, `observe::observe_joining_members`; `false` when unknown or not asked).
    /// etcd can lose the race to publish a member that received the leader's snapshot
    /// (etcd-io/etcd#16436): the leader applied the member's publish proposal inside that
    /// snapshot, the member never sees it applied and serves no client until its request
    /// times out, though raft has it in sync.
    pub raft_caught_up: bool,
    /// What it listens on, read from its etcd flags; `None` when they do not say (then it is
    /// taken as built as the spec says: before the switch to TLS existed, `spec.tls` could not
    /// change, so every Pod was).
    pub listen: Option<crate::plan::tls_switch::Listeners>,
    /// Its peer URL was moved back to `http://` during a switch to TLS
    /// ([`crate::plan::tls_switch::ANNOTATION_TLS_SWITCH_REVERTED`]).
    pub tls_switch_reverted: bool,
    /// When the kubelet reports its etcd container started running (Unix seconds); `None`
    /// when not running or not reported.
    pub etcd_started_at: Option<i64>,
    /// Its readiness gate [`crate::build::SERVING_CONDITION`]: `None` when the Pod has none
    /// (built before revision 3 of the template, or a restore's seed), else whether its
    /// condition is `True`. Closed, the Pod is not Ready whatever its probe says.
    pub serving_gate: Option<bool>,
}

/// A member PVC.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PvcState {
    /// Labelled as retained by an EtcdRestore: never deleted by this operator.
    pub retained_by_restore: bool,
    /// Its deletion has been requested.
    pub terminating: bool,
    /// It was created before this EtcdCluster object (API server timestamps): it holds the data
    /// of an earlier cluster of the same name, kept by `reclaimPolicy: Retain` or a restore.
    pub predates_cluster: bool,
    /// etcd 3.6 refuses to replay v2 requests that etcd 3.4 left in the WAL (its `/health` is a
    /// v2 read through raft): before a member moves from 3.5 to 3.6 it runs once on 3.5 with
    /// `--snapshot-count=1` until it saved a v2 snapshot (etcd's 3.5 → 3.6 upgrade guide).
    /// Recorded on the PVC, which outlives the Pod: the version to run for that (annotation
    /// [`crate::build::ANNOTATION_SNAPSHOT_BEFORE_UPGRADE`]).
    pub snapshot_before_upgrade: Option<EtcdVersion>,
    /// The snapshot was taken ([`crate::build::ANNOTATION_V2_WAL_CLEAN`]): the member may
    /// run etcd 3.6.
    pub v2_wal_clean: bool,
    /// Its requested size (`spec.resources.requests.storage`) in bytes; `None` when unset or
    /// not a quantity.
    pub requested_bytes: Option<u128>,
    /// Its StorageClass as the API server recorded it (the default class filled in).
    pub storage_class: Option<String>,
    /// Its StorageClass exists and has `allowVolumeExpansion: true`. Only looked up for PVCs
    /// smaller than `spec.storage.size`; `false` otherwise and when the class is missing.
    pub class_allows_expansion: bool,
}

impl Observed {
    /// No member answered and the cluster never existed (no cluster ID or member recorded in its
    /// status): its first member is on its way, from `spec` or from a restore into a new
    /// cluster. Not quorum loss: there never was a quorum to lose.
    pub fn bootstrapping(&self) -> bool {
        matches!(self.membership, Membership::Unknown)
            && self.recorded_cluster_id.is_none()
            && self.last_known_members.is_empty()
    }

    /// Member `member` is joining: it does not answer a client, but its etcd started within
    /// the publish window and raft has it caught up ([`PodState::raft_caught_up`]), and its
    /// Pod is not being deleted. etcd serves its clients once the member has published itself,
    /// within etcd's request timeout of its start when it lost the publish race. Neither
    /// unreachable nor unhealthy meanwhile.
    pub fn joining(&self, member: &Member) -> bool {
        !member.healthy()
            && member
                .member_name(&self.cluster)
                .and_then(|name| self.pods.get(&name))
                .is_some_and(|pod| pod.raft_caught_up && !pod.terminating)
    }

    /// How long after its etcd starts a member that raft has caught up may still serve no
    /// client: etcd's request timeout (5 s + 2 x the election timeout, `ReqTimeout`), which
    /// bounds a publish attempt whose proposal was lost in the leader's snapshot, plus 2 s for
    /// the kubelet's whole-second start time, plus [`BOOTSTRAP_ALLOWANCE_SECS`] for etcd's
    /// bootstrap before its first attempt. Afterwards the member has published (a later
    /// attempt is in the log after that snapshot) or something else is wrong with it.
    pub fn publish_window(&self) -> i64 {
        publish_window_secs(
            self.spec
                .etcd_options
                .as_ref()
                .and_then(|o| o.election_timeout_ms),
        )
    }

    /// `pod`'s etcd started within [`Observed::publish_window`] of this observation's wall
    /// clock (false without either time): while it may still be publishing itself.
    pub fn within_publish_window(&self, pod: &PodState) -> bool {
        match (pod.etcd_started_at, self.wall_clock) {
            (Some(started), Some(now)) => now - started <= self.publish_window(),
            _ => false,
        }
    }

    /// The voters the PodDisruptionBudget keeps a quorum of: those in etcd's member list, or
    /// without one, the larger of the members last known and `size` (the validated
    /// `spec.size`; erring towards a stricter budget).
    pub fn budget_voters(&self, size: ClusterSize) -> usize {
        match &self.membership {
            Membership::Known(members) => members.iter().filter(|m| !m.learner).count(),
            Membership::Unknown => self.last_known_members.len().max(size.voters()),
        }
    }
}

/// How long etcd's bootstrap may take before it starts raft and makes its first publish
/// attempt, counted in the publish window: a joining member resolves every member's peer URL,
/// its own among them, and retries each second until the cluster DNS has its new Pod (1-4 s in
/// the restore bench's member logs: "failed to resolve URL Host"). With the window counted from
/// the container's start alone, a joining voter that had lost the publish race was still
/// silent when the window ended, and was reported unreachable for a pass (a
/// `MembersUnreachable` warning, the next member add held back).
pub const BOOTSTRAP_ALLOWANCE_SECS: i64 = 5;

/// [`Observed::publish_window`] for `spec.etcdOptions.electionTimeoutMs` (etcd's default 1000 ms
/// when unset), in seconds.
pub fn publish_window_secs(election_timeout_ms: Option<i32>) -> i64 {
    let election_ms = election_timeout_ms.unwrap_or(1000);
    5 + (2 * i64::from(election_ms.max(0)) + 999) / 1000 + 2 + BOOTSTRAP_ALLOWANCE_SECS
}

impl Member {
    /// The member's name if it is one of ours: the one its peer URL designates (ours embed the
    /// member name; a member added by hand has another peer URL, whatever name it gave itself,
    /// and is never taken for one of ours: it has no Pod or PVC of ours to judge it by).
    pub fn member_name(&self, cluster: &ClusterName) -> Option<String> {
        cluster.member_of_peer_url(&self.peer_url)
    }

    /// A name for messages: ours, else the name it gave itself, else its peer URL.
    pub fn display_name(&self, cluster: &ClusterName) -> String {
        self.member_name(cluster).unwrap_or_else(|| {
            if self.name.is_empty() {
                self.peer_url.clone()
            } else {
                self.name.clone()
            }
        })
    }

    /// Whether it has started once (etcd knows its name).
    pub fn started(&self) -> bool {
        !self.name.is_empty()
    }

    /// Whether it answered its status request.
    pub fn healthy(&self) -> bool {
        matches!(self.health, MemberHealth::Healthy { .. })
    }

    /// Whether it is the raft leader.
    pub fn leader(&self) -> bool {
        matches!(self.health, MemberHealth::Healthy { leader: true, .. })
    }

    /// Its reported version, when healthy.
    pub fn version(&self) -> Option<EtcdVersion> {
        match self.health {
            MemberHealth::Healthy { version, .. } => Some(version),
            MemberHealth::Unhealthy { .. } => None,
        }
    }
}

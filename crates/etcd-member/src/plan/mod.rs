//! The planner: from the observed state, exactly one next action (or a reason to wait). Pure.
//!
//! Each reconcile starts from scratch: the planner never asks why it was called or what it did
//! last time, so a crash between any two side effects leaves a state it recognises and repairs.
//! Side effects are ordered so that every intermediate state is one of these:
//!
//! ```text
//!   member in etcd, no Pod          -> create its Pod (crash after MemberAdd, or Pod deleted)
//!   Pod, member not in etcd         -> delete the Pod (crash after MemberRemove)
//!   learner, not promoted           -> promote it once it answers (crash mid-promotion)
//!   PVC, no member, policy Delete   -> delete the PVC (crash after the Pod was deleted)
//! ```
//!
//! Rules, in priority order (the first that applies wins):
//! 1. An invalid spec is refused; nothing is touched.  2. A running EtcdRestore, then `paused`,
//!    waits. 2b. A member Pod whose serving readiness gate is closed (new, or a defragmentation
//!    interrupted) gets it opened (`maintenance.rs`).
//! 3. Without a member list: bootstrap the seed if the cluster never existed, restart missing
//!    Pods of members whose data survived, otherwise report quorum loss and wait.
//! 4. With a member list: restart missing Pods; delete Pods of non-members; remove a learner
//!    that missed its deadline; remove a dead member if quorum survives it; wait on quorum loss
//!    or an unhealthy member; promote a learner (only while every voter answers); add one
//!    learner (scale up / replacement); remove one member (scale down, never the leader when a
//!    follower can go); upgrade one member (followers first); grow member volumes to
//!    `spec.storage.size` (see `volumes.rs`); record the configuration hash on
//!    Pods an older release built without one; roll one member whose Pod was built from another
//!    configuration (followers first, see `rollout.rs`); delete PVCs the policy releases;
//!    defragment a member past `spec.maintenance.defrag`'s threshold. Under a NOSPACE alarm,
//!    after the health checks: compact (if allowed), defragment every member, disarm
//!    (`maintenance.rs`).
//!
//! Destructive actions (remove a member; take one down to upgrade, roll, snapshot or defragment
//! it) carry a [`QuorumChecked`], which only [`quorum_gate`] hands out: one rule, one place.

use std::time::Duration;

use etcd_api::ReclaimPolicy;
use etcd_api::validation::{self, EtcdVersion, FieldError};

use crate::desired::Desired;
use crate::naming::ClusterName;
use crate::state::{Member, MemberHealth, Membership, Observed};

pub mod ca_overlap;
pub mod ca_rotation;
mod gate;
mod maintenance;
pub mod objects;
mod rollout;
#[cfg(test)]
mod scenarios;
#[cfg(test)]
mod tests;
pub mod tls_switch;
mod volumes;

pub use gate::{Disruption, QuorumChecked, QuorumShort, quorum_gate};
pub use maintenance::{NEAR_QUOTA_PERCENT, database_near_quota};

/// Tunables of the planner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    /// How long a voter may be unhealthy before it is replaced. Long enough to ride out a Pod
    /// restart or a node reboot: replacing costs a full data copy to the new member.
    pub dead_after: Duration,
    /// How long a learner may go without answering before it is removed. It holds no vote, so
    /// removing it is always quorum-safe; long enough for an image pull and a snapshot transfer
    /// of a large database (etcd-facts.md: 1.2 GB in ~4 s here, far slower on real networks).
    pub learner_deadline: Duration,
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            dead_after: Duration::from_secs(5 * 60),
            learner_deadline: Duration::from_secs(10 * 60),
        }
    }
}

/// The one thing to do next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Create the seed member's PVC and Pod with `--initial-cluster-state new` and a fresh
    /// cluster token. Idempotent: the executor creates whichever of the two is missing.
    BootstrapSeed {
        /// Member name.
        member: String,
        /// etcd version to run.
        version: EtcdVersion,
    },
    /// Create the Pod (and PVC if missing) of a member etcd already knows. With data on the PVC
    /// it restarts as the same member; without, it joins with `--initial-cluster-state existing`.
    CreateMemberPod {
        /// Member name.
        member: String,
        /// `name=peerURL` of every started member plus this one.
        initial_cluster: Vec<(String, String)>,
        /// etcd version to run.
        version: EtcdVersion,
        /// Why the Pod is missing.
        reason: PodReason,
    },
    /// `MemberAdd` a learner with this peer URL; its Pod comes next pass.
    AddLearner {
        /// Member name.
        member: String,
        /// Its peer URL.
        peer_url: String,
    },
    /// `MemberPromote` a learner that answers.
    PromoteLearner {
        /// Member name.
        member: String,
        /// etcd member ID.
        id: u64,
    },
    /// `MemberRemove`; checked to keep quorum. Its Pod goes next pass.
    RemoveMember {
        /// Member name (or peer URL if it is not one of ours).
        member: String,
        /// etcd member ID.
        id: u64,
        /// Why.
        reason: RemovalReason,
        /// It passed the quorum gate.
        quorum: QuorumChecked,
    },
    /// Delete the Pod of something that is not (or no longer) a member.
    DeletePod {
        /// Pod name.
        member: String,
    },
    /// Delete a member's Pod so that it comes back on `to`; its data stays on the PVC.
    /// Checked to keep quorum while the member is down.
    UpgradeMember {
        /// Member name.
        member: String,
        /// Version it runs.
        from: EtcdVersion,
        /// Version it will run.
        to: EtcdVersion,
        /// It passed the quorum gate.
        quorum: QuorumChecked,
    },
    /// Delete a member's Pod so that it comes back built from the current spec (`spec.pod`,
    /// `spec.etcdOptions`); its data stays on the PVC and it rejoins as the same member.
    /// Checked to keep quorum while the member is down, as [`Action::UpgradeMember`].
    RollMember {
        /// Member name.
        member: String,
        /// Voters whose Pod runs the current configuration, before this one.
        up_to_date: usize,
        /// Voters.
        voters: usize,
        /// It passed the quorum gate.
        quorum: QuorumChecked,
    },
    /// Before a member moves from etcd 3.5 to 3.6: record on its PVC that its Pod runs `version`
    /// (3.5) with `--snapshot-count=1`, then delete the Pod, which comes back that way. etcd 3.6
    /// panics replaying v2 requests etcd 3.4 left in the WAL (`detected disallowed v2 WAL`); a
    /// v2 snapshot taken on 3.5 after them is the remedy etcd's upgrade guide gives. Checked to
    /// keep quorum while the member is down, as [`Action::UpgradeMember`].
    SnapshotBeforeUpgrade {
        /// Member name.
        member: String,
        /// The version it runs (and runs again, to take the snapshot).
        version: EtcdVersion,
        /// It passed the quorum gate.
        quorum: QuorumChecked,
    },
    /// The member's Pod built by [`Action::SnapshotBeforeUpgrade`] saved a v2 snapshot: record
    /// on its PVC that it may run etcd 3.6 (the upgrade follows).
    MarkV2WalClean {
        /// Member name.
        member: String,
    },
    /// Record the hashes a member Pod lacks (built by an operator release that did not record
    /// them): the Pod is adopted as built from the current spec and Secrets (annotations
    /// patched, no restart), so a later change of either rolls it like every other member.
    /// Only the missing ones are written: a recorded hash that differs still rolls the member.
    AdoptPod {
        /// Member name (also its Pod's).
        member: String,
        /// The current [`crate::build::config_hash`], when the Pod has none.
        hash: Option<String>,
        /// The current [`crate::build::member_tls_hash`], when the Pod has none.
        tls_hash: Option<String>,
    },
    /// Raise a member PVC's storage request to `spec.storage.size`; its StorageClass allows
    /// expansion. Not disruptive: the volume grows under the running member (or, for drivers
    /// that resize offline, at its next restart).
    ExpandVolume {
        /// PVC name (the member's).
        pvc: String,
        /// Its request now.
        from: String,
        /// `spec.storage.size`.
        to: String,
    },
    /// Defragment one member's database (it serves nothing meanwhile). Checked to keep quorum
    /// while it is busy, as [`Action::RollMember`], but under NOSPACE.
    DefragmentMember {
        /// Member name.
        member: String,
        /// Its client URL, where the call goes (etcd defragments the member it is sent to).
        client_url: String,
        /// Free bytes in its database file, which the defragmentation gives back.
        free_bytes: u64,
        /// The key space's revision it reports.
        revision: i64,
        /// Why now.
        reason: DefragReason,
        /// Its Pod has the serving readiness gate: the executor closes it first (the Pod leaves
        /// the client Service's endpoints), defragments, then opens it again. Only planned while
        /// every other member Pod is Ready (never two members out of the Service at once).
        drain: bool,
        /// It passed the quorum gate.
        quorum: QuorumChecked,
    },
    /// Set a member Pod's serving condition ([`crate::build::SERVING_CONDITION`]) `True`: a new
    /// Pod, or one left drained by a defragmentation that did not finish (a crash between
    /// closing and reopening the gate). Not disruptive: the Pod is Ready only once its
    /// readiness probe passes too.
    OpenServingGate {
        /// Member name (also its Pod's).
        member: String,
    },
    /// Compact the key space to `revision`, the current one (`spec.maintenance.compactOnNoSpace`
    /// under a NOSPACE alarm): old revisions' space becomes free for the defragmentation.
    CompactKeyspace {
        /// The revision every member reports.
        revision: i64,
    },
    /// Disarm the NOSPACE alarm: every member was defragmented and its database file is back
    /// under the quota.
    DisarmNoSpace {
        /// The largest database file of a member, bytes.
        largest_db: u64,
        /// The quota, bytes.
        quota: u64,
    },
    /// A step of a switch from plaintext to TLS (`tls_switch.rs`): delete the member's Pod so
    /// that it comes back listening on `to` (the executor builds every Pod with
    /// [`pod_listeners`]). Checked to keep quorum while it is down.
    RollForTls {
        /// Member name.
        member: String,
        /// What its Pod listens on now.
        from: tls_switch::Listeners,
        /// What its next Pod listens on.
        to: tls_switch::Listeners,
        /// Members done with the switch, before this step.
        done: usize,
        /// Voters.
        voters: usize,
        /// It passed the quorum gate.
        quorum: QuorumChecked,
    },
    /// A step of a switch from plaintext to TLS: `MemberUpdate` the member's peer URL to
    /// `peer_url` (`https://…:2382`; or back to `http://…:2380`, `revert`, after it did not come
    /// up on TLS: the executor first marks its Pod
    /// [`tls_switch::ANNOTATION_TLS_SWITCH_REVERTED`]). Checked to keep quorum.
    UpdatePeerUrl {
        /// Member name.
        member: String,
        /// etcd member ID.
        id: u64,
        /// The new peer URL.
        peer_url: String,
        /// Moving back to plaintext.
        revert: bool,
        /// Members done with the switch, before this step.
        done: usize,
        /// Voters.
        voters: usize,
        /// It passed the quorum gate.
        quorum: QuorumChecked,
    },
    /// Delete the PVC of a member that was cleanly removed (`reclaimPolicy: Delete`).
    DeletePvc {
        /// PVC name.
        name: String,
    },
    /// Nothing safe to do now; re-observe later.
    Wait(WaitReason),
    /// The spec cannot be acted on; report every field and touch nothing.
    Refuse(Vec<FieldError>),
    /// The cluster is as the spec asks.
    Converged,
}

/// Why a member's Pod is being created.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PodReason {
    /// The member was added and its Pod not created yet.
    NewMember,
    /// The member's Pod is gone; its data survived on the PVC.
    Restart,
    /// As [`PodReason::Restart`], on the version its PVC names, with `--snapshot-count=1`:
    /// [`Action::SnapshotBeforeUpgrade`].
    SnapshotBeforeUpgrade,
}

/// Why a member is defragmented.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DefragReason {
    /// A NOSPACE alarm is raised: every member with free space is defragmented before the
    /// alarm is disarmed.
    NoSpace,
    /// Its free space passed `spec.maintenance.defrag`'s threshold.
    Fragmented,
}

/// Why a member is removed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RemovalReason {
    /// More voters than `spec.size`.
    ScaleDown,
    /// Unhealthy past the grace period, or its data is gone; a replacement follows.
    Dead,
    /// A learner that did not answer within [`Policy::learner_deadline`]; a new one follows.
    LearnerStuck,
}

/// Why nothing is done now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WaitReason {
    /// `spec.paused` is set.
    Paused,
    /// An EtcdRestore is rebuilding the cluster; it hands the cluster back when done.
    Restoring {
        /// The EtcdRestore's name.
        restore: String,
    },
    /// The seed's Pod exists; etcd has not answered yet.
    SeedStarting,
    /// A Pod is being deleted.
    PodTerminating {
        /// Pod name.
        member: String,
    },
    /// A learner has not answered yet (starting or catching up).
    LearnerCatchingUp {
        /// Member name.
        member: String,
    },
    /// A voter raft has caught up does not serve clients yet: its etcd just started and waits
    /// for its own publish to be applied ([`crate::state::Observed::joining`]). Every voter
    /// that does not answer is such a one.
    MemberJoining {
        /// Member name.
        member: String,
    },
    /// Fewer than a majority of voters answer. Nothing destructive is done; the members may
    /// come back, or the user restores from a backup.
    QuorumLost {
        /// Voters that answer.
        healthy: usize,
        /// Voters in the member list (0 when no member answers).
        voters: usize,
    },
    /// etcd confirmed quorum (a linearizable read succeeded through a member) but the operator
    /// reaches fewer than a majority of the voters: its own network path is the problem, not
    /// the cluster's quorum. Nothing destructive is done.
    MembersUnreachable {
        /// Voters that answer the operator.
        reachable: usize,
        /// Voters in the member list.
        voters: usize,
    },
    /// A member is unhealthy but within its grace period.
    MemberUnhealthy {
        /// Member name.
        member: String,
    },
    /// Removing a member (scale down) or taking one down for an upgrade would leave too few
    /// healthy voters.
    WouldLoseQuorum {
        /// The member the action concerns.
        member: String,
        /// Voters that answer.
        healthy: usize,
        /// Voters in the member list.
        voters: usize,
    },
    /// A member answers the operator but the kubelet does not report its Pod Ready yet (its
    /// readiness probe lags by up to a probe period): the next member of a roll waits, so the
    /// client Service never loses two members at once.
    PodNotReady {
        /// Member name.
        member: String,
    },
    /// A member's data is gone and the cluster cannot be repaired without it; needs a restore.
    ClusterLost,
    /// `spec.storage.size` asks for more than these PVCs hold and their StorageClass does not
    /// allow expansion (or does not exist). Nothing after it (configuration roll, which would
    /// raise the quota derived from the size) happens until the size is set back or the class
    /// allows expansion.
    VolumeExpansionNotAllowed {
        /// The PVCs that cannot grow.
        pvcs: Vec<String>,
        /// Their StorageClass (the first one's; `None`: no class).
        storage_class: Option<String>,
        /// `spec.storage.size`.
        size: String,
    },
    /// A NOSPACE alarm is raised but nothing the operator may do frees enough space: every
    /// member is defragmented and a database file is still at or over the quota (compaction
    /// not allowed, or done without freeing enough). Raise `etcdOptions.quotaBackendBytes`
    /// (or `storage.size`), delete keys, or allow `spec.maintenance.compactOnNoSpace`.
    NoSpaceCannotBeFreed {
        /// The largest database file of a member, bytes.
        largest_db: u64,
        /// The quota, bytes.
        quota: u64,
    },
    /// A switch from plaintext to TLS waits (`tls_switch.rs`).
    TlsSwitch(tls_switch::SwitchWait),
    /// The next minor waits for etcd's cluster version to reach the minor every member runs
    /// (the leader moves it some seconds after the last member upgraded).
    ClusterVersionBehind {
        /// The cluster version etcd reports, `MAJOR.MINOR`, if any.
        cluster_version: Option<(u64, u64)>,
        /// The cluster version the next minor needs.
        needed: (u64, u64),
    },
    /// The member runs etcd 3.5 with `--snapshot-count=1` and has not saved a v2 snapshot yet
    /// ([`Action::SnapshotBeforeUpgrade`]).
    V2SnapshotPending {
        /// Member name.
        member: String,
    },
}

/// Majority of `voters`.
pub fn quorum(voters: usize) -> usize {
    voters / 2 + 1
}

/// The next action for the observed cluster: its spec validated once into a [`Desired`]
/// (refused, touching nothing, when it is invalid), then [`next_action_for`].
pub fn next_action(observed: &Observed, policy: &Policy) -> Action {
    match Desired::from_spec(&observed.spec) {
        Ok(desired) => next_action_for(observed, &desired, policy),
        Err(errors) => Action::Refuse(errors),
    }
}

/// The next action for the observed cluster and what its validated spec asks.
pub fn next_action_for(observed: &Observed, desired: &Desired, policy: &Policy) -> Action {
    if let Err(error) = check_cluster_name(&observed.cluster) {
        return Action::Refuse(vec![error]);
    }
    if let Err(error) = check_tls_not_removed(observed) {
        return Action::Refuse(vec![error]);
    }
    if let Some(current) = &observed.member_storage
        && let Err(error) = validation::check_storage_change(current, &observed.spec.storage)
    {
        return Action::Refuse(vec![error]);
    }
    if let Some(restore) = &observed.restoring {
        return Action::Wait(WaitReason::Restoring {
            restore: restore.clone(),
        });
    }
    if observed.spec.paused {
        return Action::Wait(WaitReason::Paused);
    }
    // Before anything that waits on Pods being Ready: a closed serving gate keeps its Pod
    // unready, and nothing else opens it.
    if let Some(open) = maintenance::reopen_serving_gate(observed) {
        return open;
    }
    match &observed.membership {
        Membership::Unknown => plan_without_members(observed, desired.version),
        Membership::Known(members) => plan_with_members(observed, members, desired, policy),
    }
}

/// A cluster's name must not collide with another cluster's objects: cluster `X-client`'s
/// headless peer Service (named after the cluster) would be cluster X's client Service, and
/// each operator pass would apply its own spec over the other's.
fn check_cluster_name(cluster: &ClusterName) -> Result<(), FieldError> {
    match cluster.name.strip_suffix("-client") {
        Some(other) => Err(FieldError {
            field: "metadata.name".into(),
            message: format!(
                "{:?} ends in \"-client\": its peer Service would be cluster {other:?}'s client \
                 Service; choose another name",
                cluster.name
            ),
        }),
        None => Ok(()),
    }
}

/// `spec.tls` (or one side of it) no longer asks for TLS that members use: refused, since
/// building those members back to plain HTTP would cut them off (their peers dial their
/// `https://` peer URLs; TLS clients lose them). The API server refuses removing `spec.tls`
/// (etcd-api cluster.rs); this holds for an object written past that rule.
fn check_tls_not_removed(observed: &Observed) -> Result<(), FieldError> {
    let cluster = &observed.cluster;
    let mut on_tls: Vec<&str> = Vec::new();
    if !cluster.peer_tls
        && let Membership::Known(members) = &observed.membership
    {
        on_tls.extend(
            members
                .iter()
                .filter(|m| m.peer_url.starts_with("https://"))
                .map(|m| m.name.as_str()),
        );
    }
    for (name, pod) in &observed.pods {
        let Some(listen) = pod.listen else { continue };
        if (!cluster.peer_tls && listen.peer != tls_switch::Listen::Http)
            || (!cluster.client_tls && listen.client != tls_switch::Listen::Http)
        {
            on_tls.push(name);
        }
    }
    if on_tls.is_empty() {
        return Ok(());
    }
    on_tls.sort_unstable();
    on_tls.dedup();
    Err(FieldError {
        field: "spec.tls".into(),
        message: format!(
            "members {} use TLS that spec.tls no longer asks for: a cluster is never switched \
             back to plain HTTP; set spec.tls again as it was",
            on_tls.join(", ")
        ),
    })
}

/// No member answers: create only what cannot hurt.
fn plan_without_members(observed: &Observed, target: EtcdVersion) -> Action {
    let cluster = &observed.cluster;
    let never_existed =
        observed.recorded_cluster_id.is_none() && observed.last_known_members.is_empty();
    if never_existed {
        // Volumes older than this EtcdCluster object hold an earlier cluster's data (same name,
        // `reclaimPolicy: Retain`). A seed started on one would run that old data as a "new"
        // cluster and never become healthy (issue 17, defect 9). Refuse, touch nothing, name
        // them: the user deletes them or restores from a backup.
        let retained: Vec<&str> = observed
            .pvcs
            .iter()
            .filter(|(_, pvc)| pvc.predates_cluster)
            .map(|(name, _)| name.as_str())
            .collect();
        if !retained.is_empty() {
            return Action::Refuse(vec![FieldError {
                field: "metadata.name".into(),
                message: format!(
                    "PersistentVolumeClaims {} predate this EtcdCluster: they hold the data of an \
                     earlier cluster of the same name (kept by reclaimPolicy Retain). The \
                     operator does not start a new cluster on old data and never deletes them: \
                     delete them to start empty, or create the cluster under another name",
                    retained.join(", ")
                ),
            }]);
        }
        let seed = cluster.member_name(0);
        return match observed.pods.get(&seed) {
            None => Action::BootstrapSeed {
                member: seed,
                version: target,
            },
            Some(pod) if pod.terminating => {
                Action::Wait(WaitReason::PodTerminating { member: seed })
            }
            Some(_) => Action::Wait(WaitReason::SeedStarting),
        };
    }
    // Members whose Pod is gone but whose data survived restart as themselves: etcd ignores the
    // initial-cluster flags when its data directory exists, so this cannot fork the cluster.
    let version = observed.last_known_version.unwrap_or(target);
    let initial_cluster: Vec<(String, String)> = observed
        .last_known_members
        .iter()
        .map(|name| (name.clone(), cluster.peer_url(name)))
        .collect();
    // A volume being deleted is data going away: no Pod is started on it.
    let has_data = |member: &String| observed.pvcs.get(member).is_some_and(|p| !p.terminating);
    for member in &observed.last_known_members {
        if !observed.pods.contains_key(member) && has_data(member) {
            let (version, reason) = restart_version(observed, member, version);
            return Action::CreateMemberPod {
                member: member.clone(),
                initial_cluster: initial_cluster.clone(),
                version,
                reason,
            };
        }
    }
    let with_data = observed
        .last_known_members
        .iter()
        .filter(|m| has_data(m))
        .count();
    if with_data < quorum(observed.last_known_members.len()) {
        return Action::Wait(WaitReason::ClusterLost);
    }
    Action::Wait(WaitReason::QuorumLost {
        healthy: 0,
        voters: 0,
    })
}

fn plan_with_members(
    observed: &Observed,
    members: &[Member],
    desired: &Desired,
    policy: &Policy,
) -> Action {
    let target = desired.version;
    let cluster = &observed.cluster;
    let voters: Vec<&Member> = members.iter().filter(|m| !m.learner).collect();
    let healthy_voters = voters.iter().filter(|m| m.healthy()).count();
    let name_of = |m: &Member| m.display_name(cluster);

    // The version the members run, as far as they report one. A rolling upgrade only moves
    // forward one minor at a time; anything else is refused before any action.
    let current = members.iter().filter_map(Member::version).min();
    if let Some(Err(error)) = current.map(|c| validation::check_version_change(c, target)) {
        return Action::Refuse(vec![error]);
    }

    // 1. Members etcd knows whose Pod is missing.
    //    `--initial-cluster`: the started members, and the member itself at the peer URL etcd
    //    holds for it (its MemberAdd's: mid-switch to TLS not the spec's; etcd refuses a
    //    mismatch).
    let initial_cluster = |joining: &Member, name: &str| -> Vec<(String, String)> {
        let mut list: Vec<(String, String)> = members
            .iter()
            .filter(|m| m.started())
            .map(|m| (m.name.clone(), m.peer_url.clone()))
            .collect();
        if !list.iter().any(|(started, _)| started == name) {
            list.push((name.to_owned(), joining.peer_url.clone()));
        }
        list
    };
    for member in members {
        let Some(name) = member.member_name(cluster) else {
            continue; // not one of ours (added by hand): never given a Pod
        };
        if observed.pods.contains_key(&name) {
            continue;
        }
        let pvc = observed.pvcs.get(&name);
        if pvc.is_some_and(|p| p.terminating) {
            continue; // its data is going: handled as a dead member below
        }
        // Pods are created at the target version: for a member taken down by `UpgradeMember`
        // this is the upgrade itself; etcd runs adjacent minor versions side by side.
        if !member.started() || pvc.is_some() {
            let (version, reason) = if member.started() {
                restart_version(observed, &name, target)
            } else {
                (target, PodReason::NewMember)
            };
            return Action::CreateMemberPod {
                initial_cluster: initial_cluster(member, &name),
                member: name,
                version,
                reason,
            };
        }
        // Started before, data gone: it must be removed and replaced (rule 4).
    }

    // 2. Pods of things that are not members (crash after MemberRemove, or a stale seed).
    for (name, pod) in &observed.pods {
        let is_member = members
            .iter()
            .any(|m| m.member_name(cluster).as_deref() == Some(name));
        if !is_member {
            if pod.terminating {
                return Action::Wait(WaitReason::PodTerminating {
                    member: name.clone(),
                });
            }
            return Action::DeletePod {
                member: name.clone(),
            };
        }
    }

    // 3. A learner that never answered within its deadline is removed: it holds no vote, so
    //    this never touches quorum (etcd still needs a quorum to commit the removal). Without
    //    this, a learner that cannot start blocked every later repair.
    let learner = members.iter().find(|m| m.learner);
    if let Some(stuck) = learner
        && matches!(stuck.health, MemberHealth::Unhealthy { unhealthy_for }
            if unhealthy_for >= policy.learner_deadline)
        && let Ok(quorum) = quorum_gate(
            Disruption::RemoveUnhealthyOrLearner,
            healthy_voters,
            voters.len(),
        )
    {
        return Action::RemoveMember {
            member: name_of(stuck),
            id: stuck.id,
            reason: RemovalReason::LearnerStuck,
            quorum,
        };
    }

    // 4. Dead voters: unhealthy past the grace period, or their data is gone.
    let data_lost = |m: &Member| {
        m.member_name(cluster).is_some_and(|name| {
            m.started()
                && !observed.pods.contains_key(&name)
                && observed.pvcs.get(&name).is_none_or(|p| p.terminating)
        })
    };
    // "Unhealthy" is never the operator's view alone: a member whose Pod the kubelet reports
    // Ready (its /health probe passes: it has a leader and serves reads) is only cut off from
    // the operator, and is not removed however long that lasts.
    let ready_per_kubelet = |m: &Member| {
        m.member_name(cluster)
            .and_then(|name| observed.pods.get(&name))
            .is_some_and(|pod| pod.ready && !pod.terminating)
    };
    let dead = voters.iter().find(|m| match m.health {
        MemberHealth::Unhealthy { unhealthy_for } => {
            (unhealthy_for >= policy.dead_after && !ready_per_kubelet(m)) || data_lost(m)
        }
        MemberHealth::Healthy { .. } => false,
    });
    if let Some(dead) = dead {
        // etcd commits the removal only with a quorum of the current voters; the dead member
        // is not among the healthy, so the remaining `healthy_voters` then hold a quorum of
        // `voters - 1` too.
        return match quorum_gate(
            Disruption::RemoveUnhealthyOrLearner,
            healthy_voters,
            voters.len(),
        ) {
            Ok(quorum) => Action::RemoveMember {
                member: name_of(dead),
                id: dead.id,
                reason: RemovalReason::Dead,
                quorum,
            },
            Err(short) => Action::Wait(WaitReason::MembersUnreachable {
                reachable: short.healthy,
                voters: short.voters,
            }),
        };
    }

    // 4b. A switch from plaintext to TLS (tls_switch.rs): before the health waits below, so
    //     that a member that does not come up on its https:// peer URL is reverted in time.
    //     A cluster short of voters (a dead member was just removed) gets its replacement
    //     first (step 7): one voter fewer, and every roll of the switch would wait on the
    //     quorum gate for ever. A member settling on its new URL is still seen to here.
    let short_of_voters = voters.len() < desired.size.voters();
    if learner.is_none()
        && let Some(step) = next_tls_switch_step(observed, &voters, short_of_voters)
    {
        return step;
    }

    // 5. Every voter that does not answer is joining (caught up in raft, not serving yet): wait
    //    for it to serve, under its own name rather than as unreachable or unhealthy. Short of
    //    spec.size with no learner, no Pod going and no alarm, the next learner is added
    //    meanwhile: a learner changes no quorum, and its snapshot transfer overlaps the
    //    joining member's publish (etcd refuses, "retry later", until it allows the change).
    let silent: Vec<&Member> = voters.iter().copied().filter(|m| !m.healthy()).collect();
    if let Some(first) = silent.first()
        && silent.iter().all(|m| observed.joining(m))
    {
        if learner.is_none()
            && voters.len() < desired.size.voters()
            && observed.alarms.is_empty()
            && !observed.pods.values().any(|pod| pod.terminating)
        {
            return add_learner(observed, cluster, &voters, members);
        }
        return Action::Wait(WaitReason::MemberJoining {
            member: name_of(first),
        });
    }

    // 5b. The operator reaches a minority, or a member is unhealthy within its grace period:
    //    change nothing. Not quorum loss: the member list is only known after a linearizable
    //    read succeeded (state.rs), so etcd confirmed quorum; the operator is cut off.
    //    A joining voter answered on its metrics port: it is reached, and not the one named.
    let reachable = healthy_voters + silent.iter().filter(|m| observed.joining(m)).count();
    if reachable < quorum(voters.len()) {
        return Action::Wait(WaitReason::MembersUnreachable {
            reachable,
            voters: voters.len(),
        });
    }
    if let Some(unhealthy) = silent.iter().find(|m| !observed.joining(m)) {
        return Action::Wait(WaitReason::MemberUnhealthy {
            member: name_of(unhealthy),
        });
    }

    // 6. A learner (a dead voter was dealt with above, so it does not wait on the learner):
    //    promote it once it answers, or once its metrics say raft has it caught up (it lost
    //    etcd's publish race and serves no client for seconds; etcd refuses the promotion if it
    //    is not in sync after all), and every voter answers (promoting raises the quorum); never
    //    add another before.
    if let Some(learner) = learner {
        return if learner.healthy() || observed.joining(learner) {
            Action::PromoteLearner {
                member: name_of(learner),
                id: learner.id,
            }
        } else {
            Action::Wait(WaitReason::LearnerCatchingUp {
                member: name_of(learner),
            })
        };
    }
    if let Some((name, _)) = observed.pods.iter().find(|(_, pod)| pod.terminating) {
        return Action::Wait(WaitReason::PodTerminating {
            member: name.clone(),
        });
    }

    // 6b. A NOSPACE alarm (the cluster takes no writes): compact if allowed, defragment every
    //     member, disarm (maintenance.rs). Before scaling or rolling: nothing else matters as
    //     much as writes coming back.
    if let Some(step) = maintenance::no_space_recovery(observed, &voters) {
        return step;
    }

    // 7. Scale up (or replace a removed member): one learner at a time.
    let size = desired.size.voters();
    if voters.len() < size {
        return add_learner(observed, cluster, &voters, members);
    }

    // 8. Scale down: the highest ordinal that is not the leader (all are healthy here).
    if voters.len() > size {
        let victim = voters
            .iter()
            .filter(|m| !m.leader())
            .max_by_key(|m| ordinal_key(cluster, m))
            .or_else(|| voters.first());
        if let Some(victim) = victim {
            return match quorum_gate(Disruption::RemoveHealthyVoter, healthy_voters, voters.len()) {
                Ok(quorum) => Action::RemoveMember {
                    member: name_of(victim),
                    id: victim.id,
                    reason: RemovalReason::ScaleDown,
                    quorum,
                },
                Err(short) => Action::Wait(WaitReason::WouldLoseQuorum {
                    member: name_of(victim),
                    healthy: short.healthy,
                    voters: short.voters,
                }),
            };
        }
    }

    // 9. Upgrade: one member at a time, followers before the leader. A one-member cluster has
    //    no redundancy to keep: its upgrade is a short outage the user chose with size 1.
    //    A minor upgrade starts only once etcd's cluster version is the minor all members run
    //    (3.4 -> 3.5 -> 3.6 -> 3.7: each step completes, as etcd reports it, before the next).
    if let Some(current) = current
        && let Err(behind) =
            validation::check_cluster_version(current, target, observed.cluster_version)
    {
        return Action::Wait(WaitReason::ClusterVersionBehind {
            cluster_version: behind.cluster_version,
            needed: behind.needed,
        });
    }
    // A member whose v2 snapshot was taken is marked so on its PVC, upgrade or not.
    if let Some((name, _)) = observed.pods.iter().find(|(name, pod)| {
        pod.snapshot_before_upgrade
            && pod.v2_snapshot_saved
            && observed
                .pvcs
                .get(*name)
                .is_some_and(|pvc| pvc.snapshot_before_upgrade.is_some())
    }) {
        return Action::MarkV2WalClean {
            member: name.clone(),
        };
    }
    let behind = |m: &&&Member| m.version().is_some_and(|v| v < target);
    let next = voters
        .iter()
        .filter(behind)
        .min_by_key(|m| (m.leader(), ordinal_key(cluster, m)));
    if let Some(member) = next {
        let from = member.version().unwrap_or(target);
        let name = name_of(member);
        let pvc = observed.pvcs.get(&name);
        let needs_v2_snapshot = from.major == 3
            && from.minor == 5
            && (target.major, target.minor) >= (3, 6)
            && pvc.is_some_and(|pvc| !pvc.v2_wal_clean);
        let pod_snapshotting = observed
            .pods
            .get(&name)
            .is_some_and(|pod| pod.snapshot_before_upgrade && !pod.terminating);
        if needs_v2_snapshot
            && pod_snapshotting
            && pvc.is_some_and(|p| p.snapshot_before_upgrade.is_some())
        {
            // Up on 3.5 with --snapshot-count=1; marked clean (above) once it saved one.
            return Action::Wait(WaitReason::V2SnapshotPending { member: name });
        }
        return match quorum_gate(
            Disruption::TakeDownHealthyVoter,
            healthy_voters,
            voters.len(),
        ) {
            Ok(quorum) if needs_v2_snapshot => Action::SnapshotBeforeUpgrade {
                member: name,
                version: from,
                quorum,
            },
            Ok(quorum) => Action::UpgradeMember {
                member: name,
                from,
                to: target,
                quorum,
            },
            Err(short) => Action::Wait(WaitReason::WouldLoseQuorum {
                member: name_of(member),
                healthy: short.healthy,
                voters: short.voters,
            }),
        };
    }

    // 9a. Volume growth, before the roll: the roll applies the quota derived from the new size,
    //     which must not exceed what the volumes hold.
    if let Some(grow) = volumes::next_growth(observed, members) {
        return grow;
    }

    // 9b. Configuration drift: first record the hash on Pods built without one (adopted, not
    //     restarted), then roll members whose Pod was built from another spec (rollout.rs).
    if let Some(adopt) = rollout::next_adoption(observed, members) {
        return adopt;
    }
    if let Some(roll) = rollout::next_roll(observed, &voters, healthy_voters) {
        return roll;
    }

    // 10. PVCs released by the reclaim policy: no member, no Pod, not kept by a restore.
    if observed.spec.storage.reclaim_policy == ReclaimPolicy::Delete {
        let released = observed.pvcs.iter().find(|(name, pvc)| {
            !pvc.retained_by_restore
                && !pvc.terminating
                && !observed.pods.contains_key(*name)
                && cluster.ordinal_of(name).is_some()
                && !members
                    .iter()
                    .any(|m| m.member_name(cluster).as_deref() == Some(name))
        });
        if let Some((name, _)) = released {
            return Action::DeletePvc { name: name.clone() };
        }
    }

    // 11. Scheduled maintenance: defragment a member whose free space passed the threshold.
    if let Some(defrag) = maintenance::next_defrag(observed, &voters, healthy_voters) {
        return defrag;
    }
    Action::Converged
}

/// What the spec and the annotation ask of a switch to TLS.
fn switch_wanted(observed: &Observed) -> tls_switch::SwitchWanted {
    tls_switch::SwitchWanted {
        peer_tls: observed.cluster.peer_tls,
        client_tls: observed.cluster.client_tls,
        drop_plaintext_clients: observed.drop_plaintext_clients,
    }
}

/// What a member Pod of a cluster created as the spec says listens on.
fn spec_listeners(cluster: &ClusterName) -> tls_switch::Listeners {
    let side = |tls| {
        if tls {
            tls_switch::Listen::Https
        } else {
            tls_switch::Listen::Http
        }
    };
    tls_switch::Listeners {
        peer: side(cluster.peer_tls),
        client: side(cluster.client_tls),
    }
}

/// The voters of ours as the TLS switch sees them (members not ours are left out: they have
/// no Pod of ours to roll).
fn switch_members(observed: &Observed, voters: &[&Member]) -> Vec<tls_switch::SwitchMember> {
    let cluster = &observed.cluster;
    let default = spec_listeners(cluster);
    voters
        .iter()
        .filter_map(|m| {
            let name = m.member_name(cluster)?;
            let pod = observed.pods.get(&name).map(|pod| tls_switch::SwitchPod {
                listen: pod.listen.unwrap_or(default),
                ready: pod.ready,
                terminating: pod.terminating,
                reverted: pod.tls_switch_reverted,
            });
            Some(tls_switch::SwitchMember {
                id: m.id,
                peer_url_tls: m.peer_url.starts_with("https://"),
                client_url_plain: m
                    .client_url
                    .as_deref()
                    .is_none_or(|url| url.starts_with("http://")),
                client_url_on_switch_port: m.client_url_on_switch_port,
                healthy: m.healthy(),
                leader: m.leader(),
                unhealthy_for: match m.health {
                    MemberHealth::Unhealthy { unhealthy_for } => unhealthy_for,
                    MemberHealth::Healthy { .. } => Duration::ZERO,
                },
                pod,
                name,
            })
        })
        .collect()
}

/// The next step of a switch to TLS, if one runs. `settling_only`: only a step about a member
/// that moved to its https:// URL and does not answer (the wait, then the revert).
fn next_tls_switch_step(
    observed: &Observed,
    voters: &[&Member],
    settling_only: bool,
) -> Option<Action> {
    let wanted = switch_wanted(observed);
    let members = switch_members(observed, voters);
    let step = tls_switch::next_switch_step(&wanted, &members, tls_switch::REVERT_AFTER)?;
    let settling = matches!(
        step,
        tls_switch::SwitchStep::Wait(tls_switch::SwitchWait::SettlingOnTls(_))
            | tls_switch::SwitchStep::UpdatePeerUrl { to_tls: false, .. }
    );
    if settling_only && !settling {
        return None;
    }
    let (done, voters) = tls_switch::progress(&wanted, &members).unwrap_or((0, members.len()));
    Some(match step {
        tls_switch::SwitchStep::Roll {
            member,
            from,
            to,
            quorum,
        } => Action::RollForTls {
            member,
            from,
            to,
            done,
            voters,
            quorum,
        },
        tls_switch::SwitchStep::UpdatePeerUrl {
            member,
            id,
            to_tls,
            quorum,
        } => Action::UpdatePeerUrl {
            peer_url: if to_tls {
                observed.cluster.switched_peer_url(&member)
            } else {
                observed.cluster.plain_peer_url(&member)
            },
            member,
            id,
            revert: !to_tls,
            done,
            voters,
            quorum,
        },
        tls_switch::SwitchStep::Wait(wait) => Action::Wait(WaitReason::TlsSwitch(wait)),
    })
}

/// `MemberAdd` of the next member as a learner (its Pod follows, step 1).
fn add_learner(
    observed: &Observed,
    cluster: &ClusterName,
    voters: &[&Member],
    members: &[Member],
) -> Action {
    let member = cluster.member_name(next_ordinal(observed, members));
    Action::AddLearner {
        peer_url: new_member_peer_url(cluster, voters, &member),
        member,
    }
}

/// The peer URL a new member joins on: one its Pod's peer listeners ([`pod_listeners`]) serve.
/// While some voter's URL is still `http://` (a switch to TLS before or in its first round),
/// the new Pod listens on both and joins on `http://…:2380`; the switch moves its URL later.
/// Once every voter of a cluster switched from plaintext is on `https://…:2382`, there too,
/// like its peers; otherwise as the spec says.
fn new_member_peer_url(cluster: &ClusterName, voters: &[&Member], member: &str) -> String {
    if !cluster.peer_tls {
        return cluster.peer_url(member);
    }
    let ours: Vec<(String, &Member)> = voters
        .iter()
        .filter_map(|m| Some((m.member_name(cluster)?, *m)))
        .collect();
    if ours.iter().any(|(_, m)| m.peer_url.starts_with("http://")) {
        cluster.plain_peer_url(member)
    } else if ours
        .iter()
        .any(|(name, m)| m.peer_url == cluster.switched_peer_url(name))
    {
        cluster.switched_peer_url(member)
    } else {
        cluster.peer_url(member)
    }
}

/// What every member Pod created now listens on (the executor builds Pods with it): during a
/// switch to TLS, the listeners of its current stage; otherwise as the spec says (with 2378
/// kept for the clients of a cluster switched from plaintext). Without a member list, as the
/// spec says when every Pod does (2378 kept when a Pod serves it), else both schemes on each
/// side TLS is wanted for (a Pod that listens on both reaches peers and serves clients at every
/// stage).
pub fn pod_listeners(observed: &Observed) -> tls_switch::Listeners {
    let default = spec_listeners(&observed.cluster);
    match &observed.membership {
        Membership::Known(members) => {
            let voters: Vec<&Member> = members.iter().filter(|m| !m.learner).collect();
            let members = switch_members(observed, &voters);
            if members.is_empty() {
                default
            } else {
                tls_switch::desired_listen(&switch_wanted(observed), &members)
            }
        }
        Membership::Unknown => {
            let switched = tls_switch::Listeners {
                client: tls_switch::Listen::HttpsWithSwitchPort,
                ..default
            };
            let switched_done = default.client == tls_switch::Listen::Https;
            let as_spec = observed.pods.values().all(|pod| {
                pod.listen
                    .is_none_or(|listen| listen == default || (switched_done && listen == switched))
            });
            let keeps_switch_port = observed
                .pods
                .values()
                .any(|pod| pod.listen == Some(switched));
            if as_spec && keeps_switch_port && switched_done {
                switched
            } else if as_spec {
                default
            } else {
                let side = |tls: bool, spec| {
                    if tls { tls_switch::Listen::Dual } else { spec }
                };
                tls_switch::Listeners {
                    peer: side(observed.cluster.peer_tls, default.peer),
                    client: side(observed.cluster.client_tls, default.client),
                }
            }
        }
    }
}

/// The client Service publishes 2378: some member Pod serves `https://` clients there, or
/// Pods created now would (a cluster switched from plaintext, during the switch or after it;
/// plan/tls_switch.rs). A cluster created with TLS never does.
pub fn serves_switch_client_port(observed: &Observed) -> bool {
    observed
        .pods
        .values()
        .filter_map(|pod| pod.listen)
        .chain([pod_listeners(observed)])
        .any(|listen| listen.client.serves_switch_client_port())
}

/// The lowest ordinal above every ordinal in use (members, Pods, PVCs, even retained ones), so
/// a new member never reuses an old member's name or volume.
fn next_ordinal(observed: &Observed, members: &[Member]) -> u32 {
    let cluster = &observed.cluster;
    let member_names = members.iter().filter_map(|m| m.member_name(cluster));
    observed
        .pods
        .keys()
        .chain(observed.pvcs.keys())
        .cloned()
        .chain(member_names)
        .chain(observed.last_known_members.iter().cloned())
        .filter_map(|name| cluster.ordinal_of(&name))
        .max()
        .map_or(0, |max| max + 1)
}

/// Sort key for choosing among members: by ordinal, members that are not ours last.
/// The version and reason of a restarting member's Pod: the version its PVC names for a v2
/// snapshot before an upgrade ([`Action::SnapshotBeforeUpgrade`]), else `version`.
fn restart_version(
    observed: &Observed,
    member: &str,
    version: EtcdVersion,
) -> (EtcdVersion, PodReason) {
    match observed
        .pvcs
        .get(member)
        .and_then(|pvc| pvc.snapshot_before_upgrade)
    {
        Some(snapshot_on) => (snapshot_on, PodReason::SnapshotBeforeUpgrade),
        None => (version, PodReason::Restart),
    }
}

fn ordinal_key(cluster: &ClusterName, member: &Member) -> u32 {
    member
        .member_name(cluster)
        .and_then(|name| cluster.ordinal_of(&name))
        .unwrap_or(u32::MAX)
}

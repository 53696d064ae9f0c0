//! The EtcdCluster status, and the event of an action, computed from the observed state and the
//! planned action. Pure: no client calls; the controller writes the result (one server-side
//! apply, skipped when nothing but timestamps changed) and publishes the event.
//!
//! ```text
//!   Observed ──┐
//!   Action   ──┼──▶ status_from ──▶ EtcdClusterStatus (members, readyMembers, phase,
//!   previous ──┘                    Available / Progressing / Degraded, versions, IDs)
//!   Action   ─────▶ event_for   ──▶ Option<ActionEvent>
//! ```
//!
//! What the three conditions mean:
//! - `Available`: quorum holds and every voting member answers (design.md §3). Learners are not
//!   counted: they do not serve clients yet, and one is unhealthy while it starts.
//! - `Progressing`: True while the operator is changing the cluster, the reason saying how;
//!   False with the reason it stands still (`Converged`, `Paused`, or what blocks it).
//! - `Degraded`: True with what is wrong (a member, quorum, the spec); `Healthy` otherwise.
//!
//! Messages carry counts and names but nothing that moves by itself (no durations), so an
//! unchanged cluster yields an unchanged status and the controller writes nothing.
//!
//! `status.members` is also the operator's memory for when no member answers: the observer's
//! `last_known_members` and `last_known_version` come from [`last_known_members`] and
//! [`last_known_version`] of the previous status.

use etcd_api::condition::{ConditionUpdate, Time, find_condition, set_condition, types};
use etcd_api::validation::EtcdVersion;
use etcd_api::{ClusterPhase, EtcdClusterStatus, MemberStatus};

use crate::naming::ClusterName;
use crate::plan::tls_switch::{Listen, Listeners, REVERT_AFTER, SwitchWait};
use crate::plan::{Action, DefragReason, PodReason, RemovalReason, WaitReason, quorum};
use crate::state::{Member, Membership, Observed};

#[cfg(test)]
mod tests;

/// Condition and event reasons (PascalCase).
pub mod reasons {
    /// Available: quorum holds and every voter answers.
    pub const ALL_MEMBERS_HEALTHY: &str = "AllMembersHealthy";
    /// Available: quorum holds, some voter does not answer.
    pub const MEMBERS_UNHEALTHY: &str = "MembersUnhealthy";
    /// Available, Progressing: the seed member is being created or has not answered yet.
    pub const BOOTSTRAPPING: &str = "Bootstrapping";
    /// Available, Progressing, Degraded, event: fewer than a majority of voters answer.
    pub const QUORUM_LOST: &str = "QuorumLost";
    /// Progressing: a member is being added.
    pub const SCALING_UP: &str = "ScalingUp";
    /// Progressing: a member is being removed because the cluster is larger than spec.size.
    pub const SCALING_DOWN: &str = "ScalingDown";
    /// Progressing: a learner is promoted, or waited for before its promotion.
    pub const PROMOTING_LEARNER: &str = "PromotingLearner";
    /// Progressing: a dead member is removed, to be replaced.
    pub const REPLACING_MEMBER: &str = "ReplacingMember";
    /// Progressing: members move to a new version.
    pub const UPGRADING: &str = "Upgrading";
    /// Progressing: members are rolled, one at a time, onto the current `spec.pod` /
    /// `spec.etcdOptions`.
    pub const ROLLING_CONFIGURATION: &str = "RollingConfiguration";
    /// Progressing: a running plaintext cluster is switched to TLS, member by member.
    pub const ENABLING_TLS: &str = "EnablingTLS";
    /// Progressing, Degraded, event: a member did not come up on its `https://` peer URL and
    /// was moved back to `http://`; the switch to TLS stops there.
    pub const TLS_SWITCH_REVERTED: &str = "TLSSwitchReverted";
    /// Event: a member's peer URL was moved (`MemberUpdate`) during the switch to TLS.
    pub const PEER_URL_UPDATED: &str = "PeerURLUpdated";
    /// Progressing: a member's missing Pod is recreated on its data.
    pub const RESTARTING_MEMBER: &str = "RestartingMember";
    /// Progressing: the Pod of something that is not a member is deleted.
    pub const DELETING_POD: &str = "DeletingPod";
    /// Progressing: the PVC of a removed member is deleted (reclaimPolicy Delete).
    pub const DELETING_VOLUME: &str = "DeletingVolume";
    /// Progressing: nothing left to do.
    pub const CONVERGED: &str = "Converged";
    /// Progressing: spec.paused is set.
    pub const PAUSED: &str = "Paused";
    /// Progressing: an EtcdRestore is rebuilding the cluster.
    pub const RESTORING: &str = "Restoring";
    /// Progressing, Degraded, event: the spec cannot be acted on.
    pub const INVALID_SPEC: &str = "InvalidSpec";
    /// Progressing, Degraded, event: a member's data is gone and the cluster needs a restore.
    pub const CLUSTER_LOST: &str = "ClusterLost";
    /// Progressing, Degraded, event: the next step would take the cluster below quorum.
    pub const WOULD_LOSE_QUORUM: &str = "WouldLoseQuorum";
    /// Progressing, Degraded, event: a voter does not answer.
    pub const MEMBER_UNHEALTHY: &str = "MemberUnhealthy";
    /// Available, Degraded: a member raised an etcd alarm (NOSPACE, CORRUPT); quorum holds.
    pub const ALARM_RAISED: &str = "AlarmRaised";
    /// Available, Progressing, Degraded, event: quorum holds (a linearizable read succeeded) but
    /// the operator reaches fewer than a majority of the voters.
    pub const MEMBERS_UNREACHABLE: &str = "MembersUnreachable";
    /// Available, Progressing: a voter raft has caught up does not serve clients yet (its etcd
    /// just started and waits for its own publish); no other voter is silent.
    pub const MEMBER_JOINING: &str = "MemberJoining";
    /// Degraded: nothing is wrong.
    pub const HEALTHY: &str = "Healthy";
    /// Event: the seed member of a new cluster was created.
    pub const SEED_CREATED: &str = "SeedCreated";
    /// Event: a member's Pod was created (new member, restart, or upgrade).
    pub const MEMBER_POD_CREATED: &str = "MemberPodCreated";
    /// Event: a learner was added to etcd.
    pub const MEMBER_ADDED: &str = "MemberAdded";
    /// Event: a learner became a voting member.
    pub const LEARNER_PROMOTED: &str = "LearnerPromoted";
    /// Event: a member was removed from etcd.
    pub const MEMBER_REMOVED: &str = "MemberRemoved";
    /// Event: the Pod of a non-member was deleted.
    pub const MEMBER_POD_DELETED: &str = "MemberPodDeleted";
    /// Event: a member was taken down to come back on a new version.
    pub const MEMBER_UPGRADING: &str = "MemberUpgrading";
    /// Event: a member was taken down to come back with the current configuration.
    pub const MEMBER_ROLLED: &str = "MemberRolled";
    /// Event: a member was restarted on etcd 3.5 to take a v2 snapshot before moving to 3.6.
    pub const SNAPSHOT_BEFORE_UPGRADE: &str = "SnapshotBeforeUpgrade";
    /// Event: that snapshot was taken; the member may move to etcd 3.6.
    pub const V2_WAL_CLEAN: &str = "V2WalClean";
    /// Event: the configuration hash was recorded on a Pod an older release built without one.
    pub const MEMBER_POD_ADOPTED: &str = "MemberPodAdopted";
    /// Event: a released PVC was deleted.
    pub const PVC_DELETED: &str = "PvcDeleted";
    /// Progressing, event: a member's database is defragmented.
    pub const DEFRAGMENTING: &str = "Defragmenting";
    /// Progressing, event: the key space is compacted to clear NOSPACE.
    pub const COMPACTING: &str = "Compacting";
    /// Event: a member Pod's serving readiness gate was opened (a new Pod, or one a
    /// defragmentation left drained).
    pub const MEMBER_SERVING: &str = "MemberServing";
    /// Event: the NOSPACE alarm was disarmed.
    pub const NO_SPACE_DISARMED: &str = "NoSpaceDisarmed";
    /// Progressing, Degraded, event: NOSPACE and nothing the operator may do frees space.
    pub const NO_SPACE_CANNOT_BE_FREED: &str = "NoSpaceCannotBeFreed";
    /// Progressing, event: a member PVC's request is raised to spec.storage.size.
    pub const EXPANDING_VOLUMES: &str = "ExpandingVolumes";
    /// Progressing, Degraded, event: spec.storage.size grew but the StorageClass does not
    /// allow expansion.
    pub const VOLUME_EXPANSION_NOT_ALLOWED: &str = "VolumeExpansionNotAllowed";
}

/// An event to publish about the EtcdCluster for an action.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ActionEvent {
    /// `Warning` rather than `Normal`.
    pub warning: bool,
    /// PascalCase reason, see [`reasons`].
    pub reason: &'static str,
    /// What happened, for humans.
    pub note: String,
}

/// A step of a reconcile that failed: a Kubernetes API call (e.g. a 403 for a verb the
/// operator's role lacks) or an etcd call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StepFailure {
    /// PascalCase cause ([`crate::execute::ExecError::reason`]).
    pub reason: &'static str,
    /// The error, naming the object and the API's answer.
    pub message: String,
}

/// Records a failed step in `status`: Degraded turns True with the step's reason and the error,
/// which names the object and the API's answer (a 403 names the missing verb), so the failure
/// shows in `kubectl describe`, not only in the operator's log. A Degraded that was already True
/// (quorum lost, an unhealthy member) is kept in the message.
pub fn record_failure(
    status: &mut EtcdClusterStatus,
    failure: &StepFailure,
    generation: Option<i64>,
    now: Time,
) {
    let also = find_condition(&status.conditions, types::DEGRADED)
        .filter(|c| c.status == "True")
        .map(|c| format!("; also {}: {}", c.reason, c.message))
        .unwrap_or_default();
    let update = ConditionUpdate::new(
        types::DEGRADED,
        true,
        failure.reason,
        format!("{}{also}", failure.message),
    );
    set_condition(&mut status.conditions, update, generation, &now);
}

/// Condition type: a certificate the operator does not renew (a Secret you provide, or one
/// cert-manager fills) is near its end ([`crate::certs::expiry_warning_time`]).
pub const CERTIFICATES_NEAR_EXPIRY: &str = "CertificatesNearExpiry";

/// Sets [`CERTIFICATES_NEAR_EXPIRY`]: `near` lists `(Secret, notAfter)` of each certificate
/// near its end (`None`: the cluster has no certificate the operator does not renew, and the
/// condition is left out). Returns the Warning event's note when this is news: the condition
/// turned True, or names other Secrets or ends than `previous` did.
pub fn record_certificate_expiry(
    status: &mut EtcdClusterStatus,
    previous: &EtcdClusterStatus,
    namespace: &str,
    near: Option<&[(String, String)]>,
    generation: Option<i64>,
    now: Time,
) -> Option<String> {
    let Some(near) = near else {
        etcd_api::condition::remove_condition(&mut status.conditions, CERTIFICATES_NEAR_EXPIRY);
        return None;
    };
    let update = if near.is_empty() {
        ConditionUpdate::new(
            CERTIFICATES_NEAR_EXPIRY,
            false,
            "CertificatesValid",
            "no certificate the operator does not renew is within a sixth of its lifetime (at \
             most 7 days) of its end",
        )
    } else {
        let each: Vec<String> = near
            .iter()
            .map(|(secret, ends)| format!("Secret {namespace}/{secret} ends at {ends}"))
            .collect();
        ConditionUpdate::new(
            CERTIFICATES_NEAR_EXPIRY,
            true,
            crate::tls::CERTIFICATE_NEAR_EXPIRY,
            format!(
                "{}: the operator does not renew these certificates; replace the Secret, or see \
                 why cert-manager has not renewed it",
                each.join("; ")
            ),
        )
    };
    set_condition(&mut status.conditions, update, generation, &now);
    let current = find_condition(&status.conditions, CERTIFICATES_NEAR_EXPIRY)?;
    let before = find_condition(&previous.conditions, CERTIFICATES_NEAR_EXPIRY);
    let news = current.status == "True"
        && before.is_none_or(|b| b.status != "True" || b.message != current.message);
    news.then(|| current.message.clone())
}

/// The Warning event for a failed step (published when the status changed, so a step that keeps
/// failing the same way is not repeated on every retry).
pub fn failure_event(failure: &StepFailure) -> ActionEvent {
    // Event notes are limited to 1 kB.
    let mut note = format!("{}; retried with back-off", failure.message);
    if note.len() > 1000 {
        let mut cut = 1000;
        while !note.is_char_boundary(cut) {
            cut -= 1;
        }
        note.truncate(cut);
    }
    ActionEvent {
        warning: true,
        reason: failure.reason,
        note,
    }
}

/// Consecutive "retry later" answers after which a refusal is reported. The controller retries
/// every 0.5 s for 20 answers, then doubles (`controller::refusal_backoff`), so 25 in a row is
/// about 40 s of refusals: far past the ~5 s etcd refuses after every membership change
/// (etcd-facts.md).
pub const PERSISTENT_REFUSALS: u32 = crate::controller::REFUSALS_AT_FIRST_INTERVAL + 5;

/// The failure to report for the `consecutive`-th "retry later" in a row, once it persists:
/// the status then says which step is stuck and why (the step's error names it).
pub fn refusal_report(consecutive: u32, message: &str) -> Option<StepFailure> {
    (consecutive >= PERSISTENT_REFUSALS).then(|| StepFailure {
        reason: "EtcdRetryLater",
        message: format!(
            "etcd refused the next step at least {PERSISTENT_REFUSALS} times in a row, retried \
             with back-off: {message}"
        ),
    })
}

/// The status to report for `observed` when the planner chose `action`.
///
/// `previous` is the status last written: conditions keep their `lastTransitionTime` unless
/// their status flips, and what nothing observed now can tell (cluster ID, current version, the
/// members when no member answers) is carried over from it. `generation` is the
/// `metadata.generation` the spec was read at.
pub fn status_from(
    observed: &Observed,
    action: &Action,
    generation: Option<i64>,
    previous: &EtcdClusterStatus,
    now: Time,
) -> EtcdClusterStatus {
    let current_version = current_version(observed, previous);
    let facts = Facts::new(observed, current_version.as_deref());
    let mut conditions = previous.conditions.clone();
    for update in [
        available(&facts),
        progressing(&facts, action),
        degraded(&facts, action),
    ] {
        set_condition(&mut conditions, update, generation, &now);
    }
    EtcdClusterStatus {
        observed_generation: generation,
        phase: Some(phase(&facts, action)),
        conditions,
        ready_members: i32::try_from(facts.healthy_voters).unwrap_or(i32::MAX),
        members: members(observed, previous),
        current_version,
        cluster_id: observed
            .cluster_id
            .map(|id| format!("{id:x}"))
            .or_else(|| previous.cluster_id.clone()),
        client_endpoint: Some(client_endpoint(observed)),
    }
}

/// The client Service's URL as clients can use it now: while a switch to TLS keeps serving
/// plaintext clients on 2379 (some member Pod listens on `http://` for clients), `http://…:2379`
/// (TLS is on 2378 meanwhile); otherwise as the spec says.
fn client_endpoint(observed: &Observed) -> String {
    let url = observed.cluster.client_service_url();
    let plaintext_served = observed.pods.values().any(|pod| {
        pod.listen
            .is_some_and(|listen| listen.client.serves_plain())
    });
    if observed.cluster.client_tls && plaintext_served {
        url.replacen("https://", "http://", 1)
    } else {
        url
    }
}

/// What the previous status says, read as the observer reads it (the membership core).
pub use etcd_member::observe::{last_known_members, last_known_version};

/// The event of a backup-schedule step (`spec.backup`): `(reason, note)` when the CronJob was
/// created, updated or removed; none when nothing changed. A failed step is reported as a
/// failure (status and Warning event) instead.
pub fn backup_schedule_event(
    cluster: &etcd_api::EtcdCluster,
    step: &crate::scheduled_backup::Step,
) -> Option<(&'static str, String)> {
    use crate::scheduled_backup::Step;
    let name = crate::scheduled_backup::name(cluster.metadata.name.as_deref().unwrap_or_default());
    let schedule = cluster
        .spec
        .backup
        .as_ref()
        .map(|b| b.schedule.as_str())
        .unwrap_or_default();
    match step {
        Step::Create => Some((
            "BackupScheduleCreated",
            format!(
                "CronJob {name} backs the cluster up on \"{schedule}\" (with its ServiceAccount, Role and RoleBinding)"
            ),
        )),
        Step::Update => Some((
            "BackupScheduleUpdated",
            format!("CronJob {name} follows spec.backup (schedule \"{schedule}\")"),
        )),
        Step::Remove => Some((
            "BackupScheduleRemoved",
            format!(
                "spec.backup was removed: CronJob {name} and its ServiceAccount, Role and RoleBinding deleted; EtcdBackups and their S3 objects are kept"
            ),
        )),
        Step::InSync | Step::Absent | Step::Foreign { .. } => None,
    }
}

/// The event for an action, to publish once the action succeeded: one per membership or version
/// change and every refusal; none for quiet waits (the seed or a learner starting, a Pod
/// terminating, pause, convergence). Warnings (refusals, quorum trouble, an unhealthy member)
/// should be published only when the status changed, so a long wait does not repeat them.
pub fn event_for(action: &Action) -> Option<ActionEvent> {
    let normal = |reason, note: String| {
        Some(ActionEvent {
            warning: false,
            reason,
            note,
        })
    };
    let warning = |reason, note: String| {
        Some(ActionEvent {
            warning: true,
            reason,
            note,
        })
    };
    match action {
        Action::BootstrapSeed { member, version } => normal(
            reasons::SEED_CREATED,
            format!("Created seed member {member} (etcd {version}) of a new cluster"),
        ),
        Action::CreateMemberPod {
            member,
            version,
            reason: PodReason::NewMember,
            ..
        } => normal(
            reasons::MEMBER_POD_CREATED,
            format!(
                "Created the Pod of new member {member} (etcd {version}); it joins the cluster"
            ),
        ),
        Action::CreateMemberPod {
            member,
            version,
            reason: PodReason::Restart,
            ..
        } => normal(
            reasons::MEMBER_POD_CREATED,
            format!("Recreated the Pod of member {member} (etcd {version}) on its data"),
        ),
        Action::CreateMemberPod {
            member,
            version,
            reason: PodReason::SnapshotBeforeUpgrade,
            ..
        } => normal(
            reasons::MEMBER_POD_CREATED,
            format!(
                "Recreated the Pod of member {member} on etcd {version} with --snapshot-count=1, \
                 on its data, to take a v2 snapshot before its upgrade"
            ),
        ),
        Action::AddLearner { member, peer_url } => normal(
            reasons::MEMBER_ADDED,
            format!("Added member {member} as a learner (peer URL {peer_url}); its Pod follows"),
        ),
        Action::PromoteLearner { member, id } => normal(
            reasons::LEARNER_PROMOTED,
            format!("Promoted learner {member} (ID {id:x}) to a voting member"),
        ),
        Action::RemoveMember {
            member,
            id,
            reason: RemovalReason::ScaleDown,
            ..
        } => normal(
            reasons::MEMBER_REMOVED,
            format!("Removed member {member} (ID {id:x}) to scale down; its Pod is deleted next"),
        ),
        Action::RemoveMember {
            member,
            id,
            reason: RemovalReason::Dead,
            ..
        } => normal(
            reasons::MEMBER_REMOVED,
            format!(
                "Removed dead member {member} (ID {id:x}): {}; a new member replaces it",
                DEAD_WHY
            ),
        ),
        Action::RemoveMember {
            member,
            id,
            reason: RemovalReason::LearnerStuck,
            ..
        } => warning(
            reasons::MEMBER_REMOVED,
            format!(
                "Removed learner {member} (ID {id:x}): it did not start or catch up within its \
                 deadline (check its Pod's events and logs); a new member replaces it"
            ),
        ),
        Action::DeletePod { member } => normal(
            reasons::MEMBER_POD_DELETED,
            format!("Deleted Pod {member}: it is not an etcd member"),
        ),
        Action::UpgradeMember {
            member, from, to, ..
        } => normal(
            reasons::MEMBER_UPGRADING,
            format!(
                "Took member {member} down to upgrade it from etcd {from} to {to}: its Pod is recreated on the \
                 new version, its data is kept"
            ),
        ),
        Action::RollMember {
            member,
            up_to_date,
            voters,
            ..
        } => normal(
            reasons::MEMBER_ROLLED,
            format!(
                "Took member {member} down to apply the current configuration (spec.pod, \
                 spec.etcdOptions, certificate Secrets): its Pod is recreated, its data is \
                 kept; {} before it",
                config_progress(*up_to_date, *voters)
            ),
        ),
        Action::SnapshotBeforeUpgrade {
            member, version, ..
        } => normal(
            reasons::SNAPSHOT_BEFORE_UPGRADE,
            format!(
                "Took member {member} down to restart it on etcd {version} with \
                 --snapshot-count=1: etcd 3.6 refuses to replay the v2 requests etcd 3.4 left in \
                 the WAL, and a v2 snapshot taken after them removes them (etcd's 3.5 to 3.6 \
                 upgrade guide); its upgrade follows"
            ),
        ),
        Action::MarkV2WalClean { member } => normal(
            reasons::V2_WAL_CLEAN,
            format!("Member {member} saved a v2 snapshot: it can move to etcd 3.6"),
        ),
        Action::AdoptPod {
            member,
            hash,
            tls_hash,
        } => normal(
            reasons::MEMBER_POD_ADOPTED,
            format!(
                "Recorded {} on Pod {member}, built by an operator release that did not record \
                 it; not restarted: a later change of spec.pod or spec.etcdOptions{} rolls it",
                [
                    hash.as_ref().map(|h| format!("configuration hash {h}")),
                    tls_hash.as_ref().map(|h| format!("certificate hash {h}")),
                ]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join(" and "),
                if tls_hash.is_some() {
                    " or of its certificate Secrets"
                } else {
                    ""
                }
            ),
        ),
        Action::DefragmentMember {
            member,
            free_bytes,
            reason,
            drain,
            ..
        } => normal(
            reasons::DEFRAGMENTING,
            format!(
                "Defragmented member {member} ({} MiB free in its database file{}); {}",
                free_bytes >> 20,
                match reason {
                    DefragReason::NoSpace => ", NOSPACE alarm raised",
                    DefragReason::Fragmented => ", past spec.maintenance.defrag's threshold",
                },
                if *drain {
                    "its Pod was drained from the client Service (not Ready) meanwhile, the \
                     others served"
                } else {
                    "it served nothing meanwhile, the others did (its Pod predates the serving \
                     readiness gate: clients were not drained)"
                }
            ),
        ),
        Action::OpenServingGate { member } => normal(
            reasons::MEMBER_SERVING,
            format!(
                "Opened the serving readiness gate of Pod {member} (etcd.operator.rs/serving): it \
                 is in the client Service once its readiness probe passes"
            ),
        ),
        Action::CompactKeyspace { revision } => normal(
            reasons::COMPACTING,
            format!(
                "Compacted the key space to revision {revision} to clear the NOSPACE alarm \
                 (spec.maintenance.compactOnNoSpace): older revisions are gone"
            ),
        ),
        Action::DisarmNoSpace { largest_db, quota } => normal(
            reasons::NO_SPACE_DISARMED,
            format!(
                "Disarmed the NOSPACE alarm: every member was defragmented, the largest database \
                 file is {} MiB, under the {} MiB quota; writes are accepted again",
                largest_db >> 20,
                quota >> 20
            ),
        ),
        Action::Wait(WaitReason::NoSpaceCannotBeFreed { largest_db, quota }) => warning(
            reasons::NO_SPACE_CANNOT_BE_FREED,
            no_space_message(*largest_db, *quota),
        ),
        Action::ExpandVolume { pvc, from, to } => normal(
            reasons::EXPANDING_VOLUMES,
            format!(
                "Raised the storage request of PVC {pvc} from {from} to {to} (spec.storage.size)"
            ),
        ),
        Action::Wait(WaitReason::VolumeExpansionNotAllowed {
            pvcs,
            storage_class,
            size,
        }) => warning(
            reasons::VOLUME_EXPANSION_NOT_ALLOWED,
            expansion_not_allowed_message(pvcs, storage_class.as_deref(), size),
        ),
        Action::DeletePvc { name } => normal(
            reasons::PVC_DELETED,
            format!("Deleted PVC {name} of a removed member (reclaimPolicy: Delete)"),
        ),
        Action::Refuse(errors) => warning(reasons::INVALID_SPEC, invalid_spec_message(errors)),
        Action::Wait(WaitReason::MembersUnreachable { reachable, voters }) => warning(
            reasons::MEMBERS_UNREACHABLE,
            members_unreachable_message(*reachable, *voters),
        ),
        Action::Wait(WaitReason::QuorumLost { healthy, voters }) => warning(
            reasons::QUORUM_LOST,
            quorum_lost_message(*healthy, *voters, &[]),
        ),
        Action::Wait(WaitReason::ClusterLost) => {
            warning(reasons::CLUSTER_LOST, cluster_lost_message(&[]))
        }
        Action::Wait(WaitReason::WouldLoseQuorum {
            member,
            healthy,
            voters,
        }) => warning(
            reasons::WOULD_LOSE_QUORUM,
            would_lose_quorum_message(member, *healthy, *voters),
        ),
        Action::Wait(WaitReason::MemberUnhealthy { member }) => warning(
            reasons::MEMBER_UNHEALTHY,
            format!(
                "Member {member} does not answer; nothing else changes until it does, and it is \
                 replaced if it stays down past the grace period"
            ),
        ),
        Action::RollForTls {
            member, from, to, ..
        } => normal(
            reasons::MEMBER_ROLLED,
            format!(
                "Took member {member} down to switch it to TLS: its Pod listened on {}, it comes \
                 back on {}; its data is kept",
                listeners_text(*from),
                listeners_text(*to)
            ),
        ),
        Action::UpdatePeerUrl {
            member,
            peer_url,
            revert: false,
            ..
        } => normal(
            reasons::PEER_URL_UPDATED,
            format!("Moved the peer URL of member {member} to {peer_url}; its Pod listens there"),
        ),
        Action::UpdatePeerUrl {
            member,
            peer_url,
            revert: true,
            ..
        } => warning(
            reasons::TLS_SWITCH_REVERTED,
            format!(
                "{}; its peer URL is moved back to {peer_url}",
                reverted_message(member)
            ),
        ),
        Action::Wait(WaitReason::TlsSwitch(SwitchWait::Reverted(member))) => {
            warning(reasons::TLS_SWITCH_REVERTED, reverted_message(member))
        }
        Action::Wait(WaitReason::TlsSwitch(wait)) => match wait {
            SwitchWait::WouldLoseQuorum {
                member,
                healthy,
                voters,
            } => warning(
                reasons::WOULD_LOSE_QUORUM,
                would_lose_quorum_message(member, *healthy, *voters),
            ),
            _ => None,
        },
        Action::Wait(
            WaitReason::Paused
            | WaitReason::Restoring { .. }
            | WaitReason::SeedStarting
            | WaitReason::PodTerminating { .. }
            | WaitReason::PodNotReady { .. }
            | WaitReason::LearnerCatchingUp { .. }
            | WaitReason::MemberJoining { .. }
            | WaitReason::ClusterVersionBehind { .. }
            | WaitReason::V2SnapshotPending { .. },
        )
        | Action::Converged => None,
    }
}

/// What a member Pod listens on, for messages.
fn listeners_text(listen: Listeners) -> String {
    let side = |listen, plain: &str, tls: &str| match listen {
        Listen::Http => format!("http://:{plain}"),
        Listen::Dual => format!("http://:{plain} + https://:{tls}"),
        Listen::Https => "https only".to_owned(),
        Listen::HttpsWithSwitchPort => format!("https only, on :{plain} and :{tls}"),
    };
    format!(
        "peers {}, clients {}",
        side(listen.peer, "2380", "2382"),
        side(listen.client, "2379", "2378")
    )
}

fn reverted_message(member: &str) -> String {
    format!(
        "Member {member} did not come up on its https:// peer URL within {} s (check its peer \
         certificate and its Pod's logs); the switch to TLS stops at it. Delete Pod {member} to \
         try again",
        REVERT_AFTER.as_secs()
    )
}

/// The Progressing message of a switch step.
fn switch_message(wait: &SwitchWait) -> String {
    match wait {
        SwitchWait::PodMissing(m) => format!("Waiting for the Pod of member {m}"),
        SwitchWait::PodNotReady(m) => {
            format!("Waiting for Pod {m} to be Ready before the next step")
        }
        SwitchWait::SettlingOnTls(m) => {
            format!("Waiting for member {m} to answer on its https:// peer URL")
        }
        SwitchWait::MemberUnhealthy(m) => format!("Waiting for member {m} to answer"),
        SwitchWait::Reverted(m) => reverted_message(m),
        SwitchWait::WouldLoseQuorum {
            member,
            healthy,
            voters,
        } => would_lose_quorum_message(member, *healthy, *voters),
    }
}

fn no_space_message(largest_db: u64, quota: u64) -> String {
    format!(
        "NOSPACE alarm: every member is defragmented but a database file is {} MiB, at or over \
         the {} MiB quota, so the alarm stays armed (disarming would only let the next write \
         raise it). Raise spec.etcdOptions.quotaBackendBytes or spec.storage.size, delete keys, \
         or set spec.maintenance.compactOnNoSpace",
        largest_db >> 20,
        quota >> 20
    )
}

fn expansion_not_allowed_message(pvcs: &[String], class: Option<&str>, size: &str) -> String {
    let class = class.map_or_else(
        || "no StorageClass".to_owned(),
        |c| format!("StorageClass {c}"),
    );
    format!(
        "spec.storage.size asks for {size} but PVCs {} cannot grow: {class} does not allow \
         volume expansion (allowVolumeExpansion) or does not exist. Set spec.storage.size back, \
         or have the class allow expansion; the configuration roll waits meanwhile",
        pvcs.join(", ")
    )
}

fn config_progress(up_to_date: usize, voters: usize) -> String {
    format!("{up_to_date}/{voters} members run the current configuration")
}

const DEAD_WHY: &str = "it did not answer past the grace period, or its data is gone";

/// What the observation says, computed once for the three conditions and the phase.
struct Facts<'a> {
    observed: &'a Observed,
    /// etcd's member list, when a member in quorum gave one.
    known: Option<&'a [Member]>,
    voters: usize,
    healthy_voters: usize,
    /// Names of voters that do not answer and are not joining, by ordinal.
    unhealthy_voters: Vec<String>,
    /// Names of voters that do not answer because they are joining
    /// ([`Observed::joining`]), by ordinal.
    joining_voters: Vec<String>,
    /// `spec.version`, when it parses.
    target: Option<EtcdVersion>,
    /// Some member (or the version they all last agreed on) is behind `target`.
    upgrading: bool,
    /// Healthy members that report `target`.
    on_target: usize,
    /// Voters whose Pod was built from the current spec ([`crate::build::config_hash`]) and
    /// certificate Secrets ([`Observed::tls_hashes`]).
    config_current: usize,
    /// Some voter's existing Pod was built from another spec: a configuration roll is under way.
    config_drift: bool,
}

impl<'a> Facts<'a> {
    fn new(observed: &'a Observed, current_version: Option<&str>) -> Self {
        let target = EtcdVersion::parse(&observed.spec.version);
        let known = match &observed.membership {
            Membership::Known(members) => Some(members.as_slice()),
            Membership::Unknown => None,
        };
        let members = known.unwrap_or_default();
        let voters: Vec<&Member> = members.iter().filter(|m| !m.learner).collect();
        let healthy_voters = voters.iter().filter(|m| m.healthy()).count();
        let silent_voters = |joining: bool| {
            let mut names: Vec<String> = voters
                .iter()
                .filter(|m| !m.healthy() && observed.joining(m) == joining)
                .map(|m| display_name(&observed.cluster, m))
                .collect();
            sort_by_ordinal(&observed.cluster, &mut names, |name| name);
            names
        };
        let unhealthy_voters = silent_voters(false);
        let joining_voters = silent_voters(true);
        let lowest = members
            .iter()
            .filter_map(Member::version)
            .chain(current_version.and_then(EtcdVersion::parse))
            .min();
        let upgrading = matches!((lowest, target), (Some(lowest), Some(target)) if lowest < target);
        let on_target = members
            .iter()
            .filter(|m| m.version().is_some() && m.version() == target)
            .count();
        let desired = crate::build::config_hash(&observed.spec);
        // Current: built from the spec as it is, and (TLS) from the certificate Secrets as
        // they are, when both are known (as the roll in plan/rollout.rs judges them).
        let pods_current: Vec<bool> = voters
            .iter()
            .filter_map(|m| m.member_name(&observed.cluster))
            .filter_map(|name| {
                let pod = observed.pods.get(&name)?;
                let tls_current = pod
                    .tls_hash
                    .as_ref()
                    .zip(observed.tls_hashes.get(&name))
                    .is_none_or(|(have, want)| have == want);
                Some(pod.config_hash.as_deref() == Some(desired.as_str()) && tls_current)
            })
            .collect();
        let config_current = pods_current.iter().filter(|current| **current).count();
        let config_drift = config_current < pods_current.len();
        Facts {
            observed,
            known,
            config_current,
            config_drift,
            voters: voters.len(),
            healthy_voters,
            unhealthy_voters,
            joining_voters,
            target,
            upgrading,
            on_target,
        }
    }

    /// No member answers and the cluster never existed: the seed is on its way.
    fn bootstrapping(&self) -> bool {
        self.observed.bootstrapping()
    }

    /// Only without a member list: one is known only after a linearizable read succeeded, so
    /// with one etcd confirmed quorum, however few members the operator reaches.
    fn quorum_lost(&self) -> bool {
        match self.known {
            None => !self.bootstrapping(),
            Some(_) => false,
        }
    }

    /// A member list (quorum confirmed) but the operator reaches a minority of the voters (a
    /// joining voter answered on its metrics port: it is reached).
    fn minority_reached(&self) -> bool {
        self.known.is_some()
            && self.healthy_voters + self.joining_voters.len() < quorum(self.voters)
    }

    fn size(&self) -> i32 {
        self.observed.spec.size
    }

    fn target_text(&self) -> String {
        self.target
            .map_or_else(|| self.observed.spec.version.clone(), |v| v.to_string())
    }

    /// "2 of 3 members on 3.5.1", for upgrade messages.
    fn upgrade_progress(&self) -> String {
        let members = self.known.map_or(0, <[Member]>::len);
        format!(
            "{} of {members} members on etcd {}",
            self.on_target,
            self.target_text()
        )
    }

    /// "2/3 members run the current configuration", for roll messages.
    fn config_progress(&self) -> String {
        config_progress(self.config_current, self.voters)
    }

    fn quorum_lost_message(&self) -> String {
        if self.known.is_none() {
            return quorum_lost_message(0, 0, &self.observed.last_known_members);
        }
        quorum_lost_message(self.healthy_voters, self.voters, &self.unhealthy_voters)
    }
}

fn display_name(cluster: &ClusterName, member: &Member) -> String {
    member.display_name(cluster)
}

/// Sorts by member ordinal; names that are not ours go last, by name.
fn sort_by_ordinal<T>(cluster: &ClusterName, items: &mut [T], name: impl Fn(&T) -> &str) {
    items.sort_by(|a, b| {
        let key = |item: &T| {
            let name = name(item);
            (
                cluster.ordinal_of(name).unwrap_or(u32::MAX),
                name.to_owned(),
            )
        };
        key(a).cmp(&key(b))
    });
}

/// The version every member runs: set when every member in etcd's list answers with the same
/// version. While they disagree (mid-upgrade) or some member does not answer (its version is
/// unknown), the previous value stays: it is the version all members last agreed on, so it
/// moves once, when the last member is on the new version.
fn current_version(observed: &Observed, previous: &EtcdClusterStatus) -> Option<String> {
    let agreed = match &observed.membership {
        Membership::Known(members) if !members.is_empty() => {
            let versions: Option<Vec<EtcdVersion>> = members.iter().map(Member::version).collect();
            versions.and_then(|versions| {
                let first = *versions.first()?;
                versions.iter().all(|v| *v == first).then_some(first)
            })
        }
        _ => None,
    };
    agreed
        .map(|v| v.to_string())
        .or_else(|| previous.current_version.clone())
}

/// Every member etcd reports, then every member Pod that is not (yet) one (no ID, unhealthy).
/// Without a member list, the members of the previous status stay with what cannot change
/// (ID, URLs, learner as last seen) and nothing observed now (unhealthy, no version, no leader).
fn members(observed: &Observed, previous: &EtcdClusterStatus) -> Vec<MemberStatus> {
    let cluster = &observed.cluster;
    let mut list: Vec<MemberStatus> = match &observed.membership {
        Membership::Known(members) => members
            .iter()
            .map(|m| MemberStatus {
                name: display_name(cluster, m),
                id: Some(format!("{:x}", m.id)),
                peer_url: Some(m.peer_url.clone()),
                client_url: m.client_url.clone(),
                version: m.version().map(|v| v.to_string()),
                healthy: m.healthy(),
                learner: m.learner,
                leader: m.leader(),
            })
            .collect(),
        Membership::Unknown => previous
            .members
            .iter()
            .filter(|m| m.id.is_some())
            .map(|m| MemberStatus {
                healthy: false,
                leader: false,
                version: None,
                ..m.clone()
            })
            .collect(),
    };
    for pod in observed.pods.keys() {
        if !list.iter().any(|m| m.name == *pod) {
            list.push(MemberStatus {
                name: pod.clone(),
                ..MemberStatus::default()
            });
        }
    }
    sort_by_ordinal(cluster, &mut list, |m| &m.name);
    list
}

fn available(facts: &Facts) -> ConditionUpdate {
    let (holds, reason, message) = if facts.bootstrapping() {
        (
            false,
            reasons::BOOTSTRAPPING,
            "The seed member has not answered yet".to_owned(),
        )
    } else if facts.quorum_lost() {
        (false, reasons::QUORUM_LOST, facts.quorum_lost_message())
    } else if facts.minority_reached() {
        (
            false,
            reasons::MEMBERS_UNREACHABLE,
            members_unreachable_message(facts.healthy_voters, facts.voters),
        )
    } else if !facts.observed.alarms.is_empty() {
        (false, reasons::ALARM_RAISED, alarm_message(facts))
    } else if !facts.unhealthy_voters.is_empty() {
        (
            false,
            reasons::MEMBERS_UNHEALTHY,
            format!(
                "Quorum holds ({} of {} voting members healthy); not answering: {}",
                facts.healthy_voters,
                facts.voters,
                facts.unhealthy_voters.join(", ")
            ),
        )
    } else if let Some(member) = facts.joining_voters.first() {
        (false, reasons::MEMBER_JOINING, joining_message(member))
    } else {
        (
            true,
            reasons::ALL_MEMBERS_HEALTHY,
            format!(
                "{} of {} voting members healthy",
                facts.healthy_voters, facts.voters
            ),
        )
    };
    ConditionUpdate::new(types::AVAILABLE, holds, reason, message)
}

fn progressing(facts: &Facts, action: &Action) -> ConditionUpdate {
    let active = |reason: &str, message: String| {
        ConditionUpdate::new(types::PROGRESSING, true, reason, message)
    };
    let still = |reason: &str, message: String| {
        ConditionUpdate::new(types::PROGRESSING, false, reason, message)
    };
    let target = facts.target_text();
    match action {
        Action::BootstrapSeed { member, version } => active(
            reasons::BOOTSTRAPPING,
            format!("Creating seed member {member} (etcd {version})"),
        ),
        Action::Wait(WaitReason::SeedStarting) => active(
            reasons::BOOTSTRAPPING,
            format!(
                "Waiting for seed member {} to answer",
                facts.observed.cluster.member_name(0)
            ),
        ),
        Action::CreateMemberPod {
            member,
            version,
            reason: PodReason::NewMember,
            ..
        } => active(
            reasons::SCALING_UP,
            format!("Starting the Pod of new member {member} (etcd {version})"),
        ),
        Action::CreateMemberPod {
            member, version, ..
        } if facts.upgrading => active(
            reasons::UPGRADING,
            format!(
                "Starting member {member} on etcd {version}; {}",
                facts.upgrade_progress()
            ),
        ),
        Action::CreateMemberPod {
            member, version, ..
        } if facts.config_drift => active(
            reasons::ROLLING_CONFIGURATION,
            format!(
                "Starting member {member} (etcd {version}) with the current configuration; {}",
                facts.config_progress()
            ),
        ),
        Action::CreateMemberPod {
            member, version, ..
        } => active(
            reasons::RESTARTING_MEMBER,
            format!("Recreating the Pod of member {member} (etcd {version}) on its data"),
        ),
        Action::AddLearner { member, .. } => active(
            reasons::SCALING_UP,
            format!(
                "Adding member {member} as a learner; {} of {} voting members",
                facts.voters,
                facts.size()
            ),
        ),
        Action::PromoteLearner { member, .. } => active(
            reasons::PROMOTING_LEARNER,
            format!("Promoting learner {member} to a voting member"),
        ),
        Action::Wait(WaitReason::LearnerCatchingUp { member }) => active(
            reasons::PROMOTING_LEARNER,
            format!("Waiting for learner {member} to start and catch up before promoting it"),
        ),
        Action::Wait(WaitReason::MemberJoining { member }) => {
            active(reasons::MEMBER_JOINING, joining_message(member))
        }
        Action::RemoveMember {
            member,
            reason: RemovalReason::ScaleDown,
            ..
        } => active(
            reasons::SCALING_DOWN,
            format!(
                "Removing member {member}; {} voting members, spec.size is {}",
                facts.voters,
                facts.size()
            ),
        ),
        Action::RemoveMember {
            member,
            reason: RemovalReason::Dead,
            ..
        } => active(
            reasons::REPLACING_MEMBER,
            format!("Removing dead member {member}; a new member replaces it"),
        ),
        Action::RemoveMember {
            member,
            reason: RemovalReason::LearnerStuck,
            ..
        } => active(
            reasons::REPLACING_MEMBER,
            format!(
                "Removing learner {member}: it did not start or catch up within its deadline; a \
                 new member replaces it"
            ),
        ),
        Action::DeletePod { member } => active(
            reasons::DELETING_POD,
            format!("Deleting Pod {member}: it is not an etcd member"),
        ),
        Action::Wait(WaitReason::PodTerminating { member }) if facts.upgrading => active(
            reasons::UPGRADING,
            format!(
                "Waiting for Pod {member} to stop before starting it on etcd {target}; {}",
                facts.upgrade_progress()
            ),
        ),
        Action::Wait(WaitReason::PodTerminating { member }) if facts.config_drift => active(
            reasons::ROLLING_CONFIGURATION,
            format!(
                "Waiting for Pod {member} to stop before starting it with the current \
                 configuration; {}",
                facts.config_progress()
            ),
        ),
        Action::Wait(WaitReason::PodTerminating { member }) => active(
            reasons::DELETING_POD,
            format!("Waiting for Pod {member} to terminate"),
        ),
        Action::UpgradeMember {
            member, from, to, ..
        } => active(
            reasons::UPGRADING,
            format!(
                "Upgrading member {member} from etcd {from} to {to}; {}",
                facts.upgrade_progress()
            ),
        ),
        Action::SnapshotBeforeUpgrade {
            member, version, ..
        } => active(
            reasons::UPGRADING,
            format!(
                "Restarting member {member} on etcd {version} with --snapshot-count=1 to take a \
                 v2 snapshot before its upgrade to {target}; {}",
                facts.upgrade_progress()
            ),
        ),
        Action::Wait(WaitReason::V2SnapshotPending { member }) => active(
            reasons::UPGRADING,
            format!(
                "Waiting for member {member} to save a v2 snapshot before its upgrade to \
                 {target}; {}",
                facts.upgrade_progress()
            ),
        ),
        Action::MarkV2WalClean { member } => active(
            reasons::UPGRADING,
            format!(
                "Member {member} saved a v2 snapshot; upgrading it to {target} next; {}",
                facts.upgrade_progress()
            ),
        ),
        Action::RollMember { member, .. } => active(
            reasons::ROLLING_CONFIGURATION,
            format!(
                "Restarting member {member} with the current configuration (spec.pod, \
                 spec.etcdOptions, certificate Secrets), one member at a time; {}",
                facts.config_progress()
            ),
        ),
        Action::AdoptPod { member, .. } => active(
            reasons::ROLLING_CONFIGURATION,
            format!("Recording the configuration hash on Pod {member} (no restart)"),
        ),
        Action::DefragmentMember { member, .. } => active(
            reasons::DEFRAGMENTING,
            format!("Defragmenting member {member}, one member at a time"),
        ),
        Action::OpenServingGate { member } => active(
            reasons::MEMBER_SERVING,
            format!("Opening the serving readiness gate of Pod {member}"),
        ),
        Action::CompactKeyspace { revision } => active(
            reasons::COMPACTING,
            format!("Compacting the key space to revision {revision} to clear NOSPACE"),
        ),
        Action::DisarmNoSpace { .. } => active(
            reasons::NO_SPACE_DISARMED,
            "Disarming the NOSPACE alarm".to_owned(),
        ),
        Action::Wait(WaitReason::NoSpaceCannotBeFreed { .. }) => still(
            reasons::NO_SPACE_CANNOT_BE_FREED,
            "Waiting: the NOSPACE alarm cannot be cleared by defragmentation".to_owned(),
        ),
        Action::ExpandVolume { pvc, to, .. } => active(
            reasons::EXPANDING_VOLUMES,
            format!("Growing PVC {pvc} to {to} (spec.storage.size)"),
        ),
        Action::Wait(WaitReason::VolumeExpansionNotAllowed { .. }) => still(
            reasons::VOLUME_EXPANSION_NOT_ALLOWED,
            "Waiting: spec.storage.size cannot be applied to the member volumes".to_owned(),
        ),
        Action::DeletePvc { name } => active(
            reasons::DELETING_VOLUME,
            format!("Deleting PVC {name} of a removed member (reclaimPolicy: Delete)"),
        ),
        // Within its grace period an unhealthy member is most likely the one just restarted
        // on the new version: the upgrade is what is in flight.
        Action::Wait(WaitReason::MemberUnhealthy { member }) if facts.upgrading => active(
            reasons::UPGRADING,
            format!(
                "Waiting for member {member} to answer on etcd {target}; {}",
                facts.upgrade_progress()
            ),
        ),
        // Likewise for a member just restarted with the current configuration.
        Action::Wait(WaitReason::MemberUnhealthy { member }) if facts.config_drift => active(
            reasons::ROLLING_CONFIGURATION,
            format!(
                "Waiting for member {member} to answer before restarting the next; {}",
                facts.config_progress()
            ),
        ),
        Action::Wait(WaitReason::MemberUnhealthy { member }) => still(
            reasons::MEMBER_UNHEALTHY,
            format!("Waiting for member {member} to answer before changing anything"),
        ),
        Action::Wait(WaitReason::ClusterVersionBehind {
            cluster_version,
            needed: (major, minor),
        }) => active(
            reasons::UPGRADING,
            format!(
                "Waiting for etcd's cluster version to reach {major}.{minor} (it reports {}) before \
                 upgrading to {target}: etcd moves one minor at a time",
                cluster_version.map_or_else(|| "none yet".to_owned(), |(a, b)| format!("{a}.{b}"))
            ),
        ),
        Action::RollForTls {
            member,
            to,
            done,
            voters,
            ..
        } => active(
            reasons::ENABLING_TLS,
            format!(
                "Switching to TLS: restarting member {member} to listen on {}; {done} of {voters} \
                 members through this round",
                listeners_text(*to)
            ),
        ),
        Action::UpdatePeerUrl {
            member,
            peer_url,
            revert: false,
            done,
            voters,
            ..
        } => active(
            reasons::ENABLING_TLS,
            format!(
                "Switching to TLS: moving the peer URL of member {member} to {peer_url}; {done} \
                 of {voters} members through this round"
            ),
        ),
        Action::UpdatePeerUrl {
            member, peer_url, ..
        } => active(
            reasons::TLS_SWITCH_REVERTED,
            format!(
                "{}; moving its peer URL back to {peer_url}",
                reverted_message(member)
            ),
        ),
        Action::Wait(WaitReason::TlsSwitch(wait @ SwitchWait::Reverted(_))) => {
            still(reasons::TLS_SWITCH_REVERTED, switch_message(wait))
        }
        Action::Wait(WaitReason::TlsSwitch(wait)) => active(
            reasons::ENABLING_TLS,
            format!("Switching to TLS: {}", switch_message(wait)),
        ),
        Action::Wait(WaitReason::PodNotReady { member }) => active(
            reasons::ROLLING_CONFIGURATION,
            format!(
                "Waiting for Pod {member} to be Ready before restarting the next member; {}",
                facts.config_progress()
            ),
        ),
        Action::Wait(WaitReason::Paused) => still(
            reasons::PAUSED,
            "spec.paused is set: no member is added, removed or restarted".to_owned(),
        ),
        Action::Wait(WaitReason::Restoring { restore }) => active(
            reasons::RESTORING,
            format!(
                "EtcdRestore {restore} is rebuilding the cluster; this operator takes no action \
                 until it hands the cluster back"
            ),
        ),
        Action::Refuse(_) => still(
            reasons::INVALID_SPEC,
            "The spec cannot be acted on; the Degraded condition names the field".to_owned(),
        ),
        Action::Wait(WaitReason::MembersUnreachable { .. }) => still(
            reasons::MEMBERS_UNREACHABLE,
            "Nothing is changed while the operator cannot reach a majority of the members"
                .to_owned(),
        ),
        Action::Wait(WaitReason::QuorumLost { .. }) => still(
            reasons::QUORUM_LOST,
            "Nothing is changed while quorum is lost".to_owned(),
        ),
        Action::Wait(WaitReason::ClusterLost) => still(
            reasons::CLUSTER_LOST,
            "Nothing is changed: the cluster needs a restore from a backup".to_owned(),
        ),
        Action::Wait(WaitReason::WouldLoseQuorum { member, .. }) => still(
            reasons::WOULD_LOSE_QUORUM,
            format!("Waiting: taking member {member} down now would lose quorum"),
        ),
        Action::Converged => still(
            reasons::CONVERGED,
            format!(
                "The cluster matches the spec: {} voting members on etcd {target}",
                facts.voters
            ),
        ),
    }
}

fn degraded(facts: &Facts, action: &Action) -> ConditionUpdate {
    let wrong = |reason: &str, message: String| {
        ConditionUpdate::new(types::DEGRADED, true, reason, message)
    };
    match action {
        Action::Refuse(errors) => wrong(reasons::INVALID_SPEC, invalid_spec_message(errors)),
        Action::Wait(WaitReason::MembersUnreachable { reachable, voters }) => wrong(
            reasons::MEMBERS_UNREACHABLE,
            members_unreachable_message(*reachable, *voters),
        ),
        Action::Wait(WaitReason::QuorumLost { .. }) => {
            wrong(reasons::QUORUM_LOST, facts.quorum_lost_message())
        }
        Action::Wait(WaitReason::ClusterLost) => {
            let observed = facts.observed;
            let lost: Vec<String> = observed
                .last_known_members
                .iter()
                .filter(|m| !observed.pvcs.contains_key(*m))
                .cloned()
                .collect();
            wrong(reasons::CLUSTER_LOST, cluster_lost_message(&lost))
        }
        Action::Wait(WaitReason::NoSpaceCannotBeFreed { largest_db, quota }) => wrong(
            reasons::NO_SPACE_CANNOT_BE_FREED,
            no_space_message(*largest_db, *quota),
        ),
        Action::Wait(WaitReason::VolumeExpansionNotAllowed {
            pvcs,
            storage_class,
            size,
        }) => wrong(
            reasons::VOLUME_EXPANSION_NOT_ALLOWED,
            expansion_not_allowed_message(pvcs, storage_class.as_deref(), size),
        ),
        Action::Wait(WaitReason::WouldLoseQuorum {
            member,
            healthy,
            voters,
        }) => wrong(
            reasons::WOULD_LOSE_QUORUM,
            would_lose_quorum_message(member, *healthy, *voters),
        ),
        Action::RemoveMember {
            member,
            reason: RemovalReason::Dead,
            ..
        } => wrong(
            reasons::MEMBER_UNHEALTHY,
            format!("Member {member} is dead ({DEAD_WHY}); it is removed and replaced"),
        ),
        Action::UpdatePeerUrl {
            member,
            revert: true,
            ..
        }
        | Action::Wait(WaitReason::TlsSwitch(SwitchWait::Reverted(member))) => {
            wrong(reasons::TLS_SWITCH_REVERTED, reverted_message(member))
        }
        Action::RemoveMember {
            member,
            reason: RemovalReason::LearnerStuck,
            ..
        } => wrong(
            reasons::MEMBER_UNHEALTHY,
            format!(
                "Learner {member} did not start or catch up within its deadline; it is removed \
                 and replaced"
            ),
        ),
        _ if facts.quorum_lost() => wrong(reasons::QUORUM_LOST, facts.quorum_lost_message()),
        _ if !facts.observed.alarms.is_empty() => {
            wrong(reasons::ALARM_RAISED, alarm_message(facts))
        }
        _ if !facts.unhealthy_voters.is_empty() => wrong(
            reasons::MEMBER_UNHEALTHY,
            format!(
                "Not answering: {}; quorum holds ({} of {} voting members healthy)",
                facts.unhealthy_voters.join(", "),
                facts.healthy_voters,
                facts.voters
            ),
        ),
        _ => ConditionUpdate::new(types::DEGRADED, false, reasons::HEALTHY, ""),
    }
}

fn phase(facts: &Facts, action: &Action) -> ClusterPhase {
    let upgrade_step = match action {
        // A configuration roll restarts members one by one as an upgrade does.
        Action::UpgradeMember { .. }
        | Action::RollMember { .. }
        | Action::SnapshotBeforeUpgrade { .. }
        | Action::MarkV2WalClean { .. }
        | Action::CreateMemberPod {
            reason: PodReason::SnapshotBeforeUpgrade,
            ..
        }
        | Action::Wait(
            WaitReason::ClusterVersionBehind { .. }
            | WaitReason::PodNotReady { .. }
            | WaitReason::V2SnapshotPending { .. },
        ) => true,
        Action::CreateMemberPod {
            reason: PodReason::Restart,
            ..
        }
        | Action::Wait(WaitReason::PodTerminating { .. } | WaitReason::MemberUnhealthy { .. }) => {
            facts.upgrading || facts.config_drift
        }
        _ => false,
    };
    match action {
        Action::Refuse(_) => ClusterPhase::Invalid,
        Action::Wait(WaitReason::Paused) => ClusterPhase::Paused,
        Action::Wait(WaitReason::Restoring { .. }) => ClusterPhase::Restoring,
        Action::BootstrapSeed { .. } | Action::Wait(WaitReason::SeedStarting) => {
            ClusterPhase::Creating
        }
        _ if facts.bootstrapping() => ClusterPhase::Creating,
        Action::Wait(WaitReason::QuorumLost { .. } | WaitReason::ClusterLost) => {
            ClusterPhase::QuorumLost
        }
        _ if facts.quorum_lost() => ClusterPhase::QuorumLost,
        _ if !facts.observed.alarms.is_empty() => ClusterPhase::Degraded,
        Action::Wait(
            WaitReason::WouldLoseQuorum { .. }
            | WaitReason::MembersUnreachable { .. }
            | WaitReason::VolumeExpansionNotAllowed { .. },
        )
        | Action::RemoveMember {
            reason: RemovalReason::Dead | RemovalReason::LearnerStuck,
            ..
        } => ClusterPhase::Degraded,
        _ if upgrade_step => ClusterPhase::Upgrading,
        _ if !facts.unhealthy_voters.is_empty() => ClusterPhase::Degraded,
        Action::Converged => ClusterPhase::Running,
        _ => ClusterPhase::Scaling,
    }
}

/// Each alarm with the member that raised it and what it means; quorum holds (an alarm is never
/// reported as quorum loss: a restore is not the answer to it).
fn alarm_message(facts: &Facts) -> String {
    let each: Vec<String> = facts
        .observed
        .alarms
        .iter()
        .map(|a| {
            let meaning = match a.alarm.as_str() {
                "NOSPACE" => {
                    "the database reached its quota: etcd refuses writes until it is compacted, \
                     defragmented and the alarm disarmed, or the quota raised"
                }
                "CORRUPT" => "its data differs from the other members'",
                _ => "see the etcd documentation",
            };
            format!(
                "{} alarm raised by member {} ({meaning})",
                a.alarm, a.member
            )
        })
        .collect();
    format!(
        "{}; quorum holds ({} of {} voting members answer) and members serve reads",
        each.join("; "),
        facts.healthy_voters,
        facts.voters
    )
}

/// Quorum holds (etcd served a linearizable read), the operator reaches a minority: not quorum
/// loss, and no restore.
fn joining_message(member: &str) -> String {
    format!(
        "Member {member} is in sync with the leader and is publishing itself to the cluster; \
         etcd serves its clients after that (within etcd's request timeout, 7 s by default)"
    )
}

fn members_unreachable_message(reachable: usize, voters: usize) -> String {
    format!(
        "The operator reaches {reachable} of {voters} voting members, but etcd confirmed quorum \
         (a linearizable read succeeded): check the network between the operator and the \
         members. Nothing is removed meanwhile"
    )
}

fn invalid_spec_message(errors: &[etcd_api::validation::FieldError]) -> String {
    let fields: Vec<String> = errors.iter().map(ToString::to_string).collect();
    format!(
        "{}. Nothing is changed until the spec is fixed",
        fields.join("; ")
    )
}

fn quorum_lost_message(healthy: usize, voters: usize, not_answering: &[String]) -> String {
    let what = if voters == 0 {
        "No member answers".to_owned()
    } else {
        format!(
            "{healthy} of {voters} voting members answer, a quorum needs {}",
            quorum(voters)
        )
    };
    let names = if not_answering.is_empty() {
        String::new()
    } else if voters == 0 {
        format!(" (members: {})", not_answering.join(", "))
    } else {
        format!(" (not answering: {})", not_answering.join(", "))
    };
    format!(
        "{what}{names}. Nothing destructive is done: the members may come back, or restore the \
         cluster from a backup with an EtcdRestore"
    )
}

fn cluster_lost_message(lost: &[String]) -> String {
    let which = if lost.is_empty() {
        "The data of a majority of the members is gone".to_owned()
    } else {
        format!(
            "The data of {} is gone (no PVC), a majority of the members",
            lost.join(", ")
        )
    };
    format!(
        "{which}: the cluster cannot recover by itself. Restore it from a backup with an \
         EtcdRestore"
    )
}

fn would_lose_quorum_message(member: &str, healthy: usize, voters: usize) -> String {
    let hint = if voters == 2 {
        "; a two-member cluster has no spare member: scale it to 3 first"
    } else {
        ""
    };
    format!(
        "Taking member {member} down would leave {} of {voters} voting members healthy, below \
         the quorum of {}; waiting{hint}",
        healthy.saturating_sub(1),
        quorum(voters)
    )
}

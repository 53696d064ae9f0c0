//! Status tests. The table pairs each observation with the action the planner really picks for
//! it (asserted), so the status is checked on states the loop meets; it covers every `Action`
//! variant and every `WaitReason`.

use std::time::Duration;

use etcd_api::ReclaimPolicy;
use etcd_api::condition::{Condition, find_condition};
use k8s_openapi::jiff::Timestamp;

use super::*;
use crate::fixtures::*;
use crate::plan::{Policy, next_action};
use crate::state::MemberHealth;

fn at(seconds: i64) -> Time {
    Time(Timestamp::from_second(seconds).unwrap())
}

/// The status a cluster that ran `ordinals` at `version` last wrote.
fn previous_of(ordinals: &[u32], version: &str) -> EtcdClusterStatus {
    EtcdClusterStatus {
        members: ordinals
            .iter()
            .map(|&o| MemberStatus {
                name: name(o),
                id: Some(format!("{:x}", 0xa0 + o)),
                peer_url: Some(main().peer_url(&name(o))),
                client_url: Some(main().client_url(&name(o))),
                version: Some(version.into()),
                healthy: true,
                learner: false,
                leader: o == 0,
            })
            .collect(),
        current_version: Some(version.into()),
        cluster_id: Some("c0ffee".into()),
        ..EtcdClusterStatus::default()
    }
}

fn three(version: &str) -> Vec<Member> {
    vec![
        healthy(0, version, true),
        healthy(1, version, false),
        healthy(2, version, false),
    ]
}

fn condition<'a>(status: &'a EtcdClusterStatus, type_: &str) -> &'a Condition {
    find_condition(&status.conditions, type_).unwrap()
}

/// (holds, reason) of a condition.
fn summary(status: &EtcdClusterStatus, type_: &str) -> (bool, String) {
    let c = condition(status, type_);
    (c.status == "True", c.reason.clone())
}

struct Case {
    name: &'static str,
    observed: Observed,
    previous: EtcdClusterStatus,
    action: Action,
    phase: ClusterPhase,
    available: (bool, &'static str),
    progressing: (bool, &'static str),
    degraded: (bool, &'static str),
    event: Option<(bool, &'static str)>,
    /// Words the Degraded message must contain (member names, fields, counts).
    degraded_mentions: &'static [&'static str],
}

/// `observed` with member 1's PVC asking for a v2 snapshot on 3.5, and its Pod (if any) built
/// for it, having saved one or not.
fn snapshotting(mut observed: Observed, saved: bool) -> Observed {
    if let Some(pvc) = observed.pvcs.get_mut(&name(1)) {
        pvc.snapshot_before_upgrade = Some(v(V35));
    }
    if let Some(pod) = observed.pods.get_mut(&name(1)) {
        pod.snapshot_before_upgrade = true;
        pod.v2_snapshot_saved = saved;
    }
    observed
}

/// `observed` with member 1's metrics saying raft has it caught up.
fn caught_up_in_raft(mut observed: Observed) -> Observed {
    observed.pods.get_mut(&name(1)).unwrap().raft_caught_up = true;
    observed
}

fn cases() -> Vec<Case> {
    let none = EtcdClusterStatus::default;
    let seed = || cluster(3, V35).pods(&[0]).pvcs(&[0]);
    let one = || cluster(3, V35).pods(&[0]).pvcs(&[0]);
    let full = || cluster(3, V35).pods(&[0, 1, 2]).pvcs(&[0, 1, 2]);
    let upgrading = |m1: Member| vec![healthy(0, V34, true), m1, healthy(2, V34, false)];
    vec![
        Case {
            name: "nothing exists: bootstrap the seed",
            observed: cluster(3, V35),
            previous: none(),
            action: Action::BootstrapSeed {
                member: name(0),
                version: v(V35),
            },
            phase: ClusterPhase::Creating,
            available: (false, "Bootstrapping"),
            progressing: (true, "Bootstrapping"),
            degraded: (false, "Healthy"),
            event: Some((false, "SeedCreated")),
            degraded_mentions: &[],
        },
        Case {
            name: "seed Pod exists, etcd silent",
            observed: seed(),
            previous: none(),
            action: Action::Wait(WaitReason::SeedStarting),
            phase: ClusterPhase::Creating,
            available: (false, "Bootstrapping"),
            progressing: (true, "Bootstrapping"),
            degraded: (false, "Healthy"),
            event: None,
            degraded_mentions: &[],
        },
        Case {
            name: "seed Pod terminating before the cluster ever answered",
            observed: cluster(3, V35).terminating(0),
            previous: none(),
            action: Action::Wait(WaitReason::PodTerminating { member: name(0) }),
            phase: ClusterPhase::Creating,
            available: (false, "Bootstrapping"),
            progressing: (true, "DeletingPod"),
            degraded: (false, "Healthy"),
            event: None,
            degraded_mentions: &[],
        },
        Case {
            name: "seed answers: add a learner",
            observed: one().members(vec![healthy(0, V35, true)]),
            previous: none(),
            action: Action::AddLearner {
                member: name(1),
                peer_url: main().peer_url(&name(1)),
            },
            phase: ClusterPhase::Scaling,
            available: (true, "AllMembersHealthy"),
            progressing: (true, "ScalingUp"),
            degraded: (false, "Healthy"),
            event: Some((false, "MemberAdded")),
            degraded_mentions: &[],
        },
        Case {
            name: "learner added, its Pod missing",
            observed: one().members(vec![healthy(0, V35, true), learner(1, false)]),
            previous: none(),
            action: Action::CreateMemberPod {
                member: name(1),
                initial_cluster: vec![
                    (name(0), main().peer_url(&name(0))),
                    (name(1), main().peer_url(&name(1))),
                ],
                version: v(V35),
                reason: PodReason::NewMember,
            },
            phase: ClusterPhase::Scaling,
            available: (true, "AllMembersHealthy"),
            progressing: (true, "ScalingUp"),
            degraded: (false, "Healthy"),
            event: Some((false, "MemberPodCreated")),
            degraded_mentions: &[],
        },
        Case {
            name: "learner Pod starting",
            observed: one()
                .pods(&[1])
                .pvcs(&[1])
                .members(vec![healthy(0, V35, true), learner(1, false)]),
            previous: none(),
            action: Action::Wait(WaitReason::LearnerCatchingUp { member: name(1) }),
            phase: ClusterPhase::Scaling,
            available: (true, "AllMembersHealthy"),
            progressing: (true, "PromotingLearner"),
            degraded: (false, "Healthy"),
            event: None,
            degraded_mentions: &[],
        },
        Case {
            name: "learner silent but caught up in raft (lost etcd's publish race): promote it",
            observed: caught_up_in_raft(
                one()
                    .pods(&[1])
                    .pvcs(&[1])
                    .members(vec![healthy(0, V35, true), learner(1, false)]),
            ),
            previous: none(),
            action: Action::PromoteLearner {
                member: name(1),
                id: 0xa1,
            },
            phase: ClusterPhase::Scaling,
            available: (true, "AllMembersHealthy"),
            progressing: (true, "PromotingLearner"),
            degraded: (false, "Healthy"),
            event: Some((false, "LearnerPromoted")),
            degraded_mentions: &[],
        },
        Case {
            name: "promoted voter not published yet: joining, neither unreachable nor unhealthy",
            // At spec.size (2): nothing to add meanwhile.
            observed: caught_up_in_raft(cluster(2, V35).pods(&[0, 1]).pvcs(&[0, 1]).members(vec![
                healthy(0, V35, true),
                Member {
                    learner: false,
                    ..learner(1, false)
                },
            ])),
            previous: none(),
            action: Action::Wait(WaitReason::MemberJoining { member: name(1) }),
            phase: ClusterPhase::Scaling,
            available: (false, "MemberJoining"),
            progressing: (true, "MemberJoining"),
            degraded: (false, "Healthy"),
            event: None,
            degraded_mentions: &[],
        },
        Case {
            name: "learner answers: promote it",
            observed: one()
                .pods(&[1])
                .pvcs(&[1])
                .members(vec![healthy(0, V35, true), learner(1, true)]),
            previous: none(),
            action: Action::PromoteLearner {
                member: name(1),
                id: 0xa1,
            },
            phase: ClusterPhase::Scaling,
            available: (true, "AllMembersHealthy"),
            progressing: (true, "PromotingLearner"),
            degraded: (false, "Healthy"),
            event: Some((false, "LearnerPromoted")),
            degraded_mentions: &[],
        },
        Case {
            name: "converged",
            observed: full().members(three(V35)),
            previous: previous_of(&[0, 1, 2], V35),
            action: Action::Converged,
            phase: ClusterPhase::Running,
            available: (true, "AllMembersHealthy"),
            progressing: (false, "Converged"),
            degraded: (false, "Healthy"),
            event: None,
            degraded_mentions: &[],
        },
        Case {
            name: "one member too many: scale down",
            observed: cluster(3, V35)
                .pods(&[0, 1, 2, 3])
                .pvcs(&[0, 1, 2, 3])
                .members(
                    three(V35)
                        .into_iter()
                        .chain([healthy(3, V35, false)])
                        .collect(),
                ),
            previous: previous_of(&[0, 1, 2, 3], V35),
            action: Action::RemoveMember {
                member: name(3),
                id: 0xa3,
                reason: RemovalReason::ScaleDown,
                quorum: quorum_checked(),
            },
            phase: ClusterPhase::Scaling,
            available: (true, "AllMembersHealthy"),
            progressing: (true, "ScalingDown"),
            degraded: (false, "Healthy"),
            event: Some((false, "MemberRemoved")),
            degraded_mentions: &[],
        },
        Case {
            name: "Pod of a removed member",
            observed: full().pods(&[3]).pvcs(&[3]).members(three(V35)),
            previous: previous_of(&[0, 1, 2, 3], V35),
            action: Action::DeletePod { member: name(3) },
            phase: ClusterPhase::Scaling,
            available: (true, "AllMembersHealthy"),
            progressing: (true, "DeletingPod"),
            degraded: (false, "Healthy"),
            event: Some((false, "MemberPodDeleted")),
            degraded_mentions: &[],
        },
        Case {
            name: "Pod of a removed member terminating",
            observed: full().terminating(3).members(three(V35)),
            previous: previous_of(&[0, 1, 2], V35),
            action: Action::Wait(WaitReason::PodTerminating { member: name(3) }),
            phase: ClusterPhase::Scaling,
            available: (true, "AllMembersHealthy"),
            progressing: (true, "DeletingPod"),
            degraded: (false, "Healthy"),
            event: None,
            degraded_mentions: &[],
        },
        Case {
            name: "released PVC under reclaimPolicy Delete",
            observed: {
                let mut o = full().pvcs(&[3]).members(three(V35));
                o.spec.storage.reclaim_policy = ReclaimPolicy::Delete;
                o
            },
            previous: previous_of(&[0, 1, 2], V35),
            action: Action::DeletePvc { name: name(3) },
            phase: ClusterPhase::Scaling,
            available: (true, "AllMembersHealthy"),
            progressing: (true, "DeletingVolume"),
            degraded: (false, "Healthy"),
            event: Some((false, "PvcDeleted")),
            degraded_mentions: &[],
        },
        Case {
            name: "new version: upgrade a follower",
            observed: full().members(three(V34)),
            previous: previous_of(&[0, 1, 2], V34),
            action: Action::UpgradeMember {
                member: name(1),
                from: v(V34),
                to: v(V35),
                quorum: quorum_checked(),
            },
            phase: ClusterPhase::Upgrading,
            available: (true, "AllMembersHealthy"),
            progressing: (true, "Upgrading"),
            degraded: (false, "Healthy"),
            event: Some((false, "MemberUpgrading")),
            degraded_mentions: &[],
        },
        Case {
            name: "3.5 to 3.6: a follower restarts on 3.5 to take a v2 snapshot first",
            observed: cluster(3, V36)
                .pods(&[0, 1, 2])
                .pvcs(&[0, 1, 2])
                .members(three(V35)),
            previous: previous_of(&[0, 1, 2], V35),
            action: Action::SnapshotBeforeUpgrade {
                member: name(1),
                version: v(V35),
                quorum: quorum_checked(),
            },
            phase: ClusterPhase::Upgrading,
            available: (true, "AllMembersHealthy"),
            progressing: (true, "Upgrading"),
            degraded: (false, "Healthy"),
            event: Some((false, "SnapshotBeforeUpgrade")),
            degraded_mentions: &[],
        },
        Case {
            name: "3.5 to 3.6: its Pod comes back on 3.5 with --snapshot-count=1",
            observed: snapshotting(
                cluster(3, V36).pods(&[0, 2]).pvcs(&[0, 1, 2]).members(vec![
                    healthy(0, V35, true),
                    unhealthy(1, 5),
                    healthy(2, V35, false),
                ]),
                false,
            ),
            previous: previous_of(&[0, 1, 2], V35),
            action: Action::CreateMemberPod {
                member: name(1),
                initial_cluster: [0, 1, 2]
                    .map(|o| (name(o), main().peer_url(&name(o))))
                    .to_vec(),
                version: v(V35),
                reason: PodReason::SnapshotBeforeUpgrade,
            },
            phase: ClusterPhase::Upgrading,
            available: (false, "MembersUnhealthy"),
            progressing: (true, "Upgrading"),
            degraded: (true, "MemberUnhealthy"),
            event: Some((false, "MemberPodCreated")),
            degraded_mentions: &["main-1"],
        },
        Case {
            name: "3.5 to 3.6: waiting for the v2 snapshot",
            observed: snapshotting(
                cluster(3, V36)
                    .pods(&[0, 1, 2])
                    .pvcs(&[0, 1, 2])
                    .members(three(V35)),
                false,
            ),
            previous: previous_of(&[0, 1, 2], V35),
            action: Action::Wait(WaitReason::V2SnapshotPending { member: name(1) }),
            phase: ClusterPhase::Upgrading,
            available: (true, "AllMembersHealthy"),
            progressing: (true, "Upgrading"),
            degraded: (false, "Healthy"),
            event: None,
            degraded_mentions: &[],
        },
        Case {
            name: "3.5 to 3.6: the snapshot was taken",
            observed: snapshotting(
                cluster(3, V36)
                    .pods(&[0, 1, 2])
                    .pvcs(&[0, 1, 2])
                    .members(three(V35)),
                true,
            ),
            previous: previous_of(&[0, 1, 2], V35),
            action: Action::MarkV2WalClean { member: name(1) },
            phase: ClusterPhase::Upgrading,
            available: (true, "AllMembersHealthy"),
            progressing: (true, "Upgrading"),
            degraded: (false, "Healthy"),
            event: Some((false, "V2WalClean")),
            degraded_mentions: &[],
        },
        Case {
            name: "upgraded member's Pod gone: recreate it on the new version",
            observed: cluster(3, V35)
                .pods(&[0, 2])
                .pvcs(&[0, 1, 2])
                .members(upgrading(unhealthy(1, 5))),
            previous: previous_of(&[0, 1, 2], V34),
            action: Action::CreateMemberPod {
                member: name(1),
                initial_cluster: [0, 1, 2]
                    .map(|o| (name(o), main().peer_url(&name(o))))
                    .to_vec(),
                version: v(V35),
                reason: PodReason::Restart,
            },
            phase: ClusterPhase::Upgrading,
            available: (false, "MembersUnhealthy"),
            progressing: (true, "Upgrading"),
            degraded: (true, "MemberUnhealthy"),
            event: Some((false, "MemberPodCreated")),
            degraded_mentions: &["main-1", "2 of 3"],
        },
        Case {
            name: "upgraded member starting",
            observed: full().members(upgrading(unhealthy(1, 5))),
            previous: previous_of(&[0, 1, 2], V34),
            action: Action::Wait(WaitReason::MemberUnhealthy { member: name(1) }),
            phase: ClusterPhase::Upgrading,
            available: (false, "MembersUnhealthy"),
            progressing: (true, "Upgrading"),
            degraded: (true, "MemberUnhealthy"),
            event: Some((true, "MemberUnhealthy")),
            degraded_mentions: &["main-1"],
        },
        Case {
            name: "a member stops answering, within its grace period",
            observed: full().members(vec![
                healthy(0, V35, true),
                unhealthy(1, 30),
                healthy(2, V35, false),
            ]),
            previous: previous_of(&[0, 1, 2], V35),
            action: Action::Wait(WaitReason::MemberUnhealthy { member: name(1) }),
            phase: ClusterPhase::Degraded,
            available: (false, "MembersUnhealthy"),
            progressing: (false, "MemberUnhealthy"),
            degraded: (true, "MemberUnhealthy"),
            event: Some((true, "MemberUnhealthy")),
            degraded_mentions: &["main-1", "2 of 3"],
        },
        Case {
            name: "a member's Pod is gone, its data kept: restart it",
            observed: cluster(3, V35).pods(&[0, 2]).pvcs(&[0, 1, 2]).members(vec![
                healthy(0, V35, true),
                unhealthy(1, 5),
                healthy(2, V35, false),
            ]),
            previous: previous_of(&[0, 1, 2], V35),
            action: Action::CreateMemberPod {
                member: name(1),
                initial_cluster: [0, 1, 2]
                    .map(|o| (name(o), main().peer_url(&name(o))))
                    .to_vec(),
                version: v(V35),
                reason: PodReason::Restart,
            },
            phase: ClusterPhase::Degraded,
            available: (false, "MembersUnhealthy"),
            progressing: (true, "RestartingMember"),
            degraded: (true, "MemberUnhealthy"),
            event: Some((false, "MemberPodCreated")),
            degraded_mentions: &["main-1"],
        },
        Case {
            name: "a learner that never started past its deadline: remove it",
            observed: full().members(vec![
                healthy(0, V35, true),
                healthy(1, V35, false),
                Member {
                    health: MemberHealth::Unhealthy {
                        unhealthy_for: Duration::from_secs(600),
                    },
                    ..unstarted_learner(2)
                },
            ]),
            previous: previous_of(&[0, 1, 2], V35),
            action: Action::RemoveMember {
                member: name(2),
                id: 0xa2,
                reason: RemovalReason::LearnerStuck,
                quorum: quorum_checked(),
            },
            phase: ClusterPhase::Degraded,
            available: (true, "AllMembersHealthy"),
            progressing: (true, "ReplacingMember"),
            degraded: (true, "MemberUnhealthy"),
            event: Some((true, "MemberRemoved")),
            degraded_mentions: &["main-2", "deadline"],
        },
        Case {
            name: "a member dead past its grace period: remove it",
            observed: full().members(vec![
                healthy(0, V35, true),
                unhealthy(1, 3600),
                healthy(2, V35, false),
            ]),
            previous: previous_of(&[0, 1, 2], V35),
            action: Action::RemoveMember {
                member: name(1),
                id: 0xa1,
                reason: RemovalReason::Dead,
                quorum: quorum_checked(),
            },
            phase: ClusterPhase::Degraded,
            available: (false, "MembersUnhealthy"),
            progressing: (true, "ReplacingMember"),
            degraded: (true, "MemberUnhealthy"),
            event: Some((false, "MemberRemoved")),
            degraded_mentions: &["main-1", "dead"],
        },
        Case {
            // A member list means etcd confirmed quorum: the operator is cut off (issue 17).
            name: "two of three unreachable while etcd confirms quorum",
            observed: full().members(vec![
                healthy(0, V35, false),
                unhealthy(1, 30),
                unhealthy(2, 30),
            ]),
            previous: previous_of(&[0, 1, 2], V35),
            action: Action::Wait(WaitReason::MembersUnreachable {
                reachable: 1,
                voters: 3,
            }),
            phase: ClusterPhase::Degraded,
            available: (false, "MembersUnreachable"),
            progressing: (false, "MembersUnreachable"),
            degraded: (true, "MembersUnreachable"),
            event: Some((true, "MembersUnreachable")),
            degraded_mentions: &["1 of 3", "confirmed quorum"],
        },
        Case {
            name: "no member answers at all",
            observed: full().existed(&[0, 1, 2], V35),
            previous: previous_of(&[0, 1, 2], V35),
            action: Action::Wait(WaitReason::QuorumLost {
                healthy: 0,
                voters: 0,
            }),
            phase: ClusterPhase::QuorumLost,
            available: (false, "QuorumLost"),
            progressing: (false, "QuorumLost"),
            degraded: (true, "QuorumLost"),
            event: Some((true, "QuorumLost")),
            degraded_mentions: &["No member answers", "main-0, main-1, main-2"],
        },
        Case {
            name: "no member answers, a Pod is missing: restart it",
            observed: cluster(3, V35)
                .pods(&[0, 1])
                .pvcs(&[0, 1, 2])
                .existed(&[0, 1, 2], V35),
            previous: previous_of(&[0, 1, 2], V35),
            action: Action::CreateMemberPod {
                member: name(2),
                initial_cluster: [0, 1, 2]
                    .map(|o| (name(o), main().peer_url(&name(o))))
                    .to_vec(),
                version: v(V35),
                reason: PodReason::Restart,
            },
            phase: ClusterPhase::QuorumLost,
            available: (false, "QuorumLost"),
            progressing: (true, "RestartingMember"),
            degraded: (true, "QuorumLost"),
            event: Some((false, "MemberPodCreated")),
            degraded_mentions: &["No member answers"],
        },
        Case {
            name: "most members' data gone: cluster lost",
            observed: cluster(3, V35)
                .pods(&[0])
                .pvcs(&[0])
                .existed(&[0, 1, 2], V35),
            previous: previous_of(&[0, 1, 2], V35),
            action: Action::Wait(WaitReason::ClusterLost),
            phase: ClusterPhase::QuorumLost,
            available: (false, "QuorumLost"),
            progressing: (false, "ClusterLost"),
            degraded: (true, "ClusterLost"),
            event: Some((true, "ClusterLost")),
            degraded_mentions: &["main-1, main-2", "EtcdRestore"],
        },
        Case {
            name: "two members cannot roll without an outage",
            observed: cluster(2, V35)
                .pods(&[0, 1])
                .pvcs(&[0, 1])
                .members(vec![healthy(0, V34, true), healthy(1, V34, false)]),
            previous: previous_of(&[0, 1], V34),
            action: Action::Wait(WaitReason::WouldLoseQuorum {
                member: name(1),
                healthy: 2,
                voters: 2,
            }),
            phase: ClusterPhase::Degraded,
            available: (true, "AllMembersHealthy"),
            progressing: (false, "WouldLoseQuorum"),
            degraded: (true, "WouldLoseQuorum"),
            event: Some((true, "WouldLoseQuorum")),
            degraded_mentions: &["main-1", "1 of 2", "quorum of 2", "scale it to 3"],
        },
        Case {
            name: "unsupported version refused",
            observed: {
                let mut o = full().members(three(V35));
                o.spec.version = "3.3.0".into();
                o
            },
            previous: previous_of(&[0, 1, 2], V35),
            action: Action::Refuse(vec![validation_error("3.3.0")]),
            phase: ClusterPhase::Invalid,
            available: (true, "AllMembersHealthy"),
            progressing: (false, "InvalidSpec"),
            degraded: (true, "InvalidSpec"),
            event: Some((true, "InvalidSpec")),
            degraded_mentions: &["spec.version", "3.3.0", "not supported"],
        },
        Case {
            name: "paused",
            observed: {
                let mut o = full().members(three(V35));
                o.spec.paused = true;
                o
            },
            previous: previous_of(&[0, 1, 2], V35),
            action: Action::Wait(WaitReason::Paused),
            phase: ClusterPhase::Paused,
            available: (true, "AllMembersHealthy"),
            progressing: (false, "Paused"),
            degraded: (false, "Healthy"),
            event: None,
            degraded_mentions: &[],
        },
        Case {
            name: "an EtcdRestore rebuilding the cluster",
            observed: {
                let mut o = full().members(three(V35));
                o.restoring = Some("restore-1".into());
                o
            },
            previous: previous_of(&[0, 1, 2], V35),
            action: Action::Wait(WaitReason::Restoring {
                restore: "restore-1".into(),
            }),
            phase: ClusterPhase::Restoring,
            available: (true, "AllMembersHealthy"),
            progressing: (true, "Restoring"),
            degraded: (false, "Healthy"),
            event: None,
            degraded_mentions: &[],
        },
        Case {
            name: "spec.pod changed: roll a follower",
            observed: drift(full().ready(&[0, 1, 2]).members(three(V35))),
            previous: previous_of(&[0, 1, 2], V35),
            action: Action::RollMember {
                member: name(1),
                up_to_date: 0,
                voters: 3,
                quorum: quorum_checked(),
            },
            phase: ClusterPhase::Upgrading,
            available: (true, "AllMembersHealthy"),
            progressing: (true, "RollingConfiguration"),
            degraded: (false, "Healthy"),
            event: Some((false, "MemberRolled")),
            degraded_mentions: &[],
        },
        Case {
            name: "rolled member's Pod terminating",
            observed: drift(
                cluster(3, V35)
                    .pods(&[0, 1, 2])
                    .terminating(1)
                    .pvcs(&[0, 1, 2])
                    .members(three(V35)),
            ),
            previous: previous_of(&[0, 1, 2], V35),
            action: Action::Wait(WaitReason::PodTerminating { member: name(1) }),
            phase: ClusterPhase::Upgrading,
            available: (true, "AllMembersHealthy"),
            progressing: (true, "RollingConfiguration"),
            degraded: (false, "Healthy"),
            event: None,
            degraded_mentions: &[],
        },
        Case {
            name: "rolled member back with the current configuration, not answering yet",
            observed: {
                let mut o = drift(full().members(three(V35)));
                let hash = Some(crate::build::config_hash(&o.spec));
                o.pods.get_mut(&name(1)).unwrap().config_hash = hash;
                if let Membership::Known(members) = &mut o.membership {
                    members[1] = unhealthy(1, 2);
                }
                o
            },
            previous: previous_of(&[0, 1, 2], V35),
            action: Action::Wait(WaitReason::MemberUnhealthy { member: name(1) }),
            phase: ClusterPhase::Upgrading,
            available: (false, "MembersUnhealthy"),
            progressing: (true, "RollingConfiguration"),
            degraded: (true, "MemberUnhealthy"),
            event: Some((true, "MemberUnhealthy")),
            degraded_mentions: &["main-1"],
        },
        Case {
            name: "rolled member answers, its Pod not Ready yet",
            observed: {
                let mut o = drift(full().ready(&[0, 2]).members(three(V35)));
                let hash = Some(crate::build::config_hash(&o.spec));
                o.pods.get_mut(&name(1)).unwrap().config_hash = hash;
                o
            },
            previous: previous_of(&[0, 1, 2], V35),
            action: Action::Wait(WaitReason::PodNotReady { member: name(1) }),
            phase: ClusterPhase::Upgrading,
            available: (true, "AllMembersHealthy"),
            progressing: (true, "RollingConfiguration"),
            degraded: (false, "Healthy"),
            event: None,
            degraded_mentions: &[],
        },
    ]
}

/// The user changed spec.pod after the Pods were built: they drift.
fn drift(mut observed: Observed) -> Observed {
    observed.spec.pod = Some(etcd_api::PodPolicy {
        labels: [("team".to_owned(), "storage".to_owned())].into(),
        ..etcd_api::PodPolicy::default()
    });
    observed
}

#[test]
fn a_roll_reports_how_many_members_run_the_current_configuration() {
    let mut observed = drift(
        cluster(3, V35)
            .pods(&[0, 1, 2])
            .ready(&[0, 1, 2])
            .pvcs(&[0, 1, 2])
            .members(three(V35)),
    );
    let hash = Some(crate::build::config_hash(&observed.spec));
    observed.pods.get_mut(&name(1)).unwrap().config_hash = hash;
    let action = next_action(&observed, &Policy::default());
    assert_eq!(
        action,
        Action::RollMember {
            member: name(2),
            up_to_date: 1,
            voters: 3,
            quorum: quorum_checked(),
        }
    );
    let status = status_from(
        &observed,
        &action,
        None,
        &previous_of(&[0, 1, 2], V35),
        at(1),
    );
    let progressing = condition(&status, "Progressing");
    assert_eq!(progressing.reason, "RollingConfiguration");
    assert!(
        progressing
            .message
            .contains("1/3 members run the current configuration"),
        "{}",
        progressing.message
    );
    let event = event_for(&action).unwrap();
    assert!(event.note.contains("main-2"), "{}", event.note);
}

/// A roll onto renewed certificates (the spec unchanged) is reported like a configuration
/// roll, counting the members whose Pod mounted the certificate Secrets as they are now.
#[test]
fn a_certificate_roll_is_reported_with_its_progress() {
    let mut observed = cluster(3, V35)
        .pods(&[0, 1, 2])
        .ready(&[0, 1, 2])
        .pvcs(&[0, 1, 2])
        .members(three(V35));
    for ordinal in [0, 1, 2] {
        observed
            .tls_hashes
            .insert(name(ordinal), format!("renewed-{ordinal}"));
        observed.pods.get_mut(&name(ordinal)).unwrap().tls_hash = Some(if ordinal == 1 {
            format!("renewed-{ordinal}")
        } else {
            format!("issued-{ordinal}")
        });
    }
    let action = next_action(&observed, &Policy::default());
    assert!(
        matches!(
            &action,
            Action::RollMember {
                up_to_date: 1,
                voters: 3,
                ..
            }
        ),
        "{action:?}"
    );
    let status = status_from(
        &observed,
        &action,
        None,
        &previous_of(&[0, 1, 2], V35),
        at(1),
    );
    let progressing = condition(&status, "Progressing");
    assert_eq!(progressing.reason, "RollingConfiguration");
    assert!(
        progressing
            .message
            .contains("1/3 members run the current configuration"),
        "{}",
        progressing.message
    );
    let event = event_for(&action).unwrap();
    assert!(event.note.contains("certificate Secrets"), "{}", event.note);
}

/// While a switch to TLS still serves plaintext clients on 2379, the status names the URL that
/// works there; once every member serves TLS alone, the `https://` one.
#[test]
fn the_client_endpoint_follows_what_port_2379_serves_during_a_switch_to_tls() {
    use crate::plan::tls_switch::{Listen, Listeners};
    let mut observed = cluster(3, V35)
        .pods(&[0, 1, 2])
        .ready(&[0, 1, 2])
        .pvcs(&[0, 1, 2])
        .members(three(V35));
    observed.cluster = observed.cluster.clone().with_tls(true, true);
    let endpoint = |observed: &Observed, client: Listen| {
        let mut observed = observed.clone();
        for pod in observed.pods.values_mut() {
            pod.listen = Some(Listeners {
                peer: Listen::Https,
                client,
            });
        }
        client_endpoint(&observed)
    };
    assert_eq!(
        endpoint(&observed, Listen::Dual),
        "http://main-client.db.svc:2379"
    );
    assert_eq!(
        endpoint(&observed, Listen::Https),
        "https://main-client.db.svc:2379"
    );
    // Pods whose flags do not say are taken as built from the spec.
    assert_eq!(
        client_endpoint(&observed),
        "https://main-client.db.svc:2379"
    );
}

fn validation_error(version: &str) -> etcd_api::validation::FieldError {
    etcd_api::validation::validate_version(version).unwrap_err()
}

#[test]
fn every_planned_action_gets_its_phase_conditions_and_event() {
    for case in cases() {
        let name = case.name;
        assert_eq!(
            next_action(&case.observed, &Policy::default()),
            case.action,
            "{name}: the planner picks another action for this observation"
        );
        let status = status_from(
            &case.observed,
            &case.action,
            Some(7),
            &case.previous,
            at(100),
        );
        assert_eq!(status.phase, Some(case.phase), "{name}");
        let expect = |(holds, reason): (bool, &str)| (holds, reason.to_owned());
        assert_eq!(
            summary(&status, "Available"),
            expect(case.available),
            "{name}"
        );
        assert_eq!(
            summary(&status, "Progressing"),
            expect(case.progressing),
            "{name}"
        );
        assert_eq!(
            summary(&status, "Degraded"),
            expect(case.degraded),
            "{name}"
        );
        let degraded = &condition(&status, "Degraded").message;
        for word in case.degraded_mentions {
            assert!(
                degraded.contains(word),
                "{name}: {degraded:?} lacks {word:?}"
            );
        }
        for c in &status.conditions {
            assert_eq!(c.observed_generation, Some(7), "{name}");
            assert!(
                !c.message.is_empty() || c.type_ == "Degraded",
                "{name}: {c:?}"
            );
        }
        assert_eq!(status.observed_generation, Some(7), "{name}");
        assert_eq!(
            status.client_endpoint.as_deref(),
            Some("http://main-client.db.svc:2379"),
            "{name}"
        );
        let event = event_for(&case.action);
        assert_eq!(
            event.as_ref().map(|e| (e.warning, e.reason)),
            case.event,
            "{name}"
        );
        if let Some(event) = event {
            assert!(event.note.len() <= 1024, "{name}");
            assert!(!event.note.is_empty(), "{name}");
        }
    }
}

#[test]
fn the_table_covers_every_action_and_wait_reason() {
    let mut seen: Vec<String> = cases()
        .iter()
        .map(|c| match &c.action {
            Action::Wait(reason) => format!("Wait::{}", variant(reason)),
            Action::CreateMemberPod { reason, .. } => format!("CreateMemberPod::{reason:?}"),
            Action::RemoveMember { reason, .. } => format!("RemoveMember::{reason:?}"),
            other => variant(other),
        })
        .collect();
    seen.sort();
    seen.dedup();
    assert_eq!(
        seen,
        [
            "AddLearner",
            "BootstrapSeed",
            "Converged",
            "CreateMemberPod::NewMember",
            "CreateMemberPod::Restart",
            "CreateMemberPod::SnapshotBeforeUpgrade",
            "DeletePod",
            "DeletePvc",
            "MarkV2WalClean",
            "PromoteLearner",
            "Refuse",
            "RemoveMember::Dead",
            "RemoveMember::LearnerStuck",
            "RemoveMember::ScaleDown",
            "RollMember",
            "SnapshotBeforeUpgrade",
            "UpgradeMember",
            "Wait::ClusterLost",
            "Wait::LearnerCatchingUp",
            "Wait::MemberJoining",
            "Wait::MemberUnhealthy",
            "Wait::MembersUnreachable",
            "Wait::Paused",
            "Wait::PodNotReady",
            "Wait::PodTerminating",
            "Wait::QuorumLost",
            "Wait::Restoring",
            "Wait::SeedStarting",
            "Wait::V2SnapshotPending",
            "Wait::WouldLoseQuorum",
        ]
    );
}

/// The name of an enum variant from its Debug form.
fn variant(value: &impl std::fmt::Debug) -> String {
    let debug = format!("{value:?}");
    debug
        .split(|c: char| !c.is_alphanumeric())
        .next()
        .unwrap()
        .to_owned()
}

#[test]
fn members_list_etcd_members_then_pods_by_ordinal() {
    let foreign = Member {
        id: 0xbeef,
        name: String::new(),
        peer_url: "http://10.0.0.9:2380".into(),
        client_url: None,
        client_url_on_switch_port: false,
        learner: false,
        health: MemberHealth::Unhealthy {
            unhealthy_for: Duration::ZERO,
        },
        db: None,
    };
    let observed = cluster(3, V35)
        .pods(&[0, 2, 10, 11])
        .pvcs(&[0, 2, 10])
        .members(vec![
            healthy(10, V35, false),
            foreign,
            healthy(2, V35, true),
            learner(11, false),
            healthy(0, V34, false),
        ]);
    let status = status_from(
        &observed,
        &Action::Converged,
        None,
        &EtcdClusterStatus::default(),
        at(1),
    );
    let names: Vec<&str> = status.members.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "main-0",
            "main-2",
            "main-10",
            "main-11",
            "http://10.0.0.9:2380"
        ]
    );
    assert_eq!(
        status.members[1],
        MemberStatus {
            name: "main-2".into(),
            id: Some("a2".into()),
            peer_url: Some("http://main-2.main.db.svc:2380".into()),
            client_url: Some("http://main-2.main.db.svc:2379".into()),
            version: Some(V35.into()),
            healthy: true,
            learner: false,
            leader: true,
        }
    );
    assert_eq!(status.members[0].version.as_deref(), Some(V34));
    assert_eq!(
        status.members[3],
        MemberStatus {
            name: "main-11".into(),
            id: Some("ab".into()),
            peer_url: Some("http://main-11.main.db.svc:2380".into()),
            client_url: None,
            version: None,
            healthy: false,
            learner: true,
            leader: false,
        }
    );
    assert_eq!(status.members[4].id.as_deref(), Some("beef"));
    assert!(!status.members[4].healthy);
    // Healthy voters only: the learner and the silent foreign member do not count.
    assert_eq!(status.ready_members, 3);
    assert_eq!(status.cluster_id.as_deref(), Some("c0ffee"));
    // Mixed versions: no version they all run yet.
    assert_eq!(status.current_version, None);
}

#[test]
fn pods_that_are_not_members_are_listed_without_id() {
    let observed = full3().pods(&[3]).members(three(V35));
    let status = status_from(
        &observed,
        &Action::DeletePod { member: name(3) },
        None,
        &EtcdClusterStatus::default(),
        at(1),
    );
    assert_eq!(
        status.members.last(),
        Some(&MemberStatus {
            name: "main-3".into(),
            ..MemberStatus::default()
        })
    );
    // ...and are therefore not remembered as members.
    assert_eq!(last_known_members(&status), [name(0), name(1), name(2)]);
}

fn full3() -> Observed {
    cluster(3, V35).pods(&[0, 1, 2]).pvcs(&[0, 1, 2])
}

#[test]
fn unknown_membership_keeps_the_previous_members_without_inventing_health() {
    let mut previous = previous_of(&[0, 1, 2], V35);
    // A Pod that was not a member last time and is gone now.
    previous.members.push(MemberStatus {
        name: name(5),
        ..MemberStatus::default()
    });
    previous.members[1].learner = true;
    previous.ready_members = 3;
    let observed = cluster(3, V35)
        .pods(&[0, 1, 2, 4])
        .pvcs(&[0, 1, 2])
        .existed(&[0, 1, 2], V35);
    let action = next_action(&observed, &Policy::default());
    let status = status_from(&observed, &action, Some(2), &previous, at(50));
    let expected: Vec<MemberStatus> = previous.members[..3]
        .iter()
        .map(|m| MemberStatus {
            healthy: false,
            leader: false,
            version: None,
            ..m.clone()
        })
        .chain([MemberStatus {
            name: name(4),
            ..MemberStatus::default()
        }])
        .collect();
    assert_eq!(status.members, expected);
    assert!(status.members[1].learner, "learner as last seen");
    assert_eq!(status.ready_members, 0);
    assert_eq!(status.current_version.as_deref(), Some(V35));
    assert_eq!(status.cluster_id.as_deref(), Some("c0ffee"));
    // What the observer feeds back to the planner survives the outage unchanged.
    assert_eq!(last_known_members(&status), observed.last_known_members);
    assert_eq!(last_known_version(&status), Some(v(V35)));
}

#[test]
fn current_version_moves_only_when_every_member_answers_the_same() {
    let previous = previous_of(&[0, 1, 2], V34);
    let version_for = |members: Vec<Member>| {
        status_from(
            &full3().members(members),
            &Action::Converged,
            None,
            &previous,
            at(1),
        )
        .current_version
    };
    assert_eq!(version_for(three(V35)).as_deref(), Some(V35));
    assert_eq!(version_for(three(V34)).as_deref(), Some(V34));
    let mixed = vec![
        healthy(0, V34, true),
        healthy(1, V35, false),
        healthy(2, V35, false),
    ];
    assert_eq!(version_for(mixed).as_deref(), Some(V34));
    let one_silent = vec![
        healthy(0, V35, true),
        unhealthy(1, 1),
        healthy(2, V35, false),
    ];
    assert_eq!(version_for(one_silent).as_deref(), Some(V34));
    let fresh = status_from(
        &full3().members(three(V35)),
        &Action::Converged,
        None,
        &EtcdClusterStatus::default(),
        at(1),
    );
    assert_eq!(fresh.current_version.as_deref(), Some(V35));
    assert_eq!(last_known_version(&fresh), Some(v(V35)));
}

#[test]
fn waiting_for_the_cluster_version_is_an_upgrade_in_progress() {
    // Every member runs 3.5, etcd still reports 3.4, the spec asks for 3.6.
    let mut observed = full3().members(three(V35)).cluster_version(Some((3, 4)));
    observed.spec.version = V36.into();
    let action = next_action(&observed, &Policy::default());
    assert_eq!(
        action,
        Action::Wait(WaitReason::ClusterVersionBehind {
            cluster_version: Some((3, 4)),
            needed: (3, 5)
        })
    );
    let status = status_from(
        &observed,
        &action,
        Some(2),
        &previous_of(&[0, 1, 2], V35),
        at(1),
    );
    assert_eq!(status.phase, Some(ClusterPhase::Upgrading));
    let progressing = condition(&status, "Progressing");
    assert_eq!(
        (progressing.status.as_str(), progressing.reason.as_str()),
        ("True", "Upgrading")
    );
    assert_eq!(
        progressing.message,
        "Waiting for etcd's cluster version to reach 3.5 (it reports 3.4) before upgrading to \
         3.6.16: etcd moves one minor at a time"
    );
    // Nothing to tell in an event: it is a wait, not a change.
    assert_eq!(event_for(&action), None);
}

#[test]
fn last_member_back_on_the_new_version_ends_the_upgrade() {
    // The leader was upgraded last; everything now answers on 3.5.35.
    let observed = full3().members(three(V35));
    let status = status_from(
        &observed,
        &Action::Converged,
        None,
        &previous_of(&[0, 1, 2], V34),
        at(1),
    );
    assert_eq!(status.phase, Some(ClusterPhase::Running));
    assert_eq!(status.current_version.as_deref(), Some(V35));
}

#[test]
fn cluster_id_is_hex_and_kept_when_nobody_answers() {
    let mut observed = full3().members(three(V35));
    observed.cluster_id = Some(0x8e9e_05c5_2164_694d);
    let status = status_from(
        &observed,
        &Action::Converged,
        None,
        &Default::default(),
        at(1),
    );
    assert_eq!(status.cluster_id.as_deref(), Some("8e9e05c52164694d"));

    let silent = full3().existed(&[0, 1, 2], V35);
    let later = status_from(
        &silent,
        &next_action(&silent, &Policy::default()),
        None,
        &status,
        at(2),
    );
    assert_eq!(later.cluster_id.as_deref(), Some("8e9e05c52164694d"));
}

#[test]
fn transition_times_move_only_when_a_condition_flips() {
    let calm = full3().members(three(V35));
    let first = status_from(
        &calm,
        &Action::Converged,
        Some(1),
        &Default::default(),
        at(100),
    );
    for c in &first.conditions {
        assert_eq!(c.last_transition_time, at(100), "{c:?}");
    }
    // Nothing changed: the whole status is identical, so the controller writes nothing.
    let again = status_from(&calm, &Action::Converged, Some(1), &first, at(200));
    assert_eq!(again, first);

    // A member stops answering: Available and Degraded flip, Progressing stays False.
    let sick = full3().members(vec![
        healthy(0, V35, true),
        unhealthy(1, 10),
        healthy(2, V35, false),
    ]);
    let action = next_action(&sick, &Policy::default());
    let worse = status_from(&sick, &action, Some(1), &again, at(300));
    assert_eq!(condition(&worse, "Available").last_transition_time, at(300));
    assert_eq!(condition(&worse, "Degraded").last_transition_time, at(300));
    let progressing = condition(&worse, "Progressing");
    assert_eq!(progressing.status, "False");
    assert_eq!(progressing.reason, "MemberUnhealthy");
    assert_eq!(progressing.last_transition_time, at(100));

    // Still sick a minute later (a longer unhealthy_for): nothing moves.
    let sicker = full3().members(vec![
        healthy(0, V35, true),
        unhealthy(1, 70),
        healthy(2, V35, false),
    ]);
    let still = status_from(&sicker, &action, Some(1), &worse, at(400));
    assert_eq!(still, worse);
}

#[test]
fn conditions_of_other_types_are_kept() {
    let mut previous = EtcdClusterStatus::default();
    previous.conditions.push(Condition {
        type_: "Restored".into(),
        status: "True".into(),
        reason: "FromBackup".into(),
        message: "x".into(),
        observed_generation: Some(1),
        last_transition_time: at(5),
    });
    let status = status_from(
        &full3().members(three(V35)),
        &Action::Converged,
        Some(1),
        &previous,
        at(9),
    );
    let types: Vec<&str> = status.conditions.iter().map(|c| c.type_.as_str()).collect();
    assert_eq!(types, ["Restored", "Available", "Progressing", "Degraded"]);
}

#[test]
fn event_notes_name_the_member_field_and_counts() {
    let note = |action: Action| event_for(&action).unwrap().note;
    assert!(
        note(Action::AddLearner {
            member: name(3),
            peer_url: main().peer_url(&name(3))
        })
        .contains("main-3")
    );
    assert!(
        note(Action::PromoteLearner {
            member: name(3),
            id: 0x1f
        })
        .contains("(ID 1f)")
    );
    assert!(
        note(Action::UpgradeMember {
            member: name(1),
            from: v(V34),
            to: v(V35),
            quorum: quorum_checked(),
        })
        .contains("from etcd 3.4.23 to 3.5.35")
    );
    let refused = note(Action::Refuse(vec![
        validation_error("3.3.0"),
        validation_error("x"),
    ]));
    assert!(
        refused.starts_with("spec.version: etcd 3.3.0 is not supported"),
        "{refused}"
    );
    assert!(refused.contains("; spec.version: \"x\""), "{refused}");
    let lost = note(Action::Wait(WaitReason::QuorumLost {
        healthy: 2,
        voters: 5,
    }));
    assert!(
        lost.starts_with("2 of 5 voting members answer, a quorum needs 3"),
        "{lost}"
    );
    let silent = note(Action::Wait(WaitReason::QuorumLost {
        healthy: 0,
        voters: 0,
    }));
    assert!(silent.starts_with("No member answers."), "{silent}");
    assert_eq!(
        event_for(&Action::Wait(WaitReason::PodTerminating {
            member: name(1)
        })),
        None
    );
}

/// A failed API call (here the 403 a missing RBAC verb gives) is reported where `kubectl
/// describe` shows it: Degraded names the step, the object and the API's answer, and a Warning
/// event says the same; what was Degraded before is kept in the message, not lost.
#[test]
fn a_failed_step_is_reported_as_a_condition_and_a_warning_event() {
    let observed = cluster(3, V35)
        .members(three(V35))
        .pods(&[0, 1, 2])
        .pvcs(&[0, 1, 2]);
    let action = next_action(&observed, &Policy::default());
    assert_eq!(action, Action::Converged);
    let mut status = status_from(
        &observed,
        &action,
        Some(4),
        &previous_of(&[0, 1, 2], V35),
        at(10),
    );
    let failure = StepFailure {
        reason: "KubeApiFailed",
        message: "patch PersistentVolumeClaim data-main-0: 403 Forbidden".into(),
    };
    record_failure(&mut status, &failure, Some(4), at(11));
    let degraded = condition(&status, types::DEGRADED);
    assert_eq!(
        (degraded.status.as_str(), degraded.reason.as_str()),
        ("True", "KubeApiFailed")
    );
    assert!(
        degraded.message.contains("data-main-0"),
        "{}",
        degraded.message
    );
    assert!(degraded.message.contains("403"), "{}", degraded.message);
    let event = failure_event(&failure);
    assert!(event.warning);
    assert_eq!(event.reason, "KubeApiFailed");
    assert!(event.note.contains("data-main-0"));

    // A failure on top of quorum loss keeps the quorum loss in view. (No member list: with one,
    // etcd confirmed quorum.)
    let lost = cluster(3, V35)
        .pods(&[0, 1, 2])
        .pvcs(&[0, 1, 2])
        .existed(&[0, 1, 2], V35);
    let action = next_action(&lost, &Policy::default());
    let mut status = status_from(
        &lost,
        &action,
        Some(4),
        &previous_of(&[0, 1, 2], V35),
        at(10),
    );
    record_failure(&mut status, &failure, Some(4), at(11));
    let degraded = condition(&status, types::DEGRADED);
    assert_eq!(degraded.reason, "KubeApiFailed");
    assert!(
        degraded.message.contains("QuorumLost"),
        "{}",
        degraded.message
    );
}

/// Issue 17: an alarm is reported as what it is, naming the alarm and the member, never as
/// quorum loss (which would tell the user to restore a cluster that holds quorum).
#[test]
fn an_alarm_is_reported_by_name_and_is_not_quorum_loss() {
    let mut observed = cluster(3, V35)
        .members(three(V35))
        .pods(&[0, 1, 2])
        .pvcs(&[0, 1, 2]);
    observed.alarms = vec![crate::state::MemberAlarm {
        member: name(1),
        alarm: "NOSPACE".into(),
    }];
    let action = next_action(&observed, &Policy::default());
    let status = status_from(
        &observed,
        &action,
        Some(2),
        &previous_of(&[0, 1, 2], V35),
        at(10),
    );
    assert_eq!(status.phase, Some(ClusterPhase::Degraded));
    assert_eq!(status.ready_members, 3);
    for type_ in [types::AVAILABLE, types::DEGRADED] {
        let c = condition(&status, type_);
        assert_eq!(c.reason, reasons::ALARM_RAISED, "{type_}");
        assert!(c.message.contains("NOSPACE"), "{type_}: {}", c.message);
        assert!(c.message.contains(&name(1)), "{type_}: {}", c.message);
        assert!(!c.message.contains("restore"), "{type_}: {}", c.message);
    }
    assert!(!summary(&status, types::AVAILABLE).0);
    assert!(summary(&status, types::DEGRADED).0);
}

/// Issue 17: etcd's "retry later" is normal for ~5 s after a membership change, but a refusal
/// that persists (a learner that never catches up enough to be promoted, a cluster that stays
/// "unhealthy" to etcd) must say what is stuck: reported once it lasted past the short phase.
#[test]
fn a_persistent_refusal_is_reported_and_a_short_one_is_not() {
    let message = "promote main-3: etcdserver: can only promote a learner member which is in sync \
                   with leader";
    for consecutive in 1..PERSISTENT_REFUSALS {
        assert_eq!(refusal_report(consecutive, message), None, "{consecutive}");
    }
    let report = refusal_report(PERSISTENT_REFUSALS, message).unwrap();
    assert_eq!(report.reason, "EtcdRetryLater");
    assert!(report.message.contains("main-3"), "{}", report.message);
    assert!(
        report.message.contains(&PERSISTENT_REFUSALS.to_string()),
        "{}",
        report.message
    );
    assert!(refusal_report(PERSISTENT_REFUSALS + 5, message).is_some());
}

/// Issue 17 (defect 5): an operator that reaches only a minority while etcd confirmed quorum
/// reports what it sees (members it cannot reach), not quorum loss, and recommends no restore.
#[test]
fn an_operator_reaching_a_minority_reports_unreachable_members_not_quorum_loss() {
    let observed = cluster(3, V35)
        .members(vec![
            healthy(0, V35, true),
            unhealthy(1, 30),
            unhealthy(2, 30),
        ])
        .pods(&[0, 1, 2])
        .pvcs(&[0, 1, 2]);
    let action = next_action(&observed, &Policy::default());
    let status = status_from(
        &observed,
        &action,
        Some(2),
        &previous_of(&[0, 1, 2], V35),
        at(10),
    );
    assert_ne!(status.phase, Some(ClusterPhase::QuorumLost));
    for type_ in [types::AVAILABLE, types::DEGRADED] {
        let c = condition(&status, type_);
        assert_eq!(
            c.reason,
            reasons::MEMBERS_UNREACHABLE,
            "{type_}: {}",
            c.message
        );
        assert!(!c.message.contains("EtcdRestore"), "{type_}: {}", c.message);
    }
}

#[test]
fn backup_schedule_steps_that_change_something_are_events() {
    use crate::scheduled_backup::Step;
    let mut cluster = etcd_api::EtcdCluster::new(
        "main",
        serde_json::from_value(serde_json::json!({"size": 1, "backup": {
            "schedule": "0 * * * *", "s3": {"bucket": "etcd-backups"}}}))
        .unwrap(),
    );
    cluster.metadata.namespace = Some("db".into());
    let reason = |step: Step| backup_schedule_event(&cluster, &step).map(|(r, _)| r);
    assert_eq!(reason(Step::Create), Some("BackupScheduleCreated"));
    assert_eq!(reason(Step::Update), Some("BackupScheduleUpdated"));
    assert_eq!(reason(Step::Remove), Some("BackupScheduleRemoved"));
    assert_eq!(reason(Step::InSync), None);
    assert_eq!(reason(Step::Absent), None);
    assert_eq!(reason(Step::Foreign { kind: "Role" }), None);
    let (_, note) = backup_schedule_event(&cluster, &Step::Create).unwrap();
    assert!(
        note.contains("main-backups") && note.contains("0 * * * *"),
        "{note}"
    );
    let (_, note) = backup_schedule_event(&cluster, &Step::Remove).unwrap();
    assert!(
        note.contains("EtcdBackups and their S3 objects are kept"),
        "{note}"
    );
}

#[test]
fn a_certificate_near_its_end_is_a_condition_naming_the_secret_and_news_once() {
    let near = vec![("peer-tls".to_owned(), "2027-01-01T00:00:00Z".to_owned())];
    // No certificate the operator does not renew: no condition at all.
    let mut status = EtcdClusterStatus::default();
    let previous = EtcdClusterStatus::default();
    assert_eq!(
        record_certificate_expiry(&mut status, &previous, "db", None, Some(1), at(10)),
        None
    );
    assert!(find_condition(&status.conditions, CERTIFICATES_NEAR_EXPIRY).is_none());
    // Tracked and fine: False.
    let news = record_certificate_expiry(&mut status, &previous, "db", Some(&[]), Some(1), at(10));
    assert_eq!(news, None);
    let fine = find_condition(&status.conditions, CERTIFICATES_NEAR_EXPIRY).unwrap();
    assert_eq!(
        (fine.status.as_str(), fine.reason.as_str()),
        ("False", "CertificatesValid")
    );
    // Near its end: True, naming the Secret and the end, and news (a Warning event).
    let previous = status.clone();
    let news =
        record_certificate_expiry(&mut status, &previous, "db", Some(&near), Some(1), at(20));
    let condition = find_condition(&status.conditions, CERTIFICATES_NEAR_EXPIRY).unwrap();
    assert_eq!(condition.status, "True");
    assert_eq!(condition.reason, "CertificateNearExpiry");
    assert!(
        condition
            .message
            .starts_with("Secret db/peer-tls ends at 2027-01-01T00:00:00Z"),
        "{}",
        condition.message
    );
    assert_eq!(news.as_deref(), Some(condition.message.as_str()));
    // The next pass finds the same: not news again.
    let previous = status.clone();
    let again =
        record_certificate_expiry(&mut status, &previous, "db", Some(&near), Some(1), at(30));
    assert_eq!(again, None);
    // Renewed: False again; the TLS side removed: the condition goes.
    let news = record_certificate_expiry(&mut status, &previous, "db", Some(&[]), Some(1), at(40));
    assert_eq!(news, None);
    record_certificate_expiry(&mut status, &previous, "db", None, Some(1), at(50));
    assert!(find_condition(&status.conditions, CERTIFICATES_NEAR_EXPIRY).is_none());
}

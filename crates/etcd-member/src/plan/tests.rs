//! Planner tests: one case per rule and crash point, then a quorum-safety check across every
//! small cluster shape.

use etcd_api::{ReclaimPolicy, StorageSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::*;
use crate::fixtures::*;

fn plan(observed: &Observed) -> Action {
    next_action(observed, &Policy::default())
}

fn initial_cluster(ordinals: &[u32]) -> Vec<(String, String)> {
    ordinals
        .iter()
        .map(|&o| (name(o), main().peer_url(&name(o))))
        .collect()
}

fn refused_fields(action: Action) -> Vec<String> {
    match action {
        Action::Refuse(errors) => errors.into_iter().map(|e| e.to_string()).collect(),
        other => panic!("expected Refuse, got {other:?}"),
    }
}

// === spec ===

#[test]
fn invalid_spec_is_refused_and_nothing_happens() {
    let mut observed = cluster(9, "3.5");
    observed.spec.storage.size = Quantity("lots".into());
    assert_eq!(
        refused_fields(plan(&observed)),
        [
            "spec.size: 9 is outside 1..7",
            "spec.version: \"3.5\" is not a version of the form MAJOR.MINOR.PATCH (e.g. 3.6.16)",
            "spec.storage.size: \"lots\" is not a valid quantity",
        ]
    );
}

#[test]
fn paused_waits_even_when_work_is_due() {
    let mut observed = cluster(3, V35);
    observed.spec.paused = true;
    assert_eq!(plan(&observed), Action::Wait(WaitReason::Paused));
}

/// While an EtcdRestore holds the cluster nothing is done, not even what would otherwise be
/// due (a missing Pod of a member with data), and it wins over `paused`.
#[test]
fn a_running_restore_waits_even_when_work_is_due() {
    let mut observed = cluster(3, V35)
        .members(vec![healthy(0, V35, true), healthy(1, V35, false)])
        .pods(&[0])
        .pvcs(&[0, 1]);
    observed.restoring = Some("restore-1".into());
    observed.spec.paused = true;
    assert_eq!(
        plan(&observed),
        Action::Wait(WaitReason::Restoring {
            restore: "restore-1".into()
        })
    );
}

#[test]
fn shrinking_volumes_is_refused() {
    let mut observed = cluster(3, V35)
        .members(vec![healthy(0, V35, true)])
        .pods(&[0])
        .pvcs(&[0]);
    observed.member_storage = Some(StorageSpec {
        size: Quantity("8Gi".into()),
        ..StorageSpec::default()
    });
    observed.spec.storage.size = Quantity("4Gi".into());
    assert_eq!(
        refused_fields(plan(&observed)),
        ["spec.storage.size: cannot shrink member volumes from 8Gi to 4Gi"]
    );
}

// === bootstrap ===

#[test]
fn new_cluster_bootstraps_a_seed() {
    assert_eq!(
        plan(&cluster(3, V35)),
        Action::BootstrapSeed {
            member: name(0),
            version: v(V35)
        }
    );
}

#[test]
fn crash_after_seed_pvc_before_pod_bootstraps_again() {
    assert_eq!(
        plan(&cluster(3, V35).pvcs(&[0])),
        Action::BootstrapSeed {
            member: name(0),
            version: v(V35)
        }
    );
}

/// Issue 17 (defect 9): an EtcdCluster recreated under the name of one whose volumes were
/// retained finds them (same labels). A seed started on `main-0`'s old data ran it as a "new"
/// cluster and sat at SeedStarting forever. Refused, naming the volumes; nothing is touched.
#[test]
fn volumes_older_than_the_cluster_are_refused_not_bootstrapped_on() {
    let mut observed = cluster(3, V35).pvcs(&[0, 1, 2]);
    for pvc in observed.pvcs.values_mut() {
        pvc.predates_cluster = true;
    }
    let refused = refused_fields(plan(&observed));
    assert_eq!(refused.len(), 1);
    assert!(
        refused[0].starts_with(
            "metadata.name: PersistentVolumeClaims main-0, main-1, main-2 predate this EtcdCluster"
        ),
        "{refused:?}"
    );
    // Even with the seed's Pod already running on one (an operator before this fix started it).
    let observed = observed.pods(&[0]);
    assert!(matches!(plan(&observed), Action::Refuse(_)));
}

#[test]
fn seed_pod_not_answering_yet_waits() {
    assert_eq!(
        plan(&cluster(3, V35).pods(&[0]).pvcs(&[0])),
        Action::Wait(WaitReason::SeedStarting)
    );
}

#[test]
fn a_cluster_that_existed_is_never_bootstrapped_again() {
    // Everything deleted, but status recorded a cluster: bootstrapping would silently start an
    // empty cluster under the old name.
    let observed = cluster(3, V35).existed(&[0, 1, 2], V35);
    assert_eq!(plan(&observed), Action::Wait(WaitReason::ClusterLost));
}

// === growing ===

#[test]
fn seed_answers_then_a_learner_is_added() {
    let observed = cluster(3, V35)
        .members(vec![healthy(0, V35, true)])
        .pods(&[0])
        .pvcs(&[0]);
    assert_eq!(
        plan(&observed),
        Action::AddLearner {
            member: name(1),
            peer_url: "http://main-1.main.db.svc:2380".into()
        }
    );
}

#[test]
fn crash_after_member_add_creates_the_learners_pod() {
    let observed = cluster(3, V35)
        .members(vec![healthy(0, V35, true), unstarted_learner(1)])
        .pods(&[0])
        .pvcs(&[0]);
    assert_eq!(
        plan(&observed),
        Action::CreateMemberPod {
            member: name(1),
            initial_cluster: initial_cluster(&[0, 1]),
            version: v(V35),
            reason: PodReason::NewMember,
        }
    );
}

#[test]
fn learner_not_answering_yet_is_waited_for() {
    let observed = cluster(3, V35)
        .members(vec![healthy(0, V35, true), unstarted_learner(1)])
        .pods(&[0, 1])
        .pvcs(&[0, 1]);
    assert_eq!(
        plan(&observed),
        Action::Wait(WaitReason::LearnerCatchingUp { member: name(1) })
    );
}

/// etcd's publish race (etcd-io/etcd#16436): a learner that got the leader's snapshot can lose
/// its own "publish" proposal (it was inside that snapshot) and serve no client for the 7 s of
/// etcd's request timeout. Its metrics port says it follows the leader and applied all it knows
/// committed: it is promoted then (etcd refuses, "retry later", if it is not in sync after all).
#[test]
fn learner_caught_up_in_raft_but_not_serving_yet_is_promoted() {
    let caught_up =
        |mut observed: Observed, ordinal: u32, change: fn(&mut crate::state::PodState)| {
            change(observed.pods.get_mut(&name(ordinal)).unwrap());
            observed
        };
    let observed = caught_up(
        cluster(3, V35)
            .members(vec![healthy(0, V35, true), unstarted_learner(1)])
            .pods(&[0, 1])
            .pvcs(&[0, 1]),
        1,
        |pod| pod.raft_caught_up = true,
    );
    assert_eq!(
        plan(&observed),
        Action::PromoteLearner {
            member: name(1),
            id: 0xa1
        }
    );
    // Not while its Pod is being deleted: that member is going away.
    let going = caught_up(observed.clone(), 1, |pod| pod.terminating = true);
    assert_ne!(
        plan(&going),
        Action::PromoteLearner {
            member: name(1),
            id: 0xa1
        }
    );
    // Nor while a voter does not answer: promoting raises the quorum.
    let short = caught_up(
        cluster(5, V35)
            .members(vec![
                healthy(0, V35, true),
                healthy(2, V35, false),
                unhealthy(3, 1),
                unstarted_learner(1),
            ])
            .pods(&[0, 1, 2, 3])
            .pvcs(&[0, 1, 2, 3]),
        1,
        |pod| pod.raft_caught_up = true,
    );
    assert_eq!(
        plan(&short),
        Action::Wait(WaitReason::MemberUnhealthy { member: name(3) })
    );
}

/// Once promoted, that member is a voter that still serves no client until it publishes
/// itself: the planner waits for it as joining, not as an unreachable or unhealthy member.
#[test]
fn a_promoted_voter_not_published_yet_is_waited_for_as_joining() {
    let unpublished_voter = Member {
        learner: false,
        ..unstarted_learner(1)
    };
    let mut observed = cluster(3, V35)
        .members(vec![healthy(0, V35, true), unpublished_voter.clone()])
        .pods(&[0, 1])
        .pvcs(&[0, 1]);
    // Without its metrics: the operator reaches one of two voters.
    assert_eq!(
        plan(&observed),
        Action::Wait(WaitReason::MembersUnreachable {
            reachable: 1,
            voters: 2
        })
    );
    observed.pods.get_mut(&name(1)).unwrap().raft_caught_up = true;
    // Short of spec.size, the next learner is added meanwhile: a learner changes no quorum,
    // and its snapshot transfer overlaps the joining member's publish (etcd refuses, "retry
    // later", until it allows the change).
    assert_eq!(
        plan(&observed),
        Action::AddLearner {
            member: name(2),
            peer_url: main().peer_url(&name(2)),
        }
    );
    // At spec.size, or with a learner already: wait for it to serve.
    let mut at_size = observed.clone();
    at_size.spec.size = 2;
    assert_eq!(
        plan(&at_size),
        Action::Wait(WaitReason::MemberJoining { member: name(1) })
    );
    let mut with_learner = observed.clone();
    let Membership::Known(members) = &mut with_learner.membership else {
        unreachable!()
    };
    members.push(unstarted_learner(2));
    with_learner = with_learner.pods(&[2]).pvcs(&[2]);
    assert_eq!(
        plan(&with_learner),
        Action::Wait(WaitReason::MemberJoining { member: name(1) })
    );
    // Another voter down as well: not only joining members are silent.
    let mut three = cluster(5, V35)
        .members(vec![
            healthy(0, V35, true),
            unpublished_voter,
            healthy(2, V35, false),
            unhealthy(3, 1),
        ])
        .pods(&[0, 1, 2, 3])
        .pvcs(&[0, 1, 2, 3]);
    three.pods.get_mut(&name(1)).unwrap().raft_caught_up = true;
    assert_eq!(
        plan(&three),
        Action::Wait(WaitReason::MemberUnhealthy { member: name(3) })
    );
}

#[test]
fn learner_that_answers_is_promoted_before_anything_else_is_added() {
    let learner = Member {
        learner: true,
        ..healthy(1, V35, false)
    };
    let observed = cluster(5, V35)
        .members(vec![healthy(0, V35, true), learner])
        .pods(&[0, 1])
        .pvcs(&[0, 1]);
    assert_eq!(
        plan(&observed),
        Action::PromoteLearner {
            member: name(1),
            id: 0xa1
        }
    );
}

#[test]
fn full_size_and_healthy_is_converged() {
    let observed = cluster(3, V35)
        .members(vec![
            healthy(0, V35, true),
            healthy(1, V35, false),
            healthy(2, V35, false),
        ])
        .pods(&[0, 1, 2])
        .pvcs(&[0, 1, 2]);
    assert_eq!(plan(&observed), Action::Converged);
}

#[test]
fn members_added_by_hand_are_counted_but_never_given_a_pod() {
    let foreign = Member {
        name: "hand-made".into(),
        peer_url: "http://10.1.2.3:2380".into(),
        ..healthy(9, V35, false)
    };
    let observed = cluster(3, V35)
        .members(vec![healthy(0, V35, true), healthy(1, V35, false), foreign])
        .pods(&[0, 1])
        .pvcs(&[0, 1]);
    assert_eq!(plan(&observed), Action::Converged);
}

// === shrinking ===

#[test]
fn scale_down_removes_the_highest_follower_never_the_leader() {
    let members = vec![
        healthy(0, V35, false),
        healthy(1, V35, false),
        healthy(2, V35, false),
        healthy(3, V35, false),
        healthy(4, V35, true),
    ];
    let observed = cluster(3, V35)
        .members(members)
        .pods(&[0, 1, 2, 3, 4])
        .pvcs(&[0, 1, 2, 3, 4]);
    assert_eq!(
        plan(&observed),
        Action::RemoveMember {
            member: name(3),
            id: 0xa3,
            reason: RemovalReason::ScaleDown,
            quorum: quorum_checked(),
        }
    );
}

#[test]
fn crash_after_member_remove_deletes_the_pod() {
    let members = vec![
        healthy(0, V35, true),
        healthy(1, V35, false),
        healthy(2, V35, false),
    ];
    let observed = cluster(3, V35)
        .members(members)
        .pods(&[0, 1, 2, 3])
        .pvcs(&[0, 1, 2, 3]);
    assert_eq!(plan(&observed), Action::DeletePod { member: name(3) });
}

#[test]
fn removed_members_pod_still_terminating_is_waited_for() {
    let members = vec![
        healthy(0, V35, true),
        healthy(1, V35, false),
        healthy(2, V35, false),
    ];
    let mut observed = cluster(3, V35)
        .members(members)
        .pods(&[0, 1, 2, 3])
        .pvcs(&[0, 1, 2, 3]);
    observed.pods.get_mut(&name(3)).unwrap().terminating = true;
    assert_eq!(
        plan(&observed),
        Action::Wait(WaitReason::PodTerminating { member: name(3) })
    );
}

#[test]
fn released_pvcs_follow_the_reclaim_policy() {
    let members = vec![
        healthy(0, V35, true),
        healthy(1, V35, false),
        healthy(2, V35, false),
    ];
    let retain = cluster(3, V35)
        .members(members)
        .pods(&[0, 1, 2])
        .pvcs(&[0, 1, 2, 3]);
    assert_eq!(plan(&retain), Action::Converged, "Retain keeps the volume");

    let mut delete = retain.clone();
    delete.spec.storage.reclaim_policy = ReclaimPolicy::Delete;
    assert_eq!(plan(&delete), Action::DeletePvc { name: name(3) });

    let mut kept_by_restore = delete.clone();
    kept_by_restore
        .pvcs
        .get_mut(&name(3))
        .unwrap()
        .retained_by_restore = true;
    assert_eq!(plan(&kept_by_restore), Action::Converged);
}

// === dead members ===

#[test]
fn unhealthy_member_within_grace_is_waited_for() {
    let members = vec![
        healthy(0, V35, true),
        healthy(1, V35, false),
        unhealthy(2, 10),
    ];
    let observed = cluster(3, V35)
        .members(members)
        .pods(&[0, 1, 2])
        .pvcs(&[0, 1, 2]);
    assert_eq!(
        plan(&observed),
        Action::Wait(WaitReason::MemberUnhealthy { member: name(2) })
    );
}

#[test]
fn dead_member_is_removed_when_quorum_survives() {
    let members = vec![
        healthy(0, V35, true),
        healthy(1, V35, false),
        unhealthy(2, 600),
    ];
    let observed = cluster(3, V35)
        .members(members)
        .pods(&[0, 1, 2])
        .pvcs(&[0, 1, 2]);
    assert_eq!(
        plan(&observed),
        Action::RemoveMember {
            member: name(2),
            id: 0xa2,
            reason: RemovalReason::Dead,
            quorum: quorum_checked(),
        }
    );
}

#[test]
fn replacement_gets_a_new_ordinal_and_never_the_old_volume() {
    let members = vec![healthy(0, V35, true), healthy(1, V35, false)];
    let observed = cluster(3, V35)
        .members(members)
        .pods(&[0, 1])
        .pvcs(&[0, 1, 2]);
    assert_eq!(
        plan(&observed),
        Action::AddLearner {
            member: name(3),
            peer_url: main().peer_url(&name(3))
        }
    );
}

/// With a member list (etcd confirmed quorum) two of three members the operator cannot reach
/// are not quorum loss but the operator's own isolation: nothing is removed. (Two members really
/// dead means no linearizable read succeeds, so no member list: that is quorum loss, see
/// `no_member_answering_is_reported_and_nothing_is_touched`.)
#[test]
fn two_unreachable_of_three_are_waited_on_and_nothing_is_removed() {
    let members = vec![healthy(0, V35, false), unhealthy(1, 600), unhealthy(2, 600)];
    let observed = cluster(3, V35)
        .members(members)
        .pods(&[0, 1, 2])
        .pvcs(&[0, 1, 2]);
    assert_eq!(
        plan(&observed),
        Action::Wait(WaitReason::MembersUnreachable {
            reachable: 1,
            voters: 3
        })
    );
}

#[test]
fn dead_member_of_two_is_not_removed() {
    // The survivor holds 1 of 2 votes: etcd cannot commit the removal, and forcing a new
    // cluster from one member is a restore decision for the user, not a guess for the operator.
    let members = vec![healthy(0, V35, true), unhealthy(1, 600)];
    let observed = cluster(2, V35).members(members).pods(&[0, 1]).pvcs(&[0, 1]);
    assert_eq!(
        plan(&observed),
        Action::Wait(WaitReason::MembersUnreachable {
            reachable: 1,
            voters: 2
        })
    );
}

#[test]
fn deleted_pod_with_surviving_volume_restarts_as_the_same_member() {
    let members = vec![
        healthy(0, V35, true),
        unhealthy(1, 3),
        healthy(2, V35, false),
    ];
    let observed = cluster(3, V35)
        .members(members)
        .pods(&[0, 2])
        .pvcs(&[0, 1, 2]);
    assert_eq!(
        plan(&observed),
        Action::CreateMemberPod {
            member: name(1),
            initial_cluster: initial_cluster(&[0, 1, 2]),
            version: v(V35),
            reason: PodReason::Restart,
        }
    );
}

#[test]
fn deleted_pod_and_volume_is_replaced_without_waiting_for_the_grace_period() {
    // Its data is gone: it can never come back as the same member.
    let members = vec![
        healthy(0, V35, true),
        unhealthy(1, 3),
        healthy(2, V35, false),
    ];
    let observed = cluster(3, V35).members(members).pods(&[0, 2]).pvcs(&[0, 2]);
    assert_eq!(
        plan(&observed),
        Action::RemoveMember {
            member: name(1),
            id: 0xa1,
            reason: RemovalReason::Dead,
            quorum: quorum_checked(),
        }
    );
}

// === no member answers ===

#[test]
fn all_pods_gone_but_volumes_kept_restarts_the_members() {
    let observed = cluster(3, V35).existed(&[0, 1, 2], V34).pvcs(&[0, 1, 2]);
    assert_eq!(
        plan(&observed),
        Action::CreateMemberPod {
            member: name(0),
            initial_cluster: initial_cluster(&[0, 1, 2]),
            version: v(V34),
            reason: PodReason::Restart,
        },
        "restarted at the version they ran, not upgraded mid-outage"
    );
}

#[test]
fn no_member_answering_is_reported_and_nothing_is_touched() {
    let observed = cluster(3, V35)
        .existed(&[0, 1, 2], V35)
        .pods(&[0, 1, 2])
        .pvcs(&[0, 1, 2]);
    assert_eq!(
        plan(&observed),
        Action::Wait(WaitReason::QuorumLost {
            healthy: 0,
            voters: 0
        })
    );
}

/// Two members' Pods and volumes deleted while quorum is gone: their PVCs are still terminating
/// (pvc-protection waits for the Pods). No Pod is started on a volume being deleted: that would
/// keep data the user is deleting, and the cluster is reported lost instead.
#[test]
fn no_pod_is_started_on_a_volume_being_deleted() {
    let mut observed = cluster(3, V35)
        .existed(&[0, 1, 2], V35)
        .pods(&[0])
        .pvcs(&[0, 1, 2]);
    for member in [name(1), name(2)] {
        observed.pvcs.get_mut(&member).unwrap().terminating = true;
    }
    assert_eq!(plan(&observed), Action::Wait(WaitReason::ClusterLost));
}

#[test]
fn most_volumes_lost_needs_a_restore() {
    let observed = cluster(3, V35)
        .existed(&[0, 1, 2], V35)
        .pods(&[0])
        .pvcs(&[0]);
    assert_eq!(plan(&observed), Action::Wait(WaitReason::ClusterLost));
}

// === upgrades ===

fn on(version: &str, ordinals: &[u32], leader: u32) -> Vec<Member> {
    ordinals
        .iter()
        .map(|&o| healthy(o, version, o == leader))
        .collect()
}

#[test]
fn upgrade_takes_followers_first_by_ordinal() {
    let observed = cluster(3, V35)
        .members(on(V34, &[0, 1, 2], 0))
        .pods(&[0, 1, 2])
        .pvcs(&[0, 1, 2]);
    assert_eq!(
        plan(&observed),
        Action::UpgradeMember {
            member: name(1),
            from: v(V34),
            to: v(V35),
            quorum: quorum_checked(),
        }
    );
}

#[test]
fn upgrade_takes_the_leader_last() {
    let mut members = on(V35, &[1, 2], 9);
    members.insert(0, healthy(0, V34, true));
    let observed = cluster(3, V35)
        .members(members)
        .pods(&[0, 1, 2])
        .pvcs(&[0, 1, 2]);
    assert_eq!(
        plan(&observed),
        Action::UpgradeMember {
            member: name(0),
            from: v(V34),
            to: v(V35),
            quorum: quorum_checked(),
        }
    );
}

#[test]
fn upgraded_members_pod_comes_back_on_the_new_version() {
    let members = vec![
        healthy(0, V34, true),
        unhealthy(1, 1),
        healthy(2, V34, false),
    ];
    let observed = cluster(3, V35)
        .members(members)
        .pods(&[0, 2])
        .pvcs(&[0, 1, 2]);
    assert_eq!(
        plan(&observed),
        Action::CreateMemberPod {
            member: name(1),
            initial_cluster: initial_cluster(&[0, 1, 2]),
            version: v(V35),
            reason: PodReason::Restart,
        }
    );
}

#[test]
fn next_member_waits_until_the_upgraded_one_is_healthy() {
    let members = vec![
        healthy(0, V34, true),
        unhealthy(1, 1),
        healthy(2, V34, false),
    ];
    let observed = cluster(3, V35)
        .members(members)
        .pods(&[0, 1, 2])
        .pvcs(&[0, 1, 2]);
    assert_eq!(
        plan(&observed),
        Action::Wait(WaitReason::MemberUnhealthy { member: name(1) })
    );
}

#[test]
fn downgrade_and_skipped_minor_are_refused() {
    let at_35 = cluster(3, V34)
        .members(on(V35, &[0, 1, 2], 0))
        .pods(&[0, 1, 2])
        .pvcs(&[0, 1, 2]);
    assert_eq!(
        refused_fields(plan(&at_35)),
        ["spec.version: downgrade from 3.5.35 to 3.4.23 is not supported"]
    );
    let skip = cluster(3, "3.6.0")
        .members(on(V34, &[0, 1, 2], 0))
        .pods(&[0, 1, 2])
        .pvcs(&[0, 1, 2]);
    assert_eq!(
        refused_fields(plan(&skip)),
        [
            "spec.version: upgrade from 3.4.23 to 3.6.0 skips a minor version; upgrade to 3.5.x first"
        ]
    );
}

/// Every minor step of etcd's path, as a table: members' versions (leader first), etcd's
/// cluster version, the desired version → the one next action. Followers go first; a minor
/// starts only once the cluster version is the minor all members run; skips and downgrades are
/// refused with nothing touched.
#[test]
fn upgrade_path_table() {
    let upgrade = |ordinal, from: &str, to: &str| Action::UpgradeMember {
        member: name(ordinal),
        from: v(from),
        to: v(to),
        quorum: quorum_checked(),
    };
    let behind = |cv, needed| {
        Action::Wait(WaitReason::ClusterVersionBehind {
            cluster_version: cv,
            needed,
        })
    };
    let refuse = |message: &str| {
        Action::Refuse(vec![FieldError {
            field: "spec.version".into(),
            message: message.into(),
        }])
    };
    type Case<'a> = (&'a [&'a str], Option<(u64, u64)>, &'a str, Action);
    let cases: &[Case] = &[
        // 3.5 -> 3.6 with the cluster version at 3.5: the first follower goes.
        (&[V35, V35, V35], Some((3, 5)), V36, upgrade(1, V35, V36)),
        // Mid-roll: the cluster version stays 3.5 until every member runs 3.6.
        (&[V35, V36, V35], Some((3, 5)), V36, upgrade(2, V35, V36)),
        // The leader last.
        (&[V35, V36, V36], Some((3, 5)), V36, upgrade(0, V35, V36)),
        (&[V36, V36, V36], Some((3, 5)), V36, Action::Converged),
        // All on 3.5 after a 3.4 -> 3.5 roll, etcd still says 3.4: 3.6 waits.
        (
            &[V35, V35, V35],
            Some((3, 4)),
            V36,
            behind(Some((3, 4)), (3, 5)),
        ),
        (&[V35, V35, V35], None, V36, behind(None, (3, 5))),
        // 3.6 -> 3.7 likewise.
        (&[V36, V36, V36], Some((3, 6)), V37, upgrade(1, V36, V37)),
        (
            &[V36, V36, V36],
            Some((3, 5)),
            V37,
            behind(Some((3, 5)), (3, 6)),
        ),
        // A patch upgrade never waits for the cluster version.
        (
            &["3.5.3", "3.5.3", "3.5.3"],
            None,
            V35,
            upgrade(1, "3.5.3", V35),
        ),
        // Skips and downgrades: refused, nothing touched.
        (
            &[V35, V35, V35],
            Some((3, 5)),
            V37,
            refuse("upgrade from 3.5.35 to 3.7.3 skips a minor version; upgrade to 3.6.x first"),
        ),
        (
            &[V36, V35, V35],
            Some((3, 5)),
            V37,
            refuse("upgrade from 3.5.35 to 3.7.3 skips a minor version; upgrade to 3.6.x first"),
        ),
        (
            &[V36, V36, V36],
            Some((3, 6)),
            V35,
            refuse("downgrade from 3.6.16 to 3.5.35 is not supported"),
        ),
        (
            &[V37, V37, V37],
            Some((3, 7)),
            V36,
            refuse("downgrade from 3.7.3 to 3.6.16 is not supported"),
        ),
        // The known-bad 3.5.0-3.5.2 are refused as a target, whatever runs.
        (
            &[V35, V35, V35],
            Some((3, 5)),
            "3.5.2",
            refuse(
                "etcd 3.5.2 is refused: etcd 3.5.0-3.5.2 can lose data consistency when a member \
                 crashes under write load (etcd-io/etcd#13766, fixed in 3.5.3); use 3.5.3 or later \
                 (3.5.35 is tested)",
            ),
        ),
    ];
    for (versions, cluster_version, target, want) in cases {
        let members: Vec<Member> = versions
            .iter()
            .enumerate()
            .map(|(o, version)| healthy(o as u32, version, o == 0))
            .collect();
        let observed = cluster(3, target)
            .members(members)
            .cluster_version(*cluster_version)
            .pods(&[0, 1, 2])
            .pvcs(&[0, 1, 2])
            // The v2 snapshot before 3.6 has its own test below.
            .v2_wal_clean(&[0, 1, 2]);
        assert_eq!(
            &plan(&observed),
            want,
            "{versions:?} at {cluster_version:?} -> {target}"
        );
    }
}

#[test]
fn two_member_cluster_cannot_take_a_member_down_for_an_upgrade() {
    let observed = cluster(2, V35)
        .members(on(V34, &[0, 1], 0))
        .pods(&[0, 1])
        .pvcs(&[0, 1]);
    assert_eq!(
        plan(&observed),
        Action::Wait(WaitReason::WouldLoseQuorum {
            member: name(1),
            healthy: 2,
            voters: 2
        })
    );
}

#[test]
fn one_member_cluster_upgrades_with_a_short_outage() {
    let observed = cluster(1, V35)
        .members(on(V34, &[0], 0))
        .pods(&[0])
        .pvcs(&[0]);
    assert_eq!(
        plan(&observed),
        Action::UpgradeMember {
            member: name(0),
            from: v(V34),
            to: v(V35),
            quorum: quorum_checked(),
        }
    );
}

// === invariants across every small cluster ===

/// Every shape of up to 5 voters (each healthy, unhealthy within grace, or dead), every leader
/// position, every target size: no removal and no upgrade ever leaves fewer healthy voters than
/// a quorum of what remains, and nothing destructive happens once quorum is lost.
#[test]
fn no_action_ever_breaks_quorum() {
    let mut checked = 0;
    for voters in 1..=5u32 {
        for health in 0..3u32.pow(voters) {
            for leader in 0..voters {
                for size in 1..=5 {
                    let members: Vec<Member> = (0..voters)
                        .map(|o| match (health / 3u32.pow(o)) % 3 {
                            0 => healthy(o, V35, o == leader),
                            1 => unhealthy(o, 10),
                            _ => unhealthy(o, 600),
                        })
                        .collect();
                    let ordinals: Vec<u32> = (0..voters).collect();
                    let healthy_count = members.iter().filter(|m| m.healthy()).count();
                    let n = voters as usize;
                    let observed = cluster(size, V35)
                        .members(members)
                        .pods(&ordinals)
                        .pvcs(&ordinals);
                    match plan(&observed) {
                        Action::RemoveMember { reason, .. } => {
                            assert!(healthy_count >= quorum(n), "{observed:?}");
                            let removed_healthy = usize::from(reason == RemovalReason::ScaleDown);
                            assert!(
                                healthy_count - removed_healthy >= quorum(n - 1),
                                "{observed:?}"
                            );
                        }
                        Action::UpgradeMember { .. } => unreachable!("all at target version"),
                        Action::AddLearner { .. } | Action::PromoteLearner { .. } => {
                            assert_eq!(healthy_count, n, "grows only when healthy: {observed:?}");
                        }
                        Action::Wait(
                            WaitReason::QuorumLost { .. } | WaitReason::MembersUnreachable { .. },
                        ) => {
                            assert!(healthy_count < quorum(n));
                        }
                        _ => {}
                    }
                    checked += 1;
                }
            }
        }
    }
    assert!(checked > 1000);
}

#[test]
fn upgrades_never_break_quorum() {
    for voters in 1..=5u32 {
        for upgraded in 0..(1u32 << voters) {
            for leader in 0..voters {
                let members: Vec<Member> = (0..voters)
                    .map(|o| {
                        healthy(
                            o,
                            if upgraded & (1 << o) != 0 { V35 } else { V34 },
                            o == leader,
                        )
                    })
                    .collect();
                let ordinals: Vec<u32> = (0..voters).collect();
                let observed = cluster(voters as i32, V35)
                    .members(members)
                    .pods(&ordinals)
                    .pvcs(&ordinals);
                let n = voters as usize;
                match plan(&observed) {
                    Action::UpgradeMember { member, .. } => {
                        assert!(n == 1 || n.saturating_sub(1) >= quorum(n), "{observed:?}");
                        let is_leader = member == name(leader);
                        let follower_left =
                            (0..voters).any(|o| o != leader && upgraded & (1 << o) == 0);
                        assert!(
                            !(is_leader && follower_left),
                            "leader before a follower: {observed:?}"
                        );
                    }
                    Action::Converged => assert_eq!(upgraded, (1 << voters) - 1),
                    Action::Wait(WaitReason::WouldLoseQuorum { .. }) => assert_eq!(n, 2),
                    other => panic!("{other:?} for {observed:?}"),
                }
            }
        }
    }
}

// === issue 17: safety defects ===

/// A learner that never answers (its image does not pull, its node is gone) is removed once its
/// deadline passed: it holds no vote, so removing it never touches quorum, and without this every
/// later repair waited on it forever.
#[test]
fn a_learner_that_never_starts_is_removed_after_its_deadline() {
    let policy = Policy::default();
    let stuck_for = |seconds: u64| Member {
        health: MemberHealth::Unhealthy {
            unhealthy_for: Duration::from_secs(seconds),
        },
        ..unstarted_learner(2)
    };
    let observed = |learner: Member| {
        cluster(3, V35)
            .members(vec![healthy(0, V35, true), healthy(1, V35, false), learner])
            .pods(&[0, 1, 2])
            .pvcs(&[0, 1, 2])
    };
    let within = observed(stuck_for(policy.learner_deadline.as_secs() - 1));
    assert_eq!(
        next_action(&within, &policy),
        Action::Wait(WaitReason::LearnerCatchingUp { member: name(2) })
    );
    let past = observed(stuck_for(policy.learner_deadline.as_secs()));
    assert_eq!(
        next_action(&past, &policy),
        Action::RemoveMember {
            member: name(2),
            id: 0xa2,
            reason: RemovalReason::LearnerStuck,
            quorum: quorum_checked(),
        }
    );
}

/// A dead voter is replaced while a learner is still catching up: the learner must not block
/// the repair of the voters.
#[test]
fn a_dead_voter_is_removed_while_a_learner_catches_up() {
    let observed = cluster(3, V35)
        .members(vec![
            healthy(0, V35, true),
            healthy(1, V35, false),
            unhealthy(2, 600),
            Member {
                health: MemberHealth::Unhealthy {
                    unhealthy_for: Duration::from_secs(10),
                },
                ..unstarted_learner(3)
            },
        ])
        .pods(&[0, 1, 2, 3])
        .pvcs(&[0, 1, 2, 3]);
    assert_eq!(
        plan(&observed),
        Action::RemoveMember {
            member: name(2),
            id: 0xa2,
            reason: RemovalReason::Dead,
            quorum: quorum_checked(),
        }
    );
}

/// A learner is promoted only while every voter answers: promoting raises the quorum, and a
/// voter that is down (within its grace period) may be about to be replaced.
#[test]
fn promotion_waits_while_a_voter_is_unhealthy() {
    let learner = Member {
        learner: true,
        ..healthy(3, V35, false)
    };
    let observed = cluster(3, V35)
        .members(vec![
            healthy(0, V35, true),
            healthy(1, V35, false),
            unhealthy(2, 10),
            learner,
        ])
        .pods(&[0, 1, 2, 3])
        .pvcs(&[0, 1, 2, 3]);
    assert_eq!(
        plan(&observed),
        Action::Wait(WaitReason::MemberUnhealthy { member: name(2) })
    );
}

/// A member added by hand, as the observer really sees it: started (etcd knows its name), not
/// one of our names, no Pod or PVC of ours, and not answering at first. It is not "data lost":
/// it gets the grace period like any member, and is removed only past it.
#[test]
fn a_member_added_by_hand_gets_the_grace_period() {
    let foreign = |seconds: u64| Member {
        name: "hand-made".into(),
        peer_url: "http://10.1.2.3:2380".into(),
        client_url: Some("http://10.1.2.3:2379".into()),
        ..unhealthy(9, seconds)
    };
    let observed = |m: Member| {
        cluster(3, V35)
            .members(vec![healthy(0, V35, true), healthy(1, V35, false), m])
            .pods(&[0, 1])
            .pvcs(&[0, 1])
    };
    assert_eq!(
        plan(&observed(foreign(0))),
        Action::Wait(WaitReason::MemberUnhealthy {
            member: "hand-made".into()
        })
    );
    assert_eq!(
        plan(&observed(foreign(600))),
        Action::RemoveMember {
            member: "hand-made".into(),
            id: 0xa9,
            reason: RemovalReason::Dead,
            quorum: quorum_checked(),
        }
    );
}

/// Cluster `X-client`'s headless peer Service would be cluster X's client Service: refused.
#[test]
fn a_cluster_name_ending_in_client_is_refused() {
    let mut observed = cluster(3, V35);
    observed.cluster = ClusterName::new("db", "orders-client");
    let refused = refused_fields(plan(&observed));
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert!(refused[0].starts_with("metadata.name"), "{refused:?}");
}

/// Issue 17: the quorum invariants again, over the shapes the observer really produces with
/// learners, foreign members, missing and terminating Pods and missing PVCs: up to 3 voters
/// (healthy, unhealthy within grace, dead) each with its Pod and PVC (both, Pod gone, Pod
/// terminating, both gone; a member without its Pod does not answer), a learner (none, not
/// started, past its deadline, answering with its Pod), a member added by hand (none, not
/// answering, answering), every target size from 1 to 4.
#[test]
fn no_action_breaks_quorum_with_learners_foreign_members_and_missing_objects() {
    let policy = Policy::default();
    let mut checked = 0;
    for voters in 1..=3u32 {
        for health in 0..3u32.pow(voters) {
            for objects in 0..4u32.pow(voters) {
                for learner_state in 0..4u32 {
                    for foreign_state in 0..3u32 {
                        for size in 1..=4 {
                            let mut observed = cluster(size, V35);
                            let mut members = Vec::new();
                            let mut pvc_kept = Vec::new();
                            for o in 0..voters {
                                let objects = (objects / 4u32.pow(o)) % 4;
                                let health = (health / 3u32.pow(o)) % 3;
                                // 0: Pod and PVC; 1: Pod gone; 2: Pod terminating; 3: both gone.
                                if objects == 0 || objects == 2 {
                                    observed = observed.pods(&[o]);
                                }
                                if objects == 2 {
                                    observed = observed.terminating(o);
                                }
                                if objects != 3 {
                                    observed = observed.pvcs(&[o]);
                                    pvc_kept.push(name(o));
                                }
                                let answers = health == 0 && objects != 1 && objects != 3;
                                members.push(match (answers, health) {
                                    (true, _) => healthy(o, V35, o == 0),
                                    (false, 2) => unhealthy(o, 600),
                                    (false, _) => unhealthy(o, 10),
                                });
                            }
                            let l = voters;
                            match learner_state {
                                1 => members.push(unstarted_learner(l)),
                                2 => members.push(Member {
                                    health: MemberHealth::Unhealthy {
                                        unhealthy_for: policy.learner_deadline,
                                    },
                                    ..unstarted_learner(l)
                                }),
                                3 => {
                                    members.push(learner(l, true));
                                    observed = observed.pods(&[l]).pvcs(&[l]);
                                }
                                _ => {}
                            }
                            if foreign_state > 0 {
                                let base = if foreign_state == 2 {
                                    healthy(9, V35, false)
                                } else {
                                    unhealthy(9, 10)
                                };
                                members.push(Member {
                                    name: "hand-made".into(),
                                    peer_url: "http://10.1.2.3:2380".into(),
                                    client_url: Some("http://10.1.2.3:2379".into()),
                                    ..base
                                });
                            }
                            let voter_list: Vec<&Member> =
                                members.iter().filter(|m| !m.learner).collect();
                            let n = voter_list.len();
                            let healthy_count = voter_list.iter().filter(|m| m.healthy()).count();
                            let all_voters_healthy = healthy_count == n;
                            let has_learner = members.iter().any(|m| m.learner);
                            let observed = observed.members(members.clone());
                            let action = next_action(&observed, &policy);
                            let why = || format!("{action:?} for {observed:?}");
                            match &action {
                                Action::RemoveMember { reason, id, .. } => {
                                    assert!(healthy_count >= quorum(n), "{}", why());
                                    let removed = members.iter().find(|m| m.id == *id).unwrap();
                                    match reason {
                                        RemovalReason::LearnerStuck => {
                                            assert!(
                                                removed.learner && !removed.healthy(),
                                                "{}",
                                                why()
                                            )
                                        }
                                        RemovalReason::Dead => {
                                            assert!(
                                                !removed.learner && !removed.healthy(),
                                                "{}",
                                                why()
                                            )
                                        }
                                        RemovalReason::ScaleDown => {
                                            assert!(healthy_count > quorum(n - 1), "{}", why())
                                        }
                                    }
                                }
                                Action::PromoteLearner { .. } => {
                                    assert!(all_voters_healthy, "{}", why())
                                }
                                Action::AddLearner { .. } => {
                                    assert!(all_voters_healthy && !has_learner, "{}", why())
                                }
                                Action::CreateMemberPod {
                                    member,
                                    reason: PodReason::Restart,
                                    ..
                                } => assert!(pvc_kept.contains(member), "{}", why()),
                                Action::DeletePod { member } => assert!(
                                    !members
                                        .iter()
                                        .any(|m| m.member_name(&main()).as_deref() == Some(member)),
                                    "{}",
                                    why()
                                ),
                                Action::DeletePvc { .. } | Action::UpgradeMember { .. } => {
                                    assert!(healthy_count >= quorum(n), "{}", why())
                                }
                                Action::Wait(
                                    WaitReason::QuorumLost { .. }
                                    | WaitReason::MembersUnreachable { .. },
                                ) => assert!(healthy_count < quorum(n), "{}", why()),
                                _ => {}
                            }
                            checked += 1;
                        }
                    }
                }
            }
        }
    }
    assert!(checked > 10_000, "{checked}");
}

// === issue 17, defect 5: "unhealthy" is never the operator's reachability alone ===

/// The member list is only known after a linearizable read succeeded through a member: etcd
/// confirmed quorum. An operator that then reaches only a minority of the voters is cut off
/// from them; it must not call that quorum loss (which tells the user to restore) nor act.
#[test]
fn an_operator_reaching_a_minority_does_not_report_quorum_loss() {
    let observed = cluster(3, V35)
        .members(vec![
            healthy(0, V35, true),
            unhealthy(1, 600),
            unhealthy(2, 600),
        ])
        .pods(&[0, 1, 2])
        .pvcs(&[0, 1, 2]);
    assert_eq!(
        plan(&observed),
        Action::Wait(WaitReason::MembersUnreachable {
            reachable: 1,
            voters: 3
        })
    );
}

/// A member the operator cannot reach, past the grace period, whose Pod the kubelet reports
/// Ready (its own /health probe passes: it has a leader and serves reads) is not dead: the
/// operator's view alone never removes a member. With its Pod not Ready, both observers agree.
#[test]
fn an_unreachable_member_whose_pod_is_ready_is_not_removed() {
    let members = vec![
        healthy(0, V35, true),
        healthy(1, V35, false),
        unhealthy(2, 600),
    ];
    let observed = cluster(3, V35)
        .members(members)
        .pods(&[0, 1, 2])
        .pvcs(&[0, 1, 2]);
    assert_eq!(
        plan(&observed.clone().ready(&[0, 1, 2])),
        Action::Wait(WaitReason::MemberUnhealthy { member: name(2) })
    );
    assert_eq!(
        plan(&observed.ready(&[0, 1])),
        Action::RemoveMember {
            member: name(2),
            id: 0xa2,
            reason: RemovalReason::Dead,
            quorum: quorum_checked(),
        }
    );
}

/// etcd 3.6 panics replaying v2 requests etcd 3.4 left in the WAL (`detected disallowed v2 WAL`,
/// seen here: a cluster born on 3.4, whose `/health` probes are v2 reads through raft, upgraded
/// to 3.5 then 3.6 crash-looped its first 3.6 member). Before a member moves from 3.5 to 3.6 it
/// runs once on 3.5 with `--snapshot-count=1` until it saved a v2 snapshot (etcd's 3.5 → 3.6
/// upgrade guide); the PVC records each step, so a restart of the operator resumes it.
#[test]
fn a_member_takes_a_v2_snapshot_on_3_5_before_it_moves_to_3_6() {
    let base = || {
        cluster(3, V36)
            .members(on(V35, &[0, 1, 2], 0))
            .cluster_version(Some((3, 5)))
            .pods(&[0, 1, 2])
            .pvcs(&[0, 1, 2])
    };
    // 1. Not marked clean: restart the first follower on 3.5 for the snapshot.
    assert_eq!(
        plan(&base()),
        Action::SnapshotBeforeUpgrade {
            member: name(1),
            version: v(V35),
            quorum: quorum_checked(),
        }
    );
    // 2. Its PVC names 3.5, its Pod is gone: the Pod comes back on 3.5, on its data.
    let mut observed = base();
    observed
        .pvcs
        .get_mut(&name(1))
        .unwrap()
        .snapshot_before_upgrade = Some(v(V35));
    observed.pods.remove(&name(1));
    let Membership::Known(members) = &mut observed.membership else {
        unreachable!()
    };
    members[1] = unhealthy(1, 1);
    assert_eq!(
        plan(&observed),
        Action::CreateMemberPod {
            member: name(1),
            initial_cluster: initial_cluster(&[0, 1, 2]),
            version: v(V35),
            reason: PodReason::SnapshotBeforeUpgrade,
        }
    );
    // A crash between the PVC's annotation and the Pod's deletion: the old Pod is deleted again.
    let mut observed = base();
    observed
        .pvcs
        .get_mut(&name(1))
        .unwrap()
        .snapshot_before_upgrade = Some(v(V35));
    assert_eq!(
        plan(&observed),
        Action::SnapshotBeforeUpgrade {
            member: name(1),
            version: v(V35),
            quorum: quorum_checked(),
        }
    );
    // 3. Up on 3.5 with --snapshot-count=1: wait for the snapshot, then mark the PVC.
    let pod = observed.pods.get_mut(&name(1)).unwrap();
    pod.snapshot_before_upgrade = true;
    assert_eq!(
        plan(&observed),
        Action::Wait(WaitReason::V2SnapshotPending { member: name(1) })
    );
    observed.pods.get_mut(&name(1)).unwrap().v2_snapshot_saved = true;
    assert_eq!(plan(&observed), Action::MarkV2WalClean { member: name(1) });
    // 4. Marked clean: the upgrade itself.
    let pvc = observed.pvcs.get_mut(&name(1)).unwrap();
    pvc.snapshot_before_upgrade = None;
    pvc.v2_wal_clean = true;
    assert_eq!(
        plan(&observed),
        Action::UpgradeMember {
            member: name(1),
            from: v(V35),
            to: v(V36),
            quorum: quorum_checked(),
        }
    );
    // Taking the member down for the snapshot keeps quorum as an upgrade does.
    let Membership::Known(all) = &base().membership else {
        unreachable!()
    };
    let degraded = cluster(3, V36)
        .members(vec![all[0].clone(), all[1].clone(), unhealthy(2, 1)])
        .cluster_version(Some((3, 5)))
        .pods(&[0, 1, 2])
        .pvcs(&[0, 1, 2]);
    assert!(
        !matches!(plan(&degraded), Action::SnapshotBeforeUpgrade { .. }),
        "{:?}",
        plan(&degraded)
    );
    // Other minors have no v2 WAL to clean: 3.4 -> 3.5 and 3.6 -> 3.7 upgrade at once.
    let observed = cluster(3, V35)
        .members(on(V34, &[0, 1, 2], 0))
        .pods(&[0, 1, 2])
        .pvcs(&[0, 1, 2]);
    assert!(matches!(plan(&observed), Action::UpgradeMember { .. }));
    let observed = cluster(3, V37)
        .members(on(V36, &[0, 1, 2], 0))
        .pods(&[0, 1, 2])
        .pvcs(&[0, 1, 2]);
    assert!(matches!(plan(&observed), Action::UpgradeMember { .. }));
}

// === switch from plaintext to TLS (tls_switch.rs, through the whole planner) ===

/// A running plaintext cluster of three (member 2 leads) whose spec now asks for TLS on both
/// sides; its Pods listen on `listen`, member `i`'s peer URL is https:// when `urls[i]`.
fn switching(listen: [tls_switch::Listeners; 3], urls: [bool; 3]) -> Observed {
    use etcd_api::{ClientTls, PeerTls, TlsSpec};
    let mut observed = cluster(3, V35)
        .members(vec![
            healthy(0, V35, false),
            healthy(1, V35, false),
            healthy(2, V35, true),
        ])
        .pods(&[0, 1, 2])
        .ready(&[0, 1, 2])
        .pvcs(&[0, 1, 2]);
    observed.spec.tls = Some(TlsSpec {
        peer: Some(PeerTls::default()),
        client: Some(ClientTls::default()),
    });
    observed.cluster = main().with_tls(true, true);
    if let Membership::Known(members) = &mut observed.membership {
        for (i, m) in members.iter_mut().enumerate() {
            if urls[i] {
                m.peer_url = main().switched_peer_url(&m.name);
            }
        }
    }
    for (i, pod) in observed.pods.values_mut().enumerate() {
        pod.listen = Some(listen[i]);
    }
    observed
}

const PLAIN_L: tls_switch::Listeners = tls_switch::Listeners {
    peer: tls_switch::Listen::Http,
    client: tls_switch::Listen::Http,
};
const DUAL_L: tls_switch::Listeners = tls_switch::Listeners {
    peer: tls_switch::Listen::Dual,
    client: tls_switch::Listen::Dual,
};

#[test]
fn setting_tls_on_a_plaintext_cluster_rolls_a_follower_to_dual_listeners_first() {
    let observed = switching([PLAIN_L; 3], [false; 3]);
    match plan(&observed) {
        Action::RollForTls {
            member,
            from,
            to,
            done,
            voters,
            ..
        } => {
            assert_eq!((member.as_str(), from, to), ("main-0", PLAIN_L, DUAL_L));
            assert_eq!((done, voters), (0, 3));
        }
        other => panic!("expected RollForTls, got {other:?}"),
    }
    // A Pod re-created now listens on both.
    assert_eq!(pod_listeners(&observed), DUAL_L);
}

#[test]
fn once_every_member_listens_on_both_a_peer_url_moves_to_https_2382() {
    let observed = switching([DUAL_L; 3], [false; 3]);
    match plan(&observed) {
        Action::UpdatePeerUrl {
            member,
            id,
            peer_url,
            revert,
            ..
        } => {
            assert_eq!(member, "main-0");
            assert_eq!(id, 0xa0);
            assert_eq!(peer_url, "https://main-0.main.db.svc:2382");
            assert!(!revert);
        }
        other => panic!("expected UpdatePeerUrl, got {other:?}"),
    }
}

#[test]
fn a_member_not_up_on_tls_is_reverted_before_the_planner_would_wait_or_replace_it() {
    let mut observed = switching([DUAL_L; 3], [true, false, false]);
    if let Membership::Known(members) = &mut observed.membership {
        members[0].health = MemberHealth::Unhealthy {
            unhealthy_for: Duration::from_secs(20),
        };
    }
    assert_eq!(
        plan(&observed),
        Action::Wait(WaitReason::TlsSwitch(
            tls_switch::SwitchWait::SettlingOnTls("main-0".into())
        ))
    );
    if let Membership::Known(members) = &mut observed.membership {
        members[0].health = MemberHealth::Unhealthy {
            unhealthy_for: tls_switch::REVERT_AFTER,
        };
    }
    match plan(&observed) {
        Action::UpdatePeerUrl {
            member,
            peer_url,
            revert,
            ..
        } => {
            assert_eq!(member, "main-0");
            assert_eq!(peer_url, "http://main-0.main.db.svc:2380");
            assert!(revert);
        }
        other => panic!("expected the revert, got {other:?}"),
    }
}

/// `observed` with the member `main-0` removed from etcd as dead, its Pod and PVC gone: what
/// the planner sees the pass after it replaced a dead member's removal.
fn without_main_0(mut observed: Observed) -> Observed {
    if let Membership::Known(members) = &mut observed.membership {
        members.retain(|m| m.name != "main-0");
    }
    observed.pods.remove("main-0");
    observed.pvcs.remove("main-0");
    observed
}

/// The replacement's AddLearner (its name, its peer URL), or a panic naming what came instead.
fn replacement_of(observed: &Observed) -> (String, String) {
    match plan(observed) {
        Action::AddLearner { member, peer_url } => (member, peer_url),
        other => panic!("expected the replacement's AddLearner, got {other:?}"),
    }
}

/// Found by the fault suite (`cluster.pod_mark_tls_reverted:before:member_cut`): a member
/// removed as dead mid-switch left two voters, and every further step of the switch waited
/// on the quorum gate (`WouldLoseQuorum`, 2 healthy of 2) forever, before scale-up could
/// replace it. The replacement comes first, on a peer URL its stage's listeners serve.
#[test]
fn a_member_removed_mid_switch_is_replaced_before_the_switch_goes_on() {
    // Round 1 (every Pod on both listeners, URLs still http://): the replacement joins on
    // http://…:2380, which its dual-listening Pod serves; the switch moves its URL later.
    let observed = without_main_0(switching([DUAL_L; 3], [false; 3]));
    assert_eq!(
        replacement_of(&observed),
        ("main-3".into(), "http://main-3.main.db.svc:2380".into())
    );
    assert_eq!(pod_listeners(&observed), DUAL_L);
    // Some URLs moved, one still http://: the same.
    let observed = without_main_0(switching([DUAL_L; 3], [false, true, false]));
    assert_eq!(
        replacement_of(&observed),
        ("main-3".into(), "http://main-3.main.db.svc:2380".into())
    );
    // Every remaining URL moved: its Pod listens on https:// only, on its URL's port 2382.
    let observed = without_main_0(switching([DUAL_L; 3], [false, true, true]));
    assert_eq!(
        replacement_of(&observed),
        ("main-3".into(), "https://main-3.main.db.svc:2382".into())
    );
    assert_eq!(pod_listeners(&observed).peer, tls_switch::Listen::Https);
}

/// The replacement's Pod starts with its own entry of `--initial-cluster` as etcd holds it
/// (the URL its MemberAdd gave it), not the spec's URL: etcd refuses to join on a mismatch.
/// Found by the fault suite's rerun of `cluster.pod_mark_tls_reverted:before:member_cut`
/// once the replacement came first: the new member's etcd restarted in a loop.
#[test]
fn a_replacement_joining_mid_switch_starts_on_the_peer_url_etcd_holds_for_it() {
    let mut observed = without_main_0(switching([DUAL_L; 3], [false, true, false]));
    let (member, peer_url) = replacement_of(&observed);
    if let Membership::Known(members) = &mut observed.membership {
        members.push(Member {
            peer_url: peer_url.clone(),
            ..unstarted_learner(3)
        });
    }
    observed = observed.pvcs(&[3]);
    match plan(&observed) {
        Action::CreateMemberPod {
            member: created,
            initial_cluster,
            ..
        } => {
            assert_eq!(created, member);
            let own: Vec<_> = initial_cluster
                .iter()
                .filter(|(n, _)| *n == member)
                .collect();
            assert_eq!(own, [&(member.clone(), peer_url)], "{initial_cluster:?}");
        }
        other => panic!("expected the replacement's Pod, got {other:?}"),
    }
}

/// A member just moved to its https:// URL and not answering yet is waited for (then reverted,
/// as without a replacement due): with one of two voters down nothing could be committed
/// anyway, not the replacement's MemberAdd either.
#[test]
fn a_member_settling_on_its_new_url_is_waited_for_while_a_replacement_is_due() {
    let mut observed = without_main_0(switching([DUAL_L; 3], [false, true, false]));
    if let Membership::Known(members) = &mut observed.membership {
        let settling = members.iter_mut().find(|m| m.name == "main-1").unwrap();
        settling.health = MemberHealth::Unhealthy {
            unhealthy_for: Duration::from_secs(20),
        };
    }
    assert_eq!(
        plan(&observed),
        Action::Wait(WaitReason::TlsSwitch(
            tls_switch::SwitchWait::SettlingOnTls("main-1".into())
        ))
    );
}

#[test]
fn a_member_replaced_after_the_switch_joins_on_the_switched_port() {
    let mut done = without_main_0(switching([DROPPED_L; 3], [true; 3]));
    done.drop_plaintext_clients = true;
    assert_eq!(
        replacement_of(&done),
        ("main-3".into(), "https://main-3.main.db.svc:2382".into())
    );
    assert_eq!(pod_listeners(&done), DROPPED_L);
    // A cluster created with TLS: https:// on 2380, as its members.
    let born = born_with_tls();
    assert_eq!(
        replacement_of(&without_main_0(born)),
        ("main-3".into(), "https://main-3.main.db.svc:2380".into())
    );
}

/// `spec.tls` removed mid-switch or after it (the API server refuses that; an object written
/// past it, e.g. with an older CRD): refused, nothing rolled back to plain HTTP, which would
/// cut the member off from peers dialling its https:// URL.
#[test]
fn spec_tls_removed_while_members_use_tls_is_refused_not_rolled_back() {
    let https_only = tls_switch::Listeners {
        peer: tls_switch::Listen::Https,
        client: tls_switch::Listen::Dual,
    };
    for (listen, urls) in [
        ([DUAL_L; 3], [true, false, false]),
        ([DUAL_L; 3], [false; 3]),
        ([https_only; 3], [true; 3]),
    ] {
        let mut observed = switching(listen, urls);
        observed.spec.tls = None;
        observed.cluster = main();
        match plan(&observed) {
            Action::Refuse(errors) => {
                assert_eq!(errors[0].field, "spec.tls", "{errors:?}");
                assert!(errors[0].message.contains("main-0"), "{errors:?}");
            }
            other => panic!("{listen:?} {urls:?}: expected a refusal, got {other:?}"),
        }
    }
    // A plaintext cluster without spec.tls is just that.
    let mut plain = switching([PLAIN_L; 3], [false; 3]);
    plain.spec.tls = None;
    plain.cluster = main();
    assert_eq!(plan(&plain), Action::Converged);
}

#[test]
fn members_mid_switch_are_ours_their_pods_are_never_deleted() {
    // http:// and https://…:2382 peer URLs side by side: every Pod belongs to a member.
    let observed = switching([DUAL_L; 3], [true, false, false]);
    let action = plan(&observed);
    assert!(
        !matches!(
            action,
            Action::DeletePod { .. } | Action::RemoveMember { .. }
        ),
        "{action:?}"
    );
    assert_eq!(
        action,
        Action::UpdatePeerUrl {
            member: "main-1".into(),
            id: 0xa1,
            peer_url: "https://main-1.main.db.svc:2382".into(),
            revert: false,
            // main-0 is through this round (listens on both, https:// URL).
            done: 1,
            voters: 3,
            quorum: quorum_gate(Disruption::TakeDownHealthyVoter, 3, 3).unwrap(),
        }
    );
}

#[test]
fn clusters_not_switching_plan_as_before() {
    // A plaintext cluster, and Pods without readable flags: nothing to switch.
    let plain = cluster(3, V35)
        .members(vec![
            healthy(0, V35, false),
            healthy(1, V35, false),
            healthy(2, V35, true),
        ])
        .pods(&[0, 1, 2])
        .ready(&[0, 1, 2])
        .pvcs(&[0, 1, 2]);
    assert_eq!(plan(&plain), Action::Converged);
    assert_eq!(pod_listeners(&plain), PLAIN_L);
}

const DROPPED_L: tls_switch::Listeners = tls_switch::Listeners {
    peer: tls_switch::Listen::Https,
    client: tls_switch::Listen::HttpsWithSwitchPort,
};

/// What a member Pod of a cluster created with TLS listens on.
const TLS_L: tls_switch::Listeners = tls_switch::Listeners {
    peer: tls_switch::Listen::Https,
    client: tls_switch::Listen::Https,
};

/// A cluster of three created with TLS on both sides (its URLs https://, on 2380 and 2379).
fn born_with_tls() -> Observed {
    let mut born = switching([TLS_L; 3], [false; 3]);
    if let Membership::Known(members) = &mut born.membership {
        for m in members.iter_mut() {
            m.peer_url = main().with_tls(true, true).peer_url(&m.name);
            m.client_url = Some(main().with_tls(true, true).client_url(&m.name));
        }
    }
    born
}

#[test]
fn the_client_service_publishes_2378_only_for_a_cluster_switched_from_plaintext() {
    // Mid-switch (members serve both schemes) and after the drop: 2378 is served.
    assert!(serves_switch_client_port(&switching(
        [DUAL_L; 3],
        [true; 3]
    )));
    let mut dropped = switching([DROPPED_L; 3], [true; 3]);
    dropped.drop_plaintext_clients = true;
    assert!(serves_switch_client_port(&dropped));
    assert_eq!(plan(&dropped), Action::Converged);
    assert_eq!(pod_listeners(&dropped), DROPPED_L);
    // Without a member list, a Pod re-created keeps 2378 too.
    dropped.membership = Membership::Unknown;
    assert_eq!(pod_listeners(&dropped), DROPPED_L);
    // A plaintext switch about to start: the first Pod rolled listens on 2378.
    assert!(serves_switch_client_port(&switching(
        [PLAIN_L; 3],
        [false; 3]
    )));

    // Created with TLS: nothing listens on 2378, even with the annotation set.
    let mut born = born_with_tls();
    born.drop_plaintext_clients = true;
    assert!(!serves_switch_client_port(&born));
    assert_eq!(plan(&born), Action::Converged);
    assert_eq!(pod_listeners(&born), TLS_L);
    born.membership = Membership::Unknown;
    assert_eq!(pod_listeners(&born), TLS_L);
    // A plaintext cluster.
    let plain = cluster(3, V35)
        .members(vec![healthy(0, V35, true)])
        .pods(&[0])
        .ready(&[0])
        .pvcs(&[0]);
    assert!(!serves_switch_client_port(&plain));
}

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;

fn snapshot() -> Snapshot {
    Snapshot {
        connection: etcd_api::S3Connection {
            bucket: "b".into(),
            ..Default::default()
        },
        key: "k".into(),
        sha256: Some("ab".repeat(32)),
        revision: Some(40),
        etcd_version: None,
    }
}

/// A 3-member cluster that lost quorum: Pods and PVCs main-0..2 exist.
fn lost_cluster() -> ClusterState {
    ClusterState {
        held_by: None,
        quorum: Quorum::Lost,
        size: 3,
        available_at_size: false,
        seed_is_member: false,
        next_ordinal: 3,
        old_pods: (0..3).map(|i| (format!("main-{i}"), false)).collect(),
        old_pvcs: (0..3).map(|i| (format!("main-{i}"), false)).collect(),
        old_pods_serve_switch_port: false,
    }
}

fn fresh() -> Observed {
    Observed {
        progress: Progress::default(),
        force: false,
        can_create_cluster: false,
        name: "r1".into(),
        cluster_name: "main".into(),
        source: Ok(snapshot()),
        credentials: Ok(()),
        cluster: Some(lost_cluster()),
        seed: SeedState::default(),
        deleting: false,
        finalizer: true,
        retained_volumes: Vec::new(),
        deadline: Deadline {
            timeout_seconds: 600,
            passed: false,
        },
    }
}

/// Started and held, nothing of the seed yet.
fn started() -> Observed {
    let mut o = fresh();
    o.progress.seed_member = Some("main-3".into());
    o.cluster.as_mut().unwrap().held_by = Some("r1".into());
    o
}

fn seed_pod() -> SeedPod {
    SeedPod::default()
}

/// A seed Pod whose readiness gate is open (as after [`Step::AdmitSeed`], or one the cluster
/// operator recreated without the gate).
fn admitted_seed_pod() -> SeedPod {
    SeedPod {
        admitted: true,
        ..SeedPod::default()
    }
}

fn reason(step: Step) -> &'static str {
    match step {
        Step::Fail(refusal) => refusal.reason,
        other => panic!("expected a failure, got {other:?}"),
    }
}

#[test]
fn refusals_before_anything_is_touched() {
    let mut o = fresh();
    o.source = Err(Refusal::new("BackupNotFound", "EtcdBackup b1 not found"));
    assert_eq!(reason(next_step(&o)), "BackupNotFound");

    let mut o = fresh();
    o.credentials = Err(Refusal::new("SecretNotFound", "Secret s3 not found"));
    assert_eq!(reason(next_step(&o)), "SecretNotFound");

    let mut o = fresh();
    o.cluster = None;
    assert_eq!(reason(next_step(&o)), reasons::CLUSTER_NOT_FOUND);

    let mut o = fresh();
    o.cluster.as_mut().unwrap().quorum = Quorum::Held;
    let Step::Fail(refusal) = next_step(&o) else {
        panic!()
    };
    assert_eq!(refusal.reason, reasons::QUORUM_HELD);
    assert!(
        refusal.message.contains("spec.force"),
        "{}",
        refusal.message
    );

    let mut o = fresh();
    o.cluster.as_mut().unwrap().held_by = Some("other".into());
    assert_eq!(reason(next_step(&o)), reasons::RESTORE_IN_PROGRESS);
}

#[test]
fn start_names_the_seed_above_every_ordinal_in_use() {
    assert_eq!(
        next_step(&fresh()),
        Step::Start {
            seed_member: "main-3".into()
        }
    );
    // force overrides a held quorum.
    let mut o = fresh();
    o.force = true;
    o.cluster.as_mut().unwrap().quorum = Quorum::Held;
    assert!(matches!(next_step(&o), Step::Start { .. }));
    // force also overrides a quorum that is not known.
    o.cluster.as_mut().unwrap().quorum = Quorum::default();
    assert!(matches!(next_step(&o), Step::Start { .. }));
    // A new cluster starts at ordinal 0, and is created (held) right after the start.
    let mut o = fresh();
    o.cluster = None;
    o.can_create_cluster = true;
    assert_eq!(
        next_step(&o),
        Step::Start {
            seed_member: "main-0".into()
        }
    );
    o.progress.seed_member = Some("main-0".into());
    assert_eq!(next_step(&o), Step::CreateCluster);
}

#[test]
fn the_seed_pvc_needs_no_quorum_check() {
    // Creating the seed's PVC starts nothing: it is not a point of no return.
    let mut o = started();
    o.cluster.as_mut().unwrap().quorum = Quorum::Held;
    assert_eq!(next_step(&o), Step::CreateSeedPvc);
}

#[test]
fn hold_before_the_seed_and_never_take_another_restores_hold() {
    let mut o = started();
    o.cluster.as_mut().unwrap().held_by = None;
    assert_eq!(next_step(&o), Step::Hold);
    o.cluster.as_mut().unwrap().held_by = Some("r0".into());
    assert_eq!(reason(next_step(&o)), reasons::RESTORE_IN_PROGRESS);
}

#[test]
fn without_force_old_members_stay_until_the_seed_answers() {
    let mut o = started();
    assert_eq!(next_step(&o), Step::CreateSeedPvc);
    o.seed.pvc = true;
    assert_eq!(next_step(&o), Step::CreateSeedPod);
    o.seed.pod = Some(seed_pod());
    assert_eq!(
        next_step(&o),
        Step::Wait(Waiting::SeedStarting { detail: None })
    );
    // The seed answers: its revision is recorded first (the init container's report wins).
    o.seed.pod.as_mut().unwrap().prepared_revision = Some(40);
    o.seed.serving_revision = Some(41);
    assert_eq!(next_step(&o), Step::RecordSeed { revision: 40 });
    o.progress.restored_revision = Some(40);
    // Then every old PVC is retained before any old Pod is deleted.
    for i in 0..3 {
        assert_eq!(
            next_step(&o),
            Step::RetainPvc {
                name: format!("main-{i}")
            }
        );
        o.cluster
            .as_mut()
            .unwrap()
            .old_pvcs
            .insert(format!("main-{i}"), true);
    }
    assert_eq!(
        next_step(&o),
        Step::DeleteOldPod {
            name: "main-0".into()
        }
    );
    for i in 0..3 {
        o.cluster
            .as_mut()
            .unwrap()
            .old_pods
            .insert(format!("main-{i}"), true);
    }
    assert_eq!(
        next_step(&o),
        Step::Wait(Waiting::OldPodTerminating("main-0".into()))
    );
    o.cluster.as_mut().unwrap().old_pods.clear();
    assert_eq!(next_step(&o), Step::HandOver);
}

#[test]
fn with_force_old_members_go_before_the_seed() {
    let mut o = started();
    o.force = true;
    assert_eq!(
        next_step(&o),
        Step::RetainPvc {
            name: "main-0".into()
        }
    );
    let cluster = o.cluster.as_mut().unwrap();
    cluster.old_pvcs.values_mut().for_each(|r| *r = true);
    assert_eq!(
        next_step(&o),
        Step::DeleteOldPod {
            name: "main-0".into()
        }
    );
    o.cluster.as_mut().unwrap().old_pods.clear();
    assert_eq!(next_step(&o), Step::CreateSeedPvc);
}

#[test]
fn a_final_init_failure_fails_and_a_transient_one_waits() {
    let mut o = started();
    o.seed.pvc = true;
    o.seed.pod = Some(SeedPod {
        init_failure: Some(InitFailure {
            reason: "S3Unavailable".into(),
            message: "connection refused".into(),
            permanent: false,
        }),
        ..seed_pod()
    });
    let Step::Wait(Waiting::SeedStarting {
        detail: Some(detail),
    }) = next_step(&o)
    else {
        panic!("{:?}", next_step(&o))
    };
    assert!(detail.contains("S3Unavailable"), "{detail}");

    o.seed.pod.as_mut().unwrap().init_failure = Some(InitFailure {
        reason: "ChecksumMismatch".into(),
        message: "the recorded SHA-256 is ab…".into(),
        permanent: true,
    });
    let Step::Fail(refusal) = next_step(&o) else {
        panic!()
    };
    assert_eq!(refusal.reason, "ChecksumMismatch");
    assert!(refusal.message.contains("main-3"), "{}", refusal.message);
}

#[test]
fn after_a_failure_the_seed_that_never_ran_is_removed_then_the_hold_released() {
    let mut o = started();
    o.progress.finished = Some(Outcome::Failing);
    o.seed.pvc = true;
    o.seed.pod = Some(seed_pod());
    assert_eq!(next_step(&o), Step::DeleteSeedPod);
    o.seed.pod.as_mut().unwrap().terminating = true;
    assert_eq!(next_step(&o), Step::Wait(Waiting::SeedTerminating));
    o.seed.pod = None;
    assert_eq!(next_step(&o), Step::DeleteSeedPvc);
    o.seed.pvc = false;
    assert_eq!(next_step(&o), Step::Release);
    o.cluster.as_mut().unwrap().held_by = None;
    // Only now, with the cluster released, is the phase Failed.
    assert_eq!(next_step(&o), Step::MarkFailed);
    o.progress.finished = Some(Outcome::Failed);
    assert_eq!(next_step(&o), Step::Done);
    // The old members were never touched on the way.
    assert_eq!(
        o.cluster.unwrap(),
        ClusterState {
            held_by: None,
            ..lost_cluster()
        }
    );
}

#[test]
fn a_seed_that_served_is_never_removed_after_a_failure() {
    // Handed over (and so admitted to the client Service): it may hold acknowledged writes.
    let mut o = started();
    o.progress.finished = Some(Outcome::Failing);
    o.progress.restored_revision = Some(40);
    o.progress.handed_over = true;
    o.seed.pvc = true;
    o.seed.pod = Some(admitted_seed_pod());
    assert_eq!(next_step(&o), Step::Release);
    // Refused before the start: nothing was ever created; the phase follows at once.
    let mut o = fresh();
    o.progress.finished = Some(Outcome::Failing);
    assert_eq!(next_step(&o), Step::MarkFailed);
    o.progress.finished = Some(Outcome::Failed);
    assert_eq!(next_step(&o), Step::Done);
}

#[test]
fn hand_over_is_recorded_then_released_then_success_waits_for_full_size() {
    let mut o = started();
    o.seed.pvc = true;
    o.seed.pod = Some(seed_pod());
    o.seed.serving_revision = Some(40);
    o.progress.restored_revision = Some(40);
    o.progress.handed_over = true;
    let cluster = o.cluster.as_mut().unwrap();
    cluster.old_pods.clear();
    // After recording HandedOver the seed is admitted to the client Service, then released.
    assert_eq!(next_step(&o), Step::AdmitSeed);
    o.seed.pod.as_mut().unwrap().admitted = true;
    assert_eq!(next_step(&o), Step::Release);
    o.cluster.as_mut().unwrap().held_by = None;
    assert_eq!(next_step(&o), Step::Wait(Waiting::GrowingBack));
    let cluster = o.cluster.as_mut().unwrap();
    cluster.available_at_size = true;
    assert_eq!(
        next_step(&o),
        Step::Wait(Waiting::GrowingBack),
        "Available, but without the seed it is not the restored cluster"
    );
    o.cluster.as_mut().unwrap().seed_is_member = true;
    o.seed.serving_revision = Some(39);
    assert_eq!(next_step(&o), Step::Wait(Waiting::GrowingBack));
    o.seed.serving_revision = Some(45);
    assert_eq!(next_step(&o), Step::Succeed);
    o.progress.finished = Some(Outcome::Succeeded);
    assert_eq!(next_step(&o), Step::Done);
}

#[test]
fn a_cluster_deleted_mid_restore_fails_it() {
    let mut o = started();
    o.cluster = None;
    assert_eq!(reason(next_step(&o)), reasons::CLUSTER_DELETED);
    o.progress.handed_over = true;
    assert_eq!(reason(next_step(&o)), reasons::CLUSTER_DELETED);
}

#[test]
fn a_source_gone_before_the_seed_pod_fails_cleanly() {
    let mut o = started();
    o.seed.pvc = true;
    o.source = Err(Refusal::new("BackupNotFound", "EtcdBackup b1 not found"));
    assert_eq!(reason(next_step(&o)), "BackupNotFound");
    // Once the seed Pod exists, the source is no longer needed.
    o.seed.pod = Some(seed_pod());
    assert!(matches!(next_step(&o), Step::Wait(_)));
}

/// Every reachable state of a restore that lost quorum walks to `HandOver` without deleting
/// an old Pod before its PVC is retained, and (without force) before the seed answered.
#[test]
fn old_pods_are_deleted_only_after_their_pvcs_are_retained() {
    for force in [false, true] {
        let mut o = started();
        o.force = force;
        let mut steps = 0;
        loop {
            steps += 1;
            assert!(steps < 50, "no progress");
            match next_step(&o) {
                Step::RetainPvc { name } => {
                    o.cluster.as_mut().unwrap().old_pvcs.insert(name, true);
                }
                Step::DeleteOldPod { name } => {
                    let cluster = o.cluster.as_ref().unwrap();
                    assert!(cluster.old_pvcs.values().all(|r| *r));
                    assert!(force || o.progress.restored_revision.is_some());
                    o.cluster.as_mut().unwrap().old_pods.remove(&name);
                }
                Step::CreateSeedPvc => o.seed.pvc = true,
                Step::CreateSeedPod => o.seed.pod = Some(seed_pod()),
                Step::Wait(Waiting::SeedStarting { .. }) => o.seed.serving_revision = Some(40),
                Step::RecordSeed { revision } => o.progress.restored_revision = Some(revision),
                Step::HandOver => break,
                other => panic!("unexpected {other:?}"),
            }
        }
        assert!(o.cluster.unwrap().old_pods.is_empty());
    }
}

// === issue 17, defect 12: deleting a restore mid-flight releases the hold ===

/// A restore in progress takes its finalizer before anything else, so that a deletion can
/// still release the hold.
#[test]
fn a_restore_in_progress_takes_its_finalizer_first() {
    let mut o = fresh();
    o.finalizer = false;
    assert_eq!(next_step(&o), Step::AddFinalizer);
}

/// Deleted mid-flight: cleaned up like a failure (a seed that never ran goes, the hold is
/// released), then the finalizer is removed; the cluster is never left held.
#[test]
fn a_restore_deleted_mid_flight_releases_the_hold_then_its_finalizer() {
    let mut o = started();
    o.deleting = true;
    assert_eq!(next_step(&o), Step::Release);
    o.cluster.as_mut().unwrap().held_by = None;
    assert_eq!(next_step(&o), Step::RemoveFinalizer);
    o.finalizer = false;
    assert_eq!(next_step(&o), Step::Done);
    // A seed that never ran is removed first.
    let mut o = started();
    o.deleting = true;
    o.seed.pvc = true;
    assert_eq!(next_step(&o), Step::DeleteSeedPvc);
}

// === issue 17, defect 4: a restore must never serve two clusters at once ===

/// An old member the operator cannot reach, but that the kubelet reports Ready, may be serving:
/// "unreachable" is not "no quorum". The restore waits and says why; it neither starts nor
/// fails.
#[test]
fn an_unknown_quorum_is_not_a_lost_one() {
    let mut o = fresh();
    let detail = "main-1: unreachable from the operator but Ready per the kubelet";
    o.cluster.as_mut().unwrap().quorum = Quorum::Unknown(detail.into());
    assert_eq!(
        next_step(&o),
        Step::Wait(Waiting::QuorumUnknown(detail.into()))
    );
}

/// Quorum is checked again right before the seed Pod starts: old members that came back since
/// the start stop the restore (the seed's PVC, a copy of the snapshot, is removed and the
/// cluster released); an unknown quorum waits.
#[test]
fn quorum_is_checked_again_before_the_seed_starts() {
    let mut o = started();
    o.seed.pvc = true;
    o.cluster.as_mut().unwrap().quorum = Quorum::Unknown("main-0: unreachable".into());
    assert!(
        matches!(next_step(&o), Step::Wait(Waiting::QuorumUnknown(_))),
        "{:?}",
        next_step(&o)
    );
    o.cluster.as_mut().unwrap().quorum = Quorum::Held;
    assert_eq!(reason(next_step(&o)), reasons::QUORUM_REGAINED);
    o.progress.finished = Some(Outcome::Failing);
    assert_eq!(next_step(&o), Step::DeleteSeedPvc);
}

/// Quorum is checked again before every old Pod's deletion: a seed that served only the
/// restore (never admitted to clients) is removed when the old members are back.
#[test]
fn quorum_is_checked_again_before_each_old_pod_is_deleted() {
    let mut o = started();
    o.seed.pvc = true;
    o.seed.pod = Some(seed_pod());
    o.seed.serving_revision = Some(40);
    o.progress.restored_revision = Some(40);
    let cluster = o.cluster.as_mut().unwrap();
    cluster.old_pvcs.values_mut().for_each(|r| *r = true);
    // One old Pod is already going; two more would follow.
    cluster.old_pods.insert("main-0".into(), true);
    cluster.quorum = Quorum::Held;
    assert_eq!(reason(next_step(&o)), reasons::QUORUM_REGAINED);
    o.cluster.as_mut().unwrap().quorum = Quorum::Unknown("main-1: unreachable".into());
    assert!(matches!(
        next_step(&o),
        Step::Wait(Waiting::QuorumUnknown(_))
    ));
    // Failed: the seed (never admitted) goes, then its PVC, then the hold.
    o.progress.finished = Some(Outcome::Failing);
    assert_eq!(next_step(&o), Step::DeleteSeedPod);
    o.seed.pod = None;
    assert_eq!(next_step(&o), Step::DeleteSeedPvc);
    o.seed.pvc = false;
    assert_eq!(next_step(&o), Step::Release);
    // Only terminating old Pods left: nothing more is deleted, no new check is needed.
    let mut o = started();
    o.seed.pvc = true;
    o.seed.pod = Some(seed_pod());
    o.seed.serving_revision = Some(40);
    o.progress.restored_revision = Some(40);
    let cluster = o.cluster.as_mut().unwrap();
    cluster.old_pvcs.values_mut().for_each(|r| *r = true);
    cluster.old_pods.values_mut().for_each(|t| *t = true);
    cluster.quorum = Quorum::default();
    assert_eq!(
        next_step(&o),
        Step::Wait(Waiting::OldPodTerminating("main-0".into()))
    );
}

/// Every path of a restore without force: the seed is admitted to the client Service only
/// after every old Pod is gone and the hand-over recorded, and no old Pod is deleted or seed
/// started unless quorum was proven lost at that very step.
#[test]
fn the_client_service_never_selects_the_seed_and_old_members_together() {
    for force in [false, true] {
        let mut o = started();
        o.force = force;
        let mut steps = 0;
        loop {
            steps += 1;
            assert!(steps < 60, "no progress");
            let step = next_step(&o);
            if matches!(step, Step::CreateSeedPod | Step::DeleteOldPod { .. }) {
                assert!(
                    force || o.cluster.as_ref().unwrap().quorum == Quorum::Lost,
                    "{step:?}"
                );
            }
            match step {
                Step::RetainPvc { name } => {
                    o.cluster.as_mut().unwrap().old_pvcs.insert(name, true);
                }
                Step::DeleteOldPod { name } => {
                    o.cluster.as_mut().unwrap().old_pods.remove(&name);
                }
                Step::CreateSeedPvc => o.seed.pvc = true,
                Step::CreateSeedPod => o.seed.pod = Some(seed_pod()),
                Step::Wait(Waiting::SeedStarting { .. }) => o.seed.serving_revision = Some(40),
                Step::RecordSeed { revision } => o.progress.restored_revision = Some(revision),
                Step::HandOver => o.progress.handed_over = true,
                Step::AdmitSeed => {
                    assert!(o.cluster.as_ref().unwrap().old_pods.is_empty());
                    assert!(o.progress.handed_over);
                    o.seed.pod.as_mut().unwrap().admitted = true;
                }
                Step::Release => break,
                other => panic!("unexpected {other:?}"),
            }
        }
        assert!(o.seed.pod.unwrap().admitted);
    }
}

// === issue 17, defect 9: volumes retained from an earlier cluster of the same name ===

/// A restore with `clusterSpec` into a name whose volumes were retained refuses before
/// anything is created, naming them.
#[test]
fn a_new_cluster_over_retained_volumes_is_refused() {
    let mut o = fresh();
    o.cluster = None;
    o.can_create_cluster = true;
    o.retained_volumes = vec!["main-0".into(), "main-1".into()];
    let Step::Fail(refusal) = next_step(&o) else {
        panic!("{:?}", next_step(&o))
    };
    assert_eq!(refusal.reason, reasons::RETAINED_VOLUMES);
    assert!(
        refusal.message.contains("main-0, main-1"),
        "{}",
        refusal.message
    );
}

/// A volume with the seed's name that this restore did not build (it appeared after the start,
/// or an operator before this fix chose the name) is never taken for a prepared seed ("already
/// prepared" served the old data), and the clean-up never deletes it.
#[test]
fn a_seed_volume_this_restore_did_not_build_is_refused_and_kept() {
    let mut o = started();
    o.seed.foreign_pvc = true;
    assert_eq!(reason(next_step(&o)), reasons::RETAINED_VOLUMES);
    o.progress.finished = Some(Outcome::Failing);
    assert_eq!(next_step(&o), Step::Release);
}

/// Issue 17 (defect 16): a restore waiting on something that never comes has a deadline
/// (`spec.timeoutSeconds`). Before the hand-over the seed never served clients, so timing out
/// cleans up as any failure does: the seed goes, the hold is released.
#[test]
fn a_restore_stuck_before_the_hand_over_times_out_and_cleans_up() {
    // The seed never starts (its image cannot be pulled).
    let mut o = started();
    o.seed.pvc = true;
    o.seed.pod = Some(SeedPod {
        waiting: Some("ImagePullBackOff".into()),
        ..seed_pod()
    });
    assert!(matches!(
        next_step(&o),
        Step::Wait(Waiting::SeedStarting { .. })
    ));
    o.deadline.passed = true;
    let Step::Fail(refusal) = next_step(&o) else {
        panic!("expected a failure, got {:?}", next_step(&o));
    };
    assert_eq!(refusal.reason, reasons::TIMED_OUT);
    assert!(
        refusal.message.contains("ImagePullBackOff") && refusal.message.contains("600"),
        "the message names what it waited on and the timeout: {}",
        refusal.message
    );
    // Then the clean-up any failure gets: the seed that never served goes, the hold is released.
    o.progress.finished = Some(Outcome::Failing);
    assert_eq!(next_step(&o), Step::DeleteSeedPod);
    o.seed.pod = None;
    assert_eq!(next_step(&o), Step::DeleteSeedPvc);
    o.seed.pvc = false;
    assert_eq!(next_step(&o), Step::Release);

    // An old member Pod that never finishes terminating.
    let mut o = started();
    o.seed.pvc = true;
    o.seed.pod = Some(seed_pod());
    o.seed.serving_revision = Some(40);
    o.progress.restored_revision = Some(40);
    let cluster = o.cluster.as_mut().unwrap();
    cluster
        .old_pvcs
        .values_mut()
        .for_each(|retained| *retained = true);
    cluster.old_pods = [("main-0".to_owned(), true)].into();
    assert_eq!(
        next_step(&o),
        Step::Wait(Waiting::OldPodTerminating("main-0".into()))
    );
    o.deadline.passed = true;
    assert_eq!(reason(next_step(&o)), reasons::TIMED_OUT);

    // A quorum neither confirmed nor proven lost, before anything was started.
    let mut o = fresh();
    o.cluster.as_mut().unwrap().quorum = Quorum::Unknown("main-1 unreached, Ready".into());
    o.deadline.passed = true;
    assert_eq!(reason(next_step(&o)), reasons::TIMED_OUT);
}

/// After the hand-over the seed serves clients: a deadline fails the restore but deletes
/// nothing and never interrupts the admission and release of the seed.
#[test]
fn a_restore_that_handed_over_times_out_without_deleting_anything() {
    let mut o = started();
    o.seed.pvc = true;
    o.seed.pod = Some(seed_pod());
    o.seed.serving_revision = Some(40);
    o.progress.restored_revision = Some(40);
    o.progress.handed_over = true;
    o.cluster.as_mut().unwrap().old_pods.clear();
    o.deadline.passed = true;
    assert_eq!(
        next_step(&o),
        Step::AdmitSeed,
        "a deadline ends waits, not steps"
    );
    o.seed.pod.as_mut().unwrap().admitted = true;
    assert_eq!(next_step(&o), Step::Release);
    o.cluster.as_mut().unwrap().held_by = None;
    assert_eq!(reason(next_step(&o)), reasons::GROW_BACK_TIMED_OUT);
    o.progress.finished = Some(Outcome::Failing);
    assert_eq!(next_step(&o), Step::MarkFailed, "nothing is deleted");
}

/// A deadline ends only a restore in progress: one that finished, or is being deleted, goes on
/// as before.
#[test]
fn a_deadline_does_not_touch_a_finished_or_deleted_restore() {
    let mut o = started();
    o.deadline.passed = true;
    o.progress.finished = Some(Outcome::Succeeded);
    assert_eq!(next_step(&o), Step::Done);
    let mut o = started();
    o.deadline.passed = true;
    o.seed.pvc = true;
    o.seed.pod = Some(SeedPod {
        terminating: true,
        ..seed_pod()
    });
    o.progress.finished = Some(Outcome::Failing);
    assert_eq!(next_step(&o), Step::Wait(Waiting::SeedTerminating));
    o.progress.finished = None;
    o.deleting = true;
    assert_eq!(next_step(&o), Step::Wait(Waiting::SeedTerminating));
}

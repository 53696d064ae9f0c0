//! The EtcdRestore's status and events from the planned step (pure). Steps that only record
//! progress (start, seed revision, hand-over, outcome) are nothing but this status write, so each
//! is one write that either happened or did not.

use etcd_api::condition::{ConditionStatus, ConditionUpdate, set_condition};
use etcd_api::{EtcdRestoreStatus, RestorePhase};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::plan::{Observed, Step, Waiting};

/// Condition types of an EtcdRestore.
pub mod conditions {
    /// True once finished, successfully or not (the phase says which).
    pub const COMPLETE: &str = etcd_api::condition::types::COMPLETE;
    /// True once Failed, with the reason.
    pub const FAILED: &str = etcd_api::condition::types::FAILED;
    /// True once the seed member answered with the restored data.
    pub const SEED_READY: &str = "SeedReady";
    /// True once the cluster was handed back to the cluster operator.
    pub const HANDED_OVER: &str = "HandedOver";
}

/// The status after `step` (computed before the step's own I/O: a step that is a status write is
/// exactly this).
pub fn next_status(
    previous: &EtcdRestoreStatus,
    step: &Step,
    observed: &Observed,
    now: &Time,
) -> EtcdRestoreStatus {
    let mut status = previous.clone();
    let set = |status: &mut EtcdRestoreStatus, type_, value: bool, reason: &str, message: &str| {
        let update = ConditionUpdate::new(type_, ConditionStatus::from(value), reason, message);
        set_condition(&mut status.conditions, update, None, now);
    };
    match step {
        // The failure is recorded at once; the phase follows once what the restore started is
        // removed and the cluster released (MarkFailed).
        Step::Fail(refusal) => {
            status.step = Some("Failed".to_owned());
            status.reason = Some(refusal.reason.to_owned());
            status.message = Some(refusal.message.clone());
            set(
                &mut status,
                conditions::FAILED,
                true,
                refusal.reason,
                &refusal.message,
            );
        }
        Step::MarkFailed => {
            status.step = Some("Failed".to_owned());
            status.phase = Some(RestorePhase::Failed);
            status.completion_time = Some(now.clone());
            let reason = status.reason.clone().unwrap_or_else(|| "Failed".to_owned());
            set(
                &mut status,
                conditions::COMPLETE,
                true,
                &reason,
                "the restore failed; the cluster is as the cluster operator had it",
            );
        }
        Step::Start { seed_member } => {
            status.step = Some("PreparingSeed".to_owned());
            status.phase = Some(RestorePhase::Running);
            status.start_time = Some(now.clone());
            status.seed_member = Some(seed_member.clone());
            status.reason = None;
            let from = observed
                .source
                .as_ref()
                .map(|s| s.uri())
                .unwrap_or_default();
            status.message = Some(format!("building seed member {seed_member} from {from}"));
        }
        Step::RecordSeed { revision } => {
            status.step = Some("SeedServing".to_owned());
            status.restored_revision = Some(*revision);
            let message = format!(
                "seed member {} serves the snapshot at revision {revision}",
                status.seed_member.clone().unwrap_or_default()
            );
            set(
                &mut status,
                conditions::SEED_READY,
                true,
                "SeedServing",
                &message,
            );
            status.message = Some(message);
        }
        Step::HandOver => {
            status.step = Some("GrowingBack".to_owned());
            let message = "the cluster operator adopted the seed and grows the cluster back";
            set(
                &mut status,
                conditions::HANDED_OVER,
                true,
                "HandedOver",
                message,
            );
            status.message = Some(message.to_owned());
        }
        Step::Succeed => {
            status.step = Some("Succeeded".to_owned());
            status.phase = Some(RestorePhase::Succeeded);
            status.reason = Some("Succeeded".to_owned());
            status.completion_time = Some(now.clone());
            let message = format!(
                "the cluster is Available at full size and serves revision {} or later",
                status.restored_revision.unwrap_or_default()
            );
            set(
                &mut status,
                conditions::COMPLETE,
                true,
                "Succeeded",
                &message,
            );
            status.message = Some(message);
        }
        // Before the start too: a restore that waits on an unknown quorum says so.
        Step::Wait(waiting @ Waiting::QuorumUnknown(_)) => {
            status.reason = Some("QuorumUnknown".to_owned());
            status.step = Some(waiting_step(waiting).to_owned());
            status.message = Some(waiting_message(waiting, observed));
        }
        Step::Wait(waiting) if status.phase == Some(RestorePhase::Running) => {
            if status.reason.as_deref() == Some("QuorumUnknown") {
                status.reason = None;
            }
            status.step = Some(waiting_step(waiting).to_owned());
            status.message = Some(waiting_message(waiting, observed));
        }
        _ => {}
    }
    status
}

/// `status.step` while waiting (PascalCase, for the printer column).
fn waiting_step(waiting: &Waiting) -> &'static str {
    match waiting {
        Waiting::OldPodTerminating(_) => "StoppingOldMembers",
        Waiting::SeedTerminating => "RemovingSeed",
        Waiting::SeedStarting { .. } => "PreparingSeed",
        Waiting::QuorumUnknown(_) => "WaitingForQuorumVerdict",
        Waiting::GrowingBack => "GrowingBack",
    }
}

fn waiting_message(waiting: &Waiting, observed: &Observed) -> String {
    let seed = observed.progress.seed_member.clone().unwrap_or_default();
    match waiting {
        Waiting::OldPodTerminating(pod) => format!("waiting for old member Pod {pod} to stop"),
        Waiting::SeedTerminating => format!("removing seed Pod {seed}"),
        Waiting::SeedStarting { detail: None } => {
            format!("seed member {seed}: preparing its data from the snapshot, then starting etcd")
        }
        Waiting::SeedStarting {
            detail: Some(detail),
        } => format!("seed member {seed}: {detail}"),
        Waiting::QuorumUnknown(detail) => format!(
            "waiting: the old members' quorum is neither confirmed nor proven lost, and an \
             unreachable member may still serve ({detail}); the restore goes on once every old \
             member is down (no leader, or its Pod not Ready or gone), and stops if they have \
             quorum (spec.force overrides)"
        ),
        Waiting::GrowingBack => {
            let size = observed.cluster.as_ref().map_or(0, |c| c.size);
            format!("the cluster operator grows the cluster back to {size} members")
        }
    }
}

/// The event a step deserves: (warning, reason, note). Waits and cleanup go unannounced.
pub fn event_for(step: &Step, observed: &Observed) -> Option<(bool, &'static str, String)> {
    let seed = observed.progress.seed_member.clone().unwrap_or_default();
    let cluster = &observed.cluster_name;
    Some(match step {
        Step::Fail(refusal) => (
            true,
            "RestoreFailed",
            format!("{}: {}", refusal.reason, refusal.message),
        ),
        Step::Start { seed_member } => (
            false,
            "RestoreStarted",
            format!(
                "rebuilding EtcdCluster {cluster} from {} with seed member {seed_member}",
                observed
                    .source
                    .as_ref()
                    .map(|s| s.uri())
                    .unwrap_or_default()
            ),
        ),
        Step::CreateCluster => (
            false,
            "ClusterCreated",
            format!("created EtcdCluster {cluster} from spec.clusterSpec"),
        ),
        Step::Hold => (
            false,
            "ClusterHeld",
            format!(
                "the cluster operator takes no action on {cluster} until the restore hands it back"
            ),
        ),
        Step::RetainPvc { name } => (
            false,
            "VolumeRetained",
            format!("old member volume {name} is kept (labelled retained-by-restore)"),
        ),
        Step::DeleteOldPod { name } => (
            false,
            "OldMemberStopped",
            format!("deleted old member Pod {name}; its volume is kept"),
        ),
        Step::CreateSeedPod => (
            false,
            "SeedCreated",
            format!("seed member {seed} prepares its data from the snapshot"),
        ),
        Step::RecordSeed { revision } => (
            false,
            "SeedReady",
            format!("seed member {seed} serves the snapshot at revision {revision}"),
        ),
        Step::HandOver => (
            false,
            "HandedOver",
            format!("handed {cluster} back to the cluster operator with seed member {seed}"),
        ),
        Step::AdmitSeed => (
            false,
            "SeedAdmitted",
            format!(
                "every old member Pod is gone: seed member {seed} may now be selected by the \
                 client Service"
            ),
        ),
        Step::Wait(Waiting::QuorumUnknown(detail)) => (
            true,
            "QuorumUnknown",
            format!("not restoring while an old member may still serve: {detail}"),
        ),
        Step::Succeed => (
            false,
            "RestoreSucceeded",
            format!("{cluster} is Available at full size"),
        ),
        Step::DeleteSeedPod => (
            false,
            "SeedRemoved",
            format!("removed seed member {seed}, which never served"),
        ),
        Step::Release if observed.deleting => (
            true,
            "HoldReleased",
            format!(
                "the EtcdRestore was deleted before it finished: released {cluster}, the \
                 cluster operator acts on it again"
            ),
        ),
        Step::Done
        | Step::AddFinalizer
        | Step::RemoveFinalizer
        | Step::MarkFailed
        | Step::CreateSeedPvc
        | Step::Release
        | Step::DeleteSeedPvc
        | Step::Wait(_) => {
            return None;
        }
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use etcd_api::condition::{find_condition, is_condition_true};

    use super::*;
    use crate::plan::{Progress, Refusal, SeedState, Snapshot};

    fn observed() -> Observed {
        Observed {
            progress: Progress {
                seed_member: Some("main-3".into()),
                ..Progress::default()
            },
            force: false,
            can_create_cluster: false,
            name: "r1".into(),
            deleting: false,
            finalizer: true,
            retained_volumes: Vec::new(),
            deadline: Default::default(),
            cluster_name: "main".into(),
            source: Ok(Snapshot {
                connection: etcd_api::S3Connection {
                    bucket: "b".into(),
                    ..Default::default()
                },
                key: "k.db".into(),
                sha256: None,
                revision: None,
                etcd_version: None,
            }),
            credentials: Ok(()),
            cluster: None,
            seed: SeedState::default(),
        }
    }

    fn now() -> Time {
        Time(jiff::Timestamp::from_second(1_800_000_000).unwrap())
    }

    #[test]
    fn a_restore_walks_from_start_to_success() {
        let o = observed();
        let s = next_status(
            &EtcdRestoreStatus::default(),
            &Step::Start {
                seed_member: "main-3".into(),
            },
            &o,
            &now(),
        );
        assert_eq!(s.phase, Some(RestorePhase::Running));
        assert_eq!(s.seed_member.as_deref(), Some("main-3"));
        assert_eq!(s.step.as_deref(), Some("PreparingSeed"));
        let waiting = next_status(
            &s,
            &Step::Wait(Waiting::OldPodTerminating("main-0".into())),
            &o,
            &now(),
        );
        assert_eq!(waiting.step.as_deref(), Some("StoppingOldMembers"));
        assert!(s.message.as_deref().unwrap().contains("s3://b/k.db"));
        let s = next_status(&s, &Step::RecordSeed { revision: 40 }, &o, &now());
        assert_eq!(s.restored_revision, Some(40));
        assert!(is_condition_true(&s.conditions, conditions::SEED_READY));
        assert_eq!(s.step.as_deref(), Some("SeedServing"));
        let s = next_status(&s, &Step::HandOver, &o, &now());
        assert!(is_condition_true(&s.conditions, conditions::HANDED_OVER));
        let s = next_status(&s, &Step::Wait(Waiting::GrowingBack), &o, &now());
        assert_eq!(s.phase, Some(RestorePhase::Running));
        assert_eq!(s.step.as_deref(), Some("GrowingBack"));
        let s = next_status(&s, &Step::Succeed, &o, &now());
        assert_eq!(s.step.as_deref(), Some("Succeeded"));
        assert_eq!(s.phase, Some(RestorePhase::Succeeded));
        assert!(is_condition_true(&s.conditions, conditions::COMPLETE));
        assert!(s.completion_time.is_some());
    }

    #[test]
    fn a_failure_names_its_reason_everywhere() {
        let o = observed();
        let refusal = Refusal::new("QuorumHeld", "the cluster still has quorum");
        let s = next_status(
            &EtcdRestoreStatus::default(),
            &Step::Fail(refusal.clone()),
            &o,
            &now(),
        );
        // Recorded at once, phase Failed only once cleaned up.
        assert_eq!(s.phase, None);
        assert_eq!(s.reason.as_deref(), Some("QuorumHeld"));
        let failed = find_condition(&s.conditions, conditions::FAILED).unwrap();
        assert_eq!(failed.reason, "QuorumHeld");
        assert_eq!(s.step.as_deref(), Some("Failed"));
        let s = next_status(&s, &Step::MarkFailed, &o, &now());
        assert_eq!(s.phase, Some(RestorePhase::Failed));
        assert!(s.completion_time.is_some());
        let complete = find_condition(&s.conditions, conditions::COMPLETE).unwrap();
        assert_eq!(
            (complete.status.as_str(), complete.reason.as_str()),
            ("True", "QuorumHeld")
        );
        let (warning, reason, note) = event_for(&Step::Fail(refusal), &o).unwrap();
        assert!(warning && reason == "RestoreFailed" && note.contains("QuorumHeld"));
    }
}

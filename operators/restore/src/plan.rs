//! The restore planner: from what is observed about one EtcdRestore (its status, its source, the
//! EtcdCluster, the member Pods and PVCs, the seed), the one next step. Pure; the executor
//! performs the step and the controller observes again, so a crash at any point resumes from
//! what exists.
//!
//! The sequence, and why in this order:
//! 1. Before anything is touched, refuse what cannot work: a backup that does not exist or did
//!    not succeed, a checksum that contradicts the backup's, a missing credentials Secret, a
//!    missing cluster without `clusterSpec`, a cluster that still has quorum (unless `force`),
//!    a cluster another restore holds.
//! 2. `Start`: the seed's name is chosen and recorded in status first (the next ordinal above
//!    every one in use), so a crash never builds two seeds.
//! 3. The cluster is created (restoring into a new name) or held (annotated): the cluster
//!    operator stops acting on it.
//! 4. With `force` the old member Pods go first (a live cluster must not serve next to the
//!    seed); otherwise they stay until the seed has proven the snapshot good, so a bad snapshot
//!    leaves the cluster as it was.
//! 5. The seed's PVC, then its Pod: an init container downloads the snapshot, checks it and
//!    runs `etcdutl snapshot restore` before etcd starts. A final failure there (checksum,
//!    missing object, rejected credentials) fails the restore, and the seed is removed again.
//! 6. The seed answers: its revision is recorded; old PVCs are labelled retained (never deleted
//!    by either operator); old Pods are deleted.
//! 7. Hand-over: `HandedOver` is recorded, the seed is admitted (its readiness gate opened: only
//!    now may the client Service select it), then the hold is released; the cluster operator
//!    adopts the seed and grows it back to `spec.size`.
//!
//! Two clusters must never serve at once (issue 17, defect 4). Without `force`, quorum is
//! judged fail-closed ([`Quorum`]: unreachable is not lost) before the start and again right
//! before each point of no return (the seed Pod's creation, each old Pod's deletion); and the
//! seed carries a readiness gate, closed until every old Pod is gone, so the client Service
//! never selects the seed and old members together.
//! 8. Succeeded once the cluster is Available at full size, the seed among its members, serving
//!    at least the restored revision.

use std::collections::BTreeMap;

/// Why a restore is refused or failed: the status reason and a message naming the cause.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// PascalCase reason, e.g. `BackupNotFound`.
    pub reason: &'static str,
    /// What is wrong, naming the object or field.
    pub message: String,
}

impl Refusal {
    /// A refusal with `reason` and `message`.
    pub fn new(reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            reason,
            message: message.into(),
        }
    }
}

/// Reasons the planner itself gives (sources and credentials bring their own).
pub mod reasons {
    /// The cluster does not exist and no `clusterSpec` says how to create it.
    pub const CLUSTER_NOT_FOUND: &str = "ClusterNotFound";
    /// The cluster still has quorum and `force` is not set.
    pub const QUORUM_HELD: &str = "QuorumHeld";
    /// Another EtcdRestore holds the cluster.
    pub const RESTORE_IN_PROGRESS: &str = "RestoreInProgress";
    /// The cluster was deleted while the restore ran.
    pub const CLUSTER_DELETED: &str = "ClusterDeleted";
    /// Volumes of an earlier cluster of the same name exist where the restore would build.
    pub const RETAINED_VOLUMES: &str = "RetainedVolumesExist";
    /// The old members had quorum again at a re-check before a step past which two clusters
    /// could serve.
    pub const QUORUM_REGAINED: &str = "QuorumRegained";
    /// `spec.timeoutSeconds` ran out before the hand-over (the seed never served clients).
    pub const TIMED_OUT: &str = "TimedOut";
    /// `spec.timeoutSeconds` ran out while the cluster grew back from the seed.
    pub const GROW_BACK_TIMED_OUT: &str = "GrowBackTimedOut";
}

/// The snapshot the restore reads, resolved from `spec.source`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// Bucket and connection.
    pub connection: etcd_api::S3Connection,
    /// Object key.
    pub key: String,
    /// SHA-256 the object must have, when known.
    pub sha256: Option<String>,
    /// Revision recorded by the backup, when known.
    pub revision: Option<i64>,
    /// etcd version of the member the backup was taken from, when known.
    pub etcd_version: Option<String>,
}

impl Snapshot {
    /// `s3://bucket/key`.
    pub fn uri(&self) -> String {
        format!("s3://{}/{}", self.connection.bucket, self.key)
    }
}

/// The EtcdRestore's own progress, from its status.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    /// Succeeded, failing (cleaning up) or Failed.
    pub finished: Option<Outcome>,
    /// The seed member's name, once started.
    pub seed_member: Option<String>,
    /// The seed's revision, once it answered.
    pub restored_revision: Option<i64>,
    /// The cluster was handed back to the cluster operator.
    pub handed_over: bool,
}

/// How a finished restore ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Succeeded.
    Succeeded,
    /// The failure is recorded (condition `Failed`); what it started is being removed. The
    /// phase turns `Failed` only once the cluster is released, so a client that sees `Failed`
    /// finds the cluster as the cluster operator had it.
    Failing,
    /// Failed, cleaned up.
    Failed,
}

/// The EtcdCluster as the restore sees it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterState {
    /// The EtcdRestore holding it (its `etcd.operator.rs/restoring` annotation).
    pub held_by: Option<String>,
    /// Whether the old members (every member but the seed) still have quorum. Asked before the
    /// start and again before each step past which two clusters could serve (see [`Quorum`]).
    pub quorum: Quorum,
    /// `spec.size`.
    pub size: i32,
    /// Available, every member ready, status up to date with the spec.
    pub available_at_size: bool,
    /// The seed is among the members its status lists.
    pub seed_is_member: bool,
    /// The next free ordinal (above every member, Pod and PVC ever seen).
    pub next_ordinal: u32,
    /// Member Pods other than the seed's: name → terminating.
    pub old_pods: BTreeMap<String, bool>,
    /// Member PVCs other than the seed's: name → already labelled retained.
    pub old_pvcs: BTreeMap<String, bool>,
    /// An old member Pod serves `https://` clients on 2378 (a cluster switched from plaintext,
    /// whose clients may still use that port): the seed serves there too, and so the members
    /// the cluster operator grows from it (see [`crate::build::seed_pod`]).
    pub old_pods_serve_switch_port: bool,
}

/// What the old members' answers prove about their quorum. Fails closed (issue 17, defect 4):
/// an operator that cannot reach a member knows nothing about it, so "unreachable" is never
/// read as "no quorum"; only a member that answered without a leader, or one the kubelet also
/// reports not Ready (its `/health` probe fails: no leader), or one whose Pod is gone, counts as
/// down.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Quorum {
    /// A member confirmed quorum (a linearizable read succeeded on it).
    Held,
    /// Proven lost: every old member is down by the rule above.
    Lost,
    /// Neither: names the members that could still serve (unreached but Ready, or answering
    /// with a leader without confirming quorum).
    Unknown(String),
}

impl Default for Quorum {
    /// Not observed is not known: fail closed.
    fn default() -> Self {
        Quorum::Unknown("not observed".to_owned())
    }
}

/// The seed member's objects and answers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SeedState {
    /// Its PVC exists (marked as built by this restore).
    pub pvc: bool,
    /// A PVC with the seed's name exists that this restore did not build (a volume retained
    /// from an earlier cluster of the same name): never used, never deleted.
    pub foreign_pvc: bool,
    /// Its Pod, if it exists.
    pub pod: Option<SeedPod>,
    /// etcd's answer on the seed's client URL: its revision, when it is healthy.
    pub serving_revision: Option<i64>,
}

/// The seed Pod's state.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SeedPod {
    /// Its deletion was requested.
    pub terminating: bool,
    /// The preparing init container failed (last attempt), with its report.
    pub init_failure: Option<InitFailure>,
    /// The revision the init container reported restoring.
    pub prepared_revision: Option<i64>,
    /// Why it is not running yet, e.g. `ImagePullBackOff` (for the status message).
    pub waiting: Option<String>,
    /// Its readiness gate [`crate::build::SEED_ADMITTED_CONDITION`] is open (or it has none):
    /// it can be Ready, so the client Service may select it.
    pub admitted: bool,
}

/// A failed attempt of the preparing init container.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InitFailure {
    /// PascalCase reason from its report (`ChecksumMismatch`), or `SeedPreparationFailed`.
    pub reason: String,
    /// Its message.
    pub message: String,
    /// Trying again cannot help (see `seed::is_permanent`), or it failed too often.
    pub permanent: bool,
}

/// Everything the planner knows about one EtcdRestore at one moment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observed {
    /// Its progress so far.
    pub progress: Progress,
    /// `spec.force`.
    pub force: bool,
    /// `spec.clusterSpec` is set.
    pub can_create_cluster: bool,
    /// The EtcdRestore's name (the hold's value).
    pub name: String,
    /// `spec.clusterName`.
    pub cluster_name: String,
    /// The resolved source, or why it cannot be used.
    pub source: Result<Snapshot, Refusal>,
    /// The credentials Secret is usable (or none is needed).
    pub credentials: Result<(), Refusal>,
    /// The cluster; `None` when it does not exist.
    pub cluster: Option<ClusterState>,
    /// The seed (empty before the start).
    pub seed: SeedState,
    /// Its deletion was requested (its finalizer keeps it until the hold is released).
    pub deleting: bool,
    /// It carries [`FINALIZER`].
    pub finalizer: bool,
    /// When the cluster does not exist: PVCs that carry its labels (retained from an earlier
    /// cluster of the same name).
    pub retained_volumes: Vec<String>,
    /// `spec.timeoutSeconds` and whether it has run out.
    pub deadline: Deadline,
}

/// How long a restore may wait (`spec.timeoutSeconds`, from `status.startTime`, or from its
/// creation before it started), and whether that time is up.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Deadline {
    /// The timeout in seconds (for the message).
    pub timeout_seconds: i64,
    /// It has run out.
    pub passed: bool,
}

/// The finalizer that keeps a deleted EtcdRestore until it released its hold on the cluster:
/// without it, deleting a restore mid-flight left the cluster held forever (issue 17).
pub const FINALIZER: &str = "etcd.operator.rs/release-hold";

/// The one next step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Finished and clean: nothing to do.
    Done,
    /// Record the failure (final). Cleaning up follows as its own steps, then [`Step::MarkFailed`].
    Fail(Refusal),
    /// Everything the failed restore started is gone: record phase Failed.
    MarkFailed,
    /// Record phase Running, the start time and the seed's name.
    Start {
        /// `<cluster>-<next ordinal>`.
        seed_member: String,
    },
    /// Create the EtcdCluster from `spec.clusterSpec`, already held.
    CreateCluster,
    /// Annotate the EtcdCluster: the cluster operator stops acting on it.
    Hold,
    /// Add [`FINALIZER`] (before anything else while in progress).
    AddFinalizer,
    /// Remove [`FINALIZER`] from a deleted restore that released its hold.
    RemoveFinalizer,
    /// Delete an old member Pod.
    DeleteOldPod {
        /// Pod name.
        name: String,
    },
    /// Label an old member PVC as retained by this restore.
    RetainPvc {
        /// PVC name.
        name: String,
    },
    /// Create the seed's PVC.
    CreateSeedPvc,
    /// Create the seed's Pod (with the preparing init container).
    CreateSeedPod,
    /// Record the seed's restored revision.
    RecordSeed {
        /// The revision.
        revision: i64,
    },
    /// Record `HandedOver` in status (then the seed is admitted and the hold released).
    HandOver,
    /// Open the seed Pod's readiness gate: from now on the client Service may select it. Only
    /// after the hand-over, so only once every old member Pod is gone.
    AdmitSeed,
    /// Remove the hold.
    Release,
    /// Record Succeeded.
    Succeed,
    /// After a failure before the seed ever ran: delete its Pod.
    DeleteSeedPod,
    /// After a failure before the seed ever ran: delete its PVC (it holds only a copy of the
    /// snapshot, never anybody's data).
    DeleteSeedPvc,
    /// Nothing to do now.
    Wait(Waiting),
}

/// Why nothing is done now (status message).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Waiting {
    /// An old member Pod is terminating.
    OldPodTerminating(String),
    /// The seed Pod is being deleted (cleaning up).
    SeedTerminating,
    /// The seed is preparing its data or starting etcd.
    SeedStarting {
        /// The init container's last transient failure or the waiting reason, if any.
        detail: Option<String>,
    },
    /// The cluster operator is growing the cluster back to its size.
    GrowingBack,
    /// The old members' quorum is neither confirmed nor proven lost ([`Quorum::Unknown`]).
    QuorumUnknown(String),
}

/// The next step for `observed`.
///
/// A restore in progress that is still waiting when its deadline has passed fails (issue 17,
/// defect 16): a deadline ends waits, never a sequence of steps (the seed's admission and the
/// release of the hold always complete). What the failure cleans up follows from where it
/// stopped: before the hand-over the seed never served clients and goes; after it, nothing is
/// deleted and the cluster operator keeps growing the cluster.
pub fn next_step(observed: &Observed) -> Step {
    let step = next_step_without_deadline(observed);
    let in_progress = observed.progress.finished.is_none() && !observed.deleting;
    match step {
        Step::Wait(waiting) if in_progress && observed.deadline.passed => {
            Step::Fail(timed_out(&waiting, observed))
        }
        step => step,
    }
}

/// The failure a passed deadline turns `waiting` into.
fn timed_out(waiting: &Waiting, observed: &Observed) -> Refusal {
    let timeout = observed.deadline.timeout_seconds;
    let seed = observed.progress.seed_member.as_deref().unwrap_or("");
    let waited_on = match waiting {
        Waiting::GrowingBack => {
            let restored = observed.progress.restored_revision.unwrap_or(0);
            return Refusal::new(
                reasons::GROW_BACK_TIMED_OUT,
                format!(
                    "the cluster did not grow back to spec.size within spec.timeoutSeconds \
                     ({timeout}s); seed {seed} serves the restored data (revision {restored}) \
                     and nothing is deleted: the cluster operator goes on growing it, see the \
                     EtcdCluster's conditions for what holds it"
                ),
            );
        }
        Waiting::SeedStarting { detail: None } => format!("seed {seed} to start"),
        Waiting::SeedStarting {
            detail: Some(detail),
        } => format!("seed {seed} to start ({detail})"),
        Waiting::OldPodTerminating(pod) => format!("old member Pod {pod} to stop"),
        Waiting::SeedTerminating => format!("seed Pod {seed} to stop"),
        Waiting::QuorumUnknown(detail) => {
            format!("the old members' quorum to be confirmed or proven lost ({detail})")
        }
    };
    Refusal::new(
        reasons::TIMED_OUT,
        format!(
            "still waiting for {waited_on} after spec.timeoutSeconds ({timeout}s); the seed, \
             which never served clients, is removed and the cluster released to the cluster \
             operator"
        ),
    )
}

fn next_step_without_deadline(observed: &Observed) -> Step {
    if observed.deleting {
        return on_deletion(observed);
    }
    let progress = &observed.progress;
    match progress.finished {
        Some(Outcome::Succeeded) => return Step::Done,
        Some(Outcome::Failing | Outcome::Failed) => return clean_up(observed),
        None => {}
    }
    // In progress: the finalizer first, so that deleting the restore still releases the hold.
    if !observed.finalizer {
        return Step::AddFinalizer;
    }
    let Some(seed_member) = &progress.seed_member else {
        return before_start(observed);
    };
    if progress.handed_over {
        return after_hand_over(observed);
    }

    // Started, not handed over: the cluster must exist and be held by us.
    let Some(cluster) = &observed.cluster else {
        if observed.can_create_cluster && observed.seed.pod.is_none() {
            return Step::CreateCluster;
        }
        return Step::Fail(Refusal::new(
            reasons::CLUSTER_DELETED,
            "the EtcdCluster was deleted while the restore ran",
        ));
    };
    match &cluster.held_by {
        None => return Step::Hold,
        Some(holder) if *holder != observed.name => {
            return Step::Fail(held_by_other(holder));
        }
        Some(_) => {}
    }

    // With force, a cluster that may still serve is stopped before the seed starts.
    if observed.force
        && let Some(step) = retire_old_members(cluster)
    {
        return step;
    }

    let seed = &observed.seed;
    if seed.foreign_pvc {
        return Step::Fail(retained_volumes(std::slice::from_ref(seed_member)));
    }
    if !seed.pvc {
        return Step::CreateSeedPvc;
    }
    let Some(pod) = &seed.pod else {
        if observed.source.is_err() || observed.credentials.is_err() {
            // The source vanished between the start and the seed (a backup deleted): the Pod
            // cannot be built. Fail; the cluster is released untouched (the seed never ran).
            return Step::Fail(first_error(observed));
        }
        // Point of no return: a second cluster is about to start. The old members may have
        // come back since the start: check again.
        if let Some(step) = recheck_quorum(observed, cluster) {
            return step;
        }
        return Step::CreateSeedPod;
    };
    if let Some(failure) = &pod.init_failure
        && failure.permanent
        && progress.restored_revision.is_none()
    {
        return Step::Fail(Refusal {
            reason: reason_str(&failure.reason),
            message: format!("preparing seed {seed_member}: {}", failure.message),
        });
    }
    let Some(serving) = seed.serving_revision else {
        return Step::Wait(Waiting::SeedStarting {
            detail: pod
                .init_failure
                .as_ref()
                .map(|f| format!("{}: {}", f.reason, f.message))
                .or_else(|| pod.waiting.clone()),
        });
    };
    if progress.restored_revision.is_none() {
        // The init container's report is the snapshot's revision; etcd's answer is the same
        // unless a client already wrote to the seed.
        let revision = pod.prepared_revision.unwrap_or(serving);
        return Step::RecordSeed { revision };
    }
    // Point of no return: old member Pods are deleted. Each deletion is preceded by a fresh
    // check (a cluster of five that lost two members has quorum again when one comes back).
    if cluster.old_pods.values().any(|terminating| !terminating)
        && let Some(step) = recheck_quorum(observed, cluster)
    {
        return step;
    }
    if let Some(step) = retire_old_members(cluster) {
        return step;
    }
    Step::HandOver
}

/// Without `force`, a step that lets the seed run next to the old members (or takes the old
/// members down) needs their quorum proven lost now, not only at the start: `None` when it is,
/// else the failure (quorum is back: the restore stops, the seed that never served goes) or the
/// wait (not known: fail closed and report).
fn recheck_quorum(observed: &Observed, cluster: &ClusterState) -> Option<Step> {
    if observed.force {
        return None;
    }
    match &cluster.quorum {
        Quorum::Lost => None,
        Quorum::Held => Some(Step::Fail(Refusal::new(
            reasons::QUORUM_REGAINED,
            "the old members have quorum again: restoring now would run two clusters and \
             discard what they acknowledged since; the seed is removed and the cluster left \
             to the cluster operator (set spec.force to replace its data anyway)",
        ))),
        Quorum::Unknown(detail) => Some(Step::Wait(Waiting::QuorumUnknown(detail.clone()))),
    }
}

fn before_start(observed: &Observed) -> Step {
    if let Err(refusal) = &observed.source {
        return Step::Fail(refusal.clone());
    }
    if let Err(refusal) = &observed.credentials {
        return Step::Fail(refusal.clone());
    }
    let next_ordinal = match &observed.cluster {
        None if !observed.can_create_cluster => {
            return Step::Fail(Refusal::new(
                reasons::CLUSTER_NOT_FOUND,
                "spec.clusterName names no EtcdCluster in this namespace and spec.clusterSpec \
                 is not set",
            ));
        }
        None if !observed.retained_volumes.is_empty() => {
            return Step::Fail(retained_volumes(&observed.retained_volumes));
        }
        None => 0,
        Some(cluster) => {
            if let Some(holder) = &cluster.held_by
                && *holder != observed.name
            {
                return Step::Fail(held_by_other(holder));
            }
            if !observed.force {
                match &cluster.quorum {
                    Quorum::Held => {
                        return Step::Fail(Refusal::new(
                            reasons::QUORUM_HELD,
                            "the cluster still has quorum: restoring would replace its data \
                             with the snapshot's; set spec.force to do that anyway",
                        ));
                    }
                    // Unreachable is not lost: wait (and say so) until it is one or the other.
                    Quorum::Unknown(detail) => {
                        return Step::Wait(Waiting::QuorumUnknown(detail.clone()));
                    }
                    Quorum::Lost => {}
                }
            }
            cluster.next_ordinal
        }
    };
    Step::Start {
        seed_member: format!("{}-{next_ordinal}", observed.cluster_name),
    }
}

/// Old members go: their PVCs are labelled retained first, then their Pods are deleted.
fn retire_old_members(cluster: &ClusterState) -> Option<Step> {
    if let Some((name, _)) = cluster.old_pvcs.iter().find(|(_, retained)| !**retained) {
        return Some(Step::RetainPvc { name: name.clone() });
    }
    if let Some((name, _)) = cluster
        .old_pods
        .iter()
        .find(|(_, terminating)| !**terminating)
    {
        return Some(Step::DeleteOldPod { name: name.clone() });
    }
    cluster
        .old_pods
        .keys()
        .next()
        .map(|name| Step::Wait(Waiting::OldPodTerminating(name.clone())))
}

fn after_hand_over(observed: &Observed) -> Step {
    let Some(cluster) = &observed.cluster else {
        return Step::Fail(Refusal::new(
            reasons::CLUSTER_DELETED,
            "the EtcdCluster was deleted while it grew back",
        ));
    };
    // The seed becomes selectable by the client Service only now: every old member Pod is gone
    // (the hand-over follows their deletion), so clients never reach two clusters at once.
    if observed.seed.pod.as_ref().is_some_and(|pod| !pod.admitted) {
        return Step::AdmitSeed;
    }
    if cluster.held_by.as_deref() == Some(observed.name.as_str()) {
        return Step::Release;
    }
    let restored = observed.progress.restored_revision.unwrap_or(0);
    let serves_restored = observed
        .seed
        .serving_revision
        .is_some_and(|revision| revision >= restored);
    if cluster.available_at_size && cluster.seed_is_member && serves_restored {
        Step::Succeed
    } else {
        Step::Wait(Waiting::GrowingBack)
    }
}

/// Deleted (the finalizer kept it): cleaned up like a failure (a seed that never ran goes, the
/// hold is released, old members' Pods stay as they are), then the finalizer goes. A restore that
/// already succeeded or failed only loses its finalizer.
fn on_deletion(observed: &Observed) -> Step {
    match clean_up(observed) {
        Step::Done | Step::MarkFailed if observed.finalizer => Step::RemoveFinalizer,
        Step::MarkFailed => Step::Done,
        step => step,
    }
}

/// After a failure: a seed that never served clients is removed, then the hold is released,
/// leaving the cluster as the cluster operator had it (old Pods kept unless `force` took them
/// down). Before the hand-over the seed's readiness gate is closed, so the client Service never
/// selected it: it holds nothing but a copy of the snapshot, and it must not keep running next
/// to old members that came back (issue 17, defect 4).
fn clean_up(observed: &Observed) -> Step {
    let progress = &observed.progress;
    let seed_never_served = !progress.handed_over;
    if seed_never_served && progress.seed_member.is_some() {
        if let Some(pod) = &observed.seed.pod {
            return if pod.terminating {
                Step::Wait(Waiting::SeedTerminating)
            } else {
                Step::DeleteSeedPod
            };
        }
        if observed.seed.pvc {
            return Step::DeleteSeedPvc;
        }
    }
    match &observed.cluster {
        Some(cluster) if cluster.held_by.as_deref() == Some(observed.name.as_str()) => {
            Step::Release
        }
        _ if progress.finished == Some(Outcome::Failing) => Step::MarkFailed,
        _ => Step::Done,
    }
}

/// Issue 17 (defect 9): never build on, adopt or delete a volume this restore did not create.
fn retained_volumes(names: &[String]) -> Refusal {
    Refusal::new(
        reasons::RETAINED_VOLUMES,
        format!(
            "PersistentVolumeClaims {} of an earlier cluster named like spec.clusterName exist \
             (retained): a seed would meet their old data. They are left untouched; delete them, \
             or restore into another name",
            names.join(", ")
        ),
    )
}

fn held_by_other(holder: &str) -> Refusal {
    Refusal::new(
        reasons::RESTORE_IN_PROGRESS,
        format!("EtcdRestore {holder} is already restoring this cluster"),
    )
}

fn first_error(observed: &Observed) -> Refusal {
    match (&observed.source, &observed.credentials) {
        (Err(e), _) | (_, Err(e)) => e.clone(),
        _ => Refusal::new("SeedPreparationFailed", "the seed could not be built"),
    }
}

/// The reasons a seed report may carry, as `'static` strings for [`Refusal`].
fn reason_str(reason: &str) -> &'static str {
    const KNOWN: [&str; 10] = [
        "InvalidChecksum",
        "ObjectNotFound",
        "BucketNotFound",
        "CredentialsRejected",
        "S3Unavailable",
        "DownloadFailed",
        "ChecksumMismatch",
        "TrailerInvalid",
        "RestoreFailed",
        "Io",
    ];
    KNOWN
        .into_iter()
        .find(|known| *known == reason)
        .unwrap_or("SeedPreparationFailed")
}

#[cfg(test)]
mod tests;

//! What to do with an EtcdBackup now (pure, no I/O).
//!
//! An EtcdBackup runs at most once. The phase written in its status is the record that makes this
//! safe across restarts: `Running` is written before any byte is streamed, so an operator that
//! starts up and finds a backup `Running` that it is not running itself knows an earlier run died
//! mid-upload, and marks it `Failed`/`Interrupted` instead of silently running it again (a second
//! run would snapshot a different revision under the same EtcdBackup).
//!
//! The process also remembers which backups it is running or has finished ([`LocalState`]): the
//! controller's cache may still show `Pending` or `Running` after this process wrote the next
//! phase, and that stale view must neither start a backup twice nor mark a live one interrupted.

use etcd_api::{BackupPhase, EtcdBackup};

/// What this process knows about a backup from its own memory (keyed by UID).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LocalState {
    /// A task of this process is running it.
    Running,
    /// This process ran it to a final phase (or marked it interrupted).
    Finished,
}

/// Why nothing is done.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SkipReason {
    /// Succeeded or Failed: final, never run again.
    Finished(BackupPhase),
    /// Running in this process; its task writes the outcome.
    RunningHere,
    /// Finished by this process; the cache has not caught up with the final status yet.
    FinishedHere,
    /// Being deleted before it started.
    Deleting,
}

/// The next step for one EtcdBackup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Nothing to do.
    Skip(SkipReason),
    /// Write `Running`, then take the snapshot.
    Start,
    /// It is `Running` but no live process runs it: an earlier run died mid-upload. Mark it
    /// `Failed` with reason `Interrupted`.
    FailInterrupted,
}

/// Decides the next step; see the module docs.
pub fn next_step(backup: &EtcdBackup, local: Option<LocalState>) -> Step {
    match local {
        Some(LocalState::Finished) => return Step::Skip(SkipReason::FinishedHere),
        Some(LocalState::Running) => return Step::Skip(SkipReason::RunningHere),
        None => {}
    }
    let phase = backup.status.as_ref().and_then(|s| s.phase);
    match phase {
        Some(phase) if phase.is_finished() => Step::Skip(SkipReason::Finished(phase)),
        // A Running backup is finished off even while being deleted: harmless, and the truth.
        Some(BackupPhase::Running) => Step::FailInterrupted,
        _ if backup.metadata.deletion_timestamp.is_some() => Step::Skip(SkipReason::Deleting),
        None | Some(BackupPhase::Pending) => Step::Start,
        // Unreachable: Succeeded/Failed and Running are matched above.
        Some(_) => Step::Skip(SkipReason::Finished(BackupPhase::Failed)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use etcd_api::{EtcdBackupSpec, EtcdBackupStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;

    fn backup(phase: Option<BackupPhase>, deleting: bool) -> EtcdBackup {
        let mut b = EtcdBackup::new(
            "b",
            EtcdBackupSpec {
                cluster_name: Some("c".into()),
                endpoints: None,
                tls_secret_ref: None,
                s3: Default::default(),
                timeout_seconds: None,
            },
        );
        b.status = phase.map(|phase| EtcdBackupStatus {
            phase: Some(phase),
            ..Default::default()
        });
        if deleting {
            b.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
        }
        b
    }

    #[test]
    fn table() {
        use BackupPhase::*;
        use LocalState::Finished as Done;
        use LocalState::Running as Here;
        type Case = (
            &'static str,
            Option<BackupPhase>,
            bool,
            Option<LocalState>,
            Step,
        );
        let cases: Vec<Case> = vec![
            ("new object starts", None, false, None, Step::Start),
            ("pending starts", Some(Pending), false, None, Step::Start),
            (
                "succeeded is never re-run",
                Some(Succeeded),
                false,
                None,
                Step::Skip(SkipReason::Finished(Succeeded)),
            ),
            (
                "failed is never re-run",
                Some(Failed),
                false,
                None,
                Step::Skip(SkipReason::Finished(Failed)),
            ),
            (
                "running at startup was interrupted",
                Some(Running),
                false,
                None,
                Step::FailInterrupted,
            ),
            (
                "running and being deleted: still marked",
                Some(Running),
                true,
                None,
                Step::FailInterrupted,
            ),
            (
                "running in this process",
                Some(Running),
                false,
                Some(Here),
                Step::Skip(SkipReason::RunningHere),
            ),
            (
                "stale pending while running here",
                Some(Pending),
                false,
                Some(Here),
                Step::Skip(SkipReason::RunningHere),
            ),
            (
                "stale running after finishing here",
                Some(Running),
                false,
                Some(Done),
                Step::Skip(SkipReason::FinishedHere),
            ),
            (
                "stale pending after finishing here",
                None,
                false,
                Some(Done),
                Step::Skip(SkipReason::FinishedHere),
            ),
            (
                "deleted before it started",
                None,
                true,
                None,
                Step::Skip(SkipReason::Deleting),
            ),
            (
                "finished and being deleted",
                Some(Succeeded),
                true,
                None,
                Step::Skip(SkipReason::Finished(Succeeded)),
            ),
        ];
        for (name, phase, deleting, local, want) in cases {
            assert_eq!(next_step(&backup(phase, deleting), local), want, "{name}");
        }
    }
}

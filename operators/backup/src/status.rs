//! The status an EtcdBackup gets at each transition (pure, no I/O; the controller applies it).
//!
//! Conditions: `Complete` is `True` once the backup finished, either way; `Failed` is `True` with
//! the failure's reason, or `False` (`Succeeded`) after a success. While running, `Complete` is
//! `False` with reason `Running`. `startTime` is set when the run starts and kept afterwards.

use etcd_api::condition::{ConditionUpdate, Time, set_condition, types};
use etcd_api::{BackupArtifact, BackupPhase, EtcdBackupStatus};

use crate::execute::LeftBehind;

/// Reason of the `Failed` condition and `status.reason` for a run that died mid-upload.
pub const REASON_INTERRUPTED: &str = "Interrupted";
/// Reason of both conditions after a success.
pub const REASON_SUCCEEDED: &str = "Succeeded";
/// Reason of `Complete` when an interrupted run's completed object was adopted.
pub const REASON_ADOPTED: &str = "AdoptedAfterInterruption";
/// Reason of `Complete=False` while running.
pub const REASON_RUNNING: &str = "Running";
/// The `Complete` condition's reason while the outcome of the upload's completion is not known
/// ([`completion_unknown`]).
pub const REASON_COMPLETION_UNKNOWN: &str = "CompletionUnknown";

/// `Running`, stamped with the start time: written before the snapshot starts.
pub fn running(
    previous: Option<&EtcdBackupStatus>,
    generation: Option<i64>,
    now: &Time,
) -> EtcdBackupStatus {
    let mut status = previous.cloned().unwrap_or_default();
    status.phase = Some(BackupPhase::Running);
    status.start_time = Some(now.clone());
    status.reason = None;
    status.message = Some("streaming the snapshot to S3".to_owned());
    set_condition(
        &mut status.conditions,
        ConditionUpdate::new(
            types::COMPLETE,
            false,
            REASON_RUNNING,
            "the snapshot is being streamed to S3",
        ),
        generation,
        now,
    );
    status
}

/// Still `Running` after an upload whose completion may have been applied but could not be read
/// back (its answer lost, then S3 silent: `BackupError::completion_unknown`). Never `Failed`
/// while the object may exist: the next reconcile looks for it as it does after an interrupted
/// run ([`after_interruption`], S3 errors retried with back-off) and adopts it or fails the
/// backup on what it finds.
pub fn completion_unknown(
    previous: Option<&EtcdBackupStatus>,
    generation: Option<i64>,
    detail: &str,
    now: &Time,
) -> EtcdBackupStatus {
    let mut status = previous.cloned().unwrap_or_default();
    status.phase = Some(BackupPhase::Running);
    status.reason = None;
    let message = format!("{detail}; checking S3 again before deciding the outcome");
    status.message = Some(message.clone());
    set_condition(
        &mut status.conditions,
        ConditionUpdate::new(types::COMPLETE, false, REASON_COMPLETION_UNKNOWN, message),
        generation,
        now,
    );
    status
}

/// `Succeeded` with the stored artifact.
pub fn succeeded(
    previous: Option<&EtcdBackupStatus>,
    generation: Option<i64>,
    artifact: BackupArtifact,
    now: &Time,
) -> EtcdBackupStatus {
    let mut status = previous.cloned().unwrap_or_default();
    let message = format!(
        "stored {} ({} bytes, revision {}, etcd {})",
        artifact.uri, artifact.size_bytes, artifact.revision, artifact.etcd_version
    );
    status.phase = Some(BackupPhase::Succeeded);
    status.start_time.get_or_insert_with(|| now.clone());
    status.completion_time = Some(now.clone());
    status.reason = None;
    status.message = Some(message.clone());
    status.artifact = Some(artifact);
    set_condition(
        &mut status.conditions,
        ConditionUpdate::new(types::COMPLETE, true, REASON_SUCCEEDED, message),
        generation,
        now,
    );
    set_condition(
        &mut status.conditions,
        ConditionUpdate::new(
            types::FAILED,
            false,
            REASON_SUCCEEDED,
            "the backup succeeded",
        ),
        generation,
        now,
    );
    status
}

/// `Failed` with a PascalCase `reason` and a `message` naming the cause. No artifact.
pub fn failed(
    previous: Option<&EtcdBackupStatus>,
    generation: Option<i64>,
    reason: &str,
    message: &str,
    now: &Time,
) -> EtcdBackupStatus {
    let mut status = previous.cloned().unwrap_or_default();
    status.phase = Some(BackupPhase::Failed);
    status.start_time.get_or_insert_with(|| now.clone());
    status.completion_time = Some(now.clone());
    status.reason = Some(reason.to_owned());
    status.message = Some(message.to_owned());
    status.artifact = None;
    for type_ in [types::COMPLETE, types::FAILED] {
        set_condition(
            &mut status.conditions,
            ConditionUpdate::new(type_, true, reason, message),
            generation,
            now,
        );
    }
    status
}

/// The status of a backup found `Running` at the operator's start (an earlier run died), from
/// what that run left in S3 (issue 17, defect 14). A complete, verified object under the backup's
/// UID is adopted: the backup Succeeded, with the artifact its lost status write would have
/// recorded, rather than an orphaned object and a status that denies it. Otherwise the backup
/// failed `Interrupted`, and the message says what the check found (nothing under the searched
/// prefix, or an unusable object left in place), or that it could not check.
pub fn after_interruption(
    previous: Option<&EtcdBackupStatus>,
    generation: Option<i64>,
    left: &Result<LeftBehind, String>,
    objects: &str,
    now: &Time,
) -> EtcdBackupStatus {
    let since = previous
        .and_then(|s| s.start_time.as_ref())
        .map_or_else(String::new, |t| format!(" (started {})", t.0));
    let unsure = previous.is_some_and(|s| {
        s.conditions
            .iter()
            .any(|c| c.type_ == types::COMPLETE && c.reason == REASON_COMPLETION_UNKNOWN)
    });
    let stopped = if unsure {
        format!("the upload's completion got no answer and S3 did not answer its read-back{since}")
    } else {
        format!("the backup was Running when the operator stopped{since}")
    };
    match left {
        Ok(LeftBehind::Complete(artifact)) => {
            let mut status = succeeded(previous, generation, artifact.clone(), now);
            let message = format!(
                "{stopped}; its upload had completed and only the outcome was not recorded: \
                 adopted {} ({} bytes, read back and verified against etcd's SHA-256 trailer, \
                 revision {}, etcd {})",
                artifact.uri, artifact.size_bytes, artifact.revision, artifact.etcd_version
            );
            status.message = Some(message.clone());
            set_condition(
                &mut status.conditions,
                ConditionUpdate::new(types::COMPLETE, true, REASON_ADOPTED, message),
                generation,
                now,
            );
            status
        }
        Ok(LeftBehind::Nothing { searched }) => failed(
            previous,
            generation,
            REASON_INTERRUPTED,
            &format!(
                "{stopped}; it is not re-run. No object with this backup's UID exists under \
                 {searched} (checked): the upload never completed, and its multipart upload, if \
                 one was begun, was aborted. Create a new EtcdBackup to retry"
            ),
            now,
        ),
        Ok(LeftBehind::Unusable { uri, why }) => failed(
            previous,
            generation,
            REASON_INTERRUPTED,
            &format!(
                "{stopped}; it is not re-run. {uri} carries this backup's UID but is not \
                 adopted: {why}. It is left in place. Create a new EtcdBackup to retry"
            ),
            now,
        ),
        Err(error) => failed(
            previous,
            generation,
            REASON_INTERRUPTED,
            &format!(
                "{stopped}; it is not re-run. Whether its upload completed could not be \
                 checked ({error}): an object matching {objects} exists only if it did, just \
                 before the stop. Create a new EtcdBackup to retry"
            ),
            now,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use etcd_api::condition::find_condition;
    use k8s_openapi::jiff::Timestamp;

    fn at(s: i64) -> Time {
        Time(Timestamp::from_second(s).unwrap())
    }

    fn artifact() -> BackupArtifact {
        BackupArtifact {
            uri: "s3://b/c/20231114T221320Z-rev7-u.db".into(),
            size_bytes: 1234,
            size: "1.2 KiB".into(),
            sha256: "ab".repeat(32),
            revision: 7,
            etcd_version: "3.5.1".into(),
            cluster_id: "c1".into(),
        }
    }

    fn cond(s: &EtcdBackupStatus, t: &str) -> (String, String) {
        let c = find_condition(&s.conditions, t).unwrap();
        (c.status.clone(), c.reason.clone())
    }

    #[test]
    fn running_then_succeeded() {
        let r = running(None, Some(1), &at(100));
        assert_eq!(r.phase, Some(BackupPhase::Running));
        assert_eq!(r.start_time, Some(at(100)));
        assert_eq!(r.completion_time, None);
        assert_eq!(cond(&r, "Complete"), ("False".into(), "Running".into()));
        assert!(find_condition(&r.conditions, "Failed").is_none());

        let s = succeeded(Some(&r), Some(1), artifact(), &at(160));
        assert_eq!(s.phase, Some(BackupPhase::Succeeded));
        assert_eq!(s.start_time, Some(at(100)), "start time is kept");
        assert_eq!(s.completion_time, Some(at(160)));
        assert_eq!(s.artifact, Some(artifact()));
        assert_eq!(s.reason, None);
        assert_eq!(
            s.message.as_deref(),
            Some("stored s3://b/c/20231114T221320Z-rev7-u.db (1234 bytes, revision 7, etcd 3.5.1)")
        );
        assert_eq!(cond(&s, "Complete"), ("True".into(), "Succeeded".into()));
        assert_eq!(cond(&s, "Failed"), ("False".into(), "Succeeded".into()));
        let complete = find_condition(&s.conditions, "Complete").unwrap();
        assert_eq!(complete.last_transition_time, at(160));
        assert_eq!(complete.observed_generation, Some(1));
    }

    #[test]
    fn failed_names_reason_and_message() {
        let r = running(None, Some(2), &at(100));
        let f = failed(
            Some(&r),
            Some(2),
            "BucketNotFound",
            "S3 bucket \"x\" does not exist",
            &at(105),
        );
        assert_eq!(f.phase, Some(BackupPhase::Failed));
        assert_eq!(f.reason.as_deref(), Some("BucketNotFound"));
        assert_eq!(f.message.as_deref(), Some("S3 bucket \"x\" does not exist"));
        assert_eq!(f.start_time, Some(at(100)));
        assert_eq!(f.completion_time, Some(at(105)));
        assert_eq!(f.artifact, None);
        assert_eq!(
            cond(&f, "Complete"),
            ("True".into(), "BucketNotFound".into())
        );
        assert_eq!(cond(&f, "Failed"), ("True".into(), "BucketNotFound".into()));
        assert_eq!(
            find_condition(&f.conditions, "Failed").unwrap().message,
            "S3 bucket \"x\" does not exist"
        );
    }

    #[test]
    fn failed_before_running_gets_a_start_time() {
        let f = failed(None, None, "SecretNotFound", "m", &at(7));
        assert_eq!(f.start_time, Some(at(7)));
        assert_eq!(f.completion_time, Some(at(7)));
    }

    fn running_at(t: i64) -> EtcdBackupStatus {
        running(None, Some(1), &at(t))
    }

    /// Issue 17 (defect 14): an interrupted run whose upload completed left a verified object
    /// whose status write was lost: it is adopted (Succeeded, with the artifact), not denied.
    #[test]
    fn an_interrupted_run_with_a_complete_object_is_adopted() {
        let artifact = BackupArtifact {
            uri: "s3://bkt/p/main/20261125T200000Z-rev40-u1.db".into(),
            size_bytes: 20_512,
            size: "20.0 KiB".into(),
            sha256: "ab".repeat(32),
            revision: 40,
            etcd_version: "3.6.16".into(),
            cluster_id: "c1".into(),
        };
        let left = Ok(LeftBehind::Complete(artifact.clone()));
        let s = after_interruption(
            Some(&running_at(0)),
            Some(1),
            &left,
            "s3://bkt/p/*-u1.db",
            &at(5),
        );
        assert_eq!(s.phase, Some(BackupPhase::Succeeded));
        assert_eq!(s.artifact, Some(artifact));
        assert_eq!(s.start_time, Some(at(0)));
        let m = s.message.unwrap();
        assert!(
            m.contains("adopted s3://bkt/p/main/") && m.contains("verified"),
            "{m}"
        );
        let complete = find_condition(&s.conditions, "Complete").unwrap();
        assert_eq!(complete.reason, REASON_ADOPTED);
    }

    /// Issue 18: a completion whose answer was lost, then an S3 that did not answer the
    /// read-back: still Running (never Failed while the object may exist), saying why; once S3
    /// answers, the object is adopted, and the message says what happened rather than "the
    /// operator stopped".
    #[test]
    fn an_unknown_completion_stays_running_and_is_adopted_once_found() {
        let unsure = completion_unknown(
            Some(&running_at(0)),
            Some(1),
            "whether s3://bkt/p/main/k-u1.db was stored is unknown",
            &at(30),
        );
        assert_eq!(unsure.phase, Some(BackupPhase::Running));
        assert_eq!(unsure.reason, None);
        assert_eq!(unsure.completion_time, None);
        assert_eq!(unsure.start_time, Some(at(0)));
        assert_eq!(
            cond(&unsure, "Complete"),
            ("False".into(), REASON_COMPLETION_UNKNOWN.into())
        );
        assert!(find_condition(&unsure.conditions, "Failed").is_none());
        let m = unsure.message.clone().unwrap();
        assert!(
            m.contains("unknown") && m.contains("checking S3 again"),
            "{m}"
        );

        let left = Ok(LeftBehind::Complete(artifact()));
        let s = after_interruption(Some(&unsure), Some(1), &left, "x", &at(60));
        assert_eq!(s.phase, Some(BackupPhase::Succeeded));
        assert_eq!(s.artifact, Some(artifact()));
        let m = s.message.unwrap();
        assert!(
            m.contains("completion got no answer") && !m.contains("operator stopped"),
            "{m}"
        );
    }

    /// Without an object, the failure says that it looked, and where; an unusable one is named
    /// and left in place; an unchecked one says so (never "no object was stored").
    #[test]
    fn an_interrupted_run_without_an_object_says_what_was_checked() {
        let now = at(5);
        let nothing = Ok(LeftBehind::Nothing {
            searched: "s3://bkt/p/main/".into(),
        });
        let s = after_interruption(Some(&running_at(0)), Some(1), &nothing, "x", &now);
        assert_eq!(s.phase, Some(BackupPhase::Failed));
        assert_eq!(s.reason.as_deref(), Some(REASON_INTERRUPTED));
        let m = s.message.unwrap();
        assert!(
            m.contains("started 1970-01-01T00:00:00Z")
                && m.contains("not re-run")
                && m.contains("under s3://bkt/p/main/ (checked)"),
            "{m}"
        );
        let unusable = Ok(LeftBehind::Unusable {
            uri: "s3://bkt/p/main/k-u1.db".into(),
            why: "truncated snapshot".into(),
        });
        let m = after_interruption(None, None, &unusable, "x", &now)
            .message
            .unwrap();
        assert!(
            m.contains("s3://bkt/p/main/k-u1.db") && m.contains("left in place"),
            "{m}"
        );
        let unchecked = Err("Secret db/s3 not found".to_owned());
        let m = after_interruption(None, None, &unchecked, "s3://bkt/p/*-u1.db", &now)
            .message
            .unwrap();
        assert!(
            m.contains("could not be checked")
                && m.contains("s3://bkt/p/*-u1.db")
                && !m.contains("no object was stored"),
            "{m}"
        );
    }
}

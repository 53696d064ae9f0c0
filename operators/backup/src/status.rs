//! The status an EtcdBackup gets at each transition (pure, no I/O; the controller applies it).
//!
//! Conditions: `Complete` is `True` once the backup finished, either way; `Failed` is `True` with
//! the failure's reason, or `False` (`Succeeded`) after a success. While running, `Complete` is
//! `False` with reason `Running`. `startTime` is set when the run starts and kept afterwards.

use etcd_api::condition::{ConditionUpdate, Time, set_condition, types};
use etcd_api::{BackupArtifact, BackupPhase, EtcdBackupStatus};

/// Reason of the `Failed` condition and `status.reason` for a run that died mid-upload.
pub const REASON_INTERRUPTED: &str = "Interrupted";
/// Reason of both conditions after a success.
pub const REASON_SUCCEEDED: &str = "Succeeded";
/// Reason of `Complete=False` while running.
pub const REASON_RUNNING: &str = "Running";

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

/// The message of an interrupted backup: what happened, and where its object is if the upload
/// completed. A verified upload is completed before the outcome is written, so a stop between
/// the two leaves an object this message must not deny (issue 17); `objects` is the pattern of
/// its key (`s3://<bucket>/<prefix>*-<uid>.db`: keys end in the backup's UID).
pub fn interrupted_message_for(start_time: Option<&Time>, objects: &str) -> String {
    let since = start_time.map_or_else(String::new, |t| format!(" (started {})", t.0));
    format!(
        "the backup was Running when the operator stopped{since}; it is not re-run. The S3 \
         multipart upload is completed only after the snapshot's checksum verified: an object \
         matching {objects} exists only if that happened just before the stop (it is then a \
         complete, verified snapshot the status does not record); an incomplete upload the \
         operator could not abort is removed by the bucket's AbortIncompleteMultipartUpload \
         lifecycle rule. Create a new EtcdBackup to retry"
    )
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

    #[test]
    fn interrupted_message_says_when_it_started() {
        let m = interrupted_message_for(Some(&at(0)), "s3://bkt/*-u.db");
        assert!(m.contains("started 1970-01-01T00:00:00Z"), "{m}");
    }

    /// Issue 17 (defect 14): "no object was stored" is false when the upload completed and
    /// only the write of the outcome was lost (a crash between the two). The message says where
    /// such an object would be (its key ends in the backup's UID), not that none exists.
    #[test]
    fn interrupted_message_does_not_claim_nothing_was_stored() {
        let m = interrupted_message_for(Some(&at(0)), "s3://bkt/p/main/*-0b5e-11.db");
        assert!(!m.contains("no object was stored"), "{m}");
        assert!(m.contains("s3://bkt/p/main/*-0b5e-11.db"), "{m}");
        assert!(m.contains("not re-run"), "{m}");
    }
}

//! Which scheduled backups to delete so that `--retain N` remain (pure, no I/O).
//!
//! Rules (the CronJob's `create-backup --retain N` applies them to the EtcdBackups of one cluster
//! labelled as scheduled):
//! - Succeeded backups are ordered by their artifact's object key, PARSED ([`SnapshotKey`]: time,
//!   then revision, then UID), newest first; the first N are kept, the rest deleted (and their S3
//!   objects with `--delete-objects`). Never by key string: `rev9` sorts after `rev10` as text.
//! - A Succeeded backup whose artifact key does not parse is kept and reported: what cannot be
//!   ordered is never deleted.
//! - Failed backups stored nothing. They do not count towards N (a run of failures must never
//!   push good backups out), and are bounded separately: the N most recent (by creation time)
//!   stay for inspection, older ones are deleted.
//! - Pending and Running backups are never touched.
//! - A Succeeded backup an unfinished EtcdRestore reads (by `backupRef` or by its object) is
//!   kept and does not count towards N: deleting it would pull the snapshot from under the
//!   restore (issue 17).

use std::collections::BTreeSet;

use etcd_api::{BackupPhase, EtcdBackup, EtcdRestore};
use etcd_snapshot::{KeyParseError, SnapshotKey};

/// An S3 object: bucket and key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct S3Object {
    /// The bucket.
    pub bucket: String,
    /// The key.
    pub key: String,
}

/// Splits `s3://bucket/key`.
pub fn parse_s3_uri(uri: &str) -> Option<S3Object> {
    let (bucket, key) = uri.strip_prefix("s3://")?.split_once('/')?;
    if bucket.is_empty() || key.is_empty() {
        return None;
    }
    Some(S3Object {
        bucket: bucket.to_owned(),
        key: key.to_owned(),
    })
}

/// One EtcdBackup to delete.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Doomed {
    /// Name of the EtcdBackup.
    pub name: String,
    /// Its snapshot object (Succeeded backups only).
    pub object: Option<S3Object>,
}

/// The outcome of [`plan_retention`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RetentionPlan {
    /// To delete, oldest first.
    pub delete: Vec<Doomed>,
    /// Names of Succeeded backups kept, newest first.
    pub kept: Vec<String>,
    /// Succeeded backups kept because their artifact key does not parse.
    pub unparseable: Vec<(String, KeyParseError)>,
    /// Succeeded backups kept because an unfinished EtcdRestore reads them.
    pub in_use: Vec<String>,
}

/// What unfinished EtcdRestores read: backups by name (`backupRef`) and S3 objects.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InUse {
    /// EtcdBackup names.
    pub backups: BTreeSet<String>,
    /// (bucket, key) of S3 objects.
    pub objects: BTreeSet<(String, String)>,
}

/// What the unfinished `restores` (no phase yet, Pending or Running) read.
pub fn in_use(restores: &[EtcdRestore]) -> InUse {
    let mut used = InUse::default();
    let unfinished = restores.iter().filter(|r| {
        !r.status
            .as_ref()
            .and_then(|s| s.phase)
            .is_some_and(|p| p.is_finished())
    });
    for restore in unfinished {
        let source = &restore.spec.source;
        if let Some(backup) = &source.backup_ref {
            used.backups.insert(backup.name.clone());
        }
        if let Some(object) = &source.s3 {
            used.objects
                .insert((object.connection.bucket.clone(), object.key.clone()));
        }
    }
    used
}

/// Applies the rules in the module docs to `backups` (all of one cluster, scheduled).
pub fn plan_retention(backups: &[EtcdBackup], retain: usize, in_use: &InUse) -> RetentionPlan {
    let mut plan = RetentionPlan::default();
    let mut succeeded: Vec<(SnapshotKey, String, S3Object)> = Vec::new();
    let mut failed: Vec<(Option<&k8s_openapi::jiff::Timestamp>, String)> = Vec::new();
    for backup in backups {
        let name = backup.metadata.name.clone().unwrap_or_default();
        let status = backup.status.as_ref();
        match status.and_then(|s| s.phase) {
            Some(BackupPhase::Succeeded) => {
                let uri = status
                    .and_then(|s| s.artifact.as_ref())
                    .map_or("", |a| a.uri.as_str());
                let parsed = parse_s3_uri(uri)
                    .ok_or_else(|| KeyParseError {
                        key: uri.to_owned(),
                        why: "artifact uri is not s3://<bucket>/<key>",
                    })
                    .and_then(|object| Ok((SnapshotKey::parse(&object.key)?, object)));
                match parsed {
                    Ok((key, object)) => succeeded.push((key, name, object)),
                    Err(e) => plan.unparseable.push((name, e)),
                }
            }
            Some(BackupPhase::Failed) => {
                let created = backup.metadata.creation_timestamp.as_ref().map(|t| &t.0);
                failed.push((created, name));
            }
            _ => {}
        }
    }
    // Newest first.
    succeeded.sort_by(|a, b| b.0.cmp(&a.0));
    failed.sort_by(|a, b| b.cmp(a));
    // A backup an unfinished restore reads is kept, and does not count towards N.
    let (used, succeeded): (Vec<_>, Vec<_>) = succeeded.into_iter().partition(|(_, name, o)| {
        in_use.backups.contains(name) || in_use.objects.contains(&(o.bucket.clone(), o.key.clone()))
    });
    plan.in_use = used.into_iter().map(|(_, name, _)| name).collect();
    for (i, (_, name, object)) in succeeded.into_iter().enumerate() {
        if i < retain {
            plan.kept.push(name);
        } else {
            plan.delete.push(Doomed {
                name,
                object: Some(object),
            });
        }
    }
    for (_, name) in failed.into_iter().skip(retain) {
        plan.delete.push(Doomed { name, object: None });
    }
    plan.delete.reverse();
    plan
}

#[cfg(test)]
mod tests {
    use super::*;
    use etcd_api::{BackupArtifact, EtcdBackupSpec, EtcdBackupStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;
    use std::time::{Duration, UNIX_EPOCH};

    const T0: u64 = 1_700_000_000;

    fn backup(
        name: &str,
        phase: Option<BackupPhase>,
        uri: Option<String>,
        created: i64,
    ) -> EtcdBackup {
        let mut b = EtcdBackup::new(
            name,
            EtcdBackupSpec {
                cluster_name: Some("c".into()),
                endpoints: None,
                tls_secret_ref: None,
                s3: Default::default(),
                timeout_seconds: None,
            },
        );
        b.metadata.creation_timestamp = Some(Time(Timestamp::from_second(created).unwrap()));
        b.status = Some(EtcdBackupStatus {
            phase,
            artifact: uri.map(|uri| BackupArtifact {
                uri,
                ..Default::default()
            }),
            ..Default::default()
        });
        b
    }

    fn ok(name: &str, secs: u64, rev: u64) -> EtcdBackup {
        let key = SnapshotKey::new(UNIX_EPOCH + Duration::from_secs(secs), rev, name)
            .object_key("p/", "c");
        backup(
            name,
            Some(BackupPhase::Succeeded),
            Some(format!("s3://bkt/{key}")),
            secs as i64,
        )
    }

    fn names(plan: &RetentionPlan) -> Vec<&str> {
        plan.delete.iter().map(|d| d.name.as_str()).collect()
    }

    #[test]
    fn keeps_the_newest_by_time() {
        let backups = vec![
            ok("b", T0 + 60, 5),
            ok("a", T0, 9),
            ok("d", T0 + 180, 2),
            ok("c", T0 + 120, 1),
        ];
        let plan = plan_retention(&backups, 2, &InUse::default());
        assert_eq!(plan.kept, ["d", "c"]);
        assert_eq!(names(&plan), ["a", "b"], "oldest first");
        let a = &plan.delete[0];
        let object = a.object.as_ref().unwrap();
        assert_eq!(object.bucket, "bkt");
        assert!(
            object.key.starts_with("p/c/20231114T221320Z-rev9-a"),
            "{}",
            object.key
        );
    }

    #[test]
    fn same_second_orders_by_parsed_revision_not_string() {
        // As strings "rev10" < "rev9"; parsed, 9 < 10 < 100.
        let backups = vec![ok("r10", T0, 10), ok("r9", T0, 9), ok("r100", T0, 100)];
        let plan = plan_retention(&backups, 1, &InUse::default());
        assert_eq!(plan.kept, ["r100"]);
        assert_eq!(names(&plan), ["r9", "r10"]);
        let plan = plan_retention(&backups, 2, &InUse::default());
        assert_eq!(plan.kept, ["r100", "r10"]);
        assert_eq!(names(&plan), ["r9"]);
    }

    #[test]
    fn time_dominates_revision() {
        // A restored cluster restarts at a lower revision: the later backup is newer.
        let backups = vec![
            ok("before-restore", T0, 5000),
            ok("after-restore", T0 + 1, 12),
        ];
        let plan = plan_retention(&backups, 1, &InUse::default());
        assert_eq!(plan.kept, ["after-restore"]);
        assert_eq!(names(&plan), ["before-restore"]);
    }

    #[test]
    fn failed_do_not_count_and_are_bounded_separately() {
        let failed = |n: &str, t: i64| backup(n, Some(BackupPhase::Failed), None, t);
        let backups = vec![
            ok("s1", T0, 1),
            ok("s2", T0 + 10, 2),
            failed("f1", T0 as i64 + 20),
            failed("f2", T0 as i64 + 30),
            failed("f3", T0 as i64 + 40),
        ];
        let plan = plan_retention(&backups, 2, &InUse::default());
        assert_eq!(plan.kept, ["s2", "s1"]);
        assert_eq!(names(&plan), ["f1"]);
        assert_eq!(plan.delete[0].object, None);
    }

    #[test]
    fn running_pending_and_unparseable_are_never_deleted() {
        let backups = vec![
            ok("old", T0, 1),
            ok("new", T0 + 10, 2),
            backup("running", Some(BackupPhase::Running), None, 0),
            backup("pending", Some(BackupPhase::Pending), None, 0),
            backup("fresh", None, None, 0),
            backup(
                "weird",
                Some(BackupPhase::Succeeded),
                Some("s3://bkt/c/notes.db".into()),
                0,
            ),
            backup("no-artifact", Some(BackupPhase::Succeeded), None, 0),
        ];
        let plan = plan_retention(&backups, 1, &InUse::default());
        assert_eq!(names(&plan), ["old"]);
        let unparseable: Vec<&str> = plan.unparseable.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(unparseable, ["weird", "no-artifact"]);
    }

    #[test]
    fn fewer_than_retain_deletes_nothing() {
        let plan = plan_retention(&[ok("a", T0, 1)], 3, &InUse::default());
        assert!(plan.delete.is_empty());
        assert_eq!(plan.kept, ["a"]);
    }

    #[test]
    fn s3_uris() {
        assert_eq!(
            parse_s3_uri("s3://b/k/x.db"),
            Some(S3Object {
                bucket: "b".into(),
                key: "k/x.db".into()
            })
        );
        for bad in ["", "s3://", "s3://b", "s3://b/", "s3:///k", "http://b/k"] {
            assert_eq!(parse_s3_uri(bad), None, "{bad}");
        }
    }

    /// Issue 17 (defect 14): a backup an unfinished EtcdRestore reads is never deleted by
    /// retention (by name or by its object), whatever its age.
    #[test]
    fn a_backup_a_running_restore_reads_is_never_deleted() {
        let backups = vec![ok("a", T0, 1), ok("b", T0 + 60, 2), ok("c", T0 + 120, 3)];
        let by_name = InUse {
            backups: ["a".to_owned()].into(),
            ..InUse::default()
        };
        let plan = plan_retention(&backups, 1, &by_name);
        assert_eq!(names(&plan), ["b"]);
        assert!(plan.in_use.contains(&"a".to_owned()), "{plan:?}");
        let object = parse_s3_uri(
            &backups[0]
                .status
                .as_ref()
                .unwrap()
                .artifact
                .as_ref()
                .unwrap()
                .uri,
        )
        .unwrap();
        let by_object = InUse {
            objects: [(object.bucket, object.key)].into(),
            ..InUse::default()
        };
        assert_eq!(names(&plan_retention(&backups, 1, &by_object)), ["b"]);
    }

    #[test]
    fn unfinished_restores_name_what_they_read() {
        use etcd_api::{
            EtcdRestoreSpec, EtcdRestoreStatus, LocalObjectReference, RestorePhase, RestoreSource,
            S3ObjectSource,
        };
        let restore = |source: RestoreSource, phase: Option<RestorePhase>| {
            let mut r = EtcdRestore::new(
                "r",
                EtcdRestoreSpec {
                    cluster_name: "c".into(),
                    source,
                    cluster_spec: None,
                    force: false,
                    timeout_seconds: None,
                },
            );
            r.status = Some(EtcdRestoreStatus {
                phase,
                ..EtcdRestoreStatus::default()
            });
            r
        };
        let by_ref = |name: &str| RestoreSource {
            backup_ref: Some(LocalObjectReference { name: name.into() }),
            ..RestoreSource::default()
        };
        let mut object = S3ObjectSource::default();
        object.connection.bucket = "bkt".into();
        object.key = "p/c/k.db".into();
        let restores = [
            restore(by_ref("a"), Some(RestorePhase::Running)),
            restore(by_ref("b"), Some(RestorePhase::Succeeded)),
            restore(by_ref("c"), None),
            restore(
                RestoreSource {
                    s3: Some(object),
                    ..RestoreSource::default()
                },
                Some(RestorePhase::Pending),
            ),
        ];
        let used = in_use(&restores);
        assert_eq!(used.backups, ["a".to_owned(), "c".to_owned()].into());
        assert_eq!(
            used.objects,
            [("bkt".to_owned(), "p/c/k.db".to_owned())].into()
        );
    }
}

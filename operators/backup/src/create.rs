//! `etcd-backup-operator create-backup`: what the chart's CronJob runs (I/O, except
//! [`scheduled_backup`] which builds the object).
//!
//! 1. Create an EtcdBackup for the cluster (`generateName: <cluster>-`, labelled
//!    `etcd.operator.rs/cluster=<cluster>` and `etcd.operator.rs/scheduled=true`).
//! 2. With `--wait`, poll it until it is Succeeded or Failed (or the wait times out), so the
//!    Job's status tells the truth: the binary exits non-zero unless it Succeeded.
//! 3. With `--retain N`, apply [`crate::retention`] to the cluster's scheduled EtcdBackups. For
//!    each backup to delete, its S3 object is deleted first (with `--delete-objects`), then the
//!    EtcdBackup: if the object cannot be deleted, the EtcdBackup that records it stays.
//!    Retention runs after the wait, so the new backup counts once it succeeded; it also runs
//!    when the new backup failed (failed backups never push good ones out).

use std::collections::BTreeMap;
use std::time::Duration;

use etcd_api::{BackupPhase, EtcdBackup, EtcdBackupSpec, EtcdRestore, S3Destination};
use kube::Api;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::core::ObjectMeta;
use tokio::time::Instant;

use crate::execute::{BackupError, CLUSTER_LABEL, resolve_s3, s3_client};
use crate::retention::{RetentionPlan, in_use, plan_retention};

/// Label marking EtcdBackups created by `create-backup` (the only ones retention touches).
pub const SCHEDULED_LABEL: &str = "etcd.operator.rs/scheduled";
/// How often `--wait` looks at the backup.
pub const WAIT_POLL: Duration = Duration::from_secs(2);

/// What to create and what to clean up.
#[derive(Clone, Debug)]
pub struct CreateBackup {
    /// The EtcdCluster to back up.
    pub cluster: String,
    /// Its namespace (and the EtcdBackups').
    pub namespace: String,
    /// The destination.
    pub s3: S3Destination,
    /// `spec.timeoutSeconds`.
    pub timeout_seconds: Option<i64>,
    /// Wait this long for the backup to finish.
    pub wait: Option<Duration>,
    /// Keep this many Succeeded scheduled backups.
    pub retain: Option<usize>,
    /// Also delete the S3 objects of the backups retention deletes.
    pub delete_objects: bool,
}

/// Why `create-backup` failed.
#[derive(Debug, thiserror::Error)]
pub enum CreateError {
    /// Creating the EtcdBackup failed.
    #[error("creating an EtcdBackup for {namespace}/{cluster}: {source}")]
    Create {
        /// Namespace.
        namespace: String,
        /// Cluster.
        cluster: String,
        /// API error.
        source: Box<kube::Error>,
    },
    /// Reading, listing or deleting EtcdBackups failed.
    #[error("{what}: {source}")]
    Kubernetes {
        /// What was attempted.
        what: String,
        /// API error.
        source: Box<kube::Error>,
    },
    /// The backup did not finish within `--wait`.
    #[error("EtcdBackup {name} did not finish within {waited:?}")]
    WaitTimeout {
        /// The backup.
        name: String,
        /// How long we waited.
        waited: Duration,
    },
    /// The S3 settings of a backup to delete could not be resolved.
    #[error("EtcdBackup {name}: {source}")]
    S3Settings {
        /// The backup.
        name: String,
        /// Why.
        source: Box<BackupError>,
    },
    /// Deleting a snapshot object failed; its EtcdBackup was kept.
    #[error("deleting {uri} (EtcdBackup {name}, kept): {detail}")]
    DeleteObject {
        /// The backup.
        name: String,
        /// The object.
        uri: String,
        /// The S3 error.
        detail: String,
    },
}

/// What `create-backup` did.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// Name of the created EtcdBackup.
    pub name: String,
    /// Its phase when we stopped looking (`None` without `--wait`).
    pub phase: Option<BackupPhase>,
    /// Its status message, when finished.
    pub message: Option<String>,
    /// What retention decided (empty without `--retain`).
    pub retention: RetentionPlan,
}

impl Outcome {
    /// The exit status the CronJob's Job should see: success unless we waited and it did not
    /// succeed.
    pub fn succeeded(&self, waited: bool) -> bool {
        !waited || self.phase == Some(BackupPhase::Succeeded)
    }
}

/// The EtcdBackup `create-backup` creates (pure).
pub fn scheduled_backup(request: &CreateBackup) -> EtcdBackup {
    EtcdBackup {
        metadata: ObjectMeta {
            generate_name: Some(format!("{}-", request.cluster)),
            namespace: Some(request.namespace.clone()),
            labels: Some(BTreeMap::from([
                (CLUSTER_LABEL.to_owned(), request.cluster.clone()),
                (SCHEDULED_LABEL.to_owned(), "true".to_owned()),
            ])),
            ..Default::default()
        },
        spec: EtcdBackupSpec {
            cluster_name: Some(request.cluster.clone()),
            endpoints: None,
            tls_secret_ref: None,
            s3: request.s3.clone(),
            timeout_seconds: request.timeout_seconds,
        },
        status: None,
    }
}

/// Steps 1–3 of the module docs.
pub async fn create_backup(
    client: &kube::Client,
    request: &CreateBackup,
) -> Result<Outcome, CreateError> {
    let api: Api<EtcdBackup> = Api::namespaced(client.clone(), &request.namespace);
    let created = failpoint::around(
        "backup.backup_create",
        api.create(&PostParams::default(), &scheduled_backup(request)),
    )
    .await
    .map_err(|e| CreateError::Create {
        namespace: request.namespace.clone(),
        cluster: request.cluster.clone(),
        source: Box::new(e),
    })?;
    let name = created.metadata.name.clone().unwrap_or_default();
    tracing::info!(namespace = %request.namespace, %name, "created EtcdBackup");
    let mut outcome = Outcome {
        name: name.clone(),
        phase: None,
        message: None,
        retention: RetentionPlan::default(),
    };
    if let Some(wait) = request.wait {
        let finished = wait_finished(&api, &name, wait).await?;
        let status = finished.status.unwrap_or_default();
        outcome.phase = status.phase;
        outcome.message = status.message;
    }
    if let Some(retain) = request.retain {
        outcome.retention = apply_retention(client, request, retain).await?;
    }
    Ok(outcome)
}

async fn wait_finished(
    api: &Api<EtcdBackup>,
    name: &str,
    wait: Duration,
) -> Result<EtcdBackup, CreateError> {
    let start = Instant::now();
    loop {
        let backup = api.get(name).await.map_err(|e| CreateError::Kubernetes {
            what: format!("reading EtcdBackup {name}"),
            source: Box::new(e),
        })?;
        if backup
            .status
            .as_ref()
            .and_then(|s| s.phase)
            .is_some_and(BackupPhase::is_finished)
        {
            return Ok(backup);
        }
        if start.elapsed() >= wait {
            return Err(CreateError::WaitTimeout {
                name: name.to_owned(),
                waited: start.elapsed(),
            });
        }
        tokio::time::sleep(WAIT_POLL.min(wait.saturating_sub(start.elapsed()))).await;
    }
}

/// Lists the cluster's scheduled EtcdBackups, plans retention and carries it out.
pub async fn apply_retention(
    client: &kube::Client,
    request: &CreateBackup,
    retain: usize,
) -> Result<RetentionPlan, CreateError> {
    let api: Api<EtcdBackup> = Api::namespaced(client.clone(), &request.namespace);
    let selector = format!("{CLUSTER_LABEL}={},{SCHEDULED_LABEL}=true", request.cluster);
    let backups = api
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(|e| CreateError::Kubernetes {
            what: format!("listing EtcdBackups {selector}"),
            source: Box::new(e),
        })?;
    // Backups an unfinished EtcdRestore reads are never deleted.
    let restores: Api<EtcdRestore> = Api::namespaced(client.clone(), &request.namespace);
    let restores =
        restores
            .list(&ListParams::default())
            .await
            .map_err(|e| CreateError::Kubernetes {
                what: "listing EtcdRestores".to_owned(),
                source: Box::new(e),
            })?;
    let plan = plan_retention(&backups.items, retain, &in_use(&restores.items));
    for name in &plan.in_use {
        tracing::info!(%name, "kept: an unfinished EtcdRestore reads it");
    }
    for (name, error) in &plan.unparseable {
        tracing::warn!(%name, %error, "kept: its artifact key does not parse, so it cannot be ordered");
    }
    for doomed in &plan.delete {
        if request.delete_objects
            && let Some(object) = &doomed.object
        {
            let backup = backups
                .items
                .iter()
                .find(|b| b.metadata.name.as_deref() == Some(doomed.name.as_str()));
            let destination = backup.map(|b| b.spec.s3.clone()).unwrap_or_default();
            let target = resolve_s3(client, &request.namespace, &destination)
                .await
                .map_err(|e| CreateError::S3Settings {
                    name: doomed.name.clone(),
                    source: Box::new(e),
                })?;
            let s3 = s3_client(&target).await;
            failpoint::around(
                "backup.retention_s3_delete",
                s3.delete_object()
                    .bucket(&object.bucket)
                    .key(&object.key)
                    .send(),
            )
            .await
            .map_err(|e| CreateError::DeleteObject {
                name: doomed.name.clone(),
                uri: format!("s3://{}/{}", object.bucket, object.key),
                detail: aws_sdk_s3::error::DisplayErrorContext(&e).to_string(),
            })?;
            tracing::info!(name = %doomed.name, bucket = %object.bucket, key = %object.key, "deleted snapshot object");
        }
        match failpoint::around(
            "backup.retention_backup_delete",
            api.delete(&doomed.name, &DeleteParams::default()),
        )
        .await
        {
            Ok(_) => tracing::info!(name = %doomed.name, "deleted EtcdBackup (retention)"),
            // Someone else deleted it meanwhile: the goal is reached.
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => {
                return Err(CreateError::Kubernetes {
                    what: format!("deleting EtcdBackup {}", doomed.name),
                    source: Box::new(e),
                });
            }
        }
    }
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;
    use etcd_api::S3Connection;

    #[test]
    fn scheduled_backup_is_labelled_and_generated() {
        let request = CreateBackup {
            cluster: "main".into(),
            namespace: "db".into(),
            s3: S3Destination {
                connection: S3Connection {
                    bucket: "bkt".into(),
                    ..Default::default()
                },
                prefix: Some("p/".into()),
            },
            timeout_seconds: Some(600),
            wait: None,
            retain: Some(3),
            delete_objects: false,
        };
        let b = scheduled_backup(&request);
        assert_eq!(b.metadata.generate_name.as_deref(), Some("main-"));
        assert_eq!(b.metadata.name, None);
        assert_eq!(b.metadata.namespace.as_deref(), Some("db"));
        let labels = b.metadata.labels.unwrap();
        assert_eq!(
            labels.get("etcd.operator.rs/cluster").map(String::as_str),
            Some("main")
        );
        assert_eq!(
            labels.get("etcd.operator.rs/scheduled").map(String::as_str),
            Some("true")
        );
        assert_eq!(b.spec.cluster_name.as_deref(), Some("main"));
        assert_eq!(b.spec.endpoints, None);
        assert_eq!(b.spec.s3, request.s3);
        assert_eq!(b.spec.timeout_seconds, Some(600));
    }

    #[test]
    fn exit_status() {
        let mut o = Outcome {
            name: "x".into(),
            phase: None,
            message: None,
            retention: Default::default(),
        };
        assert!(o.succeeded(false));
        assert!(!o.succeeded(true));
        o.phase = Some(BackupPhase::Failed);
        assert!(!o.succeeded(true));
        o.phase = Some(BackupPhase::Succeeded);
        assert!(o.succeeded(true));
    }
}

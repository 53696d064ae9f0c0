//! The EtcdBackup controller (I/O): a kube-runtime `Controller` on EtcdBackup whose reconcile
//! plans ([`crate::plan::next_step`]) and, for a new backup, writes `Running` and hands the
//! backup to a task that runs it to completion and writes the outcome.
//!
//! Concurrency: at most `max_concurrent_backups` run at once (a semaphore; each holds a permit for
//! its whole run). A backup that finds no free slot stays `Pending` and is requeued every
//! [`QUEUE_POLL`]. The reconcile itself stays short, so the controller keeps serving other
//! objects (skips, interrupted ones) while long uploads run.
//!
//! Ordering: the UID is recorded as running in this process before `Running` is written, and
//! `Running` is written before the task starts. So a `Running` backup that no process remembers
//! was interrupted (see `plan`). The outcome is written with retries; if it can never be
//! written (API down for longer than [`OUTCOME_WRITE_DEADLINE`]) the backup stays `Running` and
//! the next operator start marks it `Interrupted`.
//!
//! Shutdown (SIGTERM or leadership lost): the token is cancelled, the running snapshot sources
//! fail, uploads are aborted, each task writes `Failed`/`Interrupted`, and [`run`] returns once
//! they are done (bounded by the executor's grace period).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use etcd_api::condition::Time;
use etcd_api::{EtcdBackup, EtcdBackupStatus};
use futures_util::StreamExt;
use k8s_openapi::jiff::Timestamp;
use kube::runtime::controller::{Action, Config as ControllerConfig, Controller};
use kube::runtime::watcher;
use kube::{Api, Resource, ResourceExt};
use operator_runtime::{Events, FailureBackoff, NamespaceClaims, Readiness, apply_status};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::execute::{BackupError, execute, resolve};
use crate::metrics::{BackupLabels, Metrics};
use crate::plan::{LocalState, Step, next_step};
use crate::status;

/// Field manager of every status write, and the events' reporting controller.
pub const FIELD_MANAGER: &str = "etcd-backup-operator";
/// How often a backup waiting for a free slot is looked at again.
pub const QUEUE_POLL: Duration = Duration::from_secs(10);
/// How long a finished backup's task keeps retrying its status write.
pub const OUTCOME_WRITE_DEADLINE: Duration = Duration::from_secs(300);

/// What [`run`] needs besides the client.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Watch only this namespace; `None` watches all.
    pub namespace: Option<String>,
    /// Backups running at once in this process.
    pub max_concurrent_backups: usize,
    /// This Pod's name (the events' reporting instance).
    pub pod_name: Option<String>,
    /// This install's identity in the namespace claims (`ShellArgs::install_identity`).
    pub install: String,
}

/// Why a reconcile failed (it is retried with per-object back-off).
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// The object has no UID or namespace (it did not come from the API server).
    #[error("EtcdBackup {0} has no uid or namespace")]
    Incomplete(String),
    /// Writing the status failed.
    #[error("writing the status of EtcdBackup {namespace}/{name}: {source}")]
    StatusWrite {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// The API error.
        source: Box<kube::Error>,
    },
    /// Reading or writing the namespace's claim failed: not known whether this install may act.
    #[error("claiming namespace {namespace} for this install: {source}")]
    Claim {
        /// The namespace.
        namespace: String,
        /// The API error.
        source: Box<kube::Error>,
    },
    /// Looking for what an interrupted run left in S3 failed (retried with back-off).
    #[error("EtcdBackup {name} was interrupted; checking S3 for its object failed: {error}")]
    InterruptedCheck {
        /// Name.
        name: String,
        /// The S3 error.
        error: String,
    },
}

impl ReconcileError {
    /// Every value [`ReconcileError::reason`] can return, created at 0 in
    /// `etcd_operator_reconcile_errors_total` when the metrics are registered. A new reason
    /// belongs here too (the test below checks the variants it can build).
    pub const REASONS: &'static [&'static str] = &[
        "IncompleteObject",
        "StatusWriteFailed",
        "InterruptedCheckFailed",
        "ClaimFailed",
    ];

    /// PascalCase reason for logs and metrics.
    pub fn reason(&self) -> &'static str {
        match self {
            ReconcileError::Incomplete(_) => "IncompleteObject",
            ReconcileError::StatusWrite { .. } => "StatusWriteFailed",
            ReconcileError::InterruptedCheck { .. } => "InterruptedCheckFailed",
            ReconcileError::Claim { .. } => "ClaimFailed",
        }
    }
}

/// Why what an interrupted run left could not be looked at.
enum LeftBehindError {
    /// The destination (credentials Secret) cannot be resolved: reported as unchecked.
    Unresolved(String),
    /// S3 did not answer: retried.
    S3(String),
}

/// What the interrupted run of `backup` left in S3 (see [`crate::execute::find_left_behind`]),
/// after aborting the multipart upload it left pending, if any
/// ([`crate::execute::abort_left_uploads`]). The key's cluster part is the one the run used:
/// `spec.clusterName`, else the cluster label, else the backup's name.
async fn left_behind(
    client: &kube::Client,
    backup: &EtcdBackup,
    namespace: &str,
    uid: &str,
) -> Result<crate::execute::LeftBehind, LeftBehindError> {
    let target = crate::execute::resolve_s3(client, namespace, &backup.spec.s3)
        .await
        .map_err(|e| LeftBehindError::Unresolved(e.to_string()))?;
    let cluster = crate::execute::key_cluster(backup);
    let s3 = crate::execute::s3_client(&target).await;
    // First: a pending upload is never completed after this, so the object found next is the
    // only one the run can ever leave.
    let aborted = crate::execute::abort_left_uploads(&s3, &target, &cluster, uid)
        .await
        .map_err(LeftBehindError::S3)?;
    if !aborted.is_empty() {
        tracing::info!(
            uid,
            ?aborted,
            "aborted the multipart upload an interrupted backup left pending"
        );
    }
    crate::execute::find_left_behind(&s3, &target, &cluster, uid)
        .await
        .map_err(LeftBehindError::S3)
}

/// Shared by reconciles and backup tasks.
struct Context {
    client: kube::Client,
    events: Events,
    /// Backups this process is running or has finished, by UID (see `plan::LocalState`).
    local: Mutex<HashMap<String, LocalState>>,
    slots: Arc<Semaphore>,
    shutdown: CancellationToken,
    tasks: Mutex<JoinSet<()>>,
    backoff: FailureBackoff,
    metrics: Metrics,
    /// Which install acts in each namespace.
    claims: NamespaceClaims,
}

impl Context {
    fn local(&self) -> std::sync::MutexGuard<'_, HashMap<String, LocalState>> {
        self.local.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn now() -> Time {
    Time(Timestamp::now())
}

/// Runs the controller until `shutdown` is cancelled, then waits for running backups to wind
/// down. `readiness` turns ready when the controller starts.
pub async fn run(
    client: kube::Client,
    settings: Settings,
    shutdown: CancellationToken,
    readiness: Readiness,
) {
    let metrics = Metrics::register(&mut operator_runtime::metrics::new_registry());
    run_with_metrics(client, settings, shutdown, readiness, metrics).await;
}

/// [`run`], recording into `metrics` (registered in the registry the probe server renders).
pub async fn run_with_metrics(
    client: kube::Client,
    settings: Settings,
    shutdown: CancellationToken,
    readiness: Readiness,
    metrics: Metrics,
) {
    let api: Api<EtcdBackup> = match &settings.namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let ctx = Arc::new(Context {
        events: Events::new(client.clone(), FIELD_MANAGER, settings.pod_name.clone()),
        client: client.clone(),
        local: Mutex::new(HashMap::new()),
        slots: Arc::new(Semaphore::new(settings.max_concurrent_backups.max(1))),
        shutdown: shutdown.clone(),
        tasks: Mutex::new(JoinSet::new()),
        backoff: FailureBackoff::new(Duration::from_secs(2), Duration::from_secs(300)),
        metrics,
        claims: NamespaceClaims::new(client.clone(), FIELD_MANAGER, settings.install.clone()),
    });
    let controller = Controller::new(api, watcher::Config::default())
        .with_config(ControllerConfig::default().concurrency(16));
    // A cluster's series go when its last EtcdBackup does (deletion is not a reconcile).
    let store = controller.store();
    let metrics = ctx.metrics.clone();
    let sweep = tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_secs(15)).await;
            let present: std::collections::HashSet<BackupLabels> =
                store.state().iter().map(|b| BackupLabels::of(b)).collect();
            metrics.retain(|labels| present.contains(labels));
        }
    });
    // Ready once the controller runs. (Waiting on `store.wait_until_ready()` from a second task
    // does not work in kube-runtime 5.0: the store wakes only its last waiter, which is the
    // controller itself, so the probe stayed 503 forever.)
    readiness.set_ready(true);
    controller
        .graceful_shutdown_on(shutdown.clone().cancelled_owned())
        .run(reconcile, error_policy, Arc::clone(&ctx))
        .for_each(|result| async move {
            if let Err(error) = result {
                tracing::debug!(%error, "reconcile failed");
            }
        })
        .await;
    // The tasks saw the same cancellation: they abort their uploads and record the outcome.
    let mut tasks = std::mem::take(&mut *ctx.tasks.lock().unwrap_or_else(PoisonError::into_inner));
    while tasks.join_next().await.is_some() {}
    // Let the namespaces go at once, so another install can take them.
    ctx.claims.release_all().await;
    sweep.abort();
}

async fn reconcile(backup: Arc<EtcdBackup>, ctx: Arc<Context>) -> Result<Action, ReconcileError> {
    let started = std::time::Instant::now();
    ctx.metrics.observe(&backup);
    let result = reconcile_once(backup, &ctx).await;
    ctx.metrics.reconciles.reconciled(
        started.elapsed(),
        result.as_ref().err().map(ReconcileError::reason),
    );
    result
}

async fn reconcile_once(
    backup: Arc<EtcdBackup>,
    ctx: &Arc<Context>,
) -> Result<Action, ReconcileError> {
    let name = backup.name_any();
    let (Some(uid), Some(namespace)) = (backup.uid(), backup.namespace()) else {
        return Err(ReconcileError::Incomplete(name));
    };
    let admitted = ctx.claims.admit(backup.as_ref(), &ctx.events).await;
    match admitted.map_err(|source| ReconcileError::Claim {
        namespace: namespace.clone(),
        source: Box::new(source),
    })? {
        true => {}
        false => return Ok(Action::requeue(operator_runtime::claim::RECHECK_AFTER)),
    }
    // Reap finished tasks so the set does not grow.
    {
        let mut tasks = ctx.tasks.lock().unwrap_or_else(PoisonError::into_inner);
        while tasks.try_join_next().is_some() {}
    }
    let local = ctx.local().get(&uid).copied();
    let step = next_step(&backup, local);
    let api: Api<EtcdBackup> = Api::namespaced(ctx.client.clone(), &namespace);
    let write = |status: EtcdBackupStatus| {
        let (api, name, namespace) = (api.clone(), name.clone(), namespace.clone());
        async move {
            failpoint::around(
                "backup.status",
                apply_status(&api, &name, FIELD_MANAGER, &status),
            )
            .await
            .map_err(|e| ReconcileError::StatusWrite {
                namespace,
                name,
                source: Box::new(e),
            })
        }
    };
    let action = match step {
        Step::Skip(_) => Action::await_change(),
        Step::FailInterrupted => {
            let previous = backup.status.as_ref();
            let s3 = &backup.spec.s3;
            let objects = format!(
                "s3://{}/{}*-{uid}.db",
                s3.connection.bucket,
                s3.prefix.as_deref().unwrap_or_default()
            );
            // Before saying anything about the object, look for it (issue 17, defect 14). An
            // S3 error is retried with back-off (the status stays Running meanwhile); only a
            // destination that cannot be resolved at all is reported as unchecked.
            let left = match left_behind(&ctx.client, &backup, &namespace, &uid).await {
                Err(LeftBehindError::S3(error)) => {
                    return Err(ReconcileError::InterruptedCheck {
                        name: name.clone(),
                        error,
                    });
                }
                Err(LeftBehindError::Unresolved(error)) => Err(error),
                Ok(left) => Ok(left),
            };
            let outcome = status::after_interruption(
                previous,
                backup.meta().generation,
                &left,
                &objects,
                &now(),
            );
            let adopted = outcome.phase == Some(etcd_api::BackupPhase::Succeeded);
            let message = outcome.message.clone().unwrap_or_default();
            write(outcome).await?;
            ctx.local().insert(uid.clone(), LocalState::Finished);
            if adopted {
                ctx.metrics.reconciles.action("BackupAdopted");
                tracing::info!(%namespace, %name, "backup was running when the operator stopped; its completed upload was adopted");
                ctx.events
                    .normal(&backup.object_ref(&()), "BackupAdopted", message)
                    .await;
            } else {
                ctx.metrics.failed(&backup, status::REASON_INTERRUPTED);
                ctx.metrics.reconciles.action("BackupFailed");
                tracing::warn!(%namespace, %name, "backup was running when the operator stopped: marked Interrupted");
                ctx.events
                    .warning(
                        &backup.object_ref(&()),
                        "BackupFailed",
                        format!("Interrupted: {message}"),
                    )
                    .await;
            }
            Action::await_change()
        }
        Step::Start => {
            let Ok(permit) = Arc::clone(&ctx.slots).try_acquire_owned() else {
                tracing::info!(%namespace, %name, "all backup slots busy; staying Pending");
                ctx.backoff.success(&uid);
                return Ok(Action::requeue(QUEUE_POLL));
            };
            // Remembered before Running is written, so the watch event of our own write finds
            // it running here rather than interrupted.
            ctx.local().insert(uid.clone(), LocalState::Running);
            let running = status::running(backup.status.as_ref(), backup.meta().generation, &now());
            if let Err(e) = write(running.clone()).await {
                ctx.local().remove(&uid);
                return Err(e);
            }
            tracing::info!(%namespace, %name, "backup started");
            ctx.metrics.reconciles.action("BackupStarted");
            ctx.events
                .normal(
                    &backup.object_ref(&()),
                    "BackupStarted",
                    "streaming an etcd snapshot to S3",
                )
                .await;
            let task = run_backup(Arc::clone(ctx), backup, running, uid.clone(), permit);
            ctx.tasks
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .spawn(task);
            Action::await_change()
        }
    };
    ctx.backoff.success(&uid);
    Ok(action)
}

/// Runs one backup to completion and records the outcome.
async fn run_backup(
    ctx: Arc<Context>,
    backup: Arc<EtcdBackup>,
    running: EtcdBackupStatus,
    uid: String,
    _permit: OwnedSemaphorePermit,
) {
    let name = backup.name_any();
    let namespace = backup.namespace().unwrap_or_default();
    let result = match resolve(&ctx.client, &backup).await {
        Ok(job) => execute(&job, &ctx.shutdown).await,
        Err(e) => Err(e),
    };
    let generation = backup.meta().generation;
    let object = backup.object_ref(&());
    if let Err(e) = &result
        && e.completion_unknown()
    {
        return completion_unknown(&ctx, &backup, &running, &uid, e).await;
    }
    let outcome = match result {
        Ok(artifact) => {
            let note = format!(
                "stored {} ({} bytes, revision {})",
                artifact.uri, artifact.size_bytes, artifact.revision
            );
            tracing::info!(%namespace, %name, uri = %artifact.uri, size = artifact.size_bytes, revision = artifact.revision, "backup succeeded");
            (
                status::succeeded(Some(&running), generation, artifact, &now()),
                None,
                note,
            )
        }
        Err(e) => {
            let (reason, message) = (e.reason(), e.to_string());
            tracing::warn!(%namespace, %name, reason, error = %message, "backup failed");
            (
                status::failed(Some(&running), generation, reason, &message, &now()),
                Some(reason),
                format!("{reason}: {message}"),
            )
        }
    };
    let (final_status, failure, note) = outcome;
    write_outcome(&ctx.client, &namespace, &name, &final_status).await;
    ctx.local().insert(uid, LocalState::Finished);
    match failure {
        None => ctx.metrics.reconciles.action("BackupSucceeded"),
        Some(reason) => {
            ctx.metrics.failed(&backup, reason);
            ctx.metrics.reconciles.action("BackupFailed");
        }
    }
    match failure {
        None => ctx.events.normal(&object, "BackupSucceeded", note).await,
        Some(_) => ctx.events.warning(&object, "BackupFailed", note).await,
    }
}

/// Writes a backup task's last status (its outcome, or that the outcome is unknown), retried
/// for up to [`OUTCOME_WRITE_DEADLINE`]. Not written at all, the backup stays Running and the
/// next start (or reconcile) looks at what the run left in S3.
async fn write_outcome(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    final_status: &EtcdBackupStatus,
) {
    let api: Api<EtcdBackup> = Api::namespaced(client.clone(), namespace);
    let deadline = tokio::time::Instant::now() + OUTCOME_WRITE_DEADLINE;
    let mut delay = Duration::from_millis(500);
    loop {
        match failpoint::around(
            "backup.status_outcome",
            apply_status(&api, name, FIELD_MANAGER, final_status),
        )
        .await
        {
            Ok(_) => break,
            Err(kube::Error::Api(e)) if e.code == 404 => {
                tracing::info!(%namespace, %name, "backup deleted while running; outcome not recorded");
                break;
            }
            Err(error) if tokio::time::Instant::now() + delay < deadline => {
                tracing::warn!(%namespace, %name, %error, "writing the outcome failed; retrying");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(30));
            }
            Err(error) => {
                tracing::error!(%namespace, %name, %error, "could not record the outcome; the next start marks the backup Interrupted");
                break;
            }
        }
    }
}

/// The upload's completion may have been applied and S3 did not answer the read-back: the
/// backup stays `Running` ([`status::completion_unknown`]) and this process forgets it, so the
/// reconcile that our status write triggers looks for its object like after an interrupted run
/// (S3 errors retried with back-off meanwhile) and adopts it or fails the backup on an answer.
/// Never `Failed` while its object may be in place (issue 18).
async fn completion_unknown(
    ctx: &Context,
    backup: &EtcdBackup,
    running: &EtcdBackupStatus,
    uid: &str,
    error: &BackupError,
) {
    let name = backup.name_any();
    let namespace = backup.namespace().unwrap_or_default();
    let message = error.to_string();
    tracing::warn!(%namespace, %name, error = %message, "backup outcome unknown; checking S3 again");
    let unsure =
        status::completion_unknown(Some(running), backup.meta().generation, &message, &now());
    // Forgotten before the write, so that the write's watch event finds no run here.
    ctx.local().remove(uid);
    write_outcome(&ctx.client, &namespace, &name, &unsure).await;
    ctx.events
        .warning(
            &backup.object_ref(&()),
            status::REASON_COMPLETION_UNKNOWN,
            message,
        )
        .await;
}

fn error_policy(backup: Arc<EtcdBackup>, error: &ReconcileError, ctx: Arc<Context>) -> Action {
    operator_runtime::backoff::requeue_failure(&*backup, error.reason(), error, &ctx.backoff)
}

#[cfg(test)]
mod reason_tests {
    use super::*;

    #[test]
    fn every_reason_is_listed_for_the_metrics() {
        let errors = [
            ReconcileError::Incomplete("b".into()),
            ReconcileError::StatusWrite {
                namespace: "db".into(),
                name: "b".into(),
                source: Box::new(kube::Error::LinesCodecMaxLineLengthExceeded),
            },
            ReconcileError::InterruptedCheck {
                name: "b".into(),
                error: "S3 down".into(),
            },
            ReconcileError::Claim {
                namespace: "db".into(),
                source: Box::new(kube::Error::LinesCodecMaxLineLengthExceeded),
            },
        ];
        for error in errors {
            assert!(
                ReconcileError::REASONS.contains(&error.reason()),
                "{} is not in ReconcileError::REASONS",
                error.reason()
            );
        }
    }
}

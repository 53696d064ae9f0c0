//! The reconcile loop: observe → plan → record status → execute one step. I/O.
//!
//! A running restore is looked at again every [`ACTIVE_POLL`] (the seed's init container, etcd
//! and the cluster operator make progress without touching the EtcdRestore); a finished and
//! clean one waits for a change. The status write of a step comes before its object change:
//! a step that is a status write (start, seed revision, hand-over, outcome) is then done, and an
//! object change repeated after a crash is idempotent.

use std::sync::Arc;
use std::time::Duration;

use etcd_api::{EtcdRestore, EtcdRestoreStatus};
use futures_util::StreamExt;
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::Api;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use operator_runtime::{Events, FailureBackoff, NamespaceClaims, Readiness, apply_status};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, info, info_span};

use crate::execute::{ExecError, Executor};
use crate::metrics::{Metrics, RestoreLabels};
use crate::observe::observe;
use crate::plan::{Step, Waiting, next_step};
use crate::status::{event_for, next_status};

/// Field manager of the status and of the objects this operator changes.
pub const FIELD_MANAGER: &str = "etcd-restore-operator";
/// How often a running restore is observed again.
pub const ACTIVE_POLL: Duration = Duration::from_secs(2);
/// How often a restore waiting on its critical path is observed again: for its seed to serve,
/// then for the cluster to be back at full size. Nothing but this poll notices either (this
/// controller watches EtcdRestores only): at [`ACTIVE_POLL`] each was seen a second late on
/// average (the restore bench: the seed's data restored at 7.0 s, the seed seen ready at 9.6 s).
/// A look is a few reads of the API server and one etcd status request.
pub const CRITICAL_WAIT_POLL: Duration = Duration::from_millis(500);

/// How often a restore waiting for an old member's Pod to go is observed again. The hand-over
/// waits for it, and nothing but this poll notices it (this controller watches EtcdRestores
/// only); the Pod of an etcd that lost its quorum goes within a few hundred milliseconds. At
/// [`ACTIVE_POLL`] the restore bench's hand-over waited 2 s on it once the steps before it ran
/// in a row. A look is a few reads of the API server.
pub const OLD_POD_POLL: Duration = Duration::from_millis(200);

/// Settings of the controller.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Watch this namespace only.
    pub namespace: Option<String>,
    /// The image whose binary prepares a seed (the chart's operator image).
    pub seed_image: String,
    /// The seed Pods' ServiceAccount (in the cluster's namespace), e.g. one annotated for
    /// workload identity so `prepare-seed` reads S3 with ambient credentials; `None`: the
    /// namespace's default.
    pub seed_service_account: Option<String>,
    /// Secrets (in the cluster's namespace) to pull `seed_image` with.
    pub seed_image_pull_secrets: Vec<String>,
    /// Timeout of each etcd call.
    pub etcd_timeout: Duration,
    /// This replica's Pod name (events' reporting instance).
    pub pod_name: Option<String>,
    /// This install's identity in the namespace claims (`ShellArgs::install_identity`).
    pub install: String,
}

struct Context {
    client: kube::Client,
    settings: Settings,
    events: Events,
    backoff: FailureBackoff,
    metrics: Metrics,
    /// Which install acts in each namespace.
    claims: NamespaceClaims,
}

/// A failed reconcile.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// Reading the API failed.
    #[error("observing: {0}")]
    Observe(kube::Error),
    /// Writing the status failed.
    #[error("writing the status: {0}")]
    Status(kube::Error),
    /// The step failed.
    #[error(transparent)]
    Execute(#[from] ExecError),
    /// Reading or writing the namespace's claim failed: not known whether this install may act.
    #[error("claiming the namespace for this install: {0}")]
    Claim(kube::Error),
}

impl ReconcileError {
    /// Every value [`ReconcileError::reason`] can return, created at 0 in
    /// `etcd_operator_reconcile_errors_total` when the metrics are registered. A new reason
    /// belongs here too (the test below checks the variants it can build).
    pub const REASONS: &'static [&'static str] = &[
        "ObserveFailed",
        "StatusWriteFailed",
        "ApiError",
        "SeedBuildFailed",
        "ObjectChanged",
        "ClaimFailed",
    ];

    /// PascalCase cause for logs.
    pub fn reason(&self) -> &'static str {
        match self {
            ReconcileError::Observe(_) => "ObserveFailed",
            ReconcileError::Status(_) => "StatusWriteFailed",
            ReconcileError::Execute(e) => e.reason(),
            ReconcileError::Claim(_) => "ClaimFailed",
        }
    }
}

/// Runs the controller until `shutdown` is cancelled.
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
    let api: Api<EtcdRestore> = match &settings.namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let ctx = Arc::new(Context {
        events: Events::new(client.clone(), FIELD_MANAGER, settings.pod_name.clone()),
        claims: NamespaceClaims::new(client.clone(), FIELD_MANAGER, settings.install.clone()),
        client,
        settings,
        backoff: FailureBackoff::new(Duration::from_secs(1), Duration::from_secs(120)),
        metrics,
    });
    let controller = Controller::new(api, watcher::Config::default());
    // A deleted EtcdRestore's series go with it (deletion is not a reconcile).
    let store = controller.store();
    let metrics = ctx.metrics.clone();
    let sweep = tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_secs(15)).await;
            let present: std::collections::HashSet<RestoreLabels> =
                store.state().iter().map(|r| RestoreLabels::of(r)).collect();
            metrics.retain(|labels| present.contains(labels));
        }
    });
    readiness.set_ready(true);
    controller
        .graceful_shutdown_on(shutdown.cancelled_owned())
        .run(reconcile, error_policy, ctx.clone())
        .for_each(|result| async move {
            if let Err(error) = result {
                tracing::debug!(%error, "reconcile stream");
            }
        })
        .await;
    sweep.abort();
    // Let the namespaces go at once, so another install can take them.
    ctx.claims.release_all().await;
}

async fn reconcile(restore: Arc<EtcdRestore>, ctx: Arc<Context>) -> Result<Action, ReconcileError> {
    let span = info_span!(
        "reconcile",
        namespace = restore.namespace().unwrap_or_default(),
        name = restore.name_any(),
        cluster = %restore.spec.cluster_name,
    );
    async move {
        let started = std::time::Instant::now();
        ctx.metrics.observe(&restore, Timestamp::now());
        let result = reconcile_once(&restore, &ctx).await;
        ctx.metrics.reconciles.reconciled(
            started.elapsed(),
            result.as_ref().err().map(ReconcileError::reason),
        );
        let action = result?;
        ctx.backoff.success(&restore.uid().unwrap_or_default());
        Ok(action)
    }
    .instrument(span)
    .await
}

/// How many steps one reconcile takes at most when each is followed by another at once (the
/// rest follow at the next reconcile, [`requeue_after`]). From the seed serving to the
/// release, a restore takes five steps in a row (record the seed, retain and stop the old
/// member, hand over, admit the seed, release); one step per reconcile, each after a 200 ms
/// requeue, spread them over 0.8 s (the restore bench). A bound, so a step whose effect did not
/// show yet cannot repeat at the API server's pace.
pub const STEPS_PER_RECONCILE: usize = 8;

async fn reconcile_once(restore: &EtcdRestore, ctx: &Context) -> Result<Action, ReconcileError> {
    let admitted = ctx.claims.admit(restore, &ctx.events).await;
    if !admitted.map_err(ReconcileError::Claim)? {
        return Ok(Action::requeue(operator_runtime::claim::RECHECK_AFTER));
    }
    // Each step is planned from live reads (the restore read again, the rest observed
    // afresh), so the next one sees the effect of the last: the same as a reconcile per step,
    // without the wait between.
    let api: Api<EtcdRestore> =
        Api::namespaced(ctx.client.clone(), &restore.namespace().unwrap_or_default());
    let mut current = restore.clone();
    let mut step = Step::Done;
    for taken in 0..STEPS_PER_RECONCILE {
        if taken > 0 {
            match api
                .get_opt(&restore.name_any())
                .await
                .map_err(ReconcileError::Observe)?
            {
                Some(read) => current = read,
                // Deleted once its finalizer went: nothing left to do.
                None => return Ok(Action::await_change()),
            }
        }
        step = take_step(&current, ctx).await?;
        match step {
            Step::Done => return Ok(Action::await_change()),
            // Its object goes with it.
            Step::Wait(_) | Step::RemoveFinalizer => break,
            _ => {}
        }
    }
    Ok(Action::requeue(requeue_after(&step)))
}

/// Observes the restore, plans its next step, records it in the status and takes it.
async fn take_step(restore: &EtcdRestore, ctx: &Context) -> Result<Step, ReconcileError> {
    let observation = observe(&ctx.client, restore, ctx.settings.etcd_timeout)
        .await
        .map_err(ReconcileError::Observe)?;
    let observed = &observation.observed;
    let step = next_step(observed);
    if step == Step::Done {
        return Ok(step);
    }

    // Record first, then act.
    let previous = restore.status.clone().unwrap_or_default();
    let status = next_status(&previous, &step, observed, &Time(Timestamp::now()));
    let mut current = restore.clone();
    if status_changed(&previous, &status) {
        let api: Api<EtcdRestore> =
            Api::namespaced(ctx.client.clone(), &restore.namespace().unwrap_or_default());
        current = failpoint::around(
            "restore.status",
            apply_status(&api, &restore.name_any(), FIELD_MANAGER, &status),
        )
        .await
        .map_err(ReconcileError::Status)?;
        ctx.metrics.observe(&current, Timestamp::now());
    }
    let executor = Executor {
        client: &ctx.client,
        restore: &current,
        cluster: observation.cluster.as_ref(),
        snapshot: observed.source.as_ref().ok(),
        seed_image: &ctx.settings.seed_image,
        seed_service_account: ctx.settings.seed_service_account.as_deref(),
        seed_image_pull_secrets: &ctx.settings.seed_image_pull_secrets,
        seed_switch_port: observed
            .cluster
            .as_ref()
            .is_some_and(|c| c.old_pods_serve_switch_port),
    };
    executor.execute(&step).await?;
    if !matches!(step, Step::Wait(_)) {
        info!(step = ?step, "restore step done");
        if let Some(kind) = crate::metrics::step_kind(&step) {
            ctx.metrics.reconciles.action(kind);
        }
    }
    if let Some((warning, reason, note)) = event_for(&step, observed) {
        let object = restore.object_ref(&());
        if warning {
            ctx.events.warning(&object, reason, note).await;
        } else {
            ctx.events.normal(&object, reason, note).await;
        }
    }
    Ok(step)
}

/// When a restore that took `step` is observed again (pure).
fn requeue_after(step: &Step) -> Duration {
    match step {
        Step::Wait(Waiting::SeedStarting { .. } | Waiting::GrowingBack) => CRITICAL_WAIT_POLL,
        Step::Wait(Waiting::OldPodTerminating(_)) => OLD_POD_POLL,
        Step::Wait(_) => ACTIVE_POLL,
        // After [`STEPS_PER_RECONCILE`] steps in a row: the next one soon (our own status write
        // also triggers a reconcile).
        _ => Duration::from_millis(200),
    }
}

/// Whether anything but condition timestamps changed.
fn status_changed(previous: &EtcdRestoreStatus, next: &EtcdRestoreStatus) -> bool {
    let mut a = previous.clone();
    let mut b = next.clone();
    let same_conditions =
        etcd_api::condition::conditions_equal_ignoring_time(&a.conditions, &b.conditions);
    a.conditions.clear();
    b.conditions.clear();
    a != b || !same_conditions
}

fn error_policy(restore: Arc<EtcdRestore>, error: &ReconcileError, ctx: Arc<Context>) -> Action {
    operator_runtime::backoff::requeue_failure(&*restore, error.reason(), error, &ctx.backoff)
}

#[cfg(test)]
mod reason_tests {
    use super::*;

    #[test]
    fn the_waits_on_the_critical_path_are_looked_at_sooner() {
        for critical in [Waiting::SeedStarting { detail: None }, Waiting::GrowingBack] {
            assert_eq!(requeue_after(&Step::Wait(critical)), CRITICAL_WAIT_POLL);
        }
        assert!(CRITICAL_WAIT_POLL < ACTIVE_POLL);
        assert_eq!(
            requeue_after(&Step::Wait(Waiting::OldPodTerminating("main-1".into()))),
            OLD_POD_POLL
        );
        assert!(OLD_POD_POLL < CRITICAL_WAIT_POLL);
        for other in [
            Waiting::SeedTerminating,
            Waiting::QuorumUnknown("no answer".into()),
        ] {
            assert_eq!(requeue_after(&Step::Wait(other)), ACTIVE_POLL);
        }
        assert_eq!(
            requeue_after(&Step::CreateSeedPod),
            Duration::from_millis(200)
        );
    }

    fn api_error() -> kube::Error {
        kube::Error::LinesCodecMaxLineLengthExceeded
    }

    #[test]
    fn every_reason_is_listed_for_the_metrics() {
        // SeedBuildFailed needs a seed build error to construct; it is listed by hand.
        let errors = [
            ReconcileError::Observe(api_error()),
            ReconcileError::Status(api_error()),
            ReconcileError::Claim(api_error()),
            ReconcileError::Execute(ExecError::Kube {
                verb: "create",
                kind: "Pod",
                name: "seed".into(),
                source: api_error(),
            }),
            ReconcileError::Execute(ExecError::Missing("gone".into())),
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

//! The reconcile loop: observe → plan → execute one action → report. I/O.
//!
//! Watch-driven: a change to an EtcdCluster, or to a Pod or PVC of one, triggers its reconcile.
//! Each reconcile also asks to be run again after an interval that depends on what it is waiting
//! for (a learner catching up is looked at again in seconds, a converged cluster in a minute), so
//! an etcd member that fails without any Kubernetes object changing is still noticed.
//!
//! A reconcile never asks why it was triggered: it computes the next step from what it observes,
//! so a crash at any line converges on the next pass.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use etcd_api::condition::conditions_equal_ignoring_time;
use etcd_api::{EtcdCluster, EtcdClusterStatus};
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{ObjectReference, PersistentVolumeClaim, Pod, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::Api;
use kube::runtime::controller::{self, Action as Requeue, Controller};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};
use operator_runtime::{Events, FailureBackoff, NamespaceClaims, Readiness, apply_status};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, info, info_span, warn};

use crate::desired::Desired;
use crate::execute::{ExecError, Executor};
use crate::metrics::{ClusterLabels, Metrics, PassClock, PassStep};
use crate::observe::{self, ObserveError, UnhealthySince};
use crate::plan::objects::ObjectKind;
use crate::plan::tls_switch::SwitchWait;
use crate::plan::{self, Action, Policy, WaitReason};
use crate::{build, status};

/// Shared by every reconcile.
pub struct Context {
    /// API client.
    pub client: kube::Client,
    /// Event publisher.
    pub events: Events,
    /// Per-object back-off after failures.
    pub backoff: FailureBackoff,
    /// Per-object back-off while etcd answers "retry later": [`refusal_backoff`].
    pub refusals: FailureBackoff,
    /// Planner tunables.
    pub policy: Policy,
    /// Timeout of each etcd call.
    pub etcd_timeout: Duration,
    /// When members were first seen unhealthy.
    pub unhealthy: UnhealthySince,
    /// Compactions this process made to clear NOSPACE.
    pub compactions: crate::observe::Compactions,
    /// Prometheus series (served by the probe server).
    pub metrics: Metrics,
    /// Lifetime of the member and client certificates the operator issues (renewed with a
    /// third of it left).
    pub certificate_validity: time::Duration,
    /// Which install acts in each namespace (two installs must never both act on a cluster).
    pub claims: NamespaceClaims,
    /// Clusters' NetworkPolicies.
    pub network: crate::execute::NetworkSettings,
    /// The operators' image, run by `spec.backup`'s CronJobs (`--backup-image`).
    pub backup_image: Option<String>,
    /// The member Pods and PVCs as the controller's watches see them (set by [`run`]).
    pub member_stores: OnceLock<MemberStores>,
    /// The cluster objects (Services, budget, NetworkPolicy) last written per cluster.
    pub cluster_objects: AppliedObjects,
    /// One etcd client per member, kept between reconciles (scoped by the cluster's UID).
    pub etcd_clients: etcd_admin::ClientPool,
    /// The starting member each cluster waits on, watched so its reconcile follows the moment
    /// it is ready ([`crate::member_watch`]).
    pub member_watches: crate::member_watch::MemberWatches,
}

/// Every member Pod and PVC (the cluster label), kept by the watches that trigger reconciles.
/// A watch event updates its store before it triggers the reconcile, so a reconcile triggered
/// by a change sees it.
#[derive(Clone)]
pub struct MemberStores {
    /// Member Pods.
    pub pods: Store<Pod>,
    /// Member PVCs.
    pub pvcs: Store<PersistentVolumeClaim>,
}

/// How long a cluster's Services, budget and NetworkPolicy are trusted to be as last applied:
/// past this they are applied again even when nothing changed. The Services and the budget are
/// watched (a hand-deleted one comes back at the pass its deletion triggers); the NetworkPolicy
/// is not, and comes back within this.
pub const REAPPLY_AFTER: Duration = Duration::from_secs(600);

/// Retry interval while etcd answers "retry later", and how many such answers in a row keep it.
/// etcd refuses the next membership change until every voter has been connected for 5 s
/// (etcd-facts.md), so each scale step meets a few seconds of refusals. Retrying every 0.5 s for
/// 10 s (twice etcd's window) lands the step within half a second of when etcd allows it; a
/// doubling from the first refusal (0.5, 1, 2, 4, 8 s) often missed the window's end by seconds
/// (`make bench`: 12.8 s between promoting the first learner and adding the second, by hand 5.0 s).
pub const REFUSAL_RETRY: Duration = Duration::from_millis(500);
/// See [`REFUSAL_RETRY`].
pub const REFUSALS_AT_FIRST_INTERVAL: u32 = 20;

/// The back-off for "retry later": [`REFUSAL_RETRY`] for [`REFUSALS_AT_FIRST_INTERVAL`]
/// answers, then doubling to 30 s, so a refusal that persists does not spin at 2 Hz forever.
pub fn refusal_backoff() -> FailureBackoff {
    FailureBackoff::new(REFUSAL_RETRY, Duration::from_secs(30)).flat_for(REFUSALS_AT_FIRST_INTERVAL)
}

/// Per key (a cluster's uid and one of its objects, `object_key`; or the backup schedule's
/// key): the digest of what was last written and when. An idle pass whose wanted objects have
/// the same digests writes nothing (issue 24: each idle pass applied three objects and read the
/// NetworkPolicy).
#[derive(Default)]
pub struct AppliedObjects(Mutex<HashMap<String, (u64, Instant)>>);

impl AppliedObjects {
    /// Whether `digest` was written under `key` less than [`REAPPLY_AFTER`] ago.
    pub fn is_current(&self, key: &str, digest: u64) -> bool {
        let map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        map.get(key)
            .is_some_and(|(applied, at)| *applied == digest && at.elapsed() < REAPPLY_AFTER)
    }

    /// What was written of the objects of cluster `uid` less than [`REAPPLY_AFTER`] ago: the
    /// objects' plan's observation of them.
    pub fn written(&self, uid: &str) -> BTreeMap<ObjectKind, u64> {
        let map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        ObjectKind::ALL
            .into_iter()
            .filter_map(|kind| {
                let (digest, at) = map.get(&object_key(uid, kind))?;
                (at.elapsed() < REAPPLY_AFTER).then_some((kind, *digest))
            })
            .collect()
    }

    /// `digest` was written under `key` (the pass started at `at`).
    pub fn record(&self, key: &str, digest: u64, at: Instant) {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        map.insert(key.to_owned(), (digest, at));
    }

    /// Write again at the next pass: `key` itself and every object under it (a cluster's uid:
    /// one of its objects changed, or a read found something else).
    pub fn forget(&self, key: &str) {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let prefix = format!("{key}/");
        map.retain(|k, _| k != key && !k.starts_with(&prefix));
    }
}

/// A failed reconcile.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// Observing failed.
    #[error(transparent)]
    Observe(#[from] ObserveError),
    /// Executing the action failed.
    #[error(transparent)]
    Execute(#[from] ExecError),
    /// Reading or creating the TLS Secrets failed.
    #[error(transparent)]
    Tls(#[from] crate::tls::TlsError),
    /// Reading or writing the namespace's claim failed: not known whether this install may act.
    #[error("claiming namespace {namespace} for this install: {source}")]
    Claim {
        /// The namespace.
        namespace: String,
        /// The API error.
        source: kube::Error,
    },
    /// Writing the status failed.
    #[error("writing the status of {cluster}: {source}")]
    Status {
        /// namespace/name.
        cluster: String,
        /// The API error.
        source: kube::Error,
    },
}

impl ReconcileError {
    /// Every value [`ReconcileError::reason`] can return, created at 0 in
    /// `etcd_operator_reconcile_errors_total` when the metrics are registered. A new reason
    /// belongs here too (the test below checks the variants it can build).
    pub const REASONS: &'static [&'static str] = &[
        "NoNamespace",
        "ListFailed",
        "BuildFailed",
        "KubeApiFailed",
        "VolumeMissing",
        "EtcdRetryLater",
        "EtcdMembershipFailed",
        "StatusWriteFailed",
        "ClaimFailed",
        "BackupScheduleFailed",
        "ObjectNotOwned",
    ];

    /// PascalCase cause, for logs and events.
    pub fn reason(&self) -> &'static str {
        match self {
            ReconcileError::Observe(e) => e.reason(),
            ReconcileError::Execute(e) => e.reason(),
            ReconcileError::Tls(e) => e.reason(),
            ReconcileError::Status { .. } => "StatusWriteFailed",
            ReconcileError::Claim { .. } => "ClaimFailed",
        }
    }
}

/// Runs the controller until the stream ends (shutdown). `namespace` limits it to one namespace;
/// at most `max_concurrent` clusters are reconciled at once (0: no limit).
pub async fn run(
    ctx: Arc<Context>,
    namespace: Option<String>,
    max_concurrent: u16,
    stop: CancellationToken,
    readiness: Readiness,
) {
    let client = ctx.client.clone();
    let (clusters, pods, pvcs) = match &namespace {
        Some(ns) => (
            Api::<EtcdCluster>::namespaced(client.clone(), ns),
            Api::<Pod>::namespaced(client.clone(), ns),
            Api::<PersistentVolumeClaim>::namespaced(client.clone(), ns),
        ),
        None => (
            Api::all(client.clone()),
            Api::all(client.clone()),
            Api::all(client),
        ),
    };
    // Only our members: Pods and PVCs carrying the cluster label. Their watches keep stores that
    // reconciles read instead of listing (each store is written before its event triggers).
    let ours = watcher::Config::default().labels(build::LABEL_CLUSTER);
    let (pod_store, pod_writer) = reflector::store::<Pod>();
    let (pvc_store, pvc_writer) = reflector::store::<PersistentVolumeClaim>();
    let pod_events = reflector::reflector(pod_writer, watcher(pods, ours.clone()))
        .default_backoff()
        .touched_objects();
    let pvc_events = reflector::reflector(pvc_writer, watcher(pvcs, ours))
        .default_backoff()
        .touched_objects();
    let stores = MemberStores {
        pods: pod_store,
        pvcs: pvc_store,
    };
    let _ = ctx.member_stores.set(stores.clone());
    // The cluster's Services and budget, watched by the same label with no store: a change made
    // by anyone but us (a Service deleted or edited by hand) forgets what was last applied, so
    // the pass it triggers writes them again. Our own applies change nothing when the objects
    // are as wanted (a server-side apply that changes nothing is not written, so no event).
    // Idle, a watch costs no request.
    let (services, budgets) = match &namespace {
        Some(ns) => (
            Api::<Service>::namespaced(ctx.client.clone(), ns),
            Api::<PodDisruptionBudget>::namespaced(ctx.client.clone(), ns),
        ),
        None => (Api::all(ctx.client.clone()), Api::all(ctx.client.clone())),
    };
    let ours = watcher::Config::default().labels(build::LABEL_CLUSTER);
    let service_events = watcher(services, ours.clone())
        .default_backoff()
        .touched_objects();
    let budget_events = watcher(budgets, ours).default_backoff().touched_objects();
    let (forget_services, forget_budgets) = (ctx.clone(), ctx.clone());
    // A starting member that turned ready (crate::member_watch): its cluster's reconcile now.
    let ready_members =
        futures_util::stream::unfold(ctx.member_watches.triggers(), |mut rx| async {
            rx.recv().await.map(|cluster| (cluster, rx))
        });
    let controller = Controller::new(clusters, watcher::Config::default())
        .with_config(controller::Config::default().concurrency(max_concurrent))
        .watches_stream(pod_events, |pod| cluster_of(&pod))
        .watches_stream(pvc_events, |pvc| cluster_of(&pvc))
        .watches_stream(service_events, move |service| {
            cluster_object_changed(&forget_services, &service)
        })
        .watches_stream(budget_events, move |budget| {
            cluster_object_changed(&forget_budgets, &budget)
        })
        .reconcile_on(ready_members)
        // Reconciles in flight finish, then the stream ends (SIGTERM or a lost Lease, through
        // `run_elected`).
        .graceful_shutdown_on(stop.cancelled_owned());
    // A deleted cluster's series go with it. Deletion is not a reconcile (no finalizer), so the
    // watched store is compared with what the metrics hold, every few seconds.
    let store = controller.store();
    let metrics = ctx.metrics.clusters.clone();
    let sweep = tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_secs(15)).await;
            metrics.retain(|c| {
                store
                    .get(&ObjectRef::new(&c.name).within(&c.namespace))
                    .is_some()
            });
        }
    });
    // Ready once the controller runs; the first reconciles follow the initial lists. The member
    // stores fill as the controller polls their watches; until then reconciles list (see
    // `observe_members`).
    readiness.set_ready(true);
    controller
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move {
            if let Err(error) = result {
                tracing::debug!(%error, "reconcile stream");
            }
        })
        .await;
    sweep.abort();
}

/// A cluster's Service or budget changed (or is gone): what was last applied for its owner no
/// longer stands, so the next pass applies again. Returns the cluster to reconcile.
fn cluster_object_changed<K: Resource>(
    ctx: &Context,
    object: &K,
) -> Option<ObjectRef<EtcdCluster>> {
    for owner in object.meta().owner_references.iter().flatten() {
        if owner.kind == "EtcdCluster" {
            ctx.cluster_objects.forget(&owner.uid);
        }
    }
    cluster_of(object)
}

/// The EtcdCluster a member Pod or PVC belongs to, from its cluster label.
fn cluster_of<K: Resource>(object: &K) -> Option<ObjectRef<EtcdCluster>> {
    let name = object.meta().labels.as_ref()?.get(build::LABEL_CLUSTER)?;
    let namespace = object.meta().namespace.as_deref()?;
    Some(ObjectRef::new(name).within(namespace))
}

async fn reconcile(
    cluster: Arc<EtcdCluster>,
    ctx: Arc<Context>,
) -> Result<Requeue, ReconcileError> {
    let span = info_span!(
        "reconcile",
        namespace = cluster.namespace().unwrap_or_default(),
        name = cluster.name_any()
    );
    async move {
        if cluster.meta().deletion_timestamp.is_some() {
            ctx.etcd_clients.forget(&cluster.uid().unwrap_or_default());
            ctx.metrics.clusters.forget(&ClusterLabels {
                namespace: cluster.namespace().unwrap_or_default(),
                name: cluster.name_any(),
            });
            // Owned objects go with the garbage collector; PVCs stay unless the policy said Delete.
            return Ok(Requeue::await_change());
        }
        let admitted = ctx
            .claims
            .admit(cluster.as_ref(), &ctx.events)
            .await
            .map_err(|source| ReconcileError::Claim {
                namespace: cluster.namespace().unwrap_or_default(),
                source,
            });
        match admitted {
            Ok(true) => {}
            Ok(false) => return Ok(Requeue::requeue(operator_runtime::claim::RECHECK_AFTER)),
            Err(error) => {
                ctx.metrics
                    .reconciles
                    .reconciled(Duration::ZERO, Some(error.reason()));
                return Err(error);
            }
        }
        let started = Instant::now();
        let result = reconcile_once(&cluster, &ctx).await;
        ctx.metrics.reconciles.reconciled(
            started.elapsed(),
            result.as_ref().err().map(ReconcileError::reason),
        );
        if result.is_ok() {
            ctx.backoff.success(&cluster.uid().unwrap_or_default());
        }
        result
    }
    .instrument(span)
    .await
}

/// Where a pass reads the cluster's member Pods and PVCs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Members {
    /// The watches' stores (no request): enough to see that nothing is to be done.
    Stored,
    /// A list from the API server: what an action is planned from.
    Listed,
}

impl Members {
    /// How the pass's log line names it.
    fn name(self) -> &'static str {
        match self {
            Members::Stored => "stored",
            Members::Listed => "listed",
        }
    }
}

/// What a pass ended with.
enum Pass {
    Done(Requeue),
    /// The stores showed something to do: plan again from a fresh list before acting, with
    /// what this pass read from etcd.
    ListFirst(Box<EtcdReads>),
}

/// What a pass from the stores read from etcd, handed to the pass from a fresh list that
/// follows it at once in the same reconcile: that pass asks etcd again only when its list
/// changes whom to ask or how ([`EtcdReads::answer`]). Every acting reconcile asked etcd twice
/// within milliseconds (each member's status, the quorum-confirmed member list, every member's
/// `/version`), while nothing of ours acted in between: a reconcile of one cluster never runs
/// beside another of the same cluster. The list only brings the Kubernetes side up to our own
/// last write; etcd's side is as fresh as it would be a few milliseconds later.
#[derive(Debug)]
struct EtcdReads {
    /// The endpoints asked (before the members added by hand were added to them).
    endpoints: Vec<String>,
    /// The TLS they were asked with.
    tls: Option<etcd_admin::ClientTls>,
    /// Their answers.
    view: etcd_admin::ClusterView,
    /// etcd's cluster version, as read after them.
    cluster_version: Option<(u64, u64)>,
}

impl EtcdReads {
    /// The reads, if they were made of exactly `endpoints` with `tls`: a Pod the list shows
    /// and the stores did not (our own Pod just created), or other TLS, is asked anew.
    fn answer(
        self,
        endpoints: &[String],
        tls: Option<&etcd_admin::ClientTls>,
    ) -> Option<(etcd_admin::ClusterView, Option<(u64, u64)>)> {
        (self.endpoints == endpoints && self.tls.as_ref() == tls)
            .then_some((self.view, self.cluster_version))
    }
}

/// One reconcile: a pass from the stores; when it finds anything to do, a pass from a fresh
/// list (so an action is never planned from a store that has not yet seen our own last write).
/// An idle, converged cluster thus costs no API request (issue 24).
async fn reconcile_once(cluster: &EtcdCluster, ctx: &Context) -> Result<Requeue, ReconcileError> {
    match timed_pass(cluster, ctx, Members::Stored, None).await? {
        Pass::Done(requeue) => Ok(requeue),
        Pass::ListFirst(reads) => {
            match timed_pass(cluster, ctx, Members::Listed, Some(*reads)).await? {
                Pass::Done(requeue) => Ok(requeue),
                // A listed pass never asks for a list.
                Pass::ListFirst(_) => Ok(Requeue::requeue(Duration::from_secs(1))),
            }
        }
    }
}

/// [`reconcile_pass`], timed step by step: the step histogram, and one debug line per pass
/// (`pass`: where the Pods came from, the action planned, the outcome, each step's
/// milliseconds) that says where a reconcile's time goes (`make bench` prints them).
async fn timed_pass(
    cluster: &EtcdCluster,
    ctx: &Context,
    members: Members,
    reads: Option<EtcdReads>,
) -> Result<Pass, ReconcileError> {
    let mut clock = PassClock::start();
    let mut planned = None;
    let result = reconcile_pass(cluster, ctx, members, reads, &mut clock, &mut planned).await;
    ctx.metrics.record_pass(&clock);
    let outcome = match &result {
        // kube's Action shows only as Debug: `Action { requeue_after: Some(200ms) }`.
        Ok(Pass::Done(requeue)) => {
            let shown = format!("{requeue:?}");
            let after = shown
                .trim_start_matches("Action { requeue_after: ")
                .trim_end_matches(" }");
            format!("requeue {after}")
        }
        Ok(Pass::ListFirst(_)) => "list first".to_owned(),
        Err(error) => error.reason().to_owned(),
    };
    debug!(
        pods = members.name(),
        action = planned.as_deref().unwrap_or("none"),
        outcome,
        total_ms = clock.total().as_secs_f64() * 1000.0,
        steps = %clock,
        "pass"
    );
    result
}

/// The action's kind, as the pass's log line names it: `AddLearner`, `Wait:SeedStarting`.
fn action_label(action: &Action) -> String {
    fn variant(debug: String) -> String {
        debug
            .split(|c: char| !c.is_ascii_alphanumeric())
            .next()
            .unwrap_or_default()
            .to_owned()
    }
    match action {
        Action::Wait(reason) => format!("Wait:{}", variant(format!("{reason:?}"))),
        other => variant(format!("{other:?}")),
    }
}

/// The member Pods and PVCs, from the stores when `members` says so and they are filled (their
/// watches listed once), else listed.
async fn observe_members(
    cluster: &EtcdCluster,
    ctx: &Context,
    members: Members,
) -> Result<(observe::KubeObservation, Members), ObserveError> {
    use futures_util::FutureExt;
    if members == Members::Stored
        && let Some(stores) = ctx.member_stores.get()
        && stores.pods.wait_until_ready().now_or_never().is_some()
        && stores.pvcs.wait_until_ready().now_or_never().is_some()
    {
        let pods = stores
            .pods
            .state()
            .into_iter()
            .filter(|pod| observe::belongs_to(cluster, pod.as_ref()))
            .map(|pod| pod.as_ref().clone())
            .collect();
        let pvcs = stores
            .pvcs
            .state()
            .into_iter()
            .filter(|pvc| observe::belongs_to(cluster, pvc.as_ref()))
            .map(|pvc| pvc.as_ref().clone())
            .collect();
        let kube = observe::observation_of(&ctx.client, cluster, pods, pvcs).await?;
        return Ok((kube, Members::Stored));
    }
    Ok((
        observe::observe_kube(&ctx.client, cluster).await?,
        Members::Listed,
    ))
}

async fn reconcile_pass(
    cluster: &EtcdCluster,
    ctx: &Context,
    members: Members,
    reads: Option<EtcdReads>,
    clock: &mut PassClock,
    planned: &mut Option<String>,
) -> Result<Pass, ReconcileError> {
    // Observe.
    let (kube, members) = observe_members(cluster, ctx, members).await?;
    clock.lap(match members {
        Members::Stored => PassStep::PodsFromStores,
        Members::Listed => PassStep::PodsListed,
    });
    // TLS first: the Secrets a member needs exist and are sound before anything acts, and the
    // operator's own client certificate is needed to observe a TLS cluster at all.
    let known_members = observe::known_members(cluster, &kube);
    let mut with_volume: Vec<String> = kube.pods.keys().chain(kube.pvcs.keys()).cloned().collect();
    with_volume.sort();
    with_volume.dedup();
    let tls_now = time::OffsetDateTime::now_utc();
    let (tls, tls_refusal) = match crate::tls::prepare(
        &ctx.client,
        cluster,
        &crate::tls::MemberSets {
            known: &known_members,
            with_volume: &with_volume,
            pods: &kube.pods,
        },
        tls_now,
        ctx.certificate_validity,
    )
    .await?
    {
        crate::tls::Prepared::Ready(tls) => (*tls, None),
        crate::tls::Prepared::Invalid(errors) => (crate::tls::ClusterTls::default(), Some(errors)),
    };
    clock.lap(PassStep::Tls);
    let mut tls = tls;
    // While a plaintext cluster is switched to TLS, the operator keeps plain HTTP until every
    // member serves https:// clients (plan/tls_switch.rs).
    let speaks_tls = observe::operator_speaks_tls(cluster, &kube);
    if !speaks_tls {
        tls.etcd = None;
    }
    let etcd_tls = tls.etcd.as_ref();
    let endpoints = observe::endpoints_to_ask(cluster, &kube);
    let uid = cluster.uid().unwrap_or_default();
    let pool = (&ctx.etcd_clients, uid.as_str());
    let (view, cluster_version) = match reads.and_then(|r| r.answer(&endpoints, etcd_tls)) {
        Some((view, cluster_version)) => (view, Some(cluster_version)),
        None => {
            // Members still starting are waited for briefly (a learner copying the leader's
            // snapshot answers nothing for seconds: the pass would block on it).
            let starting = observe::starting_endpoints(
                cluster,
                &kube,
                |endpoint| ctx.etcd_clients.answered_at(&uid, endpoint),
                jiff::Timestamp::now().as_second(),
            );
            let mut view =
                observe::observe_etcd(pool, &endpoints, &starting, ctx.etcd_timeout, etcd_tls)
                    .await;
            let unasked = observe::unasked_client_urls(&endpoints, &view);
            if !unasked.is_empty() {
                // Members added by hand: ask them too, so they are judged by their own answer.
                let all: Vec<String> = endpoints.iter().chain(&unasked).cloned().collect();
                view =
                    observe::observe_etcd(pool, &all, &starting, ctx.etcd_timeout, etcd_tls).await;
            }
            (view, None)
        }
    };
    clock.lap(PassStep::Etcd);
    let mut observed = observe::to_observed(cluster, &kube, &view, &ctx.unhealthy, Instant::now());
    observed.wall_clock = Some(jiff::Timestamp::now().as_second());
    observed.tls_hashes = kube
        .pods
        .keys()
        .filter_map(|member| {
            build::member_tls_hash(cluster, member, &tls.secret_digests)
                .map(|hash| (member.clone(), hash))
        })
        .collect();
    // A member about to start (rolled onto changed Secrets, or without a Pod) on a peer
    // certificate its running peers would not trust, or trusting none of theirs, is refused
    // like an unusable Secret: a CA change without an overlap (crate::trust). Likewise a
    // client certificate the operators could not verify, or a client ca.crt refusing theirs.
    let etcd_members: Vec<String> = match &observed.membership {
        crate::state::Membership::Known(members) => members
            .iter()
            .filter_map(|m| m.member_name(&observed.cluster))
            .collect(),
        crate::state::Membership::Unknown => observed.last_known_members.clone(),
    };
    let mut untrusted = crate::trust::peer_trust_refusals(
        cluster,
        &kube.pods,
        &etcd_members,
        &tls.peer_trusts,
        &tls.secret_digests,
    );
    // The same on the client port, with the operators as the peers (crate::trust).
    untrusted.extend(crate::trust::client_trust_refusals(
        cluster,
        &kube.pods,
        &etcd_members,
        &tls.public_tls,
        &tls.secret_digests,
    ));
    let tls_refusal = match (tls_refusal, untrusted.is_empty()) {
        (refusal, true) => refusal,
        (Some(mut errors), false) => {
            errors.extend(untrusted);
            Some(errors)
        }
        (None, false) => Some(untrusted),
    };
    // Certificates the operator does not renew: each one near its end is reported by name
    // (condition, Warning event, and the near-expiry gauge the chart's alert rule fires on).
    let mut certificates = Vec::new();
    let mut near_expiry: Vec<(String, String)> = Vec::new();
    for (secret, expiry) in &tls.expiries {
        let near = expiry.near(tls_now);
        certificates.push((secret.clone(), expiry.not_after.unix_timestamp(), near));
        if near {
            let ends = expiry
                .not_after
                .format(&time::format_description::well_known::Rfc3339)
                .unwrap_or_else(|_| expiry.not_after.to_string());
            warn!(secret, ends, "certificate near its end");
            near_expiry.push((secret.clone(), ends));
        }
    }
    ctx.metrics
        .clusters
        .record_certificates(&observed.cluster, &certificates);
    for (reason, note) in &tls.changes {
        info!(reason, note, "certificate Secrets changed");
        ctx.events
            .normal(&cluster.object_ref(&()), reason, note.clone())
            .await;
    }
    clock.lap(PassStep::Tls);
    observed.cluster_version = match cluster_version {
        Some(read) => read,
        None => observe::observe_cluster_version(&view, ctx.etcd_timeout, etcd_tls).await,
    };
    clock.lap(PassStep::ClusterVersion);
    observe::observe_v2_snapshots(&mut observed, ctx.etcd_timeout, etcd_tls).await;
    observe::observe_joining_members(&mut observed, ctx.etcd_timeout).await;
    clock.lap(PassStep::MemberMetrics);
    ctx.compactions
        .fill(&cluster.uid().unwrap_or_default(), &mut observed);

    ctx.metrics
        .clusters
        .record(&observed.cluster, &crate::metrics::sample(&observed, &view));

    // Plan. Unusable TLS Secrets are refused like a bad spec: nothing acts until they are fixed.
    // The spec is validated once, here; the budget below uses the same validated size.
    let desired = Desired::from_spec(&observed.spec);
    let action = match (tls_refusal, &desired) {
        (Some(errors), _) => Action::Refuse(errors),
        (None, Err(errors)) => Action::Refuse(errors.clone()),
        (None, Ok(desired)) => plan::next_action_for(&observed, desired, &ctx.policy),
    };
    *planned = Some(action_label(&action));
    if members == Members::Stored && !matches!(action, Action::Converged) {
        return Ok(Pass::ListFirst(Box::new(EtcdReads {
            endpoints,
            tls: etcd_tls.cloned(),
            view,
            cluster_version: observed.cluster_version,
        })));
    }
    // A wait on a silent starting member is watched (any other pass ends the watch).
    let unanswered = view.unanswered(&endpoints);
    ctx.member_watches.set(
        cluster,
        crate::member_watch::watch_target(&action, &observed, &unanswered),
        etcd_tls,
    );
    // Only an action that acts, or a restore's wait, writes the cluster's objects: both come
    // from a valid spec.
    let budget_voters = desired.map(|d| observed.budget_voters(d.size));
    let switch_port = plan::serves_switch_client_port(&observed);
    let near_quota = plan::database_near_quota(&observed);

    // Execute (nothing is touched for a refusal or while paused).
    let acts = !matches!(
        action,
        Action::Refuse(_) | Action::Wait(WaitReason::Paused | WaitReason::Restoring { .. })
    );
    let answering: Vec<String> = view
        .statuses
        .values()
        .filter_map(|s| s.as_ref().ok())
        .filter_map(|s| observed_client_url(&observed, s.id))
        .collect();
    let executor = Executor {
        client: &ctx.client,
        cluster,
        // During a switch to TLS etcd's first advertised client URL is the plaintext one:
        // membership changes go to the URLs asked above, in the scheme the operator speaks.
        etcd_endpoints: if answering.is_empty() || switching_clients(&kube) {
            &endpoints
        } else {
            &answering
        },
        etcd_timeout: ctx.etcd_timeout,
        largest_db_bytes: view
            .statuses
            .values()
            .filter_map(|s| s.as_ref().ok())
            .map(|s| u64::try_from(s.db_size).unwrap_or(0))
            .max()
            .unwrap_or(0),
        tls: &tls,
        network: &ctx.network,
        backup_image: ctx.backup_image.as_deref(),
        listen: plan::pod_listeners(&observed),
    };
    let mut executed = Ok(());
    // The objects' plan: the cluster's Services, budget, NetworkPolicy and PVC owner
    // references (etcd_member::plan::objects). Written only by a pass that acts, or a restore's
    // wait: a restore's seed is reached through the headless Service (also for a cluster the
    // restore created), so the Services and the budget are kept while a restore holds the
    // cluster, but its PVCs are the restore's. A failed write is reported like a failed step,
    // but does not stop the planned step: none of them makes the step unsafe, and a missing
    // RBAC verb used to end every reconcile here, before any repair (issue 17). (A pass that
    // acts has a valid spec, so a budget: an invalid one is refused.)
    let restoring = matches!(action, Action::Wait(WaitReason::Restoring { .. }));
    let no_pvcs = BTreeMap::new();
    let mut housekeeping: Option<ExecError> = None;
    if let (true, Ok(voters)) = (acts || restoring, &budget_voters) {
        let pvcs = if acts { &kube.pvcs } else { &no_pvcs };
        housekeeping = write_cluster_objects(ctx, &executor, *voters, switch_port, pvcs)
            .await
            .err();
        clock.lap(PassStep::Objects);
    }
    if acts {
        match ensure_scheduled_backup(ctx, &executor).await {
            Ok(step) => {
                if let Some((reason, note)) = status::backup_schedule_event(cluster, &step) {
                    info!(reason, note, "backup schedule");
                    ctx.events
                        .normal(&cluster.object_ref(&()), reason, note)
                        .await;
                }
            }
            Err(error) => {
                housekeeping.get_or_insert(error);
            }
        }
        clock.lap(PassStep::BackupSchedule);
        executed = executor.execute(&action).await;
        clock.lap(PassStep::Action);
        let uid = cluster.uid().unwrap_or_default();
        match (&executed, &action) {
            (Ok(()), Action::CompactKeyspace { revision }) => {
                ctx.compactions.record(&uid, *revision);
            }
            (
                Ok(()),
                Action::DefragmentMember {
                    member,
                    reason: plan::DefragReason::NoSpace,
                    revision,
                    ..
                },
            ) => ctx.compactions.record_defrag(&uid, member, *revision),
            _ => {}
        }
    }
    if let Some(error) = &housekeeping {
        warn!(%error, reason = error.reason(), "writing the cluster's objects failed");
    }
    let side_effect = acts && !matches!(action, Action::Wait(_) | Action::Converged);
    if side_effect
        && executed.is_ok()
        && let Some(kind) = crate::metrics::action_kind(&action)
    {
        ctx.metrics.reconciles.action(kind);
    }
    match &executed {
        Ok(()) if side_effect => info!(action = ?action, "executed"),
        Ok(()) => tracing::debug!(action = ?action, "nothing to do"),
        Err(error) if error.is_retry_later() => {
            info!(action = ?action, %error, "etcd asked to retry later")
        }
        Err(error) => warn!(action = ?action, %error, reason = error.reason(), "action failed"),
    }
    // "Retry later" in a row: back off, and report it once it persists.
    let uid = cluster.uid().unwrap_or_default();
    let refusal = match &executed {
        Err(error) if error.is_retry_later() => {
            let delay = ctx.refusals.failure(&uid);
            let report = status::refusal_report(ctx.refusals.failures(&uid), &error.to_string());
            Some((delay, report))
        }
        _ => {
            ctx.refusals.success(&uid);
            None
        }
    };
    // What failed, to report: the step itself first, else the housekeeping, else a refusal
    // that persists.
    let failure = match &executed {
        Err(error) if !error.is_retry_later() => Some(error),
        _ => housekeeping.as_ref(),
    }
    .map(|error| status::StepFailure {
        reason: error.reason(),
        message: error.to_string(),
    })
    .or_else(|| refusal.as_ref().and_then(|(_, report)| report.clone()));

    // Report.
    let previous = cluster.status.clone().unwrap_or_default();
    let now = Time(jiff::Timestamp::now());
    let mut status = status::status_from(
        &observed,
        &action,
        cluster.meta().generation,
        &previous,
        now.clone(),
    );
    if let Some(failure) = &failure {
        status::record_failure(&mut status, failure, cluster.meta().generation, now.clone());
    }
    let expiry_news = status::record_certificate_expiry(
        &mut status,
        &previous,
        &cluster.namespace().unwrap_or_default(),
        (!tls.expiries.is_empty()).then_some(near_expiry.as_slice()),
        cluster.meta().generation,
        now,
    );
    let changed = status_changed(&previous, &status);
    if changed {
        let api: Api<EtcdCluster> =
            Api::namespaced(ctx.client.clone(), &cluster.namespace().unwrap_or_default());
        failpoint::around(
            "cluster.status",
            apply_status(&api, &cluster.name_any(), build::FIELD_MANAGER, &status),
        )
        .await
        .map_err(|source| ReconcileError::Status {
            cluster: format!(
                "{}/{}",
                cluster.namespace().unwrap_or_default(),
                cluster.name_any()
            ),
            source,
        })?;
    }
    if let Some(note) = expiry_news {
        ctx.events
            .warning(
                &cluster.object_ref(&()),
                crate::tls::CERTIFICATE_NEAR_EXPIRY,
                note,
            )
            .await;
    }
    // A failed step is a Warning event when it is news (the status changed with it).
    if changed && let Some(failure) = &failure {
        let event = status::failure_event(failure);
        ctx.events
            .warning(&cluster.object_ref(&()), event.reason, event.note)
            .await;
    }
    // An event for every executed change, and for a refusal or wait when it is news.
    let newsworthy = (side_effect && executed.is_ok()) || (!side_effect && changed);
    if newsworthy && let Some(event) = status::event_for(&action) {
        let reference = cluster.object_ref(&());
        match member_pod_of(cluster, &action) {
            // Per-member events name the member's Pod as the related object, so each member's
            // step is its own event rather than a repeat of the previous member's.
            Some(pod) => {
                ctx.events
                    .publish_related(event.warning, &reference, &pod, event.reason, event.note)
                    .await
            }
            None if event.warning => {
                ctx.events
                    .warning(&reference, event.reason, event.note)
                    .await
            }
            None => {
                ctx.events
                    .normal(&reference, event.reason, event.note)
                    .await
            }
        }
    }
    clock.lap(PassStep::Report);
    match executed {
        // etcd refuses a membership change for ~5 s after the previous one (etcd-facts.md):
        // ask again soon, so the change lands close to when etcd allows it, then back off.
        Err(error) if error.is_retry_later() => Ok(Pass::Done(Requeue::requeue(
            refusal.map_or(Duration::from_millis(500), |(delay, _)| delay),
        ))),
        Err(error) => Err(error.into()),
        Ok(()) => match housekeeping {
            // Back off like any failure (error_policy), now that it is reported.
            Some(error) => Err(error.into()),
            None => Ok(Pass::Done(Requeue::requeue(requeue_delay(
                &action,
                near_quota,
                tls.next_renewal,
                tls_now,
            )))),
        },
    }
}

/// The objects' plan of one pass, planned and performed: what the cluster wants
/// ([`Executor::wanted_objects`]) against what this process wrote for it within
/// [`REAPPLY_AFTER`] and the PVCs' owner references as read.
async fn write_cluster_objects(
    ctx: &Context,
    executor: &Executor<'_>,
    voters: usize,
    switch_port: bool,
    pvcs: &BTreeMap<String, PersistentVolumeClaim>,
) -> Result<(), ExecError> {
    let uid = executor.cluster.uid().unwrap_or_default();
    let wanted = executor.wanted_objects(voters, switch_port, pvcs)?;
    let observed = plan::objects::ObservedObjects::new(ctx.cluster_objects.written(&uid), pvcs);
    let writes = plan::objects::object_writes(&observed, &wanted);
    let started = Instant::now();
    executor
        .write_objects(&writes, |write| {
            if let Some((kind, digest)) = write.written() {
                ctx.cluster_objects
                    .record(&object_key(&uid, kind), digest, started);
            }
        })
        .await
}

/// The key under which [`AppliedObjects`] keeps what was written of one of a cluster's objects.
fn object_key(uid: &str, kind: ObjectKind) -> String {
    format!("{uid}/{}", kind.name())
}

/// The cluster's `spec.backup` schedule, as [`Executor::ensure_scheduled_backup`]; but a
/// cluster without `spec.backup` whose last look (less than [`REAPPLY_AFTER`] ago, in this
/// process) found nothing of a schedule is not asked again: an idle pass read the CronJob each
/// time (issue 24, the one request per idle pass left). Only this operator makes the schedule,
/// and only from `spec.backup`, whose change is a new spec and asks again.
async fn ensure_scheduled_backup(
    ctx: &Context,
    executor: &Executor<'_>,
) -> Result<crate::scheduled_backup::Step, ExecError> {
    use crate::scheduled_backup::{self, Step};
    // Not under the uid: a change to the cluster's Services or budget does not concern it.
    let key = format!("backup/{}", executor.cluster.uid().unwrap_or_default());
    let unwanted = matches!(
        scheduled_backup::desired(executor.cluster, ctx.backup_image.as_deref()),
        Ok(None)
    );
    // The digest of "no schedule wanted, none found".
    const NONE: u64 = 0;
    if unwanted && ctx.cluster_objects.is_current(&key, NONE) {
        return Ok(Step::Absent);
    }
    let started = Instant::now();
    let step = executor.ensure_scheduled_backup().await;
    match &step {
        Ok(Step::Absent) if unwanted => ctx.cluster_objects.record(&key, NONE, started),
        _ => ctx.cluster_objects.forget(&key),
    }
    step
}

/// Some member Pod serves clients on both schemes (a switch to TLS runs).
fn switching_clients(kube: &observe::KubeObservation) -> bool {
    kube.pods.values().any(|pod| {
        observe::pod_listeners(pod)
            .is_some_and(|listen| listen.client == plan::tls_switch::Listen::Dual)
    })
}

/// A reference to the Pod of the member an action is about, if it is about one.
fn member_pod_of(cluster: &EtcdCluster, action: &Action) -> Option<ObjectReference> {
    let member = match action {
        Action::BootstrapSeed { member, .. }
        | Action::CreateMemberPod { member, .. }
        | Action::AddLearner { member, .. }
        | Action::PromoteLearner { member, .. }
        | Action::RemoveMember { member, .. }
        | Action::DeletePod { member }
        | Action::UpgradeMember { member, .. }
        | Action::RollMember { member, .. }
        | Action::RollForTls { member, .. }
        | Action::UpdatePeerUrl { member, .. }
        | Action::SnapshotBeforeUpgrade { member, .. }
        | Action::MarkV2WalClean { member }
        | Action::AdoptPod { member, .. }
        | Action::DefragmentMember { member, .. }
        | Action::OpenServingGate { member } => member,
        // The member's Pod, which mounts the PVC of its name: one event series per member.
        Action::ExpandVolume { pvc, .. } => pvc,
        Action::DeletePvc { .. }
        | Action::CompactKeyspace { .. }
        | Action::DisarmNoSpace { .. }
        | Action::Wait(_)
        | Action::Refuse(_)
        | Action::Converged => {
            return None;
        }
    };
    Some(ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        namespace: cluster.namespace(),
        name: Some(member.clone()),
        ..Default::default()
    })
}

/// The client URL of the member with this ID, as etcd lists it.
fn observed_client_url(observed: &crate::state::Observed, id: u64) -> Option<String> {
    match &observed.membership {
        crate::state::Membership::Known(members) => members
            .iter()
            .find(|m| m.id == id)
            .and_then(|m| m.client_url.clone()),
        crate::state::Membership::Unknown => None,
    }
}

/// Whether the status differs in anything but condition timestamps.
fn status_changed(previous: &EtcdClusterStatus, next: &EtcdClusterStatus) -> bool {
    let strip = |s: &EtcdClusterStatus| EtcdClusterStatus {
        conditions: vec![],
        ..s.clone()
    };
    strip(previous) != strip(next)
        || !conditions_equal_ignoring_time(&previous.conditions, &next.conditions)
}

/// How often a converged cluster is looked at: a member failing, a database growing or an
/// alarm raised shows only in etcd, not in the Kubernetes API.
const CONVERGED_RESYNC: Duration = Duration::from_secs(30);

/// [`CONVERGED_RESYNC`] while a database file is near the backend quota
/// ([`plan::database_near_quota`]): a NOSPACE alarm refuses every write until the operator
/// clears it, so it is found within seconds of being raised. Near the quota is rare and a
/// converged pass reads only etcd (its Kubernetes objects come from the watch caches).
const NEAR_QUOTA_RESYNC: Duration = Duration::from_secs(5);

/// How often a member that is starting (the seed, or a learner before it answers) is looked at.
const MEMBER_STARTING_LOOK: Duration = Duration::from_millis(500);

/// When to look again if nothing changes in the API meanwhile; `near_quota`: some member's
/// database is near the backend quota.
fn requeue_after(action: &Action, near_quota: bool) -> Duration {
    match action {
        // The next step waits for nothing but us: the learner's Pod after its member add; the
        // step the open gate held back (`make bench`: a second per member while forming).
        Action::AddLearner { .. } | Action::OpenServingGate { .. } => Duration::from_millis(200),
        // A step was taken: look at its effect soon (etcd changes do not show in the API).
        Action::BootstrapSeed { .. }
        | Action::CreateMemberPod { .. }
        | Action::PromoteLearner { .. }
        | Action::RemoveMember { .. }
        | Action::DeletePod { .. }
        | Action::UpgradeMember { .. }
        | Action::RollMember { .. }
        | Action::RollForTls { .. }
        | Action::UpdatePeerUrl { .. }
        | Action::SnapshotBeforeUpgrade { .. }
        | Action::MarkV2WalClean { .. }
        | Action::AdoptPod { .. }
        | Action::ExpandVolume { .. }
        | Action::DefragmentMember { .. }
        | Action::CompactKeyspace { .. }
        | Action::DisarmNoSpace { .. }
        | Action::DeletePvc { .. } => Duration::from_secs(1),
        Action::Wait(reason) => match reason {
            // A starting member answers etcd seconds before its Pod turns Ready (the readiness
            // probe runs every 5 s), and nothing else in the API changes meanwhile: only a look
            // finds it. At 2 s the first learner's promotion waited a second on average where
            // by hand it follows in 0.1 s (`make bench`). While it lasts (seconds; minutes for a
            // learner copying a large database) a look costs a Pod list and one status per
            // member.
            WaitReason::SeedStarting
            | WaitReason::LearnerCatchingUp { .. }
            | WaitReason::MemberJoining { .. } => MEMBER_STARTING_LOOK,
            WaitReason::PodTerminating { .. }
            | WaitReason::PodNotReady { .. }
            | WaitReason::V2SnapshotPending { .. } => Duration::from_secs(2),
            // A member settling on its new peer URL, or a Pod coming back, during the switch to
            // TLS; a reverted member waits for the user (deleting its Pod triggers a pass).
            WaitReason::TlsSwitch(SwitchWait::Reverted(_)) => Duration::from_secs(60),
            WaitReason::TlsSwitch(_) => Duration::from_secs(2),
            // etcd moves the cluster version some seconds after the last member upgraded.
            WaitReason::ClusterVersionBehind { .. } => Duration::from_secs(3),
            WaitReason::MemberUnhealthy { .. }
            | WaitReason::WouldLoseQuorum { .. }
            | WaitReason::MembersUnreachable { .. } => Duration::from_secs(10),
            WaitReason::QuorumLost { .. } | WaitReason::ClusterLost => Duration::from_secs(15),
            // Waits for the user (or an administrator's StorageClass change, which does not
            // trigger a reconcile of this cluster).
            WaitReason::VolumeExpansionNotAllowed { .. } => Duration::from_secs(60),
            // Space can come back by itself (a client deletes keys, a quota change rolls).
            WaitReason::NoSpaceCannotBeFreed { .. } => Duration::from_secs(30),
            WaitReason::Paused => Duration::from_secs(300),
            // The annotation's removal is a change to the EtcdCluster: it triggers a reconcile.
            WaitReason::Restoring { .. } => Duration::from_secs(60),
        },
        // A certificate Secret's fix (created, replaced, put back, renewed by cert-manager) is no
        // change to the EtcdCluster, and Secrets are not watched: look again as often as a
        // settled cluster reads them.
        Action::Refuse(errors) if errors.iter().any(|e| e.field.starts_with("spec.tls")) => {
            CONVERGED_RESYNC
        }
        // A bad spec waits for the user to change it (the change triggers a reconcile).
        Action::Refuse(_) => Duration::from_secs(300),
        Action::Converged if near_quota => NEAR_QUOTA_RESYNC,
        Action::Converged => CONVERGED_RESYNC,
    }
}

/// [`requeue_after`], but no later than just after the next certificate renewal time: the
/// renewal happens on time whatever the action waits for (a paused or refused cluster looks
/// again only every few minutes, and a short certificate lifetime is shorter still).
fn requeue_delay(
    action: &Action,
    near_quota: bool,
    next_renewal: Option<time::OffsetDateTime>,
    now: time::OffsetDateTime,
) -> Duration {
    let planned = requeue_after(action, near_quota);
    let Some(due) = next_renewal else {
        return planned;
    };
    // A second past it: certificate times are whole seconds, and the pass must find it due.
    let until_due = (due - now).max(time::Duration::ZERO) + time::Duration::SECOND;
    Duration::try_from(until_due).map_or(planned, |until_due| planned.min(until_due))
}

fn error_policy(cluster: Arc<EtcdCluster>, error: &ReconcileError, ctx: Arc<Context>) -> Requeue {
    operator_runtime::backoff::requeue_failure(&*cluster, error.reason(), error, &ctx.backoff)
}

#[cfg(test)]
mod reason_tests {
    use super::*;

    fn api_error() -> kube::Error {
        kube::Error::LinesCodecMaxLineLengthExceeded
    }

    #[test]
    fn every_reason_is_listed_for_the_metrics() {
        // BuildFailed and EtcdMembershipFailed/EtcdRetryLater need a build or etcd error to
        // construct; they are listed by hand.
        let errors = [
            ReconcileError::Observe(ObserveError::NoNamespace("main".into())),
            ReconcileError::Observe(ObserveError::List {
                kind: "Pod",
                cluster: "db/main".into(),
                source: api_error(),
            }),
            ReconcileError::Execute(ExecError::Kube {
                verb: "create",
                kind: "Pod",
                name: "main-0".into(),
                source: api_error(),
            }),
            ReconcileError::Execute(ExecError::VolumeMissing {
                member: "main-0".into(),
                pvc: "main-0".into(),
            }),
            ReconcileError::Status {
                cluster: "db/main".into(),
                source: api_error(),
            },
            ReconcileError::Claim {
                namespace: "db".into(),
                source: api_error(),
            },
            ReconcileError::Execute(ExecError::ScheduledBackup {
                cluster: "db/main".into(),
                source: crate::scheduled_backup::DesiredError::NoImage,
            }),
            ReconcileError::Execute(ExecError::NotOwned {
                kind: "CronJob",
                name: "main-backups".into(),
            }),
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

#[cfg(test)]
mod pass_tests {
    use super::*;

    /// The listed pass takes the stored pass's etcd answers only when it would ask the same
    /// endpoints with the same TLS: a Pod the stores had not seen yet (ours, just created) or
    /// other TLS material is asked anew.
    #[test]
    fn the_listed_pass_reuses_etcd_answers_only_for_the_same_endpoints_and_tls() {
        let endpoints = vec![
            "http://main-0.main.db.svc:2379".to_owned(),
            "http://main-1.main.db.svc:2379".to_owned(),
        ];
        let tls = etcd_admin::ClientTls {
            ca_pem: "ca".into(),
            identity: None,
        };
        let reads = |tls: Option<&etcd_admin::ClientTls>| EtcdReads {
            endpoints: endpoints.clone(),
            tls: tls.cloned(),
            view: etcd_admin::ClusterView::default(),
            cluster_version: Some((3, 6)),
        };
        assert_eq!(
            reads(None).answer(&endpoints, None),
            Some((etcd_admin::ClusterView::default(), Some((3, 6))))
        );
        assert!(reads(Some(&tls)).answer(&endpoints, Some(&tls)).is_some());
        let mut grown = endpoints.clone();
        grown.push("http://main-2.main.db.svc:2379".to_owned());
        assert_eq!(reads(None).answer(&grown, None), None, "a new Pod");
        assert_eq!(
            reads(None).answer(&endpoints[..1], None),
            None,
            "a Pod gone"
        );
        assert_eq!(reads(None).answer(&endpoints, Some(&tls)), None, "TLS now");
        let other = etcd_admin::ClientTls {
            ca_pem: "other ca".into(),
            identity: None,
        };
        assert_eq!(
            reads(Some(&tls)).answer(&endpoints, Some(&other)),
            None,
            "other CA"
        );
    }

    #[test]
    fn a_pass_names_its_action_by_kind_and_a_wait_by_its_reason() {
        let add = Action::AddLearner {
            member: "main-1".into(),
            peer_url: "http://main-1.main.default.svc:2380".into(),
        };
        assert_eq!(action_label(&add), "AddLearner");
        assert_eq!(action_label(&Action::Converged), "Converged");
        assert_eq!(
            action_label(&Action::Wait(WaitReason::LearnerCatchingUp {
                member: "main-1".into()
            })),
            "Wait:LearnerCatchingUp"
        );
        assert_eq!(
            action_label(&Action::Wait(WaitReason::SeedStarting)),
            "Wait:SeedStarting"
        );
        assert_eq!(action_label(&Action::Refuse(vec![])), "Refuse");
    }
}

#[cfg(test)]
mod applied_tests {
    use super::*;

    /// An idle pass skips only the exact objects written for the same cluster, and only for
    /// [`REAPPLY_AFTER`]; a change to one of them (its watch) forgets all of the cluster's.
    #[test]
    fn the_same_objects_are_written_once_per_reapply_period() {
        let applied = AppliedObjects::default();
        let budget = object_key("uid-a", ObjectKind::Budget);
        assert!(!applied.is_current(&budget, 1), "never written");
        assert!(applied.written("uid-a").is_empty());
        applied.record(&budget, 1, Instant::now());
        applied.record(
            &object_key("uid-a", ObjectKind::PeerService),
            7,
            Instant::now(),
        );
        applied.record("backup/uid-a", 0, Instant::now());
        assert!(applied.is_current(&budget, 1));
        assert!(
            !applied.is_current(&budget, 2),
            "other objects (voters, spec)"
        );
        assert_eq!(
            applied.written("uid-a"),
            BTreeMap::from([(ObjectKind::PeerService, 7), (ObjectKind::Budget, 1)])
        );
        assert!(applied.written("uid-b").is_empty(), "other cluster");
        applied.forget("uid-a");
        assert!(
            applied.written("uid-a").is_empty(),
            "forgotten after a change"
        );
        assert!(
            applied.is_current("backup/uid-a", 0),
            "the schedule is not the Services' concern"
        );
        if let Some(long_ago) = Instant::now().checked_sub(REAPPLY_AFTER) {
            applied.record(&budget, 1, long_ago);
            assert!(!applied.is_current(&budget, 1), "written too long ago");
            assert!(applied.written("uid-a").is_empty(), "written too long ago");
        }
    }
}

#[cfg(test)]
mod requeue_tests {
    use super::*;

    /// etcd's "retry later" lasts ~5 s after a membership change: retried at 0.5 s through twice
    /// that, then backed off; reported only after tens of seconds of refusals, not within etcd's
    /// ordinary window.
    #[test]
    fn retry_later_is_retried_at_half_a_second_through_etcds_window_then_backed_off() {
        let backoff = refusal_backoff();
        let delays: Vec<Duration> = (0..40).map(|_| backoff.failure("uid")).collect();
        let window = Duration::from_secs(5);
        let mut waited = Duration::ZERO;
        for delay in &delays {
            if waited >= 2 * window {
                break;
            }
            assert_eq!(*delay, REFUSAL_RETRY, "after {waited:?} of refusals");
            waited += *delay;
        }
        assert!(delays.windows(2).all(|pair| pair[0] <= pair[1]));
        assert_eq!(delays.last(), Some(&Duration::from_secs(30)));
        let until_reported: Duration = delays
            .iter()
            .take(crate::status::PERSISTENT_REFUSALS as usize)
            .sum();
        assert!(
            until_reported >= Duration::from_secs(30),
            "reported after {until_reported:?} of refusals"
        );
    }

    /// A cluster refused for a certificate Secret (missing, unusable, of a CA the members do
    /// not trust) looks again as a settled one does: fixing the Secret triggers no reconcile.
    /// Any other refusal waits for a change of the EtcdCluster.
    #[test]
    fn a_refusal_for_a_secret_is_looked_at_again_as_often_as_a_settled_cluster() {
        let refuse = |field: &str| {
            Action::Refuse(vec![etcd_api::validation::FieldError {
                field: field.into(),
                message: "m".into(),
            }])
        };
        assert_eq!(
            requeue_after(&refuse("spec.tls.peer.certManager"), false),
            CONVERGED_RESYNC
        );
        assert_eq!(
            requeue_after(&refuse("spec.tls.client.secretRef"), false),
            CONVERGED_RESYNC
        );
        assert_eq!(
            requeue_after(&refuse("spec.version"), false),
            Duration::from_secs(300)
        );
    }

    #[test]
    fn the_learners_pod_follows_its_member_add_at_once() {
        let add = Action::AddLearner {
            member: "main-1".into(),
            peer_url: "http://main-1.main.default.svc:2380".into(),
        };
        assert!(requeue_after(&add, false) < Duration::from_secs(1));
    }

    /// A starting seed or learner is looked at every half second (nothing in the API says
    /// when its etcd answers); a member that is unhealthy, or a quorum lost, keeps its slower
    /// look.
    #[test]
    fn a_starting_member_is_looked_at_every_half_second() {
        let learner = WaitReason::LearnerCatchingUp {
            member: "main-1".into(),
        };
        for reason in [WaitReason::SeedStarting, learner] {
            assert_eq!(
                requeue_after(&Action::Wait(reason.clone()), false),
                Duration::from_millis(500),
                "{reason:?}"
            );
        }
        let unhealthy = WaitReason::MemberUnhealthy {
            member: "main-1".into(),
        };
        assert_eq!(
            requeue_after(&Action::Wait(unhealthy), false),
            Duration::from_secs(10)
        );
    }

    /// A converged cluster whose database is near its quota is looked at every 5 s instead of
    /// every 30 s (a NOSPACE alarm changes nothing in the API); every other action keeps its
    /// own delay, and a renewal due sooner still comes first.
    #[test]
    fn a_converged_cluster_near_its_quota_is_looked_at_sooner() {
        let now = time::OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap();
        assert_eq!(
            requeue_delay(&Action::Converged, false, None, now),
            CONVERGED_RESYNC
        );
        assert_eq!(
            requeue_delay(&Action::Converged, true, None, now),
            NEAR_QUOTA_RESYNC
        );
        assert!(NEAR_QUOTA_RESYNC < CONVERGED_RESYNC);
        let paused = Action::Wait(WaitReason::Paused);
        assert_eq!(
            requeue_delay(&paused, true, None, now),
            Duration::from_secs(300),
            "a paused cluster stays paused"
        );
        let renewal = Some(now + time::Duration::seconds(2));
        assert_eq!(
            requeue_delay(&Action::Converged, true, renewal, now),
            Duration::from_secs(3)
        );
    }

    /// The next look comes by the next certificate renewal at the latest, whatever the action
    /// planned; a renewal further away than the planned look changes nothing.
    #[test]
    fn the_next_look_is_no_later_than_the_next_renewal() {
        let now = time::OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap();
        let secs = time::Duration::seconds;
        let paused = Action::Wait(WaitReason::Paused);
        let cases = [
            // (action, next renewal, delay)
            (Action::Converged, None, Duration::from_secs(30)),
            (
                Action::Converged,
                Some(now + secs(3600)),
                Duration::from_secs(30),
            ),
            (
                Action::Converged,
                Some(now + secs(10)),
                Duration::from_secs(11),
            ),
            (paused.clone(), None, Duration::from_secs(300)),
            (
                paused.clone(),
                Some(now + secs(120)),
                Duration::from_secs(121),
            ),
            // Due now (found due by a pass that could not re-issue it): a second, not zero.
            (paused, Some(now), Duration::from_secs(1)),
            (
                Action::DeletePod {
                    member: "main-0".into(),
                },
                Some(now + secs(10)),
                Duration::from_secs(1),
            ),
        ];
        for (action, next_renewal, expected) in cases {
            assert_eq!(
                requeue_delay(&action, false, next_renewal, now),
                expected,
                "{action:?}, renewal at {next_renewal:?}"
            );
        }
    }
}

//! Performs one planned action, then returns: the controller re-observes before the next one.
//! I/O only; what to do was decided by [`crate::plan`].
//!
//! Every step is idempotent against the state it leaves behind, because a crash can come
//! between any two calls: creating an object that exists is success, removing a member etcd no
//! longer has is success, adding a learner whose peer URL etcd already has is success (the
//! planner then sees the learner and creates its Pod).

use std::collections::BTreeMap;
use std::time::Duration;

use etcd_admin::{AdminError, EtcdAdmin};
use etcd_api::EtcdCluster;
use k8s_openapi::api::batch::v1::CronJob;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Service, ServiceAccount};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use operator_runtime::{apply_object, create_if_absent, delete_if_present};

use crate::build::{self, InitialState, MemberPod};
use crate::plan::objects::{ClusterObject, ObjectWrite, WantedObjects};
use crate::plan::{Action, PodReason};
use crate::scheduled_backup;

/// What the backup schedule's plan needs of one object: whether it exists, whose it is, and
/// the hash it was built from.
async fn read_existing<K>(
    api: &Api<K>,
    kind: &'static str,
    name: &str,
    cluster_uid: Option<&str>,
) -> Result<Option<scheduled_backup::Existing>, ExecError>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let object = api
        .get_opt(name)
        .await
        .map_err(ExecError::kube("get", kind, name))?;
    Ok(object.map(|o| scheduled_backup::Existing::of(o.meta(), cluster_uid)))
}

/// A failed step.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// Building an object from the EtcdCluster failed.
    #[error("building the objects of {cluster}: {source}")]
    Build {
        /// namespace/name of the cluster.
        cluster: String,
        /// Why.
        source: build::BuildError,
    },
    /// A Kubernetes API call failed.
    #[error("{verb} {kind} {name}: {source}")]
    Kube {
        /// create, delete, apply.
        verb: &'static str,
        /// Object kind.
        kind: &'static str,
        /// Object name.
        name: String,
        /// The API error.
        source: kube::Error,
    },
    /// A restarting member's PVC is gone or being deleted: its Pod is not created (a new PVC
    /// would be an empty data directory under the old member ID).
    #[error("member {member} restarts on its data, but its PVC {pvc} is gone or being deleted")]
    VolumeMissing {
        /// Member name.
        member: String,
        /// PVC name.
        pvc: String,
    },
    /// A member's certificate Secret could not be made ready.
    #[error(transparent)]
    Tls(#[from] crate::tls::TlsError),
    /// `spec.backup`'s objects cannot be built (no `--backup-image`).
    #[error("the backup schedule of {cluster}: {source}")]
    ScheduledBackup {
        /// namespace/name of the cluster.
        cluster: String,
        /// Why.
        source: crate::scheduled_backup::DesiredError,
    },
    /// An object named like the backup schedule's exists and this cluster does not own it:
    /// it is left alone and the schedule is not made.
    #[error(
        "{kind} {name} exists and is not owned by this EtcdCluster: spec.backup's schedule is not made (rename or delete that object)"
    )]
    NotOwned {
        /// Object kind.
        kind: &'static str,
        /// Object name.
        name: String,
    },
    /// An etcd membership call failed.
    #[error("{step} {member}: {source}")]
    Etcd {
        /// add learner, promote, remove.
        step: &'static str,
        /// Member name.
        member: String,
        /// etcd's answer.
        source: AdminError,
    },
}

impl From<operator_runtime::ObjectError> for ExecError {
    fn from(e: operator_runtime::ObjectError) -> Self {
        ExecError::Kube {
            verb: e.verb,
            kind: e.kind,
            name: e.name,
            source: e.source,
        }
    }
}

impl ExecError {
    /// Maps a failed Kubernetes call on the object `kind`/`name` (`verb` as RBAC names it).
    fn kube(
        verb: &'static str,
        kind: &'static str,
        name: impl Into<String>,
    ) -> impl FnOnce(kube::Error) -> ExecError {
        let name = name.into();
        move |source| ExecError::Kube {
            verb,
            kind,
            name,
            source,
        }
    }

    /// PascalCase cause, for metrics and events.
    pub fn reason(&self) -> &'static str {
        match self {
            ExecError::Build { .. } => "BuildFailed",
            ExecError::Kube { .. } => "KubeApiFailed",
            ExecError::VolumeMissing { .. } => "VolumeMissing",
            ExecError::ScheduledBackup { .. } => "BackupScheduleFailed",
            ExecError::NotOwned { .. } => "ObjectNotOwned",
            ExecError::Tls(e) => e.reason(),
            ExecError::Etcd { source, .. } if source.is_retry_later() => "EtcdRetryLater",
            ExecError::Etcd { .. } => "EtcdMembershipFailed",
        }
    }

    /// etcd asked to retry later (right after a membership change, or a learner not caught up):
    /// not a failure worth a warning.
    pub fn is_retry_later(&self) -> bool {
        matches!(self, ExecError::Etcd { source, .. } if source.is_retry_later())
    }
}

/// Least time a defragmentation or compaction call gets: it rewrites the whole database
/// (etcd-facts.md: about a second per few hundred MiB on a local disk), far longer than a
/// membership call.
const DEFRAG_TIMEOUT: Duration = Duration::from_secs(120);

/// How long a defragmentation waits for the client Service to stop routing to the member it
/// drained: the kubelet's status update and the EndpointSlice controller take about a second.
const DRAIN_WAIT: Duration = Duration::from_secs(10);

/// Whether an endpoint of these EndpointSlices routes to `pod`: it targets the Pod and is
/// ready (an unset `ready` counts as ready, as the API documents).
fn routes_to(slices: &[EndpointSlice], pod: &str) -> bool {
    slices.iter().flat_map(|s| &s.endpoints).any(|endpoint| {
        endpoint
            .target_ref
            .as_ref()
            .is_some_and(|target| target.name.as_deref() == Some(pod))
            && endpoint
                .conditions
                .as_ref()
                .and_then(|c| c.ready)
                .unwrap_or(true)
    })
}

/// Whether creating a member may create its data volume.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VolumeStep {
    /// Create the PVC if it is missing (a new member: it has no data yet).
    Create,
    /// The PVC must exist and not be terminating: the member restarts on its data.
    MustExist,
}

/// The volume step of a member-creating action. A restarting member must find its data: if its
/// PVC vanished between the observation and this step, a fresh one would start etcd with an
/// empty data directory under the old member ID (`--initial-cluster-state existing`, no log), a
/// Raft safety violation. The planner then sees the data gone and replaces the member.
pub fn volume_step(action: &Action) -> VolumeStep {
    match action {
        Action::CreateMemberPod {
            reason: PodReason::Restart | PodReason::SnapshotBeforeUpgrade,
            ..
        } => VolumeStep::MustExist,
        _ => VolumeStep::Create,
    }
}

/// The operator's settings for clusters' NetworkPolicies (`--network-policy`).
#[derive(Clone, Debug, Default)]
pub struct NetworkSettings {
    /// Whether a cluster without `spec.networkPolicy.enabled` gets one.
    pub default_policy: etcd_api::network::NetworkPolicyDefault,
    /// The operators' namespace, admitted to the client port.
    pub operator_namespace: String,
}

/// What the executor needs.
pub struct Executor<'a> {
    /// API client.
    pub client: &'a kube::Client,
    /// The cluster the action is for.
    pub cluster: &'a EtcdCluster,
    /// Client URLs of members that answered, for membership changes.
    pub etcd_endpoints: &'a [String],
    /// Timeout of each etcd call.
    pub etcd_timeout: Duration,
    /// The largest backend database a member reported (0 when none answered): the derived
    /// quota of a Pod it creates is never below it.
    pub largest_db_bytes: u64,
    /// TLS to the members and the CA issuing their certificates.
    pub tls: &'a crate::tls::ClusterTls,
    /// Where the operators run and whether clusters get a NetworkPolicy by default.
    pub network: &'a NetworkSettings,
    /// The operators' image, which `spec.backup`'s CronJob runs (`--backup-image`).
    pub backup_image: Option<&'a str>,
    /// What a member Pod created now listens on ([`etcd_member::plan::pod_listeners`]: as the
    /// spec says, or the current stage of a switch to TLS).
    pub listen: etcd_member::plan::tls_switch::Listeners,
}

impl Executor<'_> {
    fn namespace(&self) -> String {
        self.cluster.namespace().unwrap_or_default()
    }

    fn id(&self) -> String {
        format!("{}/{}", self.namespace(), self.cluster.name_any())
    }

    fn api<K>(&self) -> Api<K>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
    {
        Api::namespaced(self.client.clone(), &self.namespace())
    }

    fn built<T>(&self, result: Result<T, build::BuildError>) -> Result<T, ExecError> {
        result.map_err(|source| ExecError::Build {
            cluster: self.id(),
            source,
        })
    }

    /// The cluster's own objects as wanted now, for the objects' plan
    /// ([`etcd_member::plan::objects`]): the Services and the budget for `voters` (see
    /// [`crate::state::Observed::budget_voters`]), the client Service publishing 2378 when
    /// `switch_port` ([`crate::plan::serves_switch_client_port`]), the NetworkPolicy when the
    /// cluster wants one (admitting 2378 on the same condition), and the owner references of
    /// the member PVCs in `pvcs`.
    pub fn wanted_objects(
        &self,
        voters: usize,
        switch_port: bool,
        pvcs: &BTreeMap<String, PersistentVolumeClaim>,
    ) -> Result<WantedObjects, ExecError> {
        let policy = if self
            .cluster
            .wants_network_policy(self.network.default_policy)
        {
            Some(self.built(crate::network_policy::network_policy(
                self.cluster,
                &self.network.operator_namespace,
                switch_port,
            ))?)
        } else {
            None
        };
        let policy_name = crate::network_policy::name(self.cluster);
        self.built(WantedObjects::build(
            self.cluster,
            voters,
            switch_port,
            policy,
            policy_name,
            pvcs,
        ))
    }

    /// Performs the objects' plan, in its order. A failed write skips the later writes of its
    /// group (the Services, budget and NetworkPolicy; the PVCs), and the first failure is
    /// returned once both groups are done; `written` hears of each write that succeeded.
    pub async fn write_objects(
        &self,
        writes: &[ObjectWrite],
        mut written: impl FnMut(&ObjectWrite),
    ) -> Result<(), ExecError> {
        let mut first_failure = None;
        // Whether a write of each group failed.
        let (mut objects_failed, mut pvcs_failed) = (false, false);
        for write in writes {
            let failed = if matches!(write, ObjectWrite::SetPvcOwners { .. }) {
                &mut pvcs_failed
            } else {
                &mut objects_failed
            };
            if *failed {
                continue;
            }
            match self.write_object(write).await {
                Ok(()) => written(write),
                Err(error) => {
                    *failed = true;
                    first_failure.get_or_insert(error);
                }
            }
        }
        first_failure.map_or(Ok(()), Err)
    }

    /// Applies one of the cluster's objects (server-side).
    async fn apply_cluster_object(&self, object: &ClusterObject) -> Result<(), ExecError> {
        let manager = build::FIELD_MANAGER;
        match object {
            ClusterObject::PeerService(service) => {
                failpoint::around(
                    "cluster.peer_service_apply",
                    apply_object(&self.api::<Service>(), "Service", manager, service),
                )
                .await?;
            }
            ClusterObject::ClientService(service) => {
                failpoint::around(
                    "cluster.client_service_apply",
                    apply_object(&self.api::<Service>(), "Service", manager, service),
                )
                .await?;
            }
            ClusterObject::Budget(budget) => {
                failpoint::around(
                    "cluster.pdb_apply",
                    apply_object(
                        &self.api::<PodDisruptionBudget>(),
                        "PodDisruptionBudget",
                        manager,
                        budget,
                    ),
                )
                .await?;
            }
            ClusterObject::NetworkPolicy(policy) => {
                failpoint::around(
                    "cluster.network_policy_apply",
                    apply_object(
                        &self.api::<NetworkPolicy>(),
                        "NetworkPolicy",
                        manager,
                        policy,
                    ),
                )
                .await?;
            }
        }
        Ok(())
    }

    /// One write of the objects' plan. The Services, the budget and the NetworkPolicy are
    /// applied server-side (a Service deleted by hand comes back, the budget follows the
    /// voters); a PVC's owner references follow `spec.storage.reclaimPolicy` as it is now
    /// (without this, switching Delete → Retain would leave existing volumes to be deleted with
    /// the cluster object).
    async fn write_object(&self, write: &ObjectWrite) -> Result<(), ExecError> {
        match write {
            ObjectWrite::Apply(object) => self.apply_cluster_object(object).await?,
            ObjectWrite::RemoveNetworkPolicy { name } => {
                let api = self.api::<NetworkPolicy>();
                let existing = api.get_opt(name).await.map_err(ExecError::kube(
                    "get",
                    "NetworkPolicy",
                    name.as_str(),
                ))?;
                // Only the cluster's own: a policy of the same name someone else made stays.
                let ours = existing.is_some_and(|policy| {
                    policy
                        .owner_references()
                        .iter()
                        .any(|o| Some(&o.uid) == self.cluster.metadata.uid.as_ref())
                });
                if ours {
                    failpoint::around(
                        "cluster.network_policy_delete",
                        delete_if_present(&api, "NetworkPolicy", name),
                    )
                    .await?;
                }
            }
            ObjectWrite::SetPvcOwners { pvc, owners } => {
                let patch = serde_json::json!({"metadata": {"ownerReferences": owners}});
                failpoint::around(
                    "cluster.pvc_owner_patch",
                    self.api::<PersistentVolumeClaim>().patch(
                        pvc,
                        &PatchParams::default(),
                        &Patch::Merge(&patch),
                    ),
                )
                .await
                .map_err(|source| ExecError::Kube {
                    verb: "patch",
                    kind: "PersistentVolumeClaim",
                    name: pvc.clone(),
                    source,
                })?;
            }
        }
        Ok(())
    }

    /// Keeps `spec.backup`'s CronJob, ServiceAccount, Role and RoleBinding as the spec says
    /// (see [`crate::scheduled_backup`]): reads what exists, plans, and performs the step.
    /// Returns the step taken, for the events.
    pub async fn ensure_scheduled_backup(&self) -> Result<scheduled_backup::Step, ExecError> {
        let wanted =
            scheduled_backup::desired(self.cluster, self.backup_image).map_err(|source| {
                ExecError::ScheduledBackup {
                    cluster: self.id(),
                    source,
                }
            })?;
        let name = scheduled_backup::name(&self.cluster.name_any());
        let uid = self.cluster.metadata.uid.as_deref();
        let cron_jobs = self.api::<CronJob>();
        let accounts = self.api::<ServiceAccount>();
        let roles = self.api::<Role>();
        let bindings = self.api::<RoleBinding>();
        let cron_job = match read_existing(&cron_jobs, "CronJob", &name, uid).await {
            Ok(cron_job) => cron_job,
            // Without spec.backup, an operator whose RBAC predates it (installed without the
            // chart) cannot have made one either: not a failure of every cluster's reconcile.
            Err(ExecError::Kube {
                source: kube::Error::Api(status),
                ..
            }) if wanted.is_none() && status.code == 403 => {
                tracing::debug!(%name, "may not read CronJobs; no spec.backup, nothing to remove");
                return Ok(scheduled_backup::Step::Absent);
            }
            Err(error) => return Err(error),
        };
        let mut observed = scheduled_backup::Observed {
            cron_job,
            ..Default::default()
        };
        // The companions matter only when a schedule is wanted or ours is still there.
        if wanted.is_some() || observed.cron_job.as_ref().is_some_and(|c| c.owned) {
            observed.service_account =
                read_existing(&accounts, "ServiceAccount", &name, uid).await?;
            observed.role = read_existing(&roles, "Role", &name, uid).await?;
            observed.role_binding = read_existing(&bindings, "RoleBinding", &name, uid).await?;
        }
        let step = scheduled_backup::plan(wanted.as_ref().map(|o| o.hash.as_str()), &observed);
        match (&step, wanted) {
            (scheduled_backup::Step::Create | scheduled_backup::Step::Update, Some(objects)) => {
                // The CronJob last: a run never starts without its RBAC.
                let manager = build::FIELD_MANAGER;
                failpoint::around(
                    "cluster.backup_service_account_apply",
                    apply_object(
                        &accounts,
                        "ServiceAccount",
                        manager,
                        &objects.service_account,
                    ),
                )
                .await?;
                failpoint::around(
                    "cluster.backup_role_apply",
                    apply_object(&roles, "Role", manager, &objects.role),
                )
                .await?;
                failpoint::around(
                    "cluster.backup_role_binding_apply",
                    apply_object(&bindings, "RoleBinding", manager, &objects.role_binding),
                )
                .await?;
                failpoint::around(
                    "cluster.backup_cron_job_apply",
                    apply_object(&cron_jobs, "CronJob", manager, &objects.cron_job),
                )
                .await?;
            }
            (scheduled_backup::Step::Remove, _) => {
                // The CronJob last: while it exists, the next pass knows there is more to
                // remove. EtcdBackups and S3 objects are never touched.
                failpoint::around(
                    "cluster.backup_role_binding_delete",
                    delete_if_present(&bindings, "RoleBinding", &name),
                )
                .await?;
                failpoint::around(
                    "cluster.backup_role_delete",
                    delete_if_present(&roles, "Role", &name),
                )
                .await?;
                failpoint::around(
                    "cluster.backup_service_account_delete",
                    delete_if_present(&accounts, "ServiceAccount", &name),
                )
                .await?;
                failpoint::around(
                    "cluster.backup_cron_job_delete",
                    delete_if_present(&cron_jobs, "CronJob", &name),
                )
                .await?;
            }
            (scheduled_backup::Step::Foreign { kind }, _) => {
                return Err(ExecError::NotOwned {
                    kind,
                    name: name.clone(),
                });
            }
            _ => {}
        }
        Ok(step)
    }

    /// Performs `action`. Waits, refusals and `Converged` do nothing.
    pub async fn execute(&self, action: &Action) -> Result<(), ExecError> {
        match action {
            Action::BootstrapSeed { member, version } => {
                let peer_url = crate::observe::cluster_name(self.cluster).peer_url(member);
                let initial = [(member.clone(), peer_url)];
                self.create_member(
                    member,
                    &MemberPod {
                        member,
                        version: *version,
                        initial_cluster: &initial,
                        state: InitialState::New,
                        largest_db_bytes: self.largest_db_bytes,
                        snapshot_before_upgrade: false,
                    },
                    volume_step(action),
                )
                .await
            }
            Action::CreateMemberPod {
                member,
                initial_cluster,
                version,
                ..
            } => {
                // `existing` for both reasons: a new member joins the running cluster, and a
                // restarting member has its data directory, so etcd ignores the flag.
                self.create_member(
                    member,
                    &MemberPod {
                        member,
                        version: *version,
                        initial_cluster,
                        state: InitialState::Existing,
                        largest_db_bytes: self.largest_db_bytes,
                        snapshot_before_upgrade: matches!(
                            action,
                            Action::CreateMemberPod {
                                reason: PodReason::SnapshotBeforeUpgrade,
                                ..
                            }
                        ),
                    },
                    volume_step(action),
                )
                .await
            }
            Action::AddLearner { member, peer_url } => {
                let mut admin = self.admin(member, "add learner").await?;
                match admin.add_learner(peer_url).await {
                    Ok(_) | Err(AdminError::PeerUrlExists { .. }) => Ok(()),
                    Err(source) => Err(self.etcd_error("add learner", member, source)),
                }
            }
            Action::PromoteLearner { member, id } => {
                let mut admin = self.admin(member, "promote").await?;
                admin
                    .promote(*id)
                    .await
                    .map_err(|source| self.etcd_error("promote", member, source))
            }
            Action::RemoveMember { member, id, .. } => {
                let mut admin = self.admin(member, "remove").await?;
                match admin.remove(*id).await {
                    Ok(()) | Err(AdminError::NotFound { .. }) => Ok(()),
                    Err(source) => Err(self.etcd_error("remove", member, source)),
                }
            }
            Action::UpdatePeerUrl {
                member,
                id,
                peer_url,
                revert,
                ..
            } => {
                if *revert {
                    // The mark first: it keeps the member from being moved forward again even
                    // if this process stops between the two writes (plan/tls_switch.rs).
                    let patch = serde_json::json!({"metadata": {"annotations": {
                        etcd_member::plan::tls_switch::ANNOTATION_TLS_SWITCH_REVERTED: "true",
                    }}});
                    failpoint::around(
                        "cluster.pod_mark_tls_reverted",
                        self.api::<Pod>().patch(
                            member,
                            &PatchParams::default(),
                            &Patch::Merge(&patch),
                        ),
                    )
                    .await
                    .map_err(ExecError::kube(
                        "patch",
                        "Pod",
                        member.as_str(),
                    ))?;
                }
                let mut admin = self.admin(member, "update peer URL").await?;
                admin
                    .update_peer_url(*id, peer_url)
                    .await
                    .map_err(|source| self.etcd_error("update peer URL", member, source))
            }
            Action::DeletePod { member }
            | Action::UpgradeMember { member, .. }
            | Action::RollMember { member, .. }
            | Action::RollForTls { member, .. }
            | Action::SnapshotBeforeUpgrade { member, .. } => {
                if let Action::SnapshotBeforeUpgrade { version, .. } = action {
                    // The PVC first: it tells the next Pod how to start even if this process
                    // stops between the two writes.
                    self.annotate_pvc(
                        member,
                        serde_json::json!({
                            build::ANNOTATION_SNAPSHOT_BEFORE_UPGRADE: version.to_string(),
                            build::ANNOTATION_V2_WAL_CLEAN: null,
                        }),
                    )
                    .await?;
                }
                Ok(failpoint::around(
                    "cluster.pod_delete",
                    delete_if_present(&self.api::<Pod>(), "Pod", member),
                )
                .await?)
            }
            Action::MarkV2WalClean { member } => {
                self.annotate_pvc(
                    member,
                    serde_json::json!({
                        build::ANNOTATION_SNAPSHOT_BEFORE_UPGRADE: null,
                        build::ANNOTATION_V2_WAL_CLEAN: "true",
                    }),
                )
                .await
            }
            Action::AdoptPod {
                member,
                hash,
                tls_hash,
            } => {
                // A merge patch of annotations: the Pod's spec (immutable) is not touched and
                // the kubelet does not restart anything. Only the missing ones are written.
                let mut annotations = serde_json::Map::new();
                if let Some(hash) = hash {
                    annotations.insert(build::ANNOTATION_CONFIG_HASH.into(), hash.clone().into());
                }
                if let Some(tls_hash) = tls_hash {
                    annotations.insert(build::ANNOTATION_TLS_HASH.into(), tls_hash.clone().into());
                }
                let patch = serde_json::json!({"metadata": {"annotations": annotations}});
                failpoint::around(
                    "cluster.pod_annotate",
                    self.api::<Pod>()
                        .patch(member, &PatchParams::default(), &Patch::Merge(&patch)),
                )
                .await
                .map(|_| ())
                .map_err(ExecError::kube("patch", "Pod", member.as_str()))
            }
            Action::DefragmentMember {
                member,
                client_url,
                drain,
                ..
            } => {
                // Clients first: the Pod leaves the client Service (gate closed, not Ready),
                // so requests go to the other members instead of stalling on this one.
                if *drain {
                    self.set_serving(member, false).await?;
                    self.wait_out_of_client_service(member).await;
                }
                // The call returns when the member is done; it copies the whole database.
                let timeout = self.etcd_timeout.max(DEFRAG_TIMEOUT);
                let defragmented =
                    etcd_admin::defragment(client_url, timeout, self.tls.etcd.as_ref())
                        .await
                        .map_err(|source| self.etcd_error("defragment", member, source));
                // Reopened whatever the outcome. Should this write fail (or the process stop
                // before it), the next pass opens the gate before anything else (the planner's
                // OpenServingGate).
                let reopened = if *drain {
                    self.set_serving(member, true).await
                } else {
                    Ok(())
                };
                defragmented.and(reopened)
            }
            Action::OpenServingGate { member } => self.set_serving(member, true).await,
            Action::CompactKeyspace { .. } => {
                let admin = self.admin("cluster", "compact").await?;
                etcd_admin::compact_to_current(
                    admin.member_endpoint(),
                    self.etcd_timeout.max(DEFRAG_TIMEOUT),
                    self.tls.etcd.as_ref(),
                )
                .await
                .map(drop)
                .map_err(|source| self.etcd_error("compact", "cluster", source))
            }
            Action::DisarmNoSpace { .. } => {
                let admin = self.admin("cluster", "disarm NOSPACE").await?;
                etcd_admin::disarm_no_space(
                    admin.member_endpoint(),
                    self.etcd_timeout,
                    self.tls.etcd.as_ref(),
                )
                .await
                .map(drop)
                .map_err(|source| self.etcd_error("disarm NOSPACE", "cluster", source))
            }
            Action::ExpandVolume { pvc, to, .. } => {
                // Only the request: the API server accepts the change because the class allows
                // expansion, and its resize controller (or the CSI resizer) does the rest.
                let patch = serde_json::json!({
                    "spec": {"resources": {"requests": {"storage": to}}}
                });
                failpoint::around(
                    "cluster.pvc_resize",
                    self.api::<PersistentVolumeClaim>().patch(
                        pvc,
                        &PatchParams::default(),
                        &Patch::Merge(&patch),
                    ),
                )
                .await
                .map(|_| ())
                .map_err(ExecError::kube(
                    "patch",
                    "PersistentVolumeClaim",
                    pvc.as_str(),
                ))
            }
            Action::DeletePvc { name } => Ok(failpoint::around(
                "cluster.pvc_delete",
                delete_if_present(
                    &self.api::<PersistentVolumeClaim>(),
                    "PersistentVolumeClaim",
                    name,
                ),
            )
            .await?),
            Action::Wait(_) | Action::Refuse(_) | Action::Converged => Ok(()),
        }
    }

    /// Sets the serving condition of `member`'s Pod (its readiness gate,
    /// [`build::SERVING_CONDITION`]).
    async fn set_serving(&self, member: &str, serving: bool) -> Result<(), ExecError> {
        failpoint::around(
            "cluster.pod_serving",
            self.api::<Pod>().patch_status(
                member,
                &PatchParams::default(),
                &serving_patch(serving),
            ),
        )
        .await
        .map(|_| ())
        .map_err(ExecError::kube("patch status of", "Pod", member))
    }

    /// Opens a new Pod's serving gate, right after its creation (a failpoint of its own: every
    /// side-effect call site has one, and a crash between the two leaves a new Pod with its
    /// gate closed, which the next pass opens).
    async fn open_new_pod_serving(&self, member: &str) -> Result<(), ExecError> {
        failpoint::around(
            "cluster.new_pod_serving",
            self.api::<Pod>()
                .patch_status(member, &PatchParams::default(), &serving_patch(true)),
        )
        .await
        .map(|_| ())
        .map_err(ExecError::kube("patch status of", "Pod", member))
    }

    /// Waits, at most [`DRAIN_WAIT`], until the client Service's EndpointSlices no longer route
    /// to `member`'s Pod (its endpoint gone or not ready): the kubelet sees the closed gate and
    /// reports the Pod not Ready, then the EndpointSlice controller updates the slices, and
    /// kube-proxy (or a client reading them) follows. Bounded: a slow controller delays the
    /// defragmentation by seconds, never blocks it; a failed read is logged and not waited on.
    async fn wait_out_of_client_service(&self, member: &str) {
        let service = crate::observe::cluster_name(self.cluster).client_service_name();
        let slices = self.api::<EndpointSlice>();
        let params = ListParams::default().labels(&format!("kubernetes.io/service-name={service}"));
        let deadline = tokio::time::Instant::now() + DRAIN_WAIT;
        loop {
            match slices.list(&params).await {
                Ok(list) if !routes_to(&list.items, member) => return,
                Ok(_) => {}
                Err(error) => {
                    tracing::warn!(%error, member, "reading the client Service's endpoints failed; defragmenting without waiting");
                    return;
                }
            }
            if tokio::time::Instant::now() >= deadline {
                tracing::warn!(member, wait = ?DRAIN_WAIT, "the client Service still routes to the member; defragmenting anyway");
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Merge-patches the annotations of `member`'s PVC (`null` removes one).
    async fn annotate_pvc(
        &self,
        member: &str,
        annotations: serde_json::Value,
    ) -> Result<(), ExecError> {
        let patch = serde_json::json!({"metadata": {"annotations": annotations}});
        failpoint::around(
            "cluster.pvc_annotate",
            self.api::<PersistentVolumeClaim>().patch(
                member,
                &PatchParams::default(),
                &Patch::Merge(&patch),
            ),
        )
        .await
        .map(|_| ())
        .map_err(ExecError::kube("patch", "PersistentVolumeClaim", member))
    }

    /// Creates the member's PVC (if missing and `volume` allows it) before its Pod, so the Pod
    /// never starts without its data volume. With [`VolumeStep::MustExist`] the PVC is only
    /// checked: if it is deleted after this check, the Pod cannot start on it (the scheduler
    /// refuses a PVC being deleted, and nothing here creates a new one).
    async fn create_member(
        &self,
        member: &str,
        pod: &MemberPod<'_>,
        volume: VolumeStep,
    ) -> Result<(), ExecError> {
        let pvc = self.built(build::member_pvc(self.cluster, member))?;
        let api = self.api::<PersistentVolumeClaim>();
        match volume {
            VolumeStep::Create => {
                failpoint::around(
                    "cluster.pvc_create",
                    create_if_absent(&api, "PersistentVolumeClaim", &pvc),
                )
                .await?
            }
            VolumeStep::MustExist => {
                let name = pvc.name_any();
                let found = api.get_opt(&name).await.map_err(ExecError::kube(
                    "get",
                    "PersistentVolumeClaim",
                    name.as_str(),
                ))?;
                if found.is_none_or(|p| p.metadata.deletion_timestamp.is_some()) {
                    return Err(ExecError::VolumeMissing {
                        member: member.to_owned(),
                        pvc: name,
                    });
                }
            }
        }
        // The member's certificate before its Pod, which mounts it (a Pod whose Secret is
        // missing waits in ContainerCreating).
        let mut digests = self.tls.secret_digests.clone();
        let mut trusts = self.tls.peer_trusts.clone();
        let mut read_now = BTreeMap::new();
        if let Some(ca) = &self.tls.ca {
            let (secret, data, _) = crate::tls::ensure_member_secret(
                self.client,
                self.cluster,
                ca,
                member,
                time::OffsetDateTime::now_utc(),
                crate::tls::Renewal::WhenDue(self.tls.leaf_validity),
            )
            .await?;
            read_now.insert(secret, data);
        }
        // Certificates cert-manager issues: filled and checked before the Pod, and recorded in
        // its certificate hash (cert-manager renews them in place: the renewal rolls it).
        read_now.extend(
            crate::cert_manager::ensure_member_ready(
                self.client,
                self.cluster,
                member,
                time::OffsetDateTime::now_utc(),
            )
            .await?,
        );
        for (secret, data) in read_now {
            digests.insert(secret.clone(), build::secret_digest(&data));
            match crate::trust::PeerTrust::of_secret(&data) {
                Some(trust) => trusts.insert(secret, trust),
                None => trusts.remove(&secret),
            };
        }
        // A peer certificate the operator does not issue is mounted through the member's copy
        // (crate::overlap), which this pass's TLS writes made once every running member trusts
        // its certificate: until then the Pod waits (it would start on nothing).
        crate::overlap::copy_ready(self.cluster, member, &digests)?;
        let mut pod = self.built(build::member_pod_listening(self.cluster, pod, self.listen))?;
        // The certificate Secrets it mounts, as they are now: a later change rolls it. And what
        // its peer certificate and trust are, against which other members' next certificates
        // are checked (crate::trust).
        let annotations = pod
            .metadata
            .annotations
            .get_or_insert_with(Default::default);
        if let Some(hash) = build::member_tls_hash(self.cluster, member, &digests) {
            annotations.insert(build::ANNOTATION_TLS_HASH.to_owned(), hash);
        }
        if let Some(trust) = crate::trust::pod_annotation(self.cluster, member, &trusts) {
            annotations.insert(crate::trust::ANNOTATION_PEER_TRUST.to_owned(), trust);
        }
        failpoint::around(
            "cluster.pod_create",
            create_if_absent(&self.api::<Pod>(), "Pod", &pod),
        )
        .await?;
        // Its serving gate at once (a status can only be written once the Pod exists): opening
        // it is what the next pass would plan first (`OpenServingGate`), and that pass cost
        // about half a second per member while a cluster formed (`make bench`). The Pod is
        // Ready only once its readiness probe passes too. A crash or a failed write here leaves
        // a new Pod with its gate closed, which the next pass opens.
        if crate::observe::serving_gate(&pod).is_some()
            && let Err(error) = self.open_new_pod_serving(member).await
        {
            tracing::warn!(%error, member, "opening the new Pod's serving gate failed; the next pass opens it");
        }
        Ok(())
    }

    async fn admin(&self, member: &str, step: &'static str) -> Result<EtcdAdmin, ExecError> {
        EtcdAdmin::connect_tls(
            self.etcd_endpoints,
            self.etcd_timeout,
            self.tls.etcd.as_ref(),
        )
        .await
        .map_err(|source| self.etcd_error(step, member, source))
    }

    fn etcd_error(&self, step: &'static str, member: &str, source: AdminError) -> ExecError {
        ExecError::Etcd {
            step,
            member: member.to_owned(),
            source,
        }
    }
}

/// The strategic-merge patch that sets a member Pod's serving condition (its readiness gate,
/// [`build::SERVING_CONDITION`]) to `serving`, stamped now (as Kubernetes writes times: RFC 3339,
/// whole seconds).
fn serving_patch(serving: bool) -> Patch<serde_json::Value> {
    let now = serde_json::to_value(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        jiff::Timestamp::now(),
    ))
    .unwrap_or_default();
    Patch::Strategic(build::serving_patch(serving, &now))
}

#[cfg(test)]
mod tests {
    use super::*;
    use etcd_api::validation::EtcdVersion;

    fn create_pod(reason: PodReason) -> Action {
        Action::CreateMemberPod {
            member: "main-1".into(),
            initial_cluster: vec![],
            version: EtcdVersion::parse("3.5.1").unwrap(),
            reason,
        }
    }

    /// Issue 17: a member that restarts must find its data. If its PVC vanished between the
    /// observation and this step, creating a fresh one would start etcd with an empty data
    /// directory under the old member ID (`--initial-cluster-state existing`, no log): a Raft
    /// safety violation. Only a new member or the seed of a new cluster gets a new volume.
    #[test]
    fn restarting_a_member_never_creates_its_volume() {
        assert_eq!(
            volume_step(&create_pod(PodReason::Restart)),
            VolumeStep::MustExist
        );
        assert_eq!(
            volume_step(&create_pod(PodReason::NewMember)),
            VolumeStep::Create
        );
        let seed = Action::BootstrapSeed {
            member: "main-0".into(),
            version: EtcdVersion::parse("3.5.1").unwrap(),
        };
        assert_eq!(volume_step(&seed), VolumeStep::Create);
    }
}

#[cfg(test)]
mod drain_tests {
    use super::*;

    fn slice(endpoints: serde_json::Value) -> EndpointSlice {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "main-client-abcde"},
            "addressType": "IPv4",
            "endpoints": endpoints,
        }))
        .unwrap()
    }

    /// The drain waits until the EndpointSlice controller marked the member's endpoint not
    /// ready or dropped it; the other members' endpoints do not matter.
    #[test]
    fn a_member_is_drained_once_its_endpoint_is_not_ready_or_gone() {
        let endpoint = |pod: &str, ready: Option<bool>| {
            serde_json::json!({
                "addresses": ["10.0.0.1"],
                "conditions": {"ready": ready},
                "targetRef": {"kind": "Pod", "name": pod},
            })
        };
        let routed = slice(serde_json::json!([
            endpoint("main-0", Some(true)),
            endpoint("main-1", Some(true))
        ]));
        assert!(routes_to(std::slice::from_ref(&routed), "main-0"));
        // Unset counts as ready (the API's documented meaning).
        let unset = slice(serde_json::json!([endpoint("main-0", None)]));
        assert!(routes_to(&[unset], "main-0"));
        let not_ready = slice(serde_json::json!([
            endpoint("main-0", Some(false)),
            endpoint("main-1", Some(true))
        ]));
        assert!(!routes_to(&[not_ready], "main-0"));
        let gone = slice(serde_json::json!([endpoint("main-1", Some(true))]));
        assert!(!routes_to(&[gone], "main-0"));
        assert!(!routes_to(&[], "main-0"));
    }
}

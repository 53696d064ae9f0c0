//! Performs one planned step against the API (I/O). Status-only steps (start, seed revision,
//! hand-over, outcome) are written by the controller; this module does the object changes.
//! Every change is idempotent: creating what exists or deleting what is gone is success.

use etcd_api::{EtcdCluster, EtcdRestore};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use operator_runtime::{create_if_absent, delete_if_present};

use crate::build::{self, SeedBuildError};
use crate::plan::{FINALIZER, Snapshot, Step};

/// A step that could not be performed (the reconcile retries with back-off).
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// An API call failed.
    #[error("{verb} {kind} {name}: {source}")]
    Kube {
        /// create, patch, delete.
        verb: &'static str,
        /// The kind.
        kind: &'static str,
        /// The object.
        name: String,
        /// The API error.
        source: kube::Error,
    },
    /// The seed could not be built.
    #[error(transparent)]
    Build(#[from] SeedBuildError),
    /// The step needs an object the observation did not find (it changed meanwhile).
    #[error("{0}")]
    Missing(String),
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
    /// PascalCase cause for logs.
    pub fn reason(&self) -> &'static str {
        match self {
            ExecError::Kube { .. } => "ApiError",
            ExecError::Build(_) => "SeedBuildFailed",
            ExecError::Missing(_) => "ObjectChanged",
        }
    }
}

/// What a step acts on.
pub struct Executor<'a> {
    /// API client.
    pub client: &'a kube::Client,
    /// The EtcdRestore.
    pub restore: &'a EtcdRestore,
    /// The EtcdCluster, when it exists.
    pub cluster: Option<&'a EtcdCluster>,
    /// The resolved snapshot, when it resolved.
    pub snapshot: Option<&'a Snapshot>,
    /// The image whose `etcd-restore-operator prepare-seed` prepares the seed.
    pub seed_image: &'a str,
    /// The seed Pod's ServiceAccount (`None`: the namespace's default).
    pub seed_service_account: Option<&'a str>,
    /// The seed Pod's image pull secrets.
    pub seed_image_pull_secrets: &'a [String],
    /// The seed serves TLS clients on 2378 too ([`crate::plan::ClusterState::old_pods_serve_switch_port`]).
    pub seed_switch_port: bool,
}

impl Executor<'_> {
    fn namespace(&self) -> String {
        self.restore.namespace().unwrap_or_default()
    }

    fn api<K>(&self) -> Api<K>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
    {
        Api::namespaced(self.client.clone(), &self.namespace())
    }

    fn cluster(&self) -> Result<&EtcdCluster, ExecError> {
        self.cluster.ok_or_else(|| {
            ExecError::Missing(format!(
                "EtcdCluster {} is gone",
                self.restore.spec.cluster_name
            ))
        })
    }

    fn seed(&self) -> Result<String, ExecError> {
        self.restore
            .status
            .as_ref()
            .and_then(|s| s.seed_member.clone())
            .ok_or_else(|| ExecError::Missing("no seed member recorded".to_owned()))
    }

    /// Performs the object changes of `step`; status-only steps and waits do nothing here.
    pub async fn execute(&self, step: &Step) -> Result<(), ExecError> {
        match step {
            Step::CreateCluster => {
                let namespace = self.namespace();
                let cluster = build::new_cluster(self.restore, &namespace)
                    .ok_or_else(|| ExecError::Missing("spec.clusterSpec is not set".to_owned()))?;
                failpoint::around(
                    "restore.cluster_create",
                    create_if_absent(&self.api::<EtcdCluster>(), "EtcdCluster", &cluster),
                )
                .await?;
                Ok(())
            }
            Step::Hold => self.annotate(Some(self.restore.name_any())).await,
            Step::Release => self.annotate(None).await,
            Step::RetainPvc { name } => {
                let patch = build::retain_patch(&self.restore.name_any());
                let pvcs = self.api::<PersistentVolumeClaim>();
                failpoint::around(
                    "restore.pvc_retain",
                    pvcs.patch(name, &PatchParams::default(), &Patch::Merge(&patch)),
                )
                .await
                .map(|_| ())
                .map_err(|source| ExecError::Kube {
                    verb: "label",
                    kind: "PersistentVolumeClaim",
                    name: name.clone(),
                    source,
                })
            }
            Step::DeleteOldPod { name } => {
                failpoint::around(
                    "restore.old_pod_delete",
                    delete_if_present(&self.api::<Pod>(), "Pod", name),
                )
                .await?;
                Ok(())
            }
            Step::AdmitSeed => {
                let seed = self.seed()?;
                // Serialized as Kubernetes writes times (RFC 3339, whole seconds).
                let now = serde_json::to_value(
                    k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::now()),
                )
                .unwrap_or_default();
                let pods = self.api::<Pod>();
                failpoint::around(
                    "restore.seed_admit",
                    pods.patch_status(
                        &seed,
                        &PatchParams::default(),
                        &Patch::Strategic(build::admit_patch(&now)),
                    ),
                )
                .await
                .map(|_| ())
                .map_err(|source| ExecError::Kube {
                    verb: "patch status of",
                    kind: "Pod",
                    name: seed,
                    source,
                })
            }
            Step::CreateSeedPvc => {
                let pvc = build::seed_pvc(self.cluster()?, self.restore, &self.seed()?)?;
                failpoint::around(
                    "restore.seed_pvc_create",
                    create_if_absent(
                        &self.api::<PersistentVolumeClaim>(),
                        "PersistentVolumeClaim",
                        &pvc,
                    ),
                )
                .await?;
                Ok(())
            }
            Step::CreateSeedPod => {
                let snapshot = self
                    .snapshot
                    .ok_or_else(|| ExecError::Missing("the snapshot source is gone".to_owned()))?;
                let mut pod = build::seed_pod(
                    self.cluster()?,
                    self.restore,
                    &self.seed()?,
                    snapshot,
                    self.seed_image,
                    self.seed_switch_port,
                )?;
                build::set_seed_identity(
                    &mut pod,
                    self.seed_service_account,
                    self.seed_image_pull_secrets,
                );
                failpoint::around(
                    "restore.seed_pod_create",
                    create_if_absent(&self.api::<Pod>(), "Pod", &pod),
                )
                .await?;
                Ok(())
            }
            Step::DeleteSeedPod => {
                let seed = self.seed()?;
                failpoint::around(
                    "restore.seed_pod_delete",
                    delete_if_present(&self.api::<Pod>(), "Pod", &seed),
                )
                .await?;
                Ok(())
            }
            Step::DeleteSeedPvc => {
                let seed = self.seed()?;
                failpoint::around(
                    "restore.seed_pvc_delete",
                    delete_if_present(
                        &self.api::<PersistentVolumeClaim>(),
                        "PersistentVolumeClaim",
                        &seed,
                    ),
                )
                .await?;
                Ok(())
            }
            Step::AddFinalizer | Step::RemoveFinalizer => {
                self.set_finalizer(matches!(step, Step::AddFinalizer)).await
            }
            Step::Done
            | Step::Fail(_)
            | Step::MarkFailed
            | Step::Start { .. }
            | Step::RecordSeed { .. }
            | Step::HandOver
            | Step::Succeed
            | Step::Wait(_) => Ok(()),
        }
    }

    /// Sets (Some) or removes (None) the hold annotation on the cluster.
    /// Adds or removes [`FINALIZER`], conditional on the restore's observed resourceVersion
    /// (the whole list is written by a merge patch: another writer's change is not lost).
    async fn set_finalizer(&self, present: bool) -> Result<(), ExecError> {
        let name = self.restore.name_any();
        let mut finalizers: Vec<String> = self
            .restore
            .finalizers()
            .iter()
            .filter(|f| *f != FINALIZER)
            .cloned()
            .collect();
        if present {
            finalizers.push(FINALIZER.to_owned());
        }
        let patch = serde_json::json!({"metadata": {
            "finalizers": finalizers,
            "resourceVersion": self.restore.resource_version(),
        }});
        let restores = self.api::<EtcdRestore>();
        match failpoint::around(
            "restore.finalizer_patch",
            restores.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)),
        )
        .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 404 && !present => Ok(()),
            Err(source) => Err(ExecError::Kube {
                verb: "patch",
                kind: "EtcdRestore",
                name,
                source,
            }),
        }
    }

    async fn annotate(&self, value: Option<String>) -> Result<(), ExecError> {
        let name = &self.restore.spec.cluster_name;
        let observed_version = self
            .cluster
            .and_then(|c| c.metadata.resource_version.as_deref());
        let patch = build::hold_patch(value.as_deref(), observed_version);
        let clusters = self.api::<EtcdCluster>();
        let params = PatchParams::default();
        let patch = Patch::Merge(&patch);
        // One failpoint per step: the hold and the release are the same call.
        let result = if value.is_some() {
            failpoint::around("restore.hold", clusters.patch(name, &params, &patch)).await
        } else {
            failpoint::around("restore.release", clusters.patch(name, &params, &patch)).await
        };
        match result {
            Ok(_) => Ok(()),
            // Releasing a cluster that is gone: nothing is held.
            Err(kube::Error::Api(e)) if e.code == 404 && value.is_none() => Ok(()),
            Err(source) => Err(ExecError::Kube {
                verb: "annotate",
                kind: "EtcdCluster",
                name: name.clone(),
                source,
            }),
        }
    }
}

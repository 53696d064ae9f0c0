//! Dynamic provisioning of host-directory PersistentVolumes, binding, reclaiming, and the
//! `pvc-protection` / `pv-protection` finalizers (the persistentvolume, pvcprotection and
//! pvprotection controllers of kube-controller-manager). Decisions: [`claim::decide`] and
//! [`volume::decide`]; the claim a volume points at is always read live before a volume is
//! released, because a lagging cache must never cost data.

pub mod claim;
pub mod volume;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};
use serde_json::json;

use crate::error::{is_conflict, is_not_found};
use crate::runner::{Ctx, done, drain, error_policy};
use crate::{Error, finalizers, pods};
use claim::{ClaimAction, PROVISIONER, PVC_PROTECTION};
use volume::{ClaimState, PV_PROTECTION, VolumeAction};

pub struct Volumes {
    node_name: String,
    volumes_dir: PathBuf,
    recorder: Recorder,
}

/// Run the claim side (provisioning, binding, pvc-protection) and the volume side (phases,
/// reclaiming, pv-protection).
pub async fn run_volumes(
    client: Client,
    node_name: String,
    volumes_dir: PathBuf,
) -> Result<(), Error> {
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: "persistentvolume-controller".into(),
            instance: None,
        },
    );
    let ctx = Ctx::new(
        client.clone(),
        Volumes {
            node_name,
            volumes_dir,
            recorder,
        },
    );

    let claims = Controller::new(
        Api::<PersistentVolumeClaim>::all(client.clone()),
        watcher::Config::default(),
    );
    let store = claims.store();
    let (by_pod, by_class) = (store.clone(), store);
    let claims = claims
        .watches(
            Api::<PersistentVolume>::all(client.clone()),
            watcher::Config::default(),
            |pv: PersistentVolume| {
                let r = pv.spec.and_then(|s| s.claim_ref)?;
                Some(ObjectRef::new(r.name.as_deref()?).within(r.namespace.as_deref()?))
            },
        )
        .watches(
            Api::<Pod>::all(client.clone()),
            watcher::Config::default(),
            move |pod: Pod| claims_of_pod(&by_pod, &pod),
        )
        .watches(
            Api::<StorageClass>::all(client.clone()),
            watcher::Config::default(),
            move |class: StorageClass| unbound_claims(&by_class, &class.name_any()),
        )
        .run(reconcile_claim, error_policy, ctx.clone())
        .boxed();

    let volumes = Controller::new(
        Api::<PersistentVolume>::all(client.clone()),
        watcher::Config::default(),
    )
    .watches(
        Api::<PersistentVolumeClaim>::all(client.clone()),
        watcher::Config::default(),
        |pvc: PersistentVolumeClaim| {
            let name = pvc
                .spec
                .as_ref()
                .and_then(|s| s.volume_name.clone())
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| claim::volume_name(&pvc));
            Some(ObjectRef::new(&name))
        },
    )
    .run(reconcile_volume, error_policy, ctx)
    .boxed();
    tokio::join!(
        drain("persistentvolumeclaim", claims),
        drain("persistentvolume", volumes)
    );
    Ok(())
}

fn claims_of_pod(
    store: &Store<PersistentVolumeClaim>,
    pod: &Pod,
) -> Vec<ObjectRef<PersistentVolumeClaim>> {
    let Some(ns) = pod.namespace() else {
        return Vec::new();
    };
    pods::claim_names(pod)
        .map(|c| ObjectRef::new(c).within(&ns))
        .filter(|r| store.get(r).is_some())
        .collect()
}

/// Claims not bound yet that name the class (or none, when it may be the new default).
fn unbound_claims(
    store: &Store<PersistentVolumeClaim>,
    class: &str,
) -> Vec<ObjectRef<PersistentVolumeClaim>> {
    store
        .state()
        .iter()
        .filter(|c| {
            let spec = c.spec.as_ref();
            spec.and_then(|s| s.volume_name.as_deref())
                .is_none_or(str::is_empty)
                && spec
                    .and_then(|s| s.storage_class_name.as_deref())
                    .is_none_or(|n| n == class)
        })
        .map(|c| ObjectRef::from(c.as_ref()))
        .collect()
}

async fn reconcile_claim(
    pvc: Arc<PersistentVolumeClaim>,
    ctx: Arc<Ctx<Volumes>>,
) -> Result<Action, Error> {
    let ns = pvc
        .namespace()
        .ok_or_else(|| Error::invalid(pvc.name_any(), "a claim without a namespace"))?;
    let client = &ctx.client;
    let claims = Api::<PersistentVolumeClaim>::namespaced(client.clone(), &ns);
    let volumes = Api::<PersistentVolume>::all(client.clone());
    let classes = Api::<StorageClass>::all(client.clone())
        .list(&ListParams::default())
        .await?
        .items;
    let volume_name = pvc
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.clone())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| claim::volume_name(&pvc));
    let volume = volumes.get_opt(&volume_name).await?;
    let pods = Api::<Pod>::namespaced(client.clone(), &ns)
        .list(&ListParams::default())
        .await?
        .items;

    match claim::decide(&pvc, &classes, volume.as_ref(), &pods) {
        ClaimAction::Nothing => {}
        ClaimAction::RemoveProtection => {
            finalizers::remove(&claims, pvc.as_ref(), PVC_PROTECTION).await?
        }
        ClaimAction::SetDefaultClass(class) => {
            let patch = json!({
                "metadata": { "resourceVersion": pvc.resource_version() },
                "spec": { "storageClassName": class },
            });
            claims
                .patch(
                    &pvc.name_any(),
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await?;
        }
        ClaimAction::ClassMissing { message } => {
            publish(
                &ctx,
                pvc.as_ref(),
                EventType::Warning,
                "ProvisioningFailed",
                message,
            )
            .await;
        }
        ClaimAction::WaitForConsumer => {
            publish(
                &ctx,
                pvc.as_ref(),
                EventType::Normal,
                "WaitForFirstConsumer",
                "waiting for first consumer to be created before binding".into(),
            )
            .await;
        }
        ClaimAction::Provision {
            class,
            selected_node,
        } => {
            let class = classes
                .iter()
                .find(|c| c.metadata.name.as_deref() == Some(class.as_str()))
                .ok_or_else(|| Error::invalid(class.clone(), "the StorageClass vanished"))?;
            let pv = provision(&ctx, &pvc, class).await?;
            bind_claim(&claims, &pvc, &pv, selected_node.as_deref()).await?;
            publish(
                &ctx,
                pvc.as_ref(),
                EventType::Normal,
                "ProvisioningSucceeded",
                format!("Successfully provisioned volume {}", pv.name_any()),
            )
            .await;
        }
        ClaimAction::CompleteBinding { volume: _ } => {
            if let Some(pv) = volume.as_ref() {
                bind_claim(&claims, &pvc, pv, None).await?;
            }
        }
        ClaimAction::Lost => {
            let patch = json!({ "status": { "phase": "Lost" } });
            claims
                .patch_status(
                    &pvc.name_any(),
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await?;
            publish(
                &ctx,
                pvc.as_ref(),
                EventType::Warning,
                "ClaimLost",
                "Bound claim has lost its PersistentVolume. Data on the volume is lost!".into(),
            )
            .await;
        }
    }
    done(pvc.as_ref(), &ctx, Action::await_change())
}

/// The claim's directory and PersistentVolume (idempotent: an existing volume for the same claim
/// uid is reused), marked Bound.
async fn provision(
    ctx: &Ctx<Volumes>,
    pvc: &PersistentVolumeClaim,
    class: &StorageClass,
) -> Result<PersistentVolume, Error> {
    let volumes = Api::<PersistentVolume>::all(ctx.client.clone());
    let desired =
        claim::provisioned_volume(pvc, class, &ctx.extra.volumes_dir, &ctx.extra.node_name);
    let dir = ctx.extra.volumes_dir.join(desired.name_any());
    make_directory(&dir)?;
    let pv = match volumes.create(&PostParams::default(), &desired).await {
        Ok(pv) => pv,
        Err(e) if is_conflict(&e) => {
            let pv = volumes.get(&desired.name_any()).await?;
            let claimed = pv
                .spec
                .as_ref()
                .and_then(|s| s.claim_ref.as_ref())
                .and_then(|r| r.uid.clone());
            if claimed != pvc.metadata.uid {
                return Err(Error::invalid(
                    pv.name_any(),
                    "exists and claims another PersistentVolumeClaim",
                ));
            }
            pv
        }
        Err(e) => return Err(e.into()),
    };
    let patch = json!({ "status": { "phase": "Bound" } });
    Ok(volumes
        .patch_status(
            &pv.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await?)
}

/// A world-writable directory, as hostPath provisioners make them, so a container of any user
/// can write its data.
fn make_directory(dir: &Path) -> Result<(), Error> {
    use std::os::unix::fs::PermissionsExt;
    let io = |source| Error::Io {
        path: dir.to_path_buf(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(io)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777)).map_err(io)
}

/// The claim's side of a binding: `spec.volumeName` and the bind annotations, then status
/// Bound with the volume's capacity and access modes.
async fn bind_claim(
    claims: &Api<PersistentVolumeClaim>,
    pvc: &PersistentVolumeClaim,
    pv: &PersistentVolume,
    selected_node: Option<&str>,
) -> Result<(), Error> {
    let mut annotations = json!({
        claim::ANN_BIND_COMPLETED: "yes",
        claim::ANN_BOUND_BY_CONTROLLER: "yes",
        claim::ANN_STORAGE_PROVISIONER: PROVISIONER,
        claim::ANN_BETA_STORAGE_PROVISIONER: PROVISIONER,
    });
    if let Some(node) = selected_node {
        annotations[claim::ANN_SELECTED_NODE] = json!(node);
    }
    let patch = json!({
        "metadata": { "annotations": annotations, "resourceVersion": pvc.resource_version() },
        "spec": { "volumeName": pv.name_any() },
    });
    let name = pvc.name_any();
    claims
        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    let spec = pv.spec.clone().unwrap_or_default();
    let status = json!({ "status": {
        "phase": "Bound",
        "capacity": spec.capacity,
        "accessModes": spec.access_modes,
    }});
    claims
        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
        .await?;
    Ok(())
}

async fn reconcile_volume(
    pv: Arc<PersistentVolume>,
    ctx: Arc<Ctx<Volumes>>,
) -> Result<Action, Error> {
    let volumes = Api::<PersistentVolume>::all(ctx.client.clone());
    let state = claim_state(&ctx.client, &pv).await?;
    match volume::decide(&pv, state, &ctx.extra.volumes_dir, PROVISIONER) {
        VolumeAction::Nothing => {}
        VolumeAction::SetPhase(phase) => {
            let patch = json!({ "status": { "phase": phase } });
            volumes
                .patch_status(
                    &pv.name_any(),
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await?;
        }
        VolumeAction::Reclaim { directory } => {
            let released = json!({ "status": { "phase": "Released" } });
            volumes
                .patch_status(
                    &pv.name_any(),
                    &PatchParams::default(),
                    &Patch::Merge(&released),
                )
                .await?;
            if let Some(dir) = directory {
                match std::fs::remove_dir_all(&dir) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(source) => return Err(Error::Io { path: dir, source }),
                }
            }
            let dp = DeleteParams {
                preconditions: Some(Preconditions {
                    uid: pv.metadata.uid.clone(),
                    resource_version: None,
                }),
                ..Default::default()
            };
            match volumes.delete(&pv.name_any(), &dp).await {
                Ok(_) => {}
                Err(e) if is_not_found(&e) => {}
                Err(e) => return Err(e.into()),
            }
        }
        VolumeAction::RemoveProtection => {
            finalizers::remove(&volumes, pv.as_ref(), PV_PROTECTION).await?
        }
    }
    done(pv.as_ref(), &ctx, Action::await_change())
}

/// Whether the volume's claim exists, read live.
async fn claim_state(client: &Client, pv: &PersistentVolume) -> Result<ClaimState, Error> {
    let Some(r) = pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref()) else {
        return Ok(ClaimState::Unclaimed);
    };
    let (Some(ns), Some(name)) = (r.namespace.as_deref(), r.name.as_deref()) else {
        return Ok(ClaimState::Unclaimed);
    };
    let found = Api::<PersistentVolumeClaim>::namespaced(client.clone(), ns)
        .get_opt(name)
        .await?;
    Ok(match found {
        None => ClaimState::Gone,
        Some(c) if r.uid.is_some() && c.metadata.uid != r.uid => ClaimState::Gone,
        Some(_) => ClaimState::Present,
    })
}

/// Record an event; a failure to record is logged, never fatal to the reconcile.
async fn publish(
    ctx: &Ctx<Volumes>,
    pvc: &PersistentVolumeClaim,
    type_: EventType,
    reason: &str,
    note: String,
) {
    let event = Event {
        type_,
        reason: reason.into(),
        note: Some(note),
        action: reason.into(),
        secondary: None,
    };
    if let Err(e) = ctx
        .extra
        .recorder
        .publish(&event, &pvc.object_ref(&()))
        .await
    {
        tracing::warn!(error = %e, claim = %pvc.name_any(), "recording an event");
    }
}

//! PodDisruptionBudget status (kube-controller-manager `disruption` controller): computed by
//! [`status::compute`] from the budget's pods (read live) and, when needed, the scale of their
//! controllers; written only when it changes. The eviction endpoint (API server) reads it.

pub mod status;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{Pod, ReplicationController};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::core::GroupVersionKind;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};

use crate::Error;
use crate::runner::{Ctx, done, drain, error_policy};

pub async fn run_disruption(client: Client) -> Result<(), Error> {
    let controller = Controller::new(
        Api::<PodDisruptionBudget>::all(client.clone()),
        watcher::Config::default(),
    );
    let store = controller.store();
    let controller = controller
        .watches(
            Api::<Pod>::all(client.clone()),
            watcher::Config::default(),
            move |pod: Pod| budgets_in_namespace(&store, pod.namespace()),
        )
        .run(reconcile, error_policy, Ctx::new(client, ()))
        .boxed();
    drain("disruption", controller).await;
    Ok(())
}

fn budgets_in_namespace(
    store: &Store<PodDisruptionBudget>,
    ns: Option<String>,
) -> Vec<ObjectRef<PodDisruptionBudget>> {
    store
        .state()
        .iter()
        .filter(|b| b.namespace() == ns)
        .map(|b| ObjectRef::from(b.as_ref()))
        .collect()
}

async fn reconcile(pdb: Arc<PodDisruptionBudget>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let ns = pdb.namespace().ok_or_else(|| {
        Error::invalid(pdb.name_any(), "a PodDisruptionBudget without a namespace")
    })?;
    let pods = Api::<Pod>::namespaced(ctx.client.clone(), &ns)
        .list(&ListParams::default())
        .await?
        .items;
    let now = Timestamp::now();
    let computed = match status::selected(&pdb, &pods) {
        Err(e) => Err(e),
        Ok(chosen) => {
            let scale = if status::needs_scale(&pdb) {
                expected_scale(&ctx.client, &ns, &chosen).await
            } else {
                Ok(None)
            };
            scale.and_then(|scale| status::compute(&pdb, &chosen, scale, now))
        }
    };
    let (new_status, recheck) = match computed {
        Ok(v) => v,
        Err(e) => (status::fail_safe(&pdb, &e, now), None),
    };
    if pdb.status.as_ref() != Some(&new_status) {
        let mut updated = pdb.as_ref().clone();
        updated.status = Some(new_status);
        Api::<PodDisruptionBudget>::namespaced(ctx.client.clone(), &ns)
            .replace_status(&pdb.name_any(), &PostParams::default(), &updated)
            .await?;
    }
    let action = match recheck {
        Some(at) => {
            let wait = at.duration_since(now).unsigned_abs() + Duration::from_millis(100);
            Action::requeue(wait)
        }
        None => Action::await_change(),
    };
    done(pdb.as_ref(), &ctx, action)
}

fn controller_of(pod: &Pod) -> Option<&OwnerReference> {
    pod.owner_references()
        .iter()
        .find(|r| r.controller == Some(true))
}

/// The summed scale of the pods' controllers, each counted once (`getExpectedScale`): a
/// ReplicaSet of a Deployment counts as the Deployment (once, however many ReplicaSets a rollout
/// has); other kinds through their scale subresource. Errors are SyncFailed messages.
async fn expected_scale(client: &Client, ns: &str, pods: &[&Pod]) -> Result<Option<i32>, String> {
    let mut seen: HashSet<String> = HashSet::new();
    let mut by_target: HashMap<String, i32> = HashMap::new();
    for pod in pods {
        let name = pod.name_any();
        let owner =
            controller_of(pod).ok_or_else(|| format!("found no controllers for pod {name:?}"))?;
        if !seen.insert(owner.uid.clone()) {
            continue;
        }
        let (target, scale) = controller_scale(client, ns, owner)
            .await
            .map_err(|e| format!("found no controller scale for pod {name:?}: {e}"))?;
        by_target.insert(target, scale);
    }
    Ok(Some(by_target.values().sum()))
}

/// (uid of the scaled object, its spec.replicas).
async fn controller_scale(
    client: &Client,
    ns: &str,
    owner: &OwnerReference,
) -> Result<(String, i32), Error> {
    let group = owner.api_version.rsplit_once('/').map_or("", |(g, _)| g);
    let replicas = |r: Option<i32>| r.unwrap_or(1);
    match (group, owner.kind.as_str()) {
        ("apps", "ReplicaSet") => {
            let rs = Api::<ReplicaSet>::namespaced(client.clone(), ns)
                .get(&owner.name)
                .await?;
            if let Some(d) = rs
                .owner_references()
                .iter()
                .find(|r| r.controller == Some(true) && r.kind == "Deployment")
            {
                let dep = Api::<Deployment>::namespaced(client.clone(), ns)
                    .get(&d.name)
                    .await?;
                return Ok((d.uid.clone(), replicas(dep.spec.and_then(|s| s.replicas))));
            }
            Ok((
                owner.uid.clone(),
                replicas(rs.spec.and_then(|s| s.replicas)),
            ))
        }
        ("apps", "StatefulSet") => {
            let ss = Api::<StatefulSet>::namespaced(client.clone(), ns)
                .get(&owner.name)
                .await?;
            Ok((
                owner.uid.clone(),
                replicas(ss.spec.and_then(|s| s.replicas)),
            ))
        }
        ("", "ReplicationController") => {
            let rc = Api::<ReplicationController>::namespaced(client.clone(), ns)
                .get(&owner.name)
                .await?;
            Ok((
                owner.uid.clone(),
                replicas(rc.spec.and_then(|s| s.replicas)),
            ))
        }
        _ => {
            let version = owner
                .api_version
                .rsplit_once('/')
                .map_or(owner.api_version.as_str(), |(_, v)| v);
            let gvk = GroupVersionKind::gvk(group, version, &owner.kind);
            let (ar, _) = kube::discovery::pinned_kind(client, &gvk).await?;
            let scale = Api::<DynamicObject>::namespaced_with(client.clone(), ns, &ar)
                .get_scale(&owner.name)
                .await?;
            Ok((
                owner.uid.clone(),
                scale.spec.and_then(|s| s.replicas).unwrap_or(0),
            ))
        }
    }
}

//! EndpointSlices and core/v1 Endpoints of selector Services (kube-controller-manager's
//! endpointslice and endpoint controllers). Decisions live in [`desired`] and [`plan`]; this
//! module reads the Service's pods and slices live (so a write is never based on a lagging
//! cache) and writes only what changed.

pub mod desired;
pub mod plan;

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use futures_util::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Endpoints, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher::{self, Event};
use kube::{Client, ResourceExt};

use crate::Error;
use crate::error::is_not_found;
use crate::runner::{Ctx, done, drain, error_policy, selector_string};
use desired::{CONTROLLER_NAME, LABEL_MANAGED_BY, LABEL_SERVICE_NAME};

/// Endpoints carrying this annotation are leader-election records, never Service endpoints.
const LEADER_ANNOTATION: &str = "control-plane.alpha.kubernetes.io/leader";
/// When the Endpoints of a deleted Service are checked a second time.
const RECHECK_AFTER_DELETE: std::time::Duration = std::time::Duration::from_secs(2);

/// Run the EndpointSlice/Endpoints controller and the cleanup of Endpoints whose Service is
/// gone (slices go with their Service through the garbage collector: they carry an ownerRef).
pub async fn run_endpoints(client: Client) -> Result<(), Error> {
    let services = Api::<Service>::all(client.clone());
    let controller = Controller::new(services, watcher::Config::default());
    let store = controller.store();
    let pod_store = store.clone();
    let managed = format!("{LABEL_MANAGED_BY}={CONTROLLER_NAME}");
    let main = controller
        .owns(
            Api::<EndpointSlice>::all(client.clone()),
            watcher::Config::default().labels(&managed),
        )
        .watches(
            Api::<Pod>::all(client.clone()),
            watcher::Config::default(),
            move |pod: Pod| services_in_namespace(&pod_store, pod.namespace()),
        )
        .watches(
            Api::<Endpoints>::all(client.clone()),
            watcher::Config::default(),
            |ep: Endpoints| {
                let ns = ep.namespace();
                ns.map(|ns| ObjectRef::<Service>::new(&ep.name_any()).within(&ns))
            },
        )
        .run(reconcile, error_policy, Ctx::new(client.clone(), ()))
        .boxed();
    tokio::join!(
        drain("endpointslice", main),
        clean_leftover_endpoints(client)
    );
    Ok(())
}

/// Every Service of the pod's namespace: a pod event may change any of them (its labels may
/// have moved it out of a selector, which the new pod alone does not tell).
fn services_in_namespace(store: &Store<Service>, ns: Option<String>) -> Vec<ObjectRef<Service>> {
    store
        .state()
        .iter()
        .filter(|s| s.namespace() == ns && desired::selector(s).is_some())
        .map(|s| ObjectRef::from(s.as_ref()))
        .collect()
}

async fn reconcile(svc: Arc<Service>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let ns = svc
        .namespace()
        .ok_or_else(|| Error::invalid(svc.name_any(), "a Service without a namespace"))?;
    let name = svc.name_any();
    // The cache may still hold a Service that is gone: writing for it would leave orphans.
    let live = Api::<Service>::namespaced(ctx.client.clone(), &ns)
        .get_opt(&name)
        .await?;
    if live.as_ref().and_then(|l| l.metadata.uid.as_ref()) != svc.metadata.uid.as_ref() {
        return done(svc.as_ref(), &ctx, Action::await_change());
    }
    let slices_api = Api::<EndpointSlice>::namespaced(ctx.client.clone(), &ns);
    let ours = ListParams::default().labels(&format!(
        "{LABEL_SERVICE_NAME}={name},{LABEL_MANAGED_BY}={CONTROLLER_NAME}"
    ));
    let existing = slices_api.list(&ours).await?.items;
    let Some(selector) = desired::selector(&svc) else {
        // The selector was removed: its slices are no longer ours to keep (upstream deletes them).
        for s in existing {
            delete_ignoring_gone(&slices_api, &s.name_any()).await?;
        }
        return done(svc.as_ref(), &ctx, Action::await_change());
    };
    let pods = Api::<Pod>::namespaced(ctx.client.clone(), &ns)
        .list(&ListParams::default().labels(&selector_string(selector)))
        .await?
        .items;

    let labels = desired::slice_labels(&svc);
    let plan = plan::plan(desired::slices(&svc, &pods), &existing, &labels);
    let owner = owner_ref(&svc);
    for content in plan.create {
        let slice = EndpointSlice {
            metadata: ObjectMeta {
                generate_name: Some(format!("{name}-")),
                namespace: Some(ns.clone()),
                labels: Some(labels.clone()),
                owner_references: Some(vec![owner.clone()]),
                ..Default::default()
            },
            address_type: "IPv4".into(),
            endpoints: content.endpoints,
            ports: Some(content.ports),
        };
        slices_api.create(&PostParams::default(), &slice).await?;
    }
    for (slice_name, content) in plan.update {
        let Some(mut slice) = existing
            .iter()
            .find(|s| s.name_any() == slice_name)
            .cloned()
        else {
            continue;
        };
        slice.metadata.labels = Some(labels.clone());
        slice.metadata.owner_references = Some(vec![owner.clone()]);
        slice.address_type = "IPv4".into();
        slice.endpoints = content.endpoints;
        slice.ports = Some(content.ports);
        slices_api
            .replace(&slice_name, &PostParams::default(), &slice)
            .await?;
    }
    for slice_name in plan.delete {
        delete_ignoring_gone(&slices_api, &slice_name).await?;
    }

    sync_endpoints(&ctx.client, &svc, &ns, &pods).await?;
    done(svc.as_ref(), &ctx, Action::await_change())
}

/// The core/v1 Endpoints named like the Service: created, or replaced when its subsets or labels
/// differ from the desired ones.
async fn sync_endpoints(
    client: &Client,
    svc: &Service,
    ns: &str,
    pods: &[Pod],
) -> Result<(), Error> {
    let api = Api::<Endpoints>::namespaced(client.clone(), ns);
    let name = svc.name_any();
    let subsets = desired::endpoints_subsets(svc, pods);
    let subsets = (!subsets.is_empty()).then_some(subsets);
    let labels = desired::endpoints_labels(svc);
    match api.get_opt(&name).await? {
        None => {
            let ep = Endpoints {
                metadata: ObjectMeta {
                    name: Some(name),
                    namespace: Some(ns.to_string()),
                    labels: Some(labels),
                    ..Default::default()
                },
                subsets,
            };
            api.create(&PostParams::default(), &ep).await?;
        }
        Some(mut ep) => {
            let current_labels = ep.metadata.labels.clone().unwrap_or_default();
            let current = ep.subsets.clone().filter(|s| !s.is_empty());
            if current == subsets && current_labels == labels {
                return Ok(());
            }
            ep.subsets = subsets;
            ep.metadata.labels = Some(labels);
            api.replace(&name, &PostParams::default(), &ep).await?;
        }
    }
    Ok(())
}

fn owner_ref(svc: &Service) -> OwnerReference {
    OwnerReference {
        api_version: "v1".into(),
        kind: "Service".into(),
        name: svc.name_any(),
        uid: svc.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

async fn delete_ignoring_gone<K>(api: &Api<K>, name: &str) -> Result<(), Error>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Delete the Endpoints of deleted Services, as the endpoint controller does: on a Service's
/// delete event, and after every (re)list for Endpoints whose Service does not exist (deletes
/// missed while not watching, `checkLeftoverEndpoints`).
async fn clean_leftover_endpoints(client: Client) {
    let services = Api::<Service>::all(client.clone());
    let mut events = watcher::watcher(services, watcher::Config::default())
        .default_backoff()
        .boxed();
    let mut listed: HashSet<(String, String)> = HashSet::new();
    loop {
        let event = match events.try_next().await {
            Ok(Some(e)) => e,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(error = %e, "watching Services for Endpoints cleanup");
                continue;
            }
        };
        let result = match event {
            Event::Delete(svc) if desired::selector(&svc).is_some() => {
                let ns = svc.namespace().unwrap_or_default();
                let name = svc.name_any();
                // A reconcile that read the Service just before it went may still write its
                // Endpoints after this delete: look again once that write has landed.
                tokio::spawn(recheck_deleted(client.clone(), ns.clone(), name.clone()));
                delete_ignoring_gone(&Api::<Endpoints>::namespaced(client.clone(), &ns), &name)
                    .await
            }
            Event::Delete(_) => Ok(()),
            Event::Init => {
                listed.clear();
                Ok(())
            }
            Event::InitApply(svc) => {
                listed.insert((svc.namespace().unwrap_or_default(), svc.name_any()));
                Ok(())
            }
            Event::InitDone => delete_leftovers(&client, &listed).await,
            Event::Apply(_) => Ok(()),
        };
        if let Err(e) = result {
            tracing::warn!(error = %e, "Endpoints cleanup");
        }
    }
}

async fn recheck_deleted(client: Client, ns: String, name: String) {
    tokio::time::sleep(RECHECK_AFTER_DELETE).await;
    let result = async {
        if Api::<Service>::namespaced(client.clone(), &ns)
            .get_opt(&name)
            .await?
            .is_none()
        {
            delete_ignoring_gone(&Api::<Endpoints>::namespaced(client, &ns), &name).await?;
        }
        Ok::<(), Error>(())
    };
    if let Err(e) = result.await {
        tracing::warn!(error = %e, namespace = %ns, name = %name, "Endpoints cleanup");
    }
}

async fn delete_leftovers(
    client: &Client,
    services: &HashSet<(String, String)>,
) -> Result<(), Error> {
    let all = Api::<Endpoints>::all(client.clone())
        .list(&ListParams::default())
        .await?;
    let annotations = BTreeMap::new();
    for ep in all {
        let ns = ep.namespace().unwrap_or_default();
        let name = ep.name_any();
        let leader = ep
            .metadata
            .annotations
            .as_ref()
            .unwrap_or(&annotations)
            .contains_key(LEADER_ANNOTATION);
        if leader || services.contains(&(ns.clone(), name.clone())) {
            continue;
        }
        delete_ignoring_gone(&Api::<Endpoints>::namespaced(client.clone(), &ns), &name).await?;
    }
    Ok(())
}

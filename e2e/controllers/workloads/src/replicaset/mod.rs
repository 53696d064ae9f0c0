//! The ReplicaSet controller (`replicaset-controller`): keeps `spec.replicas` active pods from
//! the template, adopting and releasing pods by selector, and reports what it saw in the status.
//! Every sync starts from a fresh list of the namespace's pods, so a lagging watch cannot make
//! it create duplicates (what upstream's expectations guard against).

mod decide;

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetCondition, ReplicaSetStatus};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, ListParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{Controller, watcher};
use kube::{Client, ResourceExt};

use crate::error::Error;
use crate::runner::{Context, drive, object_reference};
use crate::{io, labels, pods};

pub(crate) const CONTROLLER: &str = "replicaset-controller";

/// Run the ReplicaSet controller until dropped.
pub async fn run_replicasets(client: Client) {
    let controller = Controller::new(
        Api::<ReplicaSet>::all(client.clone()),
        watcher::Config::default(),
    );
    let store = controller.store();
    let controller = controller.watches(
        Api::<Pod>::all(client.clone()),
        watcher::Config::default(),
        move |pod| owners_of(&store, &pod),
    );
    let ctx = Context::new(client, CONTROLLER, ());
    drive("replicaset", controller, ctx, reconcile).await;
}

/// The ReplicaSets a pod event concerns: its controller, or for an orphan every ReplicaSet of
/// its namespace whose selector matches it (the one that may adopt it).
fn owners_of(store: &Store<ReplicaSet>, pod: &Pod) -> Vec<ObjectRef<ReplicaSet>> {
    let namespace = pod.namespace().unwrap_or_default();
    if let Some(owner) = pods::controller_ref(&pod.metadata) {
        if owner.kind == "ReplicaSet" && owner.api_version == "apps/v1" {
            return vec![ObjectRef::new(&owner.name).within(&namespace)];
        }
        return Vec::new();
    }
    let Some(pod_labels) = pod.metadata.labels.as_ref() else {
        return Vec::new();
    };
    store
        .state()
        .iter()
        .filter(|rs| rs.namespace().as_deref() == Some(namespace.as_str()))
        .filter(|rs| {
            rs.spec
                .as_ref()
                .is_some_and(|s| labels::matches(&s.selector, pod_labels))
        })
        .map(|rs| ObjectRef::from_obj(rs.as_ref()))
        .collect()
}

async fn reconcile(rs: Arc<ReplicaSet>, ctx: Arc<Context<()>>) -> Result<Action, Error> {
    let namespace = rs.namespace().unwrap_or_default();
    let name = rs.name_any();
    let pod_api: Api<Pod> = Api::namespaced(ctx.client.clone(), &namespace);
    let rs_api: Api<ReplicaSet> = Api::namespaced(ctx.client.clone(), &namespace);
    let pod_list = pod_api.list(&ListParams::default()).await?;
    let plan = decide::plan(&rs, &pod_list.items, Timestamp::now());
    let find = |n: &str| {
        pod_list
            .items
            .iter()
            .find(|p| p.metadata.name.as_deref() == Some(n))
    };
    let owner = pods::new_controller_ref(rs.as_ref())
        .ok_or_else(|| Error::invalid("ReplicaSet", &name, "no name or uid"))?;
    let reference = object_reference(rs.as_ref());

    for pod in plan.adopt.iter().filter_map(|n| find(n)) {
        io::adopt(&pod_api, pod, owner.clone()).await?;
    }
    for pod in plan.release.iter().filter_map(|n| find(n)) {
        io::release(&pod_api, pod, &owner.uid).await?;
    }

    let mut failure: Option<(&str, String)> = None;
    if plan.create > 0 {
        let template = rs
            .spec
            .as_ref()
            .and_then(|s| s.template.as_ref())
            .ok_or_else(|| Error::invalid("ReplicaSet", &name, "no pod template"))?;
        let pod = pods::from_template(template, &name, owner.clone());
        if let Err(err) = io::create_pods(&ctx, &pod_api, &pod, plan.create, &reference).await {
            failure = Some(("FailedCreate", err.to_string()));
        }
    }
    for victim in plan.delete.iter().filter_map(|n| find(n)) {
        let pod_name = victim.name_any();
        match io::delete(&pod_api, &pod_name, victim.metadata.uid.as_deref(), None).await {
            Ok(true) => {
                let note = format!("Deleted pod: {pod_name}");
                ctx.event(
                    &reference,
                    EventType::Normal,
                    "SuccessfulDelete",
                    "Delete",
                    note,
                )
                .await;
            }
            Ok(false) => {}
            Err(err) => {
                let note = format!("Error deleting: {err}");
                ctx.event(
                    &reference,
                    EventType::Warning,
                    "FailedDelete",
                    "Delete",
                    note,
                )
                .await;
                failure = Some(("FailedDelete", err.to_string()));
            }
        }
    }

    let status = with_failure(plan.status, failure.as_ref());
    if rs.status.as_ref() != Some(&status) {
        let mut updated = (*rs).clone();
        updated.status = Some(status);
        rs_api
            .replace_status(&name, &PostParams::default(), &updated)
            .await?;
    }
    if let Some((reason, message)) = failure {
        return Err(Error::invalid(
            "ReplicaSet",
            &name,
            format!("{reason}: {message}"),
        ));
    }
    Ok(match plan.requeue_after {
        Some(after) => Action::requeue(Duration::try_from(after).unwrap_or(Duration::from_secs(1))),
        None => Action::await_change(),
    })
}

/// The `ReplicaFailure` condition after a sync: set (keeping its transition time when it was
/// already there) when a create or delete failed, removed when the sync went through.
fn with_failure(
    mut status: ReplicaSetStatus,
    failure: Option<&(&str, String)>,
) -> ReplicaSetStatus {
    let mut conditions = status.conditions.take().unwrap_or_default();
    let previous = conditions.iter().position(|c| c.type_ == "ReplicaFailure");
    match (failure, previous) {
        (Some((reason, message)), previous) => {
            let since = previous
                .and_then(|i| conditions[i].last_transition_time.clone())
                .unwrap_or(Time(Timestamp::now()));
            conditions.retain(|c| c.type_ != "ReplicaFailure");
            conditions.push(ReplicaSetCondition {
                type_: "ReplicaFailure".into(),
                status: "True".into(),
                reason: Some(reason.to_string()),
                message: Some(message.clone()),
                last_transition_time: Some(since),
            });
        }
        (None, Some(i)) => {
            conditions.remove(i);
        }
        (None, None) => {}
    }
    status.conditions = (!conditions.is_empty()).then_some(conditions);
    status
}

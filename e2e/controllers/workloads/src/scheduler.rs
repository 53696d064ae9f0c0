//! The scheduler: there is one node, so scheduling is binding. Every pod with no `spec.nodeName`
//! that asks for the default scheduler is bound through `POST pods/<name>/binding`, which makes
//! the API server set `spec.nodeName` and the `PodScheduled=True` condition, as kube-scheduler's
//! `DefaultBinder` does. The `Scheduled` event follows, reported as `default-scheduler`.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::runtime::{Controller, watcher};
use kube::{Client, ResourceExt};

use crate::error::Error;
use crate::runner::{Context, drive, object_reference};

/// The scheduler name pods get by default; pods naming another scheduler are left alone.
pub const DEFAULT_SCHEDULER: &str = "default-scheduler";

/// Should this pod be bound? Unassigned, asking for the default scheduler, not being deleted,
/// not finished (`kube-scheduler`'s `assignedPod`/`responsibleForPod` filters).
pub(crate) fn needs_binding(pod: &Pod) -> bool {
    let Some(spec) = pod.spec.as_ref() else {
        return false;
    };
    let unassigned = spec.node_name.as_deref().unwrap_or("").is_empty();
    let ours = spec.scheduler_name.as_deref().unwrap_or(DEFAULT_SCHEDULER) == DEFAULT_SCHEDULER;
    unassigned
        && ours
        && pod.metadata.deletion_timestamp.is_none()
        && !crate::pods::is_terminal(pod)
}

/// The `Binding` body kube-scheduler posts.
pub(crate) fn binding(pod: &Pod, node: &str) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {
            "name": pod.name_any(),
            "namespace": pod.namespace(),
            "uid": pod.metadata.uid,
        },
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    })
}

struct State {
    node_name: String,
}

/// Bind pods to `node_name` until dropped.
pub async fn run_scheduler(client: Client, node_name: String) {
    let pods: Api<Pod> = Api::all(client.clone());
    let ctx = Context::new(client, DEFAULT_SCHEDULER, State { node_name });
    let controller = Controller::new(pods, watcher::Config::default());
    drive("scheduler", controller, ctx, reconcile).await;
}

async fn reconcile(pod: Arc<Pod>, ctx: Arc<Context<State>>) -> Result<Action, Error> {
    if !needs_binding(&pod) {
        return Ok(Action::await_change());
    }
    let namespace = pod.namespace().unwrap_or_default();
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &namespace);
    let node = &ctx.state.node_name;
    let body = binding(&pod, node);
    match api
        .create_subresource::<_, serde_json::Value>(
            "binding",
            &pod.name_any(),
            &PostParams::default(),
            &body,
        )
        .await
    {
        Ok(_) => {}
        // 409: someone bound it first (or it is already bound); 404: it is gone.
        Err(err) if matches!(crate::error::status_code(&err), Some(404 | 409)) => {
            return Ok(Action::await_change());
        }
        Err(err) => return Err(err.into()),
    }
    ctx.event(
        &object_reference(pod.as_ref()),
        EventType::Normal,
        "Scheduled",
        "Binding",
        format!(
            "Successfully assigned {namespace}/{} to {node}",
            pod.name_any()
        ),
    )
    .await;
    Ok(Action::await_change())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pods::testing::pod;

    #[test]
    fn only_unassigned_default_scheduler_pods_are_bound() {
        let unassigned = |p: &mut Pod| {
            if let Some(spec) = p.spec.as_mut() {
                spec.node_name = None;
            }
        };
        let mut fresh = pod("a", "Pending", false, 0);
        unassigned(&mut fresh);
        assert!(needs_binding(&fresh));

        assert!(!needs_binding(&pod("bound", "Pending", false, 0)));

        let mut other = fresh.clone();
        if let Some(spec) = other.spec.as_mut() {
            spec.scheduler_name = Some("my-scheduler".into());
        }
        assert!(!needs_binding(&other));

        let mut named_default = fresh.clone();
        if let Some(spec) = named_default.spec.as_mut() {
            spec.scheduler_name = Some(DEFAULT_SCHEDULER.into());
        }
        assert!(needs_binding(&named_default));

        let mut deleting = fresh.clone();
        deleting.metadata.deletion_timestamp = Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(crate::pods::testing::ts(1)),
        );
        assert!(!needs_binding(&deleting));

        let mut failed = pod("f", "Failed", false, 0);
        unassigned(&mut failed);
        assert!(!needs_binding(&failed));
    }

    #[test]
    fn binding_targets_the_node() {
        let body = binding(&pod("a", "Pending", false, 0), "localkube");
        assert_eq!(body["kind"], "Binding");
        assert_eq!(body["metadata"]["name"], "a");
        assert_eq!(body["metadata"]["namespace"], "ns");
        assert_eq!(
            body["target"],
            serde_json::json!({"apiVersion": "v1", "kind": "Node", "name": "localkube"})
        );
    }
}

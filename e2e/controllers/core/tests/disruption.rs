#![allow(clippy::unwrap_used, clippy::expect_used)]
//! PodDisruptionBudget status numbers follow pod readiness, controller scale and evictions.

mod common;

use std::time::Duration;

use common::{api_server, eventually, obj};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(20);

async fn set_ready(pods: &Api<Pod>, name: &str, ready: bool) {
    let status = json!({ "status": { "phase": "Running", "conditions": [{ "type": "Ready", "status": if ready { "True" } else { "False" } }] } });
    pods.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
}

/// (expectedPods, currentHealthy, desiredHealthy, disruptionsAllowed, condition reason)
async fn numbers(
    api: &Api<PodDisruptionBudget>,
    name: &str,
    want: (i32, i32, i32, i32, &str),
) -> PodDisruptionBudget {
    eventually(&format!("{name} status {want:?}"), WAIT, || async {
        let b = api.get(name).await.unwrap();
        let s = b.status.clone().unwrap_or_default();
        let reason = s
            .conditions
            .as_ref()
            .and_then(|c| c.first())
            .map(|c| c.reason.clone())
            .unwrap_or_default();
        let got = (
            s.expected_pods,
            s.current_healthy,
            s.desired_healthy,
            s.disruptions_allowed,
            reason.as_str(),
        );
        if got == want {
            Ok(b)
        } else {
            Err(format!("{got:?}"))
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn budget_status() {
    let (_lk, client) = api_server().await;
    tokio::spawn(localkube_core_controllers::run_disruption(client.clone()));
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), "default");
    let sets: Api<ReplicaSet> = Api::namespaced(client.clone(), "default");
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");

    let template = json!({ "metadata": { "labels": { "app": "etcd" } }, "spec": { "containers": [{ "name": "etcd", "image": "etcd" }] } });
    let deployment = deployments
        .create(&PostParams::default(), &obj(json!({
            "metadata": { "name": "etcd" },
            "spec": { "replicas": 3, "selector": { "matchLabels": { "app": "etcd" } }, "template": template },
        })))
        .await
        .unwrap();
    // a ReplicaSet claiming a larger scale than its Deployment: the Deployment's counts
    let rs = sets
        .create(&PostParams::default(), &obj(json!({
            "metadata": { "name": "etcd-abc",
                "ownerReferences": [{ "apiVersion": "apps/v1", "kind": "Deployment", "name": "etcd", "uid": deployment.metadata.uid, "controller": true }] },
            "spec": { "replicas": 5, "selector": { "matchLabels": { "app": "etcd" } }, "template": template },
        })))
        .await
        .unwrap();
    let uid = rs.metadata.uid.unwrap();
    for i in 0..3 {
        let name = format!("etcd-{i}");
        let pod: Pod = obj(json!({
            "metadata": { "name": name, "labels": { "app": "etcd" },
                "ownerReferences": [{ "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "etcd-abc", "uid": uid, "controller": true }] },
            "spec": { "containers": [{ "name": "etcd", "image": "etcd" }] },
        }));
        pods.create(&PostParams::default(), &pod).await.unwrap();
        set_ready(&pods, &name, true).await;
    }

    budgets
        .create(
            &PostParams::default(),
            &obj(json!({
                "metadata": { "name": "quorum" },
                "spec": { "minAvailable": 2, "selector": { "matchLabels": { "app": "etcd" } } },
            })),
        )
        .await
        .unwrap();
    budgets
        .create(&PostParams::default(), &obj(json!({
            "metadata": { "name": "pct" },
            "spec": { "maxUnavailable": "34%", "selector": { "matchLabels": { "app": "etcd" } } },
        })))
        .await
        .unwrap();
    let b = numbers(&budgets, "quorum", (3, 3, 2, 1, "SufficientPods")).await;
    let s = b.status.unwrap();
    assert_eq!(s.observed_generation, b.metadata.generation);
    let c = &s.conditions.unwrap()[0];
    assert_eq!(
        (c.type_.as_str(), c.status.as_str()),
        ("DisruptionAllowed", "True")
    );
    // 34% of a scale of 3, rounded up: 2 may be unavailable
    numbers(&budgets, "pct", (3, 3, 1, 2, "SufficientPods")).await;

    set_ready(&pods, "etcd-1", false).await;
    numbers(&budgets, "quorum", (3, 2, 2, 0, "InsufficientPods")).await;

    // an eviction recorded etcd-0 as disrupted 10 s ago: not healthy any more; an entry older
    // than two minutes is pruned
    set_ready(&pods, "etcd-1", true).await;
    numbers(&budgets, "quorum", (3, 3, 2, 1, "SufficientPods")).await;
    let recent = (k8s_openapi::jiff::Timestamp::now()
        - k8s_openapi::jiff::SignedDuration::from_secs(10))
    .to_string();
    let old = (k8s_openapi::jiff::Timestamp::now()
        - k8s_openapi::jiff::SignedDuration::from_secs(180))
    .to_string();
    let mut b = budgets.get("quorum").await.unwrap();
    let mut st = b.status.clone().unwrap();
    st.disrupted_pods = Some(
        [("etcd-0", &recent), ("etcd-2", &old)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), obj(json!(v))))
            .collect(),
    );
    st.disruptions_allowed = 0;
    b.status = Some(st);
    budgets
        .replace_status("quorum", &PostParams::default(), &b)
        .await
        .unwrap();
    let b = numbers(&budgets, "quorum", (3, 2, 2, 0, "InsufficientPods")).await;
    let disrupted = b.status.unwrap().disrupted_pods.unwrap();
    assert_eq!(disrupted.keys().collect::<Vec<_>>(), vec!["etcd-0"]);
}

//! Deployments and ReplicaSets against a real localkube API server, with this crate's
//! controllers in-process and the test playing kubelet.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

use common::*;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

const TIMEOUT: Duration = Duration::from_secs(60);

fn deployment(name: &str, replicas: i32, image: &str, strategy: serde_json::Value) -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": name, "annotations": {"team": "storage"}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "strategy": strategy,
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "automountServiceAccountToken": false,
                    "containers": [{"name": "main", "image": image}],
                },
            },
        },
    }))
    .unwrap()
}

fn condition(d: &Deployment, type_: &str) -> Option<(String, String)> {
    d.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone().unwrap_or_default()))
}

fn strip_hash(mut template: serde_json::Value) -> serde_json::Value {
    if let Some(labels) = template["metadata"]["labels"].as_object_mut() {
        labels.remove("pod-template-hash");
    }
    template
}

/// The ReplicaSets of deployment `name`, keyed by name: (spec.replicas, revision annotation).
async fn replicasets(rss: &Api<ReplicaSet>, name: &str) -> BTreeMap<String, (i32, String)> {
    rss.list(&ListParams::default().labels(&format!("app={name}")))
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|rs| {
            let revision = rs
                .annotations()
                .get("deployment.kubernetes.io/revision")
                .cloned()
                .unwrap_or_default();
            (
                rs.name_any(),
                (rs.spec.and_then(|s| s.replicas).unwrap_or(0), revision),
            )
        })
        .collect()
}

#[tokio::test]
async fn deployment_becomes_available_and_rolls_within_surge_and_unavailability() {
    let (_lk, client) = start().await;
    namespace(&client, "roll").await;
    let _rs = spawn(localkube_workloads::run_replicasets(client.clone()));
    let _d = spawn(localkube_workloads::run_deployments(client.clone()));
    let _kubelet = kubelet(&client, "roll");
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "roll");
    let rss: Api<ReplicaSet> = Api::namespaced(client.clone(), "roll");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "roll");

    let strategy =
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}});
    deployments
        .create(
            &PostParams::default(),
            &deployment("web", 3, "nginx:1", strategy),
        )
        .await
        .unwrap();

    // Available, with what helm --wait and kubectl rollout status check.
    let d = eventually("web to become available", TIMEOUT, || async {
        let d = deployments.get("web").await.ok()?;
        let s = d.status.clone()?;
        let done = s.observed_generation == d.metadata.generation
            && s.updated_replicas == Some(3)
            && s.available_replicas == Some(3)
            && condition(&d, "Available")
                == Some(("True".into(), "MinimumReplicasAvailable".into()))
            && condition(&d, "Progressing")
                == Some(("True".into(), "NewReplicaSetAvailable".into()));
        done.then_some(d)
    })
    .await;
    assert_eq!(d.status.as_ref().unwrap().ready_replicas, Some(3));
    assert_eq!(d.status.as_ref().unwrap().unavailable_replicas, None);
    assert_eq!(
        d.annotations()
            .get("deployment.kubernetes.io/revision")
            .map(String::as_str),
        Some("1")
    );

    let list = rss.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(list.len(), 1);
    let rs = &list[0];
    let hash = rs.labels().get("pod-template-hash").cloned().unwrap();
    assert_eq!(rs.name_any(), format!("web-{hash}"));
    let rs_template =
        serde_json::to_value(rs.spec.as_ref().unwrap().template.clone().unwrap()).unwrap();
    let d_template = serde_json::to_value(d.spec.as_ref().unwrap().template.clone()).unwrap();
    assert_eq!(
        strip_hash(rs_template.clone()),
        d_template,
        "the ReplicaSet's template is the Deployment's"
    );
    assert_eq!(
        rs_template["metadata"]["labels"]["pod-template-hash"],
        hash.as_str()
    );
    let annotations = rs.annotations();
    assert_eq!(
        annotations
            .get("deployment.kubernetes.io/desired-replicas")
            .map(String::as_str),
        Some("3")
    );
    assert_eq!(
        annotations
            .get("deployment.kubernetes.io/max-replicas")
            .map(String::as_str),
        Some("4")
    );
    assert_eq!(annotations.get("team").map(String::as_str), Some("storage"));
    let owner = &rs.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.controller),
        ("Deployment", "web", Some(true))
    );
    let pod_list = pods.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(pod_list.len(), 3);
    for pod in &pod_list {
        assert!(
            pod.name_any().starts_with(&format!("web-{hash}-")),
            "{}",
            pod.name_any()
        );
        assert_eq!(pod.labels().get("pod-template-hash"), Some(&hash));
        assert_eq!(pod.owner_references()[0].block_owner_deletion, Some(true));
    }

    // A template change rolls to a new ReplicaSet; sample the sizes while it does.
    let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "nginx:2"}]}}}});
    deployments
        .patch("web", &PatchParams::default(), &Patch::Strategic(patch))
        .await
        .unwrap();
    let max_total = AtomicI32::new(0);
    let min_ready = AtomicI32::new(i32::MAX);
    let d = eventually("the rollout to finish", TIMEOUT, || {
        let (deployments, rss, pods) = (deployments.clone(), rss.clone(), pods.clone());
        let (max_total, min_ready) = (&max_total, &min_ready);
        async move {
            let sizes = replicasets(&rss, "web").await;
            max_total.fetch_max(sizes.values().map(|(r, _)| *r).sum(), Ordering::SeqCst);
            let ready = pods
                .list(&ListParams::default())
                .await
                .ok()?
                .items
                .iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .filter(|p| {
                    p.status
                        .as_ref()
                        .and_then(|s| s.conditions.as_ref())
                        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
                })
                .count();
            min_ready.fetch_min(i32::try_from(ready).unwrap(), Ordering::SeqCst);
            let d = deployments.get("web").await.ok()?;
            let s = d.status.clone()?;
            let done = s.observed_generation == d.metadata.generation
                && s.updated_replicas == Some(3)
                && s.replicas == Some(3)
                && s.available_replicas == Some(3)
                && condition(&d, "Progressing")
                    == Some(("True".into(), "NewReplicaSetAvailable".into()));
            done.then_some(d)
        }
    })
    .await;
    let (max_total, min_ready) = (max_total.into_inner(), min_ready.into_inner());
    assert!(max_total <= 4, "maxSurge 1 exceeded: {max_total} replicas");
    assert!(
        min_ready >= 2,
        "maxUnavailable 0 but only {min_ready} ready pods seen (one may be mid-replacement in the sample)"
    );
    assert_eq!(
        d.annotations()
            .get("deployment.kubernetes.io/revision")
            .map(String::as_str),
        Some("2")
    );
    let sizes = replicasets(&rss, "web").await;
    assert_eq!(sizes.len(), 2, "{sizes:?}");
    assert_eq!(
        sizes.get(&format!("web-{hash}")),
        Some(&(0, "1".to_string()))
    );
    assert!(
        sizes.values().any(|v| v == &(3, "2".to_string())),
        "{sizes:?}"
    );
}

#[tokio::test]
async fn replicaset_replaces_deleted_pods_adopts_orphans_and_scales_down() {
    let (_lk, client) = start().await;
    namespace(&client, "rs").await;
    let _rs = spawn(localkube_workloads::run_replicasets(client.clone()));
    let _kubelet = kubelet(&client, "rs");
    let rss: Api<ReplicaSet> = Api::namespaced(client.clone(), "rs");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "rs");
    let rs: ReplicaSet = serde_json::from_value(json!({
        "metadata": {"name": "cache"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "cache"}},
            "template": {"metadata": {"labels": {"app": "cache"}}, "spec": {
                "automountServiceAccountToken": false,
                "containers": [{"name": "main", "image": "redis"}]}},
        },
    }))
    .unwrap();
    rss.create(&PostParams::default(), &rs).await.unwrap();

    let ready = |want: i32| {
        let rss = rss.clone();
        async move {
            let rs = rss.get("cache").await.ok()?;
            let s = rs.status?;
            (s.replicas == want
                && s.ready_replicas == Some(want)
                && s.available_replicas == Some(want)
                && s.fully_labeled_replicas == Some(want)
                && s.observed_generation == rs.metadata.generation)
                .then_some(())
        }
    };
    eventually("2 ready replicas", TIMEOUT, || ready(2)).await;
    let names = |list: Vec<Pod>| {
        list.into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .map(|p| p.name_any())
            .collect::<Vec<_>>()
    };
    let before = names(pods.list(&ListParams::default()).await.unwrap().items);
    assert_eq!(before.len(), 2);
    assert!(
        before
            .iter()
            .all(|n| n.starts_with("cache-") && n.len() == "cache-".len() + 5),
        "{before:?}"
    );

    // A deleted pod is replaced by a new one.
    pods.delete(&before[0], &DeleteParams::default())
        .await
        .unwrap();
    let after = eventually("a replacement pod", TIMEOUT, || async {
        let now = names(pods.list(&ListParams::default()).await.ok()?.items);
        (now.len() == 2 && !now.contains(&before[0])).then_some(now)
    })
    .await;
    assert!(after.contains(&before[1]));
    eventually("2 ready replicas again", TIMEOUT, || ready(2)).await;

    // A matching orphan is adopted, so the ReplicaSet scales down by one.
    let orphan: Pod = serde_json::from_value(json!({
        "metadata": {"name": "stray", "labels": {"app": "cache"}},
        "spec": {"automountServiceAccountToken": false, "containers": [{"name": "main", "image": "redis"}]},
    }))
    .unwrap();
    pods.create(&PostParams::default(), &orphan).await.unwrap();
    eventually(
        "the orphan to be adopted and the extra pod removed",
        TIMEOUT,
        || async {
            let list = pods.list(&ListParams::default()).await.ok()?.items;
            let live: Vec<&Pod> = list
                .iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .collect();
            let all_owned = live.iter().all(|p| {
                p.owner_references()
                    .iter()
                    .any(|o| o.name == "cache" && o.controller == Some(true))
            });
            (live.len() == 2 && all_owned).then_some(())
        },
    )
    .await;

    // A pod relabelled out of the selector is released and replaced.
    let victim = names(pods.list(&ListParams::default()).await.unwrap().items)[0].clone();
    pods.patch(
        &victim,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"app": "other"}}})),
    )
    .await
    .unwrap();
    eventually(
        "the relabelled pod to be released and replaced",
        TIMEOUT,
        || async {
            let released = pods.get(&victim).await.ok()?.owner_references().is_empty();
            let owned = pods
                .list(&ListParams::default().labels("app=cache"))
                .await
                .ok()?
                .items
                .len();
            (released && owned == 2).then_some(())
        },
    )
    .await;

    // Scale to zero through the scale subresource.
    rss.patch_scale(
        "cache",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 0}})),
    )
    .await
    .unwrap();
    eventually("no pods left", TIMEOUT, || async {
        let left = pods
            .list(&ListParams::default().labels("app=cache"))
            .await
            .ok()?
            .items
            .len();
        let rs = rss.get("cache").await.ok()?;
        (left == 0 && rs.status?.replicas == 0).then_some(())
    })
    .await;
}

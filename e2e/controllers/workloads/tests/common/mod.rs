//! Shared by the integration tests: a private API server, a kube-rs client, a namespace with
//! its `default` ServiceAccount, polling with a deadline, and a fake kubelet that moves pods
//! through their phases via the `/status` subresource.
#![allow(dead_code)]

use std::future::Future;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Pod, ServiceAccount};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;
use test_support::LocalKube;

pub async fn start() -> (LocalKube, Client) {
    let lk = LocalKube::start_api_only(
        // The workspace's localkube (built by `cargo nextest run --workspace`), or $LOCALKUBE_BIN.
        &test_support::localkube_binary().expect("the localkube binary"),
    )
    .await
    .unwrap();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let kc = kube::config::Kubeconfig::read_from(lk.kubeconfig()).unwrap();
    let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    let client = Client::try_from(cfg).unwrap();
    (lk, client)
}

/// A namespace with the `default` ServiceAccount that pod admission requires.
pub async fn namespace(client: &Client, name: &str) {
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    let _ = Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await;
    let sa: ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": "default"}})).unwrap();
    let _ = Api::<ServiceAccount>::namespaced(client.clone(), name)
        .create(&PostParams::default(), &sa)
        .await;
}

/// Poll `check` until it returns `Some`, or panic with `what` after `timeout`.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            start.elapsed() < timeout,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Mark a pod Running and Ready, as the kubelet would.
pub async fn make_ready(pods: &Api<Pod>, name: &str) {
    let now = jiff::Timestamp::now().to_string();
    let status = json!({"status": {
        "phase": "Running",
        "podIP": "10.244.0.10",
        "conditions": [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": now},
            {"type": "Initialized", "status": "True", "lastTransitionTime": now},
            {"type": "ContainersReady", "status": "True", "lastTransitionTime": now},
            {"type": "Ready", "status": "True", "lastTransitionTime": now},
        ],
    }});
    let _ = pods
        .patch_status(name, &PatchParams::default(), &Patch::Merge(status))
        .await;
}

/// Finish a pod's only container with `exit_code` (phase Succeeded or Failed).
pub async fn finish(pods: &Api<Pod>, name: &str, exit_code: i32) {
    let now = jiff::Timestamp::now().to_string();
    let phase = if exit_code == 0 {
        "Succeeded"
    } else {
        "Failed"
    };
    let reason = if exit_code == 0 { "Completed" } else { "Error" };
    let status = json!({"status": {
        "phase": phase,
        "conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": now}],
        "containerStatuses": [{
            "name": "main", "image": "busybox", "imageID": "", "ready": false, "restartCount": 0,
            "state": {"terminated": {"exitCode": exit_code, "reason": reason, "startedAt": now, "finishedAt": now}},
        }],
    }});
    pods.patch_status(name, &PatchParams::default(), &Patch::Merge(status))
        .await
        .unwrap();
}

/// A fake kubelet for one namespace: makes every new pod Running and Ready, and completes
/// graceful deletions at once. Runs until the returned handle is aborted.
pub fn kubelet(client: &Client, namespace: &str) -> tokio::task::JoinHandle<()> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    tokio::spawn(async move {
        loop {
            if let Ok(list) = pods.list(&ListParams::default()).await {
                for pod in list.items {
                    let name = pod.name_any();
                    if pod.metadata.deletion_timestamp.is_some() {
                        let _ = pods
                            .delete(&name, &DeleteParams::default().grace_period(0))
                            .await;
                    } else if pod
                        .status
                        .as_ref()
                        .and_then(|s| s.phase.as_deref())
                        .unwrap_or("Pending")
                        == "Pending"
                    {
                        make_ready(&pods, &name).await;
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(150)).await;
        }
    })
}

/// Run the named controllers of this crate in the background.
pub fn spawn<F: Future<Output = ()> + Send + 'static>(
    controller: F,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(controller)
}

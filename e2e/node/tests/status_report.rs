//! The agent's status write against the real API server (`localkube up --api-only`): a condition
//! another writer owns (a readiness gate's) survives a status the agent computed from a copy of
//! the Pod older than that condition. Before, the agent sent its whole status as a JSON merge
//! patch, whose `conditions` list replaced the stored one: a readiness gate opened by the restore
//! operator while the agent was computing was erased, the Pod stayed NotReady with its gate
//! "does not exist", and its Service had no endpoint (the chaos case
//! `restore.seed_pod_create:after`: reads through the restored cluster's Service broke with
//! "broken pipe" for 30 s).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use e2e_harness::LocalKube;
use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use localkube_node::status_report::patch_pod_status;
use localkube_podspec::status::{ObservedContainer, ObservedState, PodObservation, pod_status};

const GATE: &str = "example.com/admitted";

#[tokio::test]
async fn a_readiness_gate_opened_meanwhile_survives_the_agents_status_write() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let lk = LocalKube::start_api_only(&e2e_harness::localkube_binary().unwrap())
        .await
        .unwrap();
    let kc = kube::config::Kubeconfig::read_from(lk.kubeconfig()).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    let client = kube::Client::try_from(config).unwrap();
    // No controller makes the default ServiceAccount here; Pod admission needs it.
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), "default");
    let account: ServiceAccount =
        serde_json::from_value(serde_json::json!({"metadata": {"name": "default"}})).unwrap();
    accounts
        .create(&PostParams::default(), &account)
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "gated"},
        "spec": {
            "nodeName": "localkube",
            "containers": [{"name": "main", "image": "busybox"}],
            "readinessGates": [{"conditionType": GATE}],
        },
    }))
    .unwrap();
    // The agent's copy: the Pod before anyone opened the gate.
    let stale = pods.create(&PostParams::default(), &pod).await.unwrap();

    // Another controller opens the gate (a strategic merge patch, as the restore operator does).
    let opened = serde_json::json!({"status": {"conditions": [{
        "type": GATE, "status": "True", "reason": "Admitted",
        "lastTransitionTime": "2026-11-26T00:00:00Z",
    }]}});
    pods.patch_status("gated", &PatchParams::default(), &Patch::Strategic(opened))
        .await
        .unwrap();

    // The agent, still on its stale copy, reports the container running and ready.
    let observed = PodObservation {
        containers: vec![ObservedContainer {
            name: "main".into(),
            image: None,
            image_id: String::new(),
            container_id: Some("c1".into()),
            state: ObservedState::Running {
                started_at: k8s_openapi::jiff::Timestamp::now(),
                started: true,
                ready: true,
            },
            restart_count: 0,
            last_state: None,
        }],
        sandbox_ready: true,
        pod_ips: vec!["10.244.0.7".into()],
        host_ips: vec!["10.244.0.1".into()],
        pod_is_terminal: false,
    };
    let status = pod_status(&stale, &observed, k8s_openapi::jiff::Timestamp::now());
    let stored = patch_pod_status(&pods, "gated", &status).await.unwrap();

    let conditions = stored.status.unwrap().conditions.unwrap_or_default();
    let gate = conditions.iter().find(|c| c.type_ == GATE);
    assert_eq!(
        gate.map(|c| c.status.as_str()),
        Some("True"),
        "the gate opened by another writer was lost: {conditions:#?}"
    );
    let containers_ready = conditions.iter().find(|c| c.type_ == "ContainersReady");
    assert_eq!(
        containers_ready.map(|c| c.status.as_str()),
        Some("True"),
        "the agent's own conditions were not written: {conditions:#?}"
    );
}

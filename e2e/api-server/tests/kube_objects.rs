//! `apply_status` and `Events` against a real API server, on the operators' own CRD
//! (EtcdCluster from etcd_api).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use etcd_api::{EtcdCluster, EtcdClusterStatus};
use k8s_openapi::api::events::v1::Event;
use kube::api::{ListParams, PostParams};
use kube::{Api, Resource};
use operator_runtime::events::MAX_NOTE_BYTES;
use operator_runtime::{Events, apply_status};

const NS: &str = "db";
const MANAGER: &str = "etcd-cluster-operator";

async fn create_cluster(client: &kube::Client, name: &str) -> EtcdCluster {
    let api: Api<EtcdCluster> = Api::namespaced(client.clone(), NS);
    let cluster: EtcdCluster = serde_json::from_value(serde_json::json!({
        "apiVersion": "etcd.operator.rs/v1alpha1",
        "kind": "EtcdCluster",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"size": 3, "version": "3.6.16"},
    }))
    .unwrap();
    api.create(&PostParams::default(), &cluster).await.unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn status_apply_and_events_against_the_api_server() {
    let (_lk, client) = common::api_server().await;
    common::create_namespace(&client, NS).await;
    common::install_crds(&client, NS).await;

    apply_status_writes_status_under_the_field_manager(&client).await;
    events_are_listed_with_reason_and_regarding_object(&client).await;
}

async fn apply_status_writes_status_under_the_field_manager(client: &kube::Client) {
    let created = create_cluster(client, "main").await;
    let api: Api<EtcdCluster> = Api::namespaced(client.clone(), NS);

    let first: EtcdClusterStatus = serde_json::from_value(serde_json::json!({
        "observedGeneration": 1,
        "phase": "Running",
        "readyMembers": 1,
        "members": [{"name": "main-0", "healthy": true, "leader": true}],
        "currentVersion": "3.6.16",
    }))
    .unwrap();
    let returned = apply_status(&api, "main", MANAGER, &first).await.unwrap();
    assert_eq!(returned.status.as_ref(), Some(&first));

    let stored = api.get("main").await.unwrap();
    assert_eq!(stored.status.as_ref(), Some(&first));
    assert_eq!(
        stored.spec, created.spec,
        "status apply left the spec alone"
    );
    assert_eq!(stored.metadata.generation, created.metadata.generation);
    let managed = stored.metadata.managed_fields.clone().unwrap_or_default();
    let entry = managed
        .iter()
        .find(|m| m.manager.as_deref() == Some(MANAGER))
        .unwrap_or_else(|| panic!("no managedFields entry for {MANAGER}: {managed:?}"));
    assert_eq!(entry.operation.as_deref(), Some("Apply"));
    assert_eq!(entry.subresource.as_deref(), Some("status"));
    let owned = serde_json::to_string(&entry.fields_v1).unwrap();
    assert!(owned.contains("f:readyMembers"), "{owned}");

    // A later apply without `members` and `currentVersion` removes them: the manager owned them.
    let second: EtcdClusterStatus = serde_json::from_value(serde_json::json!({
        "observedGeneration": 1,
        "phase": "Degraded",
        "readyMembers": 0,
    }))
    .unwrap();
    apply_status(&api, "main", MANAGER, &second).await.unwrap();
    let stored = api.get("main").await.unwrap();
    assert_eq!(stored.status.as_ref(), Some(&second));
}

async fn events_are_listed_with_reason_and_regarding_object(client: &kube::Client) {
    let cluster = create_cluster(client, "evented").await;
    let reference = cluster.object_ref(&());
    let events = Events::new(client.clone(), MANAGER, Some("operator-pod-0".into()));

    events
        .normal(
            &reference,
            "MemberAdded",
            "member evented-1 added as a learner",
        )
        .await;
    let long_note = "quorum lost: ".to_owned() + &"é".repeat(2000);
    events.warning(&reference, "QuorumLost", long_note).await;

    let api: Api<Event> = Api::namespaced(client.clone(), NS);
    let found = common::eventually("both events listed", Duration::from_secs(10), || async {
        let list = api
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?;
        let about_us: Vec<Event> = list
            .items
            .into_iter()
            .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("evented"))
            .collect();
        if about_us.len() == 2 {
            Ok(about_us)
        } else {
            Err(format!("{} events about the cluster", about_us.len()))
        }
    })
    .await;

    let normal = found
        .iter()
        .find(|e| e.reason.as_deref() == Some("MemberAdded"))
        .expect("MemberAdded event");
    assert_eq!(normal.type_.as_deref(), Some("Normal"));
    assert_eq!(
        normal.note.as_deref(),
        Some("member evented-1 added as a learner")
    );
    assert_eq!(normal.reporting_controller.as_deref(), Some(MANAGER));
    assert_eq!(normal.reporting_instance.as_deref(), Some("operator-pod-0"));
    let regarding = normal.regarding.as_ref().unwrap();
    assert_eq!(regarding.kind.as_deref(), Some("EtcdCluster"));
    assert_eq!(regarding.namespace.as_deref(), Some(NS));
    assert_eq!(regarding.uid, cluster.metadata.uid);

    let warning = found
        .iter()
        .find(|e| e.reason.as_deref() == Some("QuorumLost"))
        .expect("QuorumLost event");
    assert_eq!(warning.type_.as_deref(), Some("Warning"));
    let note = warning.note.as_deref().unwrap();
    assert!(note.len() <= MAX_NOTE_BYTES, "{} bytes", note.len());
    assert!(
        note.starts_with("quorum lost: éé") && note.ends_with('…'),
        "{note}"
    );
}
